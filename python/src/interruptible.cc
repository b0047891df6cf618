// Copyright (c) cqlstream authors.
#include "interruptible.h"

#include <nanobind/nanobind.h>

#include <future>
#include <thread>

namespace cqlstream::python {

namespace nb = nanobind;

Status RunInterruptibly(const std::function<Status()>& work, std::atomic<bool>* stop) {
  std::packaged_task<Status()> task(work);
  std::future<Status> done = task.get_future();
  std::thread worker(std::move(task));
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

}  // namespace cqlstream::python
