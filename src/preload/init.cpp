// Start-up and shared helpers of libdftracer_preload.so: the constructor that initialises the
// tracer (DFTRACER_INIT=PRELOAD unless DFTRACER_ENABLE is false, or DFTRACER_ENABLE=1 with
// DFTRACER_INIT unset), symbol
// resolution, the cached cwd and path resolution.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "fd_table.h"
#include "preload.h"
#include "process.h"

namespace dftracer::preload {

State g_state;
thread_local PreloadTls t_preload __attribute__((tls_model("initial-exec"))) = {0, 0, 0};
thread_local ArgList t_args __attribute__((tls_model("initial-exec")));

void* resolve(const char* name) noexcept {
  if (strncmp(name, "MPI_", 4) == 0) return resolve_pmpi(name);  // the MPI-IO interface (mpiio.cpp)
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) p = dlsym(RTLD_DEFAULT, name);  // never ourselves: we are first in the scope
  if (p == nullptr) {
    // A wrapper without its real function cannot forward the call: nothing sensible remains.
    static const char msg[] = "dftracer preload: cannot resolve a libc symbol, aborting\n";
    ssize_t rc = syscall(SYS_write, 2, msg, sizeof(msg) - 1);
    (void)rc;
    abort();
  }
  return p;
}

// ---------------------------------------------------------------- cwd cache

namespace {
std::atomic<PathRef*> g_cwd{nullptr};

PathRef* cwd_ref() noexcept {
  PathRef* r = g_cwd.load(std::memory_order_acquire);
  if (DFT_LIKELY(r != nullptr)) return r;
  char buf[PATH_MAX];
  // The raw syscall: no libc state, no errno change on success (we restore it anyway).
  int saved = errno;
  long n = syscall(SYS_getcwd, buf, sizeof(buf));
  errno = saved;
  if (n <= 0 || buf[0] != '/') return nullptr;  // "(unreachable)" or error
  PathRef* fresh = FdTable::make(std::string_view(buf, strlen(buf)));
  if (fresh == nullptr) return nullptr;
  PathRef* expected = nullptr;
  if (g_cwd.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) return fresh;
  FdTable::release(fresh);
  return expected;
}

// Appends `rel` to out[0..len) lexically: "." dropped, ".." pops a component, "//" collapsed.
// out holds an absolute path without trailing '/' (except the root "/"). Returns the new length
// or -1 on overflow.
int join_normalise(char* out, int len, int cap, const char* rel) noexcept {
  const char* p = rel;
  while (*p != '\0') {
    while (*p == '/') ++p;
    if (*p == '\0') break;
    const char* s = p;
    while (*p != '\0' && *p != '/') ++p;
    int n = static_cast<int>(p - s);
    if (n == 1 && s[0] == '.') continue;
    if (n == 2 && s[0] == '.' && s[1] == '.') {
      while (len > 1 && out[len - 1] != '/') --len;
      if (len > 1) --len;  // drop the '/' too, keep "/" for the root
      continue;
    }
    if (len > 1) {
      if (len + 1 >= cap) return -1;
      out[len++] = '/';
    }
    if (len + n >= cap) return -1;
    memcpy(out + len, s, n);
    len += n;
  }
  out[len] = '\0';
  return len;
}
}  // namespace

void invalidate_cwd() noexcept {
  PathRef* old = g_cwd.exchange(nullptr, std::memory_order_acq_rel);
  if (old != nullptr) FdTable::release(old);
}

int absolute_path(int dirfd, const char* path, char* out, int cap) noexcept {
  if (path == nullptr || cap < 2) return -1;
  int len = 1;
  out[0] = '/';
  out[1] = '\0';
  if (path[0] != '/') {
    if (path[0] == '\0') return -1;  // "" is ENOENT for every call that takes a path
    std::string_view base;
    char linkbuf[PATH_MAX];
    if (dirfd == AT_FDCWD) {
      PathRef* r = cwd_ref();
      if (r == nullptr) return -1;
      base = r->view();
    } else if (PathRef* r = g_fds.get(dirfd); FdTable::is_path(r)) {
      base = r->view();
    } else {
      // A directory fd we did not see opened on a traced path: ask the kernel.
      char proc[64];
      snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
      int saved = errno;
      long n = syscall(SYS_readlink, proc, linkbuf, sizeof(linkbuf) - 1);
      errno = saved;
      if (n <= 0 || linkbuf[0] != '/') return -1;
      base = std::string_view(linkbuf, n);
    }
    if (base.size() + 1 >= static_cast<size_t>(cap)) return -1;
    memcpy(out, base.data(), base.size());
    len = static_cast<int>(base.size());
    out[len] = '\0';
  }
  return join_normalise(out, len, cap, path);
}

bool traced_path(int dirfd, const char* path, char* out, int* len) noexcept {
  int n = absolute_path(dirfd, path, out, kPathCap);
  if (n < 0) return false;
  *len = n;
  return g_state.tracer->is_traced_path(std::string_view(out, n));
}

}  // namespace dftracer::preload

using namespace dftracer::preload;

namespace {

void preload_init() {
  if (g_state.ready.load(std::memory_order_acquire)) return;
  ++t_preload.busy;
  {
    dftracer::ReentryGuard guard;
    int saved = errno;
    dftracer::enable_for_preload();  // DFTRACER_INIT=PRELOAD alone enables tracing here
    const dftracer::Config& c = dftracer::config();
    g_state.tracer = dftracer::Tracer::instance();
    g_state.enabled = c.enable;
    g_state.posix = c.enable && !c.disable_io && !c.disable_posix;
    g_state.stdio = c.enable && !c.disable_io && !c.disable_stdio;
    g_state.hdf5 = c.enable && !c.disable_io;
    g_state.metadata = c.inc_metadata;
    process_init();  // environment snapshot for exec, atfork handlers
    // Tracing starts here with DFTRACER_INIT=PRELOAD (enables tracing unless DFTRACER_ENABLE is
    // explicitly false), or with DFTRACER_ENABLE=1 and DFTRACER_INIT unset; DFTRACER_INIT=FUNCTION
    // leaves it to the application.
    const char* init_env = getenv("DFTRACER_INIT");
    bool preload_init = c.init == dftracer::InitMode::PRELOAD || init_env == nullptr || init_env[0] == '\0';
    if (c.enable && preload_init) g_state.tracer->initialize(nullptr, nullptr, nullptr);
    errno = saved;
  }
  --t_preload.busy;
  g_state.ready.store(true, std::memory_order_release);
}

}  // namespace

// Priority 101: before the application's own constructors (C++ static init of the program runs
// after its dependencies' constructors anyway; the explicit priority orders us within this
// library).
__attribute__((constructor(101))) static void dftracer_preload_ctor() { preload_init(); }
