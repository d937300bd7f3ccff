// Signal handling of the tracer (tracer.h, namespace signals): one handler for the flush signals,
// installed by initialize() (DFTRACER_BIND_SIGNALS), shared by the preload library, the Python
// modules and the C/C++ APIs; and the deferral of fatal signals while a thread holds tracer locks.
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "tracer_impl.h"

namespace dftracer {

namespace {
// While t_defer > 0 this thread holds tracer locks that the writer needs, so a signal whose
// default action ends the process is held in t_pending_sig and re-raised by the last ~SignalDefer.
thread_local int t_defer = 0;
thread_local volatile sig_atomic_t t_pending_sig = 0;
}  // namespace

void defer_signals_begin() noexcept { ++t_defer; }

void defer_signals_end() noexcept {
  if (--t_defer == 0 && t_pending_sig != 0) {
    int sig = t_pending_sig;
    t_pending_sig = 0;
    raise(sig);  // the tracer's handler runs again, now without our locks held
  }
}

SignalDefer::SignalDefer() noexcept { defer_signals_begin(); }
SignalDefer::~SignalDefer() noexcept { defer_signals_end(); }

// Called from a signal handler: ask the writer thread for a flush (async-signal-safe: atomics,
// sem_post, nanosleep). wait: until the writer has written every event buffered now (~2 s max).
void TracerImpl::signal_flush(bool wait) noexcept {
  if (state.load() != ACTIVE || !writer_running.load()) return;
  uint64_t mine = flush_requested.fetch_add(1) + 1;
  sem_post(&wake);
  if (!wait) return;
  for (int i = 0; i < kSignalFlushWaitMs && flush_done.load() < mine && writer_running.load(); ++i) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

namespace signals {
namespace {
constexpr int kFlushSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGPIPE, SIGTERM, SIGXCPU};
// Crashes of the application (synchronous faults, or sent with kill): what is buffered is written
// (bounded by kSignalFlushWaitMs), then the default action runs (same status and core dump) or the
// application's handler. Never blocked by block_flush_signals (a blocked fault kills at once) and
// never deferred (returning from a fault handler re-runs the faulting instruction).
constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
bool is_fault(int sig) {
  for (int s : kFaultSignals)
    if (s == sig) return true;
  return false;
}
constexpr int kMaxSig = 65;

// Per signal: the action the application sees (two slots, switched atomically, so a handler never
// reads a half-written one), whether the tracer manages the signal, and whether our handler is in
// the kernel (not when the application asked for SIG_IGN).
// Every member has an initialiser, so g_slots (20 KiB) is constant-initialised (.bss, no
// constructor touching its pages in every process).
struct Slot {
  struct sigaction app[2] = {};
  std::atomic<int> cur{0};
  std::atomic<bool> managed{false};
  std::atomic<bool> installed{false};
};
Slot g_slots[kMaxSig];
std::atomic<bool> g_slot_lock{false};
SigactionFn g_real_sigaction = &::sigaction;

bool is_ign(const struct sigaction& a) { return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN; }
bool is_dfl(const struct sigaction& a) { return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL; }

void on_signal(int sig, siginfo_t* info, void* ctx);

// Our handler as the kernel action. For an application handler: its flags and mask, so that it
// runs with exactly the mask it asked for (on_signal blocks the flush signals only around the
// flush). For the default action: every flush signal blocked, one flush at a time.
struct sigaction ours_for(const struct sigaction& app) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = &on_signal;
  if (!is_dfl(app) && !is_ign(app)) {
    sa.sa_flags = SA_SIGINFO | (app.sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER));
    sa.sa_mask = app.sa_mask;
  } else {
    // (SA_ONSTACK: a stack-overflow SIGSEGV can run us on an alternate stack the application set)
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int s : kFlushSignals) sigaddset(&sa.sa_mask, s);
  }
  return sa;
}

// The flush before the application's handler, with the other flush signals held back meanwhile
// (one flush at a time); they are delivered, in the application's mask, before its handler runs.
void flush_before_app_handler(TracerImpl* t, bool wait) {
  sigset_t old;
  block_flush_signals(&old);
  t->signal_flush(wait);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// All signals blocked while the slot lock is held: a handler on this thread cannot spin on it.
struct SlotLock {
  sigset_t old;
  SlotLock() noexcept {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (g_slot_lock.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  ~SlotLock() noexcept {
    g_slot_lock.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
};

void set_app_locked(Slot& sl, const struct sigaction& a) {
  int next = 1 - sl.cur.load(std::memory_order_relaxed);
  sl.app[next] = a;
  sl.cur.store(next, std::memory_order_release);
}

// The application's action took effect in the kernel: restore the default and re-raise. Inside
// the handler the signal is blocked, so it is delivered when the handler returns.
void reraise_default(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  g_slots[sig].installed.store(false);
  g_real_sigaction(sig, &dfl, nullptr);
  raise(sig);
}

void on_signal(int sig, siginfo_t* info, void* ctx) {
  int saved = errno;
  Slot& sl = g_slots[sig];
  struct sigaction app = sl.app[sl.cur.load(std::memory_order_acquire)];
  bool dfl = is_dfl(app);
  TracerImpl* t = g_impl;
  // A vfork or raw clone child shares or copied our memory without the atfork handlers: hands off.
  bool own = t && static_cast<int>(syscall(SYS_getpid)) == t->pid && t->state.load() == ACTIVE;
  if (own) {
    ReentryGuard guard;
    ThreadBuffer* b = current_thread_buffer();
    if (dfl && is_fault(sig)) {
      // A crash inside the tracer (this thread holds its locks or is mid-event): no flush, it
      // could only wait for itself; otherwise write what is buffered, then the default action.
      if (t_defer == 0 && !(b && b->busy.load(std::memory_order_relaxed) == 1)) t->signal_flush(true);
    } else if (dfl) {
      if (t_defer > 0) {  // this thread holds locks the writer needs
        t_pending_sig = sig;
        errno = saved;
        return;
      }
      if (b && b->busy.load(std::memory_order_relaxed) == 1) {
        // Interrupted while formatting an event into this thread's buffer (only the owner
        // takes it as 1): finish it first; log_event re-raises when it unlocks the buffer.
        b->pending_sig = sig;
        errno = saved;
        return;
      }
      t->signal_flush(true);
    } else if (!is_ign(app) && !is_fault(sig)) {
      // The application's handler decides (it may _exit): write what is buffered first, unless
      // this thread holds a tracer lock (then the flush is only requested, not waited for).
      // Not for a crash signal the application handles itself: runtimes take SIGSEGV/SIGFPE as
      // part of normal work (guard pages, implicit null checks); a handler that then dies sets
      // the default and re-raises, which comes back here as the default action and is flushed.
      bool holding = t_defer > 0 || (b && b->busy.load(std::memory_order_relaxed) == 1);
      flush_before_app_handler(t, !holding);
    }
  }
  if (dfl) {
    reraise_default(sig);
  } else if (!is_ign(app)) {
    if (app.sa_flags & SA_RESETHAND) {
      SlotLock lock;
      struct sigaction d;
      std::memset(&d, 0, sizeof(d));
      d.sa_handler = SIG_DFL;
      sigemptyset(&d.sa_mask);
      set_app_locked(sl, d);
    }
    errno = saved;
    if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, info, ctx);
    else app.sa_handler(sig);
  }
  errno = saved;
}

}  // namespace

// initialize(): take over the flush signals (once per process; handlers survive fork).
// One sigaction call per signal in the usual case (the default action, as after exec): ours goes
// in and the previous action comes out in the same call. An ignored signal gets its action back
// and an application handler gets ours_for(it) in a second call; every signal is blocked
// meanwhile (SlotLock), so none is delivered to the interim action.
void install() noexcept {
  SlotLock lock;  // one for all seven signals (two sigprocmask calls, not fourteen)
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  const struct sigaction ours_dfl = ours_for(dfl);
  for (int k = 0; k < int(std::size(kFlushSignals) + std::size(kFaultSignals)); ++k) {
    int sig = k < int(std::size(kFlushSignals)) ? kFlushSignals[k] : kFaultSignals[k - int(std::size(kFlushSignals))];
    Slot& sl = g_slots[sig];
    if (sl.managed.load()) continue;
    struct sigaction cur;
    if (g_real_sigaction(sig, &ours_dfl, &cur) != 0) continue;
    set_app_locked(sl, cur);
    sl.managed.store(true);
    if (is_ign(cur)) {  // ignored stays ignored (and is inherited across exec)
      g_real_sigaction(sig, &cur, nullptr);
      continue;
    }
    sl.installed.store(true);  // ours_dfl, or ours_for(cur) below, is the kernel's action
    if (is_dfl(cur)) continue;
    struct sigaction sa = ours_for(cur);
    g_real_sigaction(sig, &sa, nullptr);
  }
}

void block_flush_signals(sigset_t* old) noexcept {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kFlushSignals) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, old);
}

bool is_flush_signal(int sig) noexcept {
  for (int s : kFlushSignals)
    if (s == sig) return true;
  return is_fault(sig);
}

void set_real_sigaction(SigactionFn fn) noexcept {
  if (fn) g_real_sigaction = fn;
}

bool app_sigaction(int sig, const struct sigaction* act, struct sigaction* old, int* rc) noexcept {
  if (sig <= 0 || sig >= kMaxSig || !g_slots[sig].managed.load()) return false;
  Slot& sl = g_slots[sig];
  SlotLock lock;
  if (old) *old = sl.app[sl.cur.load()];
  *rc = 0;
  if (act) {
    int r;
    if (is_ign(*act)) {
      r = g_real_sigaction(sig, act, nullptr);
      if (r == 0) sl.installed.store(false);
    } else {
      struct sigaction sa = ours_for(*act);
      r = g_real_sigaction(sig, &sa, nullptr);
      if (r == 0) sl.installed.store(true);
    }
    if (r != 0) {
      *rc = -1;  // errno from the real call
      return true;
    }
    set_app_locked(sl, *act);
  }
  return true;
}
}  // namespace signals

}  // namespace dftracer
