// Process module: fork, vfork, the exec family, posix_spawn/posix_spawnp, exit, _exit, _Exit
// (cat "PROCESS").
//
//  - fork: the parent records "fork" (ret = child pid). The core's atfork handler gives the child
//    its own file; the child keeps tracing.
//  - vfork: an assembly stub issues the vfork system call itself so that it can mark the child
//    (t_preload.vfork_child). The child shares the parent's memory until it execs or exits, so in it
//    every wrapper passes straight through and changes no shared state. The parent records "vfork".
//  - exec family: the environment passed on keeps LD_PRELOAD (with this library) and the
//    DFTRACER_* variables this process started with, so children are traced too. The event is an
//    instant (a successful exec never returns) and the trace is flushed before the image goes.
//    The new environment is built on the stack (no malloc: safe in a vfork child).
//  - _exit/_Exit: record, then finalize the trace (Python workers leave via os._exit).
//    exit: record; the core finalizes from its atexit handler, after the application's own
//    atexit handlers ran (their I/O is still traced).
//  - sigaction/signal/sysv_signal/bsd_signal: the core keeps its flush handler in the kernel for
//    the signals it manages (SIGTERM, SIGINT, ...; tracer.h, dftracer::signals) and calls the
//    application's handler from it. These wrappers make the application see and set its own
//    action as if the tracer were not there (CPython still finds SIG_DFL for SIGINT at start-up
//    and installs its KeyboardInterrupt handler).
#include <alloca.h>
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload.h"
#include "process.h"

using namespace dftracer;
using namespace dftracer::preload;

extern char** environ;

namespace {

constexpr int kMaxKeep = 64;
const char* g_keep[kMaxKeep];  // "DFTRACER_X=..." entries of the start-up environment
int g_nkeep = 0;
const char* g_ld_entry = nullptr;  // "LD_PRELOAD=..." to add when the child env has none
const char* g_lib_path = nullptr;  // absolute path of this library
constexpr char kLibName[] = "libdftracer_preload.so";

inline bool starts_with(const char* s, const char* p) noexcept { return strncmp(s, p, strlen(p)) == 0; }

// Length of the variable name of "NAME=value".
inline size_t name_len(const char* e) noexcept {
  const char* eq = strchr(e, '=');
  return eq != nullptr ? static_cast<size_t>(eq - e) : strlen(e);
}

// True if the current process is the one the tracer belongs to (not a vfork/clone child that
// shares or copied its memory without the atfork handlers).
inline bool own_process() noexcept {
  if (t_preload.vfork_child) return false;
  return static_cast<int>(syscall(SYS_getpid)) == g_state.tracer->pid();
}

// The gate of preload.h for PROCESS events (no category switch; also before the constructor ran).
inline bool may_record() noexcept {
  return g_state.ready.load(std::memory_order_acquire) && tracing_active() && thread_may_trace();
}

size_t env_count(char* const* envp) noexcept {
  size_t n = 0;
  if (envp != nullptr)
    while (envp[n] != nullptr) ++n;
  return n;
}

// Room needed by fix_env for envp: pointer slots and bytes of the rebuilt LD_PRELOAD entry.
struct EnvNeed {
  size_t slots;
  size_t ld_bytes;
};
EnvNeed env_need(char* const* envp) noexcept {
  EnvNeed need{env_count(envp) + g_nkeep + 2, 1};
  if (g_lib_path != nullptr) {
    for (size_t i = 0; envp != nullptr && envp[i] != nullptr; ++i)
      if (starts_with(envp[i], "LD_PRELOAD=")) need.ld_bytes = strlen(envp[i]) + strlen(g_lib_path) + 2;
  }
  return need;
}

// Environment for a child: envp plus LD_PRELOAD (this library first if missing) and any missing
// start-up DFTRACER_* entry. `out` has need.slots pointers, `ld` need.ld_bytes bytes.
char* const* fix_env(char* const* envp, char** out, char* ld) noexcept {
  if (!g_state.enabled || g_lib_path == nullptr) return envp;
  bool have_keep[kMaxKeep] = {};
  bool have_ld = false;
  size_t k = 0;
  for (size_t i = 0; envp != nullptr && envp[i] != nullptr; ++i) {
    char* e = envp[i];
    if (starts_with(e, "LD_PRELOAD=")) {
      have_ld = true;
      if (strstr(e, kLibName) == nullptr) {
        // "LD_PRELOAD=<ours>:<theirs>"
        const char* theirs = e + strlen("LD_PRELOAD=");
        char* p = stpcpy(ld, "LD_PRELOAD=");
        p = stpcpy(p, g_lib_path);
        if (*theirs != '\0') {
          *p++ = ':';
          strcpy(p, theirs);
        }
        out[k++] = ld;
        continue;
      }
    } else if (starts_with(e, "DFTRACER_")) {
      size_t n = name_len(e);
      for (int j = 0; j < g_nkeep; ++j)
        if (name_len(g_keep[j]) == n && strncmp(g_keep[j], e, n) == 0) have_keep[j] = true;
    }
    out[k++] = e;
  }
  if (!have_ld && g_ld_entry != nullptr) out[k++] = const_cast<char*>(g_ld_entry);
  for (int j = 0; j < g_nkeep; ++j)
    if (!have_keep[j]) out[k++] = const_cast<char*>(g_keep[j]);
  out[k] = nullptr;
  return out;
}

// Record the exec (an instant: success never returns) and flush the trace before the image goes.
void before_exec(std::string_view name, const char* path) noexcept {
  if (!may_record() || !own_process()) return;
  Recording rec;
  LastEventScope last;  // flushed just below: no writer thread for it
  ArgList a;
  if (g_state.metadata) {
    a.add_str("fname", path != nullptr ? std::string_view(path) : std::string_view());
  }
  g_state.tracer->log_instant(name, kCatProcess, now_us(), g_state.metadata ? &a : nullptr);
  g_state.tracer->flush();
}

void record_exit(std::string_view name, int status, bool finalize) noexcept {
  if (!g_state.ready.load(std::memory_order_acquire) || !g_state.enabled || !own_process()) return;
  if (may_record()) {
    Recording rec;
    LastEventScope last;  // finalized below (_exit) or by the atexit handler (exit)
    ArgList a;
    a.add_int("status", status);
    g_state.tracer->log_instant(name, kCatProcess, now_us(), g_state.metadata ? &a : nullptr);
  }
  if (finalize) {
    ++t_preload.busy;
    {
      ReentryGuard guard;
      g_state.tracer->finalize_at_exit();  // _exit follows
    }
    --t_preload.busy;
  }
}

// Execute `call(env)` with the fixed environment; all storage on this frame's stack.
#define DFT_WITH_ENV(envp, call) \
  do { \
    EnvNeed need_ = env_need(envp); \
    char** slots_ = static_cast<char**>(alloca(need_.slots * sizeof(char*))); \
    char* ld_ = static_cast<char*>(alloca(need_.ld_bytes)); \
    char* const* env_ = fix_env((envp), slots_, ld_); \
    return call(env_); \
  } while (0)

}  // namespace

// ============================================================================ exec family
DFT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  before_exec("execve", path);
  DFT_WITH_ENV(envp, [&](char* const* env) { return real_execve()(path, argv, env); });
}

DFT_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  before_exec("execv", path);
  DFT_WITH_ENV(environ, [&](char* const* env) { return real_execve()(path, argv, env); });
}

DFT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  before_exec("execvpe", file);
  DFT_WITH_ENV(envp, [&](char* const* env) { return real_execvpe()(file, argv, env); });
}

DFT_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  before_exec("execvp", file);
  DFT_WITH_ENV(environ, [&](char* const* env) { return real_execvpe()(file, argv, env); });
}

DFT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  before_exec("fexecve", nullptr);
  DFT_WITH_ENV(envp, [&](char* const* env) { return real_fexecve()(fd, argv, env); });
}

DFT_EXPORT int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) noexcept {
  before_exec("execveat", path);
  DFT_WITH_ENV(envp, [&](char* const* env) { return real_execveat()(dirfd, path, argv, env, flags); });
}

// execl family: gather the variadic arguments into an argv on the stack.
#define DFT_COLLECT_ARGV(arg0, argv, extra_envp) \
  size_t argc_ = 1; \
  { \
    va_list ap_; \
    va_start(ap_, arg0); \
    while (va_arg(ap_, const char*) != nullptr) ++argc_; \
    va_end(ap_); \
  } \
  char** argv = static_cast<char**>(alloca((argc_ + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(arg0); \
  { \
    va_list ap_; \
    va_start(ap_, arg0); \
    for (size_t i_ = 1; i_ <= argc_; ++i_) argv[i_] = va_arg(ap_, char*); \
    extra_envp; \
    va_end(ap_); \
  }

DFT_EXPORT int execl(const char* path, const char* arg0, ...) noexcept {
  DFT_COLLECT_ARGV(arg0, argv, (void)0);
  before_exec("execl", path);
  DFT_WITH_ENV(environ, [&](char* const* env) { return real_execve()(path, argv, env); });
}

DFT_EXPORT int execlp(const char* file, const char* arg0, ...) noexcept {
  DFT_COLLECT_ARGV(arg0, argv, (void)0);
  before_exec("execlp", file);
  DFT_WITH_ENV(environ, [&](char* const* env) { return real_execvpe()(file, argv, env); });
}

DFT_EXPORT int execle(const char* path, const char* arg0, ...) noexcept {
  char* const* envp = nullptr;
  DFT_COLLECT_ARGV(arg0, argv, envp = va_arg(ap_, char* const*));
  before_exec("execle", path);
  DFT_WITH_ENV(envp, [&](char* const* env) { return real_execve()(path, argv, env); });
}

// ============================================================================ posix_spawn
template <typename Real>
static int spawn_op(std::string_view name, Real real, pid_t* pid, const char* path,
                    const posix_spawn_file_actions_t* fa, const posix_spawnattr_t* attr, char* const argv[],
                    char* const envp[]) {
  bool rec = may_record() && own_process();
  int64_t t0 = rec ? now_us() : 0;
  int ret;
  {
    EnvNeed need = env_need(envp);
    char** slots = static_cast<char**>(alloca(need.slots * sizeof(char*)));
    char* ld = static_cast<char*>(alloca(need.ld_bytes));
    ret = real(pid, path, fa, attr, argv, fix_env(envp, slots, ld));
  }
  if (rec) {
    int64_t t1 = now_us();
    Recording r;
    emit(name, kCatProcess, t0, t1, [&](ArgList& a) {
      a.add_str("fname", path != nullptr ? std::string_view(path) : std::string_view());
      a.add_int("ret", ret);
      if (ret == 0 && pid != nullptr) a.add_int("child_pid", *pid);
    });
  }
  return ret;
}

DFT_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* fa,
                           const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_op("posix_spawn", real_posix_spawn(), pid, path, fa, attr, argv, envp);
}

DFT_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* fa,
                            const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  return spawn_op("posix_spawnp", real_posix_spawnp(), pid, file, fa, attr, argv, envp);
}

// ============================================================================ fork / vfork
// A forked child keeps the core's signal handlers (and the application's view of them); the
// core's atfork handler gives it its own file and writer thread.
DFT_EXPORT pid_t fork() noexcept {
  bool rec = may_record();
  int64_t t0 = rec ? now_us() : 0;
  pid_t pid = real_fork()();
  if (pid == 0) {
    // Child: the core's atfork handler already switched the tracer to the child's own file.
    int e = errno;
    posix_after_fork_child();
    errno = e;
    return 0;
  }
  if (rec) {
    int64_t t1 = now_us();
    Recording r;
    emit("fork", kCatProcess, t0, t1, [&](ArgList& a) { a.add_int("ret", pid); });
  }
  return pid;
}

// syscall(): a raw fork (SYS_fork, or SYS_clone/SYS_clone3 without CLONE_VM, i.e. a copy of
// this process) runs the core's fork handlers around it, as fork() does through pthread_atfork,
// so the child gets its own trace file and writer. Every other number is forwarded as is (one
// compare). The six argument registers are read as glibc's syscall() reads them.
namespace {
bool is_raw_fork(long number, long a1, long a2) noexcept {
  if (number == SYS_fork) return true;
  if (number == SYS_clone) return (a1 & (CLONE_VM | CLONE_THREAD)) == 0;
  if (number == SYS_clone3 && a1 != 0 && a2 >= 8) {
    // struct clone_args starts with the flags. The application's pointer may be bad (the system
    // call then fails with EFAULT): read it through the kernel, never by a load that could fault.
    uint64_t flags = 0;
    struct iovec local = {&flags, sizeof(flags)}, remote = {reinterpret_cast<void*>(a1), sizeof(flags)};
    int e = errno;
    bool ok = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(flags));
    errno = e;
    return ok && (flags & (CLONE_VM | CLONE_THREAD)) == 0;
  }
  return false;
}
}  // namespace

DFT_EXPORT long syscall(long number, ...) noexcept {
  va_list ap;
  va_start(ap, number);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (DFT_LIKELY(!is_raw_fork(number, a1, a2)) || t_preload.vfork_child ||
      !g_state.ready.load(std::memory_order_acquire))
    return real_syscall()(number, a1, a2, a3, a4, a5, a6);
  bool rec = may_record();
  int64_t t0 = rec ? now_us() : 0;
  Tracer::raw_fork_prepare();
  long ret = real_syscall()(number, a1, a2, a3, a4, a5, a6);
  int e = errno;
  if (ret == 0) {
    Tracer::raw_fork_child();
    posix_after_fork_child();
    errno = e;
    return 0;
  }
  Tracer::raw_fork_parent();
  if (rec) {
    int64_t t1 = now_us();
    Recording r;
    emit("fork", kCatProcess, t0, t1, [&](ArgList& a) {
      a.add_int("ret", ret);
      a.add_int("syscall", number);
    });
  }
  errno = e;
  return ret;
}

// glibc's clone(fn, stack, flags, arg, ...) without CLONE_VM makes a copy of this process that
// runs fn on its own stack: the same fork handlers, the child's run in a trampoline before fn.
// With CLONE_VM (threads, posix_spawn's vfork-like child) it is forwarded as is.
namespace {
struct CloneStart {
  int (*fn)(void*);
  void* arg;
};
int clone_child_start(void* p) noexcept {
  // The child's copy of the parent's frame below still holds *p (no CLONE_VM: copied memory).
  CloneStart start = *static_cast<CloneStart*>(p);
  int e = errno;
  Tracer::raw_fork_child();
  posix_after_fork_child();
  errno = e;
  int rc = start.fn(start.arg);
  // Returning from fn ends the child with the exit system call (no atexit handlers): finalize
  // the trace here, as _exit does.
  ++t_preload.busy;
  {
    ReentryGuard guard;
    g_state.tracer->finalize_at_exit();
  }
  --t_preload.busy;
  return rc;
}
}  // namespace

DFT_EXPORT int clone(int (*fn)(void*), void* stack, int flags, void* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  void* ptid = va_arg(ap, void*);
  void* tls = va_arg(ap, void*);
  void* ctid = va_arg(ap, void*);
  va_end(ap);
  if (DFT_LIKELY((flags & (CLONE_VM | CLONE_THREAD)) != 0) || fn == nullptr || t_preload.vfork_child ||
      !g_state.ready.load(std::memory_order_acquire))
    return real_clone()(fn, stack, flags, arg, ptid, tls, ctid);
  bool rec = may_record();
  int64_t t0 = rec ? now_us() : 0;
  CloneStart start{fn, arg};
  Tracer::raw_fork_prepare();
  int ret = real_clone()(&clone_child_start, stack, flags, &start, ptid, tls, ctid);
  int e = errno;
  Tracer::raw_fork_parent();
  if (rec) {
    int64_t t1 = now_us();
    Recording r;
    emit("fork", kCatProcess, t0, t1, [&](ArgList& a) {
      a.add_int("ret", ret);
      a.add_int("flags", flags);
    });
  }
  errno = e;
  return ret;
}

// Helpers of the vfork stub (hidden; called directly, never through the PLT).
extern "C" __attribute__((visibility("hidden"))) void dftracer_vfork_enter() noexcept {
  t_preload.vfork_t0 = may_record() ? now_us() : 0;
}
extern "C" __attribute__((visibility("hidden"))) void dftracer_vfork_child() noexcept { t_preload.vfork_child = 1; }
extern "C" __attribute__((visibility("hidden"))) long dftracer_vfork_parent(long pid) noexcept {
  t_preload.vfork_child = 0;  // the child has exec'ed or exited: the memory is ours again
  int64_t t0 = t_preload.vfork_t0;
  if (t0 != 0 && may_record()) {
    int64_t t1 = now_us();
    Recording r;
    emit("vfork", kCatProcess, t0, t1, [&](ArgList& a) { a.add_int("ret", pid); });
  }
  return pid;
}
extern "C" __attribute__((visibility("hidden"))) long dftracer_vfork_error(long neg_errno) noexcept {
  t_preload.vfork_child = 0;
  errno = static_cast<int>(-neg_errno);
  return -1;
}

// vfork(): the return address is kept in %rdi across the system call (the child returns through
// the same stack slot before the parent does), as glibc's own vfork does.
asm(R"(
    .text
    .globl vfork
    .type vfork, @function
    .p2align 4
vfork:
    .cfi_startproc
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call dftracer_vfork_enter
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rdi
    movl $58, %eax
    syscall
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rip, 0
    cmpq $-4095, %rax
    jae 3f
    testq %rax, %rax
    jz 2f
    movq %rax, %rdi
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call dftracer_vfork_parent
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    ret
2:
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call dftracer_vfork_child
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    xorl %eax, %eax
    ret
3:
    movq %rax, %rdi
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call dftracer_vfork_error
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size vfork, .-vfork
)");

// ============================================================================ exit
DFT_EXPORT void _exit(int status) {
  record_exit("_exit", status, true);
  real__exit()(status);
  __builtin_unreachable();
}

DFT_EXPORT void _Exit(int status) {
  record_exit("_Exit", status, true);
  real__Exit()(status);
  __builtin_unreachable();
}

DFT_EXPORT void exit(int status) noexcept {
  record_exit("exit", status, false);
  real_exit()(status);
  __builtin_unreachable();
}

// ============================================================================ signals
DFT_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  int rc;
  if (t_preload.vfork_child == 0 && signals::app_sigaction(sig, act, old, &rc)) return rc;
  return real_sigaction()(sig, act, old);
}

// signal() with its flavour's flags (glibc: BSD semantics = SA_RESTART; System V = one-shot).
static sighandler_t signal_as(int sig, sighandler_t handler, int flags,
                              sighandler_t (*real)(int, sighandler_t)) noexcept {
  if (t_preload.vfork_child != 0 || !signals::is_flush_signal(sig)) return real(sig, handler);
  struct sigaction act, old;
  memset(&act, 0, sizeof(act));
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (handler != SIG_DFL && handler != SIG_IGN && !(flags & SA_NODEFER)) sigaddset(&act.sa_mask, sig);
  int rc;
  if (!signals::app_sigaction(sig, &act, &old, &rc)) return real(sig, handler);
  if (rc != 0) return SIG_ERR;
  return old.sa_handler;  // shares its storage with sa_sigaction
}

DFT_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  return signal_as(sig, handler, SA_RESTART, real_signal());
}
DFT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
  return signal_as(sig, handler, SA_RESTART, real_bsd_signal());
}
DFT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
  return signal_as(sig, handler, SA_RESETHAND | SA_NODEFER, real_sysv_signal());
}

// ============================================================================ start-up
void dftracer::preload::process_init() noexcept {
  resolve_all();                                  // every call of src/format/calls.def
  signals::set_real_sigaction(real_sigaction());  // the core installs its handler with libc's

  // This library's absolute path (for LD_PRELOAD of children).
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&process_init), &info) != 0 && info.dli_fname != nullptr) {
    // Absolute as loaded (LD_PRELOAD or the core's $ORIGIN): kept as is, no readlink per
    // component; a relative one is made absolute so that children find it after a chdir.
    char buf[PATH_MAX];
    const char* p = info.dli_fname;
    if (p[0] != '/' && realpath(p, buf) != nullptr) p = buf;
    g_lib_path = strdup(p);
  }
  if (g_lib_path == nullptr) return;
  const char* ld = getenv("LD_PRELOAD");
  if (ld != nullptr && strstr(ld, kLibName) != nullptr) {
    size_t n = strlen("LD_PRELOAD=") + strlen(ld) + 1;
    char* e = static_cast<char*>(malloc(n));
    if (e != nullptr) {
      snprintf(e, n, "LD_PRELOAD=%s", ld);
      g_ld_entry = e;
    }
  } else {
    size_t n = strlen("LD_PRELOAD=") + strlen(g_lib_path) + 1;
    char* e = static_cast<char*>(malloc(n));
    if (e != nullptr) {
      snprintf(e, n, "LD_PRELOAD=%s", g_lib_path);
      g_ld_entry = e;
    }
  }
  for (char** e = environ; e != nullptr && *e != nullptr && g_nkeep < kMaxKeep; ++e)
    if (starts_with(*e, "DFTRACER_")) g_keep[g_nkeep++] = strdup(*e);
}
