// Copyright (c) cqlstream authors.
#include "interruptible.h"

#include <nanobind/nanobind.h>
#include <unistd.h>

#include <future>
#include <thread>
#include <utility>

namespace cqlstream::python {

namespace nb = nanobind;

bool OnMainThread() {
  // Asked on every Loader.next and Writer.add: the main thread's ident is
  // looked up once per process (the GIL, held, orders these statics). A
  // forked child looks again: its main thread is the one that forked.
  static pid_t looked_up_in = -1;
  static unsigned long main_ident = 0;
  const pid_t pid = ::getpid();
  if (looked_up_in != pid) {
    nb::module_ threading = nb::module_::import_("threading");
    main_ident = nb::cast<unsigned long>(threading.attr("main_thread")().attr("ident"));
    looked_up_in = pid;
  }
  return PyThread_get_thread_ident() == main_ident;
}

std::function<bool()> SignalCheck(bool* raised, std::atomic<std::thread::id>* checking) {
  if (!OnMainThread()) return {};
  return [raised, checking] {  // two pointers: no allocation
    nb::gil_scoped_acquire gil;
    if (checking != nullptr) checking->store(std::this_thread::get_id());
    *raised = PyErr_CheckSignals() != 0;
    if (checking != nullptr) checking->store(std::thread::id());
    return *raised;
  };
}

Status RunInterruptibly(const std::function<Status()>& work, std::atomic<bool>* stop) {
  if (!OnMainThread()) {
    // No handler would run here; and a thread that takes the GIL back
    // while the interpreter finalizes is ended at once (a daemon thread),
    // which the fewer times the better: once, at the end.
    nb::gil_scoped_release release;
    return work();
  }
  std::packaged_task<Status()> task(work);
  std::future<Status> done = task.get_future();
  std::jthread worker(std::move(task));  // joined on every way out
  bool raised = false;  // a signal handler raised: its exception is pending
  for (;;) {
    bool ended = false;
    {
      nb::gil_scoped_release release;
      ended = done.wait_for(kSignalPoll) == std::future_status::ready;
    }
    if (ended) break;
    if (PyErr_CheckSignals() != 0) {
      raised = true;
      stop->store(true);
      break;
    }
  }
  {
    nb::gil_scoped_release release;
    worker.join();
  }
  if (raised) {
    // The interrupt is what the caller hears of: the work's end (Cancelled,
    // or whatever it ended with first) is dropped.
    try {
      (void)done.get();
    } catch (...) {  // NOLINT(bugprone-empty-catch): superseded by the pending signal exception
    }
    throw nb::python_error();
  }
  return done.get();
}

void OpenInterruptibly(const std::function<void()>& open, const std::function<void()>& drop,
                       std::atomic<bool>* stop) {
  try {
    const Status done = RunInterruptibly(
        [&] {
          open();
          return Status::OK();
        },
        stop);
    (void)done;  // always OK: what `open` made, or failed with, is in the caller's variables
  } catch (const nb::python_error&) {
    {
      nb::gil_scoped_release release;
      drop();
    }
    throw;
  }
}

}  // namespace cqlstream::python
