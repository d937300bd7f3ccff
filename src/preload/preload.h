// Shared internals of libdftracer_preload.so: the per-call gate, path resolution and event
// helpers.  One module per interface (posix.cpp, stdio.cpp, process.cpp, hdf5.cpp) uses these,
// Darshan-style; real.h gives the real functions (from src/format/calls.def), fd_table.h keeps
// the fd -> path map.
//
// Rules every wrapper follows (docs/preload.md):
//  - return exactly what the real call returned and leave errno as the real call left it;
//  - never trace while the calling thread is inside the tracer (ReentryGuard / writer thread), in a
//    vfork child, or before the library constructor finished;
//  - trace a path call when the absolute, lexically normalised path is a traced path
//    (Tracer::is_traced_path), an fd call when the fd was opened on a traced path.
#pragma once

#include <dlfcn.h>
#include <errno.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "../core/tracer.h"
#include "../format/json_text.h"
#include "fd_table.h"
#include "real.h"

#define DFT_EXPORT extern "C" __attribute__((visibility("default")))
#define DFT_HIDDEN __attribute__((visibility("hidden")))
#define DFT_LIKELY(x) __builtin_expect(!!(x), 1)
#define DFT_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace dftracer::preload {

inline constexpr std::string_view kCatPosix = "POSIX";
inline constexpr std::string_view kCatStdio = "STDIO";
inline constexpr std::string_view kCatProcess = "PROCESS";

// Set once by the constructor (init.cpp).
struct State {
  std::atomic<bool> ready{false};  // constructor finished; wrappers may consult the tracer
  bool enabled = false;            // config().enable: keep LD_PRELOAD/DFTRACER_* across exec
  bool posix = false;              // POSIX category on (not DFTRACER_DISABLE_IO/_POSIX)
  bool stdio = false;              // STDIO category on
  bool hdf5 = false;               // HDF5 category on (not DFTRACER_DISABLE_IO)
  bool metadata = false;           // DFTRACER_INC_METADATA
  Tracer* tracer = nullptr;
};
extern State g_state DFT_HIDDEN;

// Thread-local state of this library (not the core's per-thread event buffer). initial-exec TLS:
// the library is loaded at start-up (LD_PRELOAD), so the access is one %fs-relative load.
struct PreloadTls {
  int busy;          // >0 while a wrapper of ours is recording (nested calls pass straight through)
  int vfork_child;   // 1 in the child of our vfork() until it execs or exits (shares parent memory)
  int64_t vfork_t0;  // start of the vfork call (parent side)
};
// Constant-initialised (init.cpp): Clang then calls no TLS init function. Without the attribute
// it references a weak hidden _ZTH... that nothing defines, which cannot be linked into a shared
// object (R_X86_64_PC32; clang 14, docs/platforms.md). GCC drops the reference by itself.
#if defined(__clang__)
#define DFT_CONSTANT_INIT __attribute__((require_constant_initialization))
#else
#define DFT_CONSTANT_INIT
#endif
extern thread_local PreloadTls t_preload DFT_CONSTANT_INIT __attribute__((tls_model("initial-exec"))) DFT_HIDDEN;

// The one "may I trace" rule, in three parts that callers test cheapest first:
//  - tracing_active(): the tracer records (dftracer_active_flag);
//  - thread_may_trace(): this thread is not inside a recording of ours, not a vfork child, not
//    the tracer's own (writer) thread;
//  - the call's category is on (g_state.posix / .stdio) and, for fd calls, the fd is traced.
inline bool tracing_active() noexcept { return __atomic_load_n(&dftracer_active_flag, __ATOMIC_RELAXED) != 0; }
inline bool thread_may_trace() noexcept { return (t_preload.busy | t_preload.vfork_child) == 0 && !in_tracer(); }

// True when a call of `category` may be traced at all (cheap; checked before any path or fd work).
inline bool gate(bool category) noexcept {
  if (DFT_LIKELY(!category)) return false;
  return tracing_active() && thread_may_trace();
}
inline bool posix_on() noexcept { return gate(g_state.posix); }
inline bool stdio_on() noexcept { return gate(g_state.stdio); }
// True when fd/FILE bookkeeping may mutate shared state: not inside a vfork child, and not on
// the tracer's own calls. The fd table mirrors the application's descriptor table; the writer
// thread has a table of its own (unshare(CLONE_FILES), chunk_writer.cpp) where the trace file
// gets the lowest numbers (0 first), so its open/fcntl/close must never touch the entries of the
// application's fds of the same numbers (issue 21: dd's input, dup2'ed onto fd 0, lost its
// entry when the writer opened the trace file and moved it up from 0).
inline bool may_mutate() noexcept { return t_preload.vfork_child == 0 && !in_tracer(); }

// Scope marking "this thread is recording": every intercepted call made meanwhile on this thread
// (the tracer's own writes when a buffer flushes inline, allocations, a signal handler's I/O)
// passes straight through, because all wrappers test t_preload.busy first. The core's writer
// thread is covered by in_tracer(). Saves and restores errno.
class Recording {
 public:
  Recording() noexcept : saved_errno_(errno) { ++t_preload.busy; }
  ~Recording() noexcept {
    --t_preload.busy;
    errno = saved_errno_;
  }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

 private:
  int saved_errno_;
};

// Per-thread argument list, reused by every event of the thread (an ArgList is ~1 KiB: building
// one per call would cost more than filling it). Only touched while t_preload.busy is held.
extern thread_local ArgList t_args __attribute__((tls_model("initial-exec"))) DFT_HIDDEN;

// Absolute, lexically normalised path of `path` relative to the directory of `dirfd`
// (AT_FDCWD = the cwd). Writes into out (capacity `cap`), returns the length, or -1 if it does
// not fit or dirfd's path is unknown. Does not touch errno.
int absolute_path(int dirfd, const char* path, char* out, int cap) noexcept DFT_HIDDEN;
// Same, and true only if the result is a traced path. out must hold kPathCap bytes.
inline constexpr int kPathCap = 4096 + 256;
bool traced_path(int dirfd, const char* path, char* out, int* len) noexcept DFT_HIDDEN;
// Forget the cached cwd (after chdir/fchdir).
void invalidate_cwd() noexcept DFT_HIDDEN;
// PMPI_<name + 4> of the loaded MPI library for an MPI_* call of the table (mpiio.cpp); aborts
// with a message when no loaded object defines it.
void* resolve_pmpi(const char* name) noexcept DFT_HIDDEN;
// posix.cpp's state after fork, in the child (the mapping-table lock).
void posix_after_fork_child() noexcept DFT_HIDDEN;

// First use of an fd the table knows nothing about (inherited across exec, a redirected
// stdin/stdout, opened by a raw system call or before tracing started): resolve it once through
// /proc/self/fd and cache the answer (its path, or FdTable::untraced()). Returns the entry when
// the fd names a traced file and this thread may trace, else null. Cold (posix.cpp).
PathRef* resolve_unknown_fd(int fd) noexcept DFT_HIDDEN;

// Entry of fd when a call on it must be traced (category on, tracing active, fd on a traced
// path, not re-entrant), else null. An fd never seen before is resolved once (resolve_unknown_fd);
// after that each call costs the same two loads and compares as before.
inline PathRef* traced_fd(bool category, int fd) noexcept {
  if (DFT_LIKELY(!category)) return nullptr;
  if (!tracing_active()) return nullptr;
  PathRef* p = g_fds.get(fd);
  if (DFT_UNLIKELY(!FdTable::is_path(p))) return p == nullptr ? resolve_unknown_fd(fd) : nullptr;
  return thread_may_trace() ? p : nullptr;
}

// Emit one complete event [t0, t1] (µs). fill(ArgList&) adds the args; it only runs with
// DFTRACER_INC_METADATA=1 (without metadata an event is name, cat, pid, tid, ts, dur).
// The caller holds a Recording.
template <typename Fill>
inline void emit(std::string_view name, std::string_view cat, int64_t t0, int64_t t1, Fill&& fill) noexcept {
  // Names and categories are literals of this library: the check folds at compile time.
  bool plain = json::is_plain(name.data(), name.size()) && json::is_plain(cat.data(), cat.size());
  if (g_state.metadata) {
    ArgList& a = t_args;
    a.clear();
    fill(a);
    g_state.tracer->log_complete(name, cat, t0, t1 - t0, &a, plain);
  } else {
    g_state.tracer->log_complete(name, cat, t0, t1 - t0, nullptr, plain);
  }
}

// Emit one complete event [t0, t1] (µs) on an fd as a compact record (Tracer::log_compact: the
// writer thread formats it): args `fragment` (the fd's cached `"fname":"<path>"`) and the
// integers fill(CompactArgs&) adds (keys: string literals); both only with DFTRACER_INC_METADATA=1.
// The caller holds a Recording.
template <typename Fill>
inline void emit_compact(std::string_view name, std::string_view cat, int64_t t0, int64_t t1, std::string_view fragment,
                         Fill&& fill) noexcept {
  bool plain = json::is_plain(name.data(), name.size()) && json::is_plain(cat.data(), cat.size());
  CompactArgs a;
  if (g_state.metadata) {
    fill(a);
  } else {
    fragment = std::string_view();
  }
  g_state.tracer->log_compact(name, cat, t0, t1 - t0, fragment, a, plain);
}

}  // namespace dftracer::preload
