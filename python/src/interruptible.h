// Copyright (c) cqlstream authors.
//
// Long calls into the core that Ctrl-C can end at the Python edge. A call
// made with the GIL released runs to its end before Python looks at its
// signals: a Dataset.pack() of a large dataset would hold a notebook's
// interrupt for minutes. RunInterruptibly runs the work on a thread of its
// own while the calling thread waits without the GIL, taking it back every
// kSignalPoll to let Python run its signal handlers (PyErr_CheckSignals).
// When a handler raises (Ctrl-C's KeyboardInterrupt), *stop is set, the
// work's end is awaited (the core ends it at its next check of the flag),
// and the handler's exception is raised.
//
// Ownership: `work` and `stop` are borrowed for the call. Thread-safety:
// called with the GIL held, from any Python thread. Signal handlers run on
// the main thread only: elsewhere `work` runs on the calling thread without
// the GIL, as a plain call, and is not interrupted.
#ifndef CQLSTREAM_PYTHON_INTERRUPTIBLE_H_
#define CQLSTREAM_PYTHON_INTERRUPTIBLE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "cqlstream/status.h"

namespace cqlstream::python {

inline constexpr std::chrono::milliseconds kSignalPoll{50};

// `work`'s Status, or the signal handler's exception (nb::python_error)
// once `work` has ended. An exception thrown by `work` is raised here.
Status RunInterruptibly(const std::function<Status()>& work, std::atomic<bool>* stop);

// RunInterruptibly for an opening (Dataset, Loader, Writer) that puts what
// it made into the caller's variables: `open` runs as RunInterruptibly's
// work, ending at its next wait once *stop is set. When the interrupt wins
// even though `open` made something (it ended between two polls), `drop`
// gives that back without the GIL (a destructor may join threads or wait
// on the network) before the handler's exception is raised. Both are
// borrowed for the call; `open` must not throw.
void OpenInterruptibly(const std::function<void()>& open, const std::function<void()>& drop,
                       std::atomic<bool>* stop);

// Whether the calling thread (GIL held) is Python's main thread, the one
// that runs signal handlers. A core call that waits on the caller's own
// thread can ask Python's handlers in its waits there (Loader.next does).
bool OnMainThread();

// For a core call that waits on the calling thread and asks a check before
// each wait (Loader::Next, Loader::Fetch, the Writer's calls): on the main
// thread, a check that takes the GIL, runs Python's signal handlers and,
// when one raised, sets *raised and says stop (raise its pending exception,
// nb::python_error, once the call has returned); elsewhere an empty one
// (nothing to ask). `checking` (may be null) holds the calling thread's id
// while the handlers run (a caller that holds a lock the handlers must not
// wait on looks at it). Called with the GIL held; `raised` and `checking`
// are borrowed for the call.
std::function<bool()> SignalCheck(bool* raised, std::atomic<std::thread::id>* checking = nullptr);

}  // namespace cqlstream::python

#endif  // CQLSTREAM_PYTHON_INTERRUPTIBLE_H_
