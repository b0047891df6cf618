// Copyright (c) cqlstream authors.
//
// Thread-safety contracts the compiler checks. clang's -Wthread-safety
// analysis (scripts/test's `threads` stage builds with it and -Werror) reads
// these annotations: a field marked GUARDED_BY(mu_) may only be touched with
// mu_ held, a function marked REQUIRES(mu_) may only be called with it held.
// std::mutex carries no annotations in libstdc++, so the project's mutex-
// holding classes use the small wrappers below (as leveldb's port::Mutex
// does); with GCC the macros expand to nothing and the wrappers are the std
// types with no overhead.
//
// Thread-safety: Mutex, MutexLock and CondVar are what they wrap; a MutexLock
// belongs to the thread that made it.
#ifndef CQLSTREAM_UTIL_MUTEX_H_
#define CQLSTREAM_UTIL_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#if defined(__clang__)
#define CQLS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define CQLS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) CQLS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY CQLS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) CQLS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) CQLS_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) CQLS_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) CQLS_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) CQLS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) CQLS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CQLS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CQLS_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) CQLS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) CQLS_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) CQLS_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS CQLS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace cqlstream {

// A std::mutex the analysis knows about.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For code that must tell the analysis a lock is held where it cannot see
  // it (e.g. a callback documented to run under the lock).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; may be released and taken again inside it
// (Unlock/Lock), e.g. around a call that must run without the lock.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable over a Mutex. Wait* REQUIRES the mutex and returns
// with it held (it is released while waiting, as with std::condition_variable).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // Returns false on time-out.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> d) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(l, d) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, std::chrono::time_point<Clock, Duration> t) REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(l, t) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  // Waits while `busy()` (called with `mu` held) is true. With
  // `interrupted` (may be empty), asks it with `mu` released before each
  // wait of at most `poll` (it may take locks of its own, such as Python's
  // GIL): false, `mu` held, once it said yes; true once not busy (at once,
  // without asking, when not busy to begin with). `mu` is released behind
  // the caller's MutexLock and always taken again before this returns or
  // throws. `busy` reads what `mu` guards: annotate it REQUIRES(the
  // caller's mutex); the analysis cannot see that it names `mu`, hence
  // none in this body.
  template <class Busy>
  bool WaitWhile(Mutex* mu, Busy busy, const std::function<bool()>& interrupted,
                 std::chrono::milliseconds poll = std::chrono::milliseconds(50)) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (busy()) {
      if (!interrupted) {
        Wait(mu);
        continue;
      }
      bool stop = false;
      {
        mu->Unlock();
        struct Relock {
          Mutex* mu;
          ~Relock() { mu->Lock(); }
        } relock{mu};
        stop = interrupted();
      }
      if (stop) return false;
      if (busy()) WaitFor(mu, poll);
    }
    return true;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace cqlstream

#endif  // CQLSTREAM_UTIL_MUTEX_H_
