// POSIX module: wrappers of the file calls of glibc 2.36 (cat "POSIX").
//
// The calls are listed in src/format/calls.def (interface POSIX); real.h declares their real
// functions.
//
// Event names are the called function's name; the _FORTIFY_SOURCE entry points (__read_chk,
// __open_2, ...) are recorded under the plain name (read, open, ...).
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <vector>

#include "ops.h"

using namespace dftracer;
using namespace dftracer::preload;

namespace {

inline int64_t iov_bytes(const struct iovec* iov, int n) noexcept {
  int64_t s = 0;
  for (int i = 0; i < n && iov != nullptr; ++i) s += static_cast<int64_t>(iov[i].iov_len);
  return s;
}

inline bool needs_mode(int flags) noexcept { return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE; }

// open family: flags, the mode when the flags say it is there, ret = the new fd.
template <typename Call>
int open_op(std::string_view name, int dirfd, const char* path, int flags, int mode, bool has_mode, Call&& call) {
  return open_entry(
      g_state.posix, kCatPosix, name, dirfd, path, call, [](int fd) { return fd; },
      [&](auto& a, int, int fd) {
        a.add_int("flags", flags);
        if (has_mode) a.add_int("mode", mode);
        a.add_int("ret", fd);
      });
}

// read/write (and their fortify entry points): bytes asked, bytes moved.
template <typename Call>
ssize_t byte_io_op(std::string_view name, int fd, size_t count, Call&& call) {
  return fd_op(g_state.posix, kCatPosix, name, fd, call, [&](auto& a, ssize_t ret) {
    a.add_uint("count", count);
    a.add_int("ret", ret);
  });
}

// pread/pwrite: bytes asked at an offset, bytes moved.
template <typename Call>
ssize_t byte_io_at_op(std::string_view name, int fd, size_t count, int64_t offset, Call&& call) {
  return fd_op(g_state.posix, kCatPosix, name, fd, call, [&](auto& a, ssize_t ret) {
    a.add_uint("count", count);
    a.add_int("offset", offset);
    a.add_int("ret", ret);
  });
}

// Traced mmap regions, so munmap/msync (address only) find their file.
struct Mapping {
  uintptr_t addr;
  size_t len;
  PathRef* path;
  int fd;
};
std::mutex g_maps_mu;
std::vector<Mapping>* g_maps = nullptr;  // never freed: usable during exit
std::atomic<int> g_nmaps{0};

void map_add(void* addr, size_t len, PathRef* p, int fd) {
  std::lock_guard<std::mutex> lk(g_maps_mu);
  if (g_maps == nullptr) g_maps = new std::vector<Mapping>();
  FdTable::acquire(p);
  g_maps->push_back({reinterpret_cast<uintptr_t>(addr), len, p, fd});
  g_nmaps.store(static_cast<int>(g_maps->size()), std::memory_order_relaxed);
}

// Path of the traced mapping containing addr (one reference for the caller), or null.
// remove: forget it (munmap of its start).
PathRef* map_find(void* addr, bool remove, int* fd) {
  if (g_nmaps.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lk(g_maps_mu);
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (size_t i = 0; i < g_maps->size(); ++i) {
    Mapping& m = (*g_maps)[i];
    if (a >= m.addr && a < m.addr + m.len) {
      PathRef* p = m.path;
      *fd = m.fd;
      if (remove) {
        (*g_maps)[i] = g_maps->back();
        g_maps->pop_back();
        g_nmaps.store(static_cast<int>(g_maps->size()), std::memory_order_relaxed);
      } else {
        FdTable::acquire(p);
      }
      return p;
    }
  }
  return nullptr;
}

template <typename Call>
void* mmap_op(std::string_view name, size_t len, int prot, int flags, int fd, int64_t off, Call&& call) {
  PathRef* p = (flags & MAP_ANONYMOUS) ? nullptr : traced_fd(g_state.posix, fd);
  if (DFT_LIKELY(p == nullptr)) return call();
  int64_t t0 = now_us();
  void* ret = call();
  int64_t t1 = now_us();
  Recording rec;
  if (ret != MAP_FAILED) map_add(ret, len, p, fd);
  emit(name, kCatPosix, t0, t1, [&](ArgList& a) {
    a.add_raw(p->fname_fragment());
    a.add_int("fd", fd);
    a.add_uint("count", len);
    a.add_int("offset", off);
    a.add_int("prot", prot);
    a.add_int("flags", flags);
    a.add_int("ret", ret == MAP_FAILED ? -1 : 0);
  });
  return ret;
}

// munmap/msync (address only): traced when addr lies in a traced mapping; remove (munmap) forgets
// the mapping. Args: fname, fd, count, what fill adds, ret.
template <typename Call, typename Fill>
int mapping_op(std::string_view name, void* addr, size_t len, bool remove, Call&& call, Fill&& fill) {
  if (DFT_LIKELY(g_nmaps.load(std::memory_order_relaxed) == 0) || !gate(g_state.posix) || (remove && !may_mutate()))
    return call();
  int fd = -1;
  PathRef* p;
  {
    Recording rec;
    p = map_find(addr, remove, &fd);
  }
  if (p == nullptr) return call();
  int64_t t0 = now_us();
  int ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(name, kCatPosix, t0, t1, [&](ArgList& a) {
    a.add_raw(p->fname_fragment());
    a.add_int("fd", fd);
    a.add_uint("count", len);
    fill(a);
    a.add_int("ret", ret);
  });
  FdTable::release(p);
  return ret;
}

// dup family: newfd shares oldfd's entry.
template <typename Call>
int dup_op(std::string_view name, int oldfd, Call&& call) {
  PathRef* p = traced_fd(g_state.posix, oldfd);
  if (DFT_LIKELY(p == nullptr)) {
    int fd = call();
    if (fd >= 0 && fd != oldfd && may_mutate()) {
      int e = errno;
      g_fds.dup(oldfd, fd);
      errno = e;
    }
    return fd;
  }
  int64_t t0 = now_us();
  int fd = call();
  int64_t t1 = now_us();
  Recording rec;
  if (fd >= 0 && fd != oldfd) g_fds.dup(oldfd, fd);
  emit(name, kCatPosix, t0, t1, [&](ArgList& a) {
    a.add_raw(p->fname_fragment());
    a.add_int("fd", oldfd);
    a.add_int("ret", fd);
  });
  return fd;
}

// copy_file_range, sendfile, splice: bytes moved by the kernel from in_fd to out_fd. Traced when
// either fd names a traced file. Args: fname/fd of the in side (fname only when traced),
// out_fname/out_fd of the out side (out_fname only when traced), count, the offsets the caller
// passed (offset, out_offset: only when given), ret = bytes moved (on both files).
template <typename Call>
ssize_t copy_op(std::string_view name, int in_fd, const int64_t* in_off, int out_fd, const int64_t* out_off,
                size_t count, Call&& call) {
  PathRef* pin = traced_fd(g_state.posix, in_fd);
  PathRef* pout = traced_fd(g_state.posix, out_fd);
  if (DFT_LIKELY(pin == nullptr && pout == nullptr)) return call();
  int64_t oin = in_off != nullptr ? *in_off : 0;
  int64_t oout = out_off != nullptr ? *out_off : 0;
  int64_t t0 = now_us();
  ssize_t ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(name, kCatPosix, t0, t1, [&](ArgList& a) {
    if (pin != nullptr) a.add_raw(pin->fname_fragment());
    a.add_int("fd", in_fd);
    if (pout != nullptr) a.add_str("out_fname", pout->view());
    a.add_int("out_fd", out_fd);
    a.add_uint("count", count);
    if (in_off != nullptr) a.add_int("offset", oin);
    if (out_off != nullptr) a.add_int("out_offset", oout);
    a.add_int("ret", ret);
  });
  return ret;
}

template <typename Real>
int fcntl_op(std::string_view name, Real real, int fd, int cmd, void* arg) {
  auto call = [&] { return real(fd, cmd, arg); };
  bool dups = cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
  if (dups) return dup_op(name, fd, call);
  return fd_op(g_state.posix, kCatPosix, name, fd, call, [&](auto& a, int ret) {
    a.add_int("cmd", cmd);
    a.add_int("ret", ret);
  });
}

// The trace file's descriptor when the current call comes from the application and must not
// close or replace it, else -1 (no file open yet, the tracer's own call, a call nested in one of
// our recordings, or a vfork child, whose descriptor table is its own copy).
int protected_trace_fd() noexcept {
  Tracer* t = g_state.tracer;
  if (t == nullptr) return -1;
  int fd = t->trace_fd();
  return fd >= 0 && thread_may_trace() ? fd : -1;
}

// Same test for one descriptor, cheapest first (close runs it on every call).
inline bool is_protected_trace_fd(int fd) noexcept {
  Tracer* t = g_state.tracer;
  if (t == nullptr || fd < 0 || fd != t->trace_fd()) return false;
  return thread_may_trace();
}

// close_range(2) over [first, last] minus the trace descriptor `keep` (first <= keep <= last):
// the parts below and above it, in that order. 0, or -1 with the first failing part's errno.
int close_range_around(unsigned first, unsigned last, int flags, unsigned keep) noexcept {
  constexpr int kKnownFlags = CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC;
  if (flags & ~kKnownFlags) {  // what the kernel answers for unknown flags, before closing anything
    errno = EINVAL;
    return -1;
  }
  int ret = 0, err = 0;
  if (keep > first && real_close_range()(first, keep - 1, flags) != 0) {
    ret = -1;
    err = errno;
  }
  if (keep < last && real_close_range()(keep + 1, last, flags) != 0 && ret == 0) {
    ret = -1;
    err = errno;
  }
  if (ret != 0) errno = err;
  return ret;
}

int close_op(int fd) {
  if (DFT_UNLIKELY(is_protected_trace_fd(fd))) return 0;  // see docs/preload.md
  return close_entry(g_state.posix, kCatPosix, "close", fd, [&] { return real_close()(fd); });
}

// stat-like calls on (dirfd, path) that may also mean "the fd itself" (AT_EMPTY_PATH, "").
template <typename Call>
int statat_op(std::string_view name, int dirfd, const char* path, int flags, Call&& call) {
  if (path != nullptr && path[0] == '\0' && (flags & AT_EMPTY_PATH))
    return fd_op(g_state.posix, kCatPosix, name, dirfd, call, kRetOnly);
  return path_op(name, dirfd, path, call, [&](auto& a, int ret) {
    a.add_int("flags", flags);
    a.add_int("ret", ret);
  });
}

// Two-path calls (rename, link, symlink): traced when either path is traced.
template <typename Call>
int two_path_op(std::string_view name, int olddir, const char* oldp, int newdir, const char* newp, bool old_is_path,
                Call&& call) {
  if (DFT_LIKELY(!gate(g_state.posix))) return call();
  char a1[kPathCap], a2[kPathCap];
  int n1 = 0, n2 = 0;
  bool t1 = old_is_path && traced_path(olddir, oldp, a1, &n1);
  bool t2 = traced_path(newdir, newp, a2, &n2);
  if (!t1 && !t2) return call();
  int64_t s = now_us();
  int ret = call();
  int64_t e = now_us();
  Recording rec;
  emit(name, kCatPosix, s, e, [&](ArgList& a) {
    if (old_is_path) {
      a.add_str("fname", std::string_view(a1, n1 > 0 ? n1 : 0));
      a.add_str("new_fname", std::string_view(a2, n2));
    } else {
      a.add_str("fname", std::string_view(a2, n2));  // symlink: the link is the file
    }
    a.add_int("ret", ret);
  });
  return ret;
}

}  // namespace

// ============================================================================ unknown fds
// preload.h, traced_fd: an fd the table has no entry for. Only the raw readlink system call, the
// path filter and one malloc for a traced path (as an open of that path would): no libc state,
// no lock, errno kept. A racing close of the same fd may leave the answer for a number the
// kernel then reuses for a descriptor no wrapper sees open (socket, pipe): one such fd would be
// attributed to the old path; an intercepted open of the number replaces the entry.
PathRef* dftracer::preload::resolve_unknown_fd(int fd) noexcept {
  if (fd < 0 || fd >= FdTable::kMaxFd || !thread_may_trace() || !may_mutate()) return nullptr;
  int saved = errno;
  char proc[32] = "/proc/self/fd/";
  char digits[12];
  int nd = 0;
  for (unsigned v = static_cast<unsigned>(fd); nd == 0 || v != 0; v /= 10)
    digits[nd++] = static_cast<char>('0' + v % 10);
  int len = 14;
  while (nd > 0) proc[len++] = digits[--nd];
  proc[len] = '\0';
  char buf[kPathCap];
  long n = syscall(SYS_readlink, proc, buf, sizeof(buf) - 1);
  PathRef* r = FdTable::untraced();
  if (n < 0 && errno == EBADF) {  // not open: nothing to cache (the call fails with EBADF)
    errno = saved;
    return nullptr;
  }
  // "pipe:[...]", "socket:[...]", "anon_inode:..." are not paths; "/memfd:x (deleted)" is none.
  std::string_view path(buf, n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0 && static_cast<size_t>(n) < sizeof(buf) - 1 && buf[0] == '/' && path.substr(0, 7) != "/memfd:" &&
      g_state.tracer->is_traced_path(path)) {
    r = FdTable::make(path);
    if (r == nullptr) {  // out of memory: ask again next time
      errno = saved;
      return nullptr;
    }
  }
  PathRef* got = g_fds.install(fd, r);
  errno = saved;
  return FdTable::is_path(got) ? got : nullptr;
}

// ============================================================================ open / close
// Declares `mode` and `has_mode`: the optional third argument of the open family, read only when
// `flags` say it is there (O_CREAT / O_TMPFILE), as glibc does.
#define DFT_OPEN_MODE_ARG(flags) \
  int mode = 0; \
  bool has_mode = needs_mode(flags); \
  if (has_mode) { \
    va_list ap; \
    va_start(ap, flags); \
    mode = va_arg(ap, int); \
    va_end(ap); \
  }

DFT_EXPORT int open(const char* path, int flags, ...) {
  DFT_OPEN_MODE_ARG(flags);
  return open_op("open", AT_FDCWD, path, flags, mode, has_mode, [&] { return real_open()(path, flags, mode); });
}

DFT_EXPORT int open64(const char* path, int flags, ...) {
  DFT_OPEN_MODE_ARG(flags);
  return open_op("open64", AT_FDCWD, path, flags, mode, has_mode, [&] { return real_open64()(path, flags, mode); });
}

DFT_EXPORT int openat(int dirfd, const char* path, int flags, ...) {
  DFT_OPEN_MODE_ARG(flags);
  return open_op("openat", dirfd, path, flags, mode, has_mode, [&] { return real_openat()(dirfd, path, flags, mode); });
}

DFT_EXPORT int openat64(int dirfd, const char* path, int flags, ...) {
  DFT_OPEN_MODE_ARG(flags);
  return open_op("openat64", dirfd, path, flags, mode, has_mode,
                 [&] { return real_openat64()(dirfd, path, flags, mode); });
}

DFT_EXPORT int creat(const char* path, mode_t mode) {
  return open_op("creat", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, true,
                 [&] { return real_creat()(path, mode); });
}

DFT_EXPORT int creat64(const char* path, mode_t mode) {
  return open_op("creat64", AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, true,
                 [&] { return real_creat64()(path, mode); });
}

DFT_EXPORT int __open_2(const char* path, int flags) {
  return open_op("open", AT_FDCWD, path, flags, 0, false, [&] { return real___open_2()(path, flags); });
}

DFT_EXPORT int __open64_2(const char* path, int flags) {
  return open_op("open64", AT_FDCWD, path, flags, 0, false, [&] { return real___open64_2()(path, flags); });
}

DFT_EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  return open_op("openat", dirfd, path, flags, 0, false, [&] { return real___openat_2()(dirfd, path, flags); });
}

DFT_EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  return open_op("openat64", dirfd, path, flags, 0, false, [&] { return real___openat64_2()(dirfd, path, flags); });
}

DFT_EXPORT int close(int fd) { return close_op(fd); }

// Bookkeeping only (not traced as events): fds closed in bulk leave the table. A range over the
// trace descriptor is closed around it (CLOSE_RANGE_CLOEXEC ranges pass: it is close-on-exec).
DFT_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept {
  int keep = protected_trace_fd();
  int ret;
  if (DFT_UNLIKELY(keep >= 0 && !(flags & CLOSE_RANGE_CLOEXEC) && first <= static_cast<unsigned>(keep) &&
                   static_cast<unsigned>(keep) <= last)) {
    ret = close_range_around(first, last, flags, static_cast<unsigned>(keep));
  } else {
    ret = real_close_range()(first, last, flags);
  }
  if (ret == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && may_mutate()) {
    int e = errno;
    g_fds.clear_range(first, last);
    errno = e;
  }
  return ret;
}

DFT_EXPORT void closefrom(int lowfd) noexcept {
  if (lowfd >= 0 && may_mutate()) {
    int e = errno;
    g_fds.clear_range(static_cast<unsigned>(lowfd), ~0u);
    errno = e;
  }
  int keep = protected_trace_fd();
  if (DFT_UNLIKELY(keep >= 0 && lowfd <= keep)) {
    // Below the trace descriptor: close_range, else one close each (kernels before 5.9).
    int e = errno;
    int from = lowfd < 0 ? 0 : lowfd;
    if (from < keep && real_close_range()(static_cast<unsigned>(from), static_cast<unsigned>(keep - 1), 0) != 0)
      for (int fd = from; fd < keep; ++fd) real_close()(fd);
    errno = e;
    lowfd = keep + 1;
  }
  real_closefrom()(lowfd);
}

// ============================================================================ data
DFT_EXPORT ssize_t read(int fd, void* buf, size_t count) {
  return byte_io_op("read", fd, count, [&] { return real_read()(fd, buf, count); });
}

DFT_EXPORT ssize_t __read_chk(int fd, void* buf, size_t count, size_t buflen) {
  return byte_io_op("read", fd, count, [&] { return real___read_chk()(fd, buf, count, buflen); });
}

DFT_EXPORT ssize_t write(int fd, const void* buf, size_t count) {
  return byte_io_op("write", fd, count, [&] { return real_write()(fd, buf, count); });
}

DFT_EXPORT ssize_t pread(int fd, void* buf, size_t count, off_t offset) {
  return byte_io_at_op("pread", fd, count, offset, [&] { return real_pread()(fd, buf, count, offset); });
}

DFT_EXPORT ssize_t pread64(int fd, void* buf, size_t count, off64_t offset) {
  return byte_io_at_op("pread64", fd, count, offset, [&] { return real_pread64()(fd, buf, count, offset); });
}

DFT_EXPORT ssize_t __pread_chk(int fd, void* buf, size_t count, off_t offset, size_t buflen) {
  return byte_io_at_op("pread", fd, count, offset, [&] { return real___pread_chk()(fd, buf, count, offset, buflen); });
}

DFT_EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t count, off64_t offset, size_t buflen) {
  return byte_io_at_op("pread64", fd, count, offset,
                       [&] { return real___pread64_chk()(fd, buf, count, offset, buflen); });
}

DFT_EXPORT ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  return byte_io_at_op("pwrite", fd, count, offset, [&] { return real_pwrite()(fd, buf, count, offset); });
}

DFT_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset) {
  return byte_io_at_op("pwrite64", fd, count, offset, [&] { return real_pwrite64()(fd, buf, count, offset); });
}

#define DFT_VEC(fn, ...) \
  return fd_op( \
      g_state.posix, kCatPosix, #fn, fd, [&] { return real_##fn()(__VA_ARGS__); }, \
      [&](auto& a, ssize_t ret) { \
        a.add_int("count", iov_bytes(iov, iovcnt)); \
        a.add_int("iovcnt", iovcnt); \
        DFT_VEC_OFFSET \
        a.add_int("ret", ret); \
      })

#define DFT_VEC_OFFSET
DFT_EXPORT ssize_t readv(int fd, const struct iovec* iov, int iovcnt) { DFT_VEC(readv, fd, iov, iovcnt); }
DFT_EXPORT ssize_t writev(int fd, const struct iovec* iov, int iovcnt) { DFT_VEC(writev, fd, iov, iovcnt); }
#undef DFT_VEC_OFFSET
#define DFT_VEC_OFFSET a.add_int("offset", offset);
DFT_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int iovcnt, off_t offset) {
  DFT_VEC(preadv, fd, iov, iovcnt, offset);
}
DFT_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int iovcnt, off64_t offset) {
  DFT_VEC(preadv64, fd, iov, iovcnt, offset);
}
DFT_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags) {
  DFT_VEC(preadv2, fd, iov, iovcnt, offset, flags);
}
DFT_EXPORT ssize_t preadv64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset, int flags) {
  DFT_VEC(preadv64v2, fd, iov, iovcnt, offset, flags);
}
DFT_EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int iovcnt, off_t offset) {
  DFT_VEC(pwritev, fd, iov, iovcnt, offset);
}
DFT_EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int iovcnt, off64_t offset) {
  DFT_VEC(pwritev64, fd, iov, iovcnt, offset);
}
DFT_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int iovcnt, off_t offset, int flags) {
  DFT_VEC(pwritev2, fd, iov, iovcnt, offset, flags);
}
DFT_EXPORT ssize_t pwritev64v2(int fd, const struct iovec* iov, int iovcnt, off64_t offset, int flags) {
  DFT_VEC(pwritev64v2, fd, iov, iovcnt, offset, flags);
}
#undef DFT_VEC_OFFSET
#undef DFT_VEC

// Kernel-side copies (coreutils 9 cat/cp: copy_file_range; Python shutil: sendfile).
static_assert(sizeof(off_t) == sizeof(int64_t) && sizeof(off64_t) == sizeof(int64_t), "64-bit offsets");
#define DFT_OFF(p) reinterpret_cast<const int64_t*>(p)
DFT_EXPORT ssize_t copy_file_range(int in_fd, off64_t* in_off, int out_fd, off64_t* out_off, size_t len,
                                   unsigned flags) {
  return copy_op("copy_file_range", in_fd, DFT_OFF(in_off), out_fd, DFT_OFF(out_off), len,
                 [&] { return real_copy_file_range()(in_fd, in_off, out_fd, out_off, len, flags); });
}

DFT_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) noexcept {
  return copy_op("sendfile", in_fd, DFT_OFF(offset), out_fd, nullptr, count,
                 [&] { return real_sendfile()(out_fd, in_fd, offset, count); });
}

DFT_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t* offset, size_t count) noexcept {
  return copy_op("sendfile64", in_fd, DFT_OFF(offset), out_fd, nullptr, count,
                 [&] { return real_sendfile64()(out_fd, in_fd, offset, count); });
}

DFT_EXPORT ssize_t splice(int in_fd, off64_t* in_off, int out_fd, off64_t* out_off, size_t len, unsigned flags) {
  return copy_op("splice", in_fd, DFT_OFF(in_off), out_fd, DFT_OFF(out_off), len,
                 [&] { return real_splice()(in_fd, in_off, out_fd, out_off, len, flags); });
}
#undef DFT_OFF

DFT_EXPORT off_t lseek(int fd, off_t offset, int whence) noexcept {
  return fd_op(
      g_state.posix, kCatPosix, "lseek", fd, [&] { return real_lseek()(fd, offset, whence); },
      [&](auto& a, off_t ret) {
        a.add_int("offset", offset);
        a.add_int("whence", whence);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT off64_t lseek64(int fd, off64_t offset, int whence) noexcept {
  return fd_op(
      g_state.posix, kCatPosix, "lseek64", fd, [&] { return real_lseek64()(fd, offset, whence); },
      [&](auto& a, off64_t ret) {
        a.add_int("offset", offset);
        a.add_int("whence", whence);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int fsync(int fd) {
  return fd_op(
      g_state.posix, kCatPosix, "fsync", fd, [&] { return real_fsync()(fd); }, kRetOnly);
}

DFT_EXPORT int fdatasync(int fd) {
  return fd_op(
      g_state.posix, kCatPosix, "fdatasync", fd, [&] { return real_fdatasync()(fd); }, kRetOnly);
}

DFT_EXPORT int ftruncate(int fd, off_t length) noexcept {
  return fd_op(
      g_state.posix, kCatPosix, "ftruncate", fd, [&] { return real_ftruncate()(fd, length); },
      [&](auto& a, int ret) {
        a.add_int("length", length);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int ftruncate64(int fd, off64_t length) noexcept {
  return fd_op(
      g_state.posix, kCatPosix, "ftruncate64", fd, [&] { return real_ftruncate64()(fd, length); },
      [&](auto& a, int ret) {
        a.add_int("length", length);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int truncate(const char* path, off_t length) noexcept {
  return path_op(
      "truncate", AT_FDCWD, path, [&] { return real_truncate()(path, length); },
      [&](auto& a, int ret) {
        a.add_int("length", length);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int truncate64(const char* path, off64_t length) noexcept {
  return path_op(
      "truncate64", AT_FDCWD, path, [&] { return real_truncate64()(path, length); },
      [&](auto& a, int ret) {
        a.add_int("length", length);
        a.add_int("ret", ret);
      });
}

// ============================================================================ stat family
#define DFT_PATH_STAT(fn, ...) \
  return path_op( \
      #fn, AT_FDCWD, path, [&] { return real_##fn()(__VA_ARGS__); }, kRetOnly)
#define DFT_FD_STAT(fn, ...) \
  return fd_op( \
      g_state.posix, kCatPosix, #fn, fd, [&] { return real_##fn()(__VA_ARGS__); }, kRetOnly)

DFT_EXPORT int stat(const char* path, struct stat* st) noexcept { DFT_PATH_STAT(stat, path, st); }
DFT_EXPORT int stat64(const char* path, struct stat64* st) noexcept { DFT_PATH_STAT(stat64, path, st); }
DFT_EXPORT int lstat(const char* path, struct stat* st) noexcept { DFT_PATH_STAT(lstat, path, st); }
DFT_EXPORT int lstat64(const char* path, struct stat64* st) noexcept { DFT_PATH_STAT(lstat64, path, st); }
DFT_EXPORT int fstat(int fd, struct stat* st) noexcept { DFT_FD_STAT(fstat, fd, st); }
DFT_EXPORT int fstat64(int fd, struct stat64* st) noexcept { DFT_FD_STAT(fstat64, fd, st); }
DFT_EXPORT int __xstat(int ver, const char* path, struct stat* st) noexcept { DFT_PATH_STAT(__xstat, ver, path, st); }
DFT_EXPORT int __xstat64(int ver, const char* path, struct stat64* st) noexcept {
  DFT_PATH_STAT(__xstat64, ver, path, st);
}
DFT_EXPORT int __lxstat(int ver, const char* path, struct stat* st) noexcept { DFT_PATH_STAT(__lxstat, ver, path, st); }
DFT_EXPORT int __lxstat64(int ver, const char* path, struct stat64* st) noexcept {
  DFT_PATH_STAT(__lxstat64, ver, path, st);
}
DFT_EXPORT int __fxstat(int ver, int fd, struct stat* st) noexcept { DFT_FD_STAT(__fxstat, ver, fd, st); }
DFT_EXPORT int __fxstat64(int ver, int fd, struct stat64* st) noexcept { DFT_FD_STAT(__fxstat64, ver, fd, st); }
DFT_EXPORT int fstatat(int dirfd, const char* path, struct stat* st, int flags) noexcept {
  return statat_op("fstatat", dirfd, path, flags, [&] { return real_fstatat()(dirfd, path, st, flags); });
}
DFT_EXPORT int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) noexcept {
  return statat_op("fstatat64", dirfd, path, flags, [&] { return real_fstatat64()(dirfd, path, st, flags); });
}
DFT_EXPORT int __fxstatat(int ver, int dirfd, const char* path, struct stat* st, int flags) noexcept {
  return statat_op("__fxstatat", dirfd, path, flags, [&] { return real___fxstatat()(ver, dirfd, path, st, flags); });
}
DFT_EXPORT int __fxstatat64(int ver, int dirfd, const char* path, struct stat64* st, int flags) noexcept {
  return statat_op("__fxstatat64", dirfd, path, flags,
                   [&] { return real___fxstatat64()(ver, dirfd, path, st, flags); });
}
DFT_EXPORT int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* st) noexcept {
  return statat_op("statx", dirfd, path, flags, [&] { return real_statx()(dirfd, path, flags, mask, st); });
}
#undef DFT_PATH_STAT
#undef DFT_FD_STAT

// ============================================================================ metadata calls
DFT_EXPORT int access(const char* path, int mode) noexcept {
  return path_op(
      "access", AT_FDCWD, path, [&] { return real_access()(path, mode); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int faccessat(int dirfd, const char* path, int mode, int flags) noexcept {
  return path_op(
      "faccessat", dirfd, path, [&] { return real_faccessat()(dirfd, path, mode, flags); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("flags", flags);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int mkdir(const char* path, mode_t mode) noexcept {
  return path_op(
      "mkdir", AT_FDCWD, path, [&] { return real_mkdir()(path, mode); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int mkdirat(int dirfd, const char* path, mode_t mode) noexcept {
  return path_op(
      "mkdirat", dirfd, path, [&] { return real_mkdirat()(dirfd, path, mode); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int rmdir(const char* path) noexcept {
  return path_op(
      "rmdir", AT_FDCWD, path, [&] { return real_rmdir()(path); }, kRetOnly);
}

DFT_EXPORT int unlink(const char* path) noexcept {
  return path_op(
      "unlink", AT_FDCWD, path, [&] { return real_unlink()(path); }, kRetOnly);
}

DFT_EXPORT int unlinkat(int dirfd, const char* path, int flags) noexcept {
  return path_op(
      "unlinkat", dirfd, path, [&] { return real_unlinkat()(dirfd, path, flags); },
      [&](auto& a, int ret) {
        a.add_int("flags", flags);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int rename(const char* oldp, const char* newp) noexcept {
  return two_path_op("rename", AT_FDCWD, oldp, AT_FDCWD, newp, true, [&] { return real_rename()(oldp, newp); });
}

DFT_EXPORT int renameat(int olddir, const char* oldp, int newdir, const char* newp) noexcept {
  return two_path_op("renameat", olddir, oldp, newdir, newp, true,
                     [&] { return real_renameat()(olddir, oldp, newdir, newp); });
}

DFT_EXPORT int link(const char* oldp, const char* newp) noexcept {
  return two_path_op("link", AT_FDCWD, oldp, AT_FDCWD, newp, true, [&] { return real_link()(oldp, newp); });
}

DFT_EXPORT int symlink(const char* target, const char* linkpath) noexcept {
  return two_path_op("symlink", AT_FDCWD, target, AT_FDCWD, linkpath, false,
                     [&] { return real_symlink()(target, linkpath); });
}

DFT_EXPORT ssize_t readlink(const char* path, char* buf, size_t size) noexcept {
  return path_op(
      "readlink", AT_FDCWD, path, [&] { return real_readlink()(path, buf, size); },
      [&](auto& a, ssize_t ret) {
        a.add_uint("count", size);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT ssize_t __readlink_chk(const char* path, char* buf, size_t size, size_t buflen) noexcept {
  return path_op(
      "readlink", AT_FDCWD, path, [&] { return real___readlink_chk()(path, buf, size, buflen); },
      [&](auto& a, ssize_t ret) {
        a.add_uint("count", size);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int chdir(const char* path) noexcept {
  int ret = path_op(
      "chdir", AT_FDCWD, path, [&] { return real_chdir()(path); }, kRetOnly);
  if (ret == 0 && may_mutate()) invalidate_cwd();
  return ret;
}

DFT_EXPORT int fchdir(int fd) noexcept {
  int ret = fd_op(
      g_state.posix, kCatPosix, "fchdir", fd, [&] { return real_fchdir()(fd); }, kRetOnly);
  if (ret == 0 && may_mutate()) invalidate_cwd();
  return ret;
}

DFT_EXPORT int chmod(const char* path, mode_t mode) noexcept {
  return path_op(
      "chmod", AT_FDCWD, path, [&] { return real_chmod()(path, mode); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int fchmod(int fd, mode_t mode) noexcept {
  return fd_op(
      g_state.posix, kCatPosix, "fchmod", fd, [&] { return real_fchmod()(fd, mode); },
      [&](auto& a, int ret) {
        a.add_int("mode", mode);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // every fcntl argument fits a pointer register (as in glibc)
  va_end(ap);
  return fcntl_op("fcntl", real_fcntl(), fd, cmd, arg);
}

DFT_EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return fcntl_op("fcntl64", real_fcntl64(), fd, cmd, arg);
}

DFT_EXPORT int dup(int oldfd) noexcept {
  return dup_op("dup", oldfd, [&] { return real_dup()(oldfd); });
}

// dup2/dup3 onto the trace descriptor: the tracer first moves its file to another number, so the
// application's call then does exactly what it does without the tracer.
static inline void yield_trace_fd(int oldfd, int newfd) noexcept {
  if (DFT_UNLIKELY(newfd != oldfd && is_protected_trace_fd(newfd))) {
    int e = errno;
    g_state.tracer->yield_fd(newfd);
    errno = e;
  }
}

DFT_EXPORT int dup2(int oldfd, int newfd) noexcept {
  yield_trace_fd(oldfd, newfd);
  return dup_op("dup2", oldfd, [&] { return real_dup2()(oldfd, newfd); });
}

DFT_EXPORT int dup3(int oldfd, int newfd, int flags) noexcept {
  yield_trace_fd(oldfd, newfd);
  return dup_op("dup3", oldfd, [&] { return real_dup3()(oldfd, newfd, flags); });
}

// ============================================================================ directories
DFT_EXPORT DIR* opendir(const char* path) {
  // The fd is registered so that openat(dirfd(d), ...) resolves.
  return open_entry(
      g_state.posix, kCatPosix, "opendir", AT_FDCWD, path, [&] { return real_opendir()(path); },
      [](DIR* d) { return d != nullptr ? dirfd(d) : -1; }, [](auto& a, DIR*, int fd) { a.add_int("ret", fd); });
}

DFT_EXPORT DIR* fdopendir(int fd) {
  return fd_op(
      g_state.posix, kCatPosix, "fdopendir", fd, [&] { return real_fdopendir()(fd); },
      [&](auto& a, DIR* d) { a.add_int("ret", d != nullptr ? 0 : -1); });
}

DFT_EXPORT int closedir(DIR* d) {
  asm("" : "+r"(d));  // declared nonnull, yet libc accepts NULL (EINVAL): keep the test
  int fd = d != nullptr ? dirfd(d) : -1;
  return close_entry(g_state.posix, kCatPosix, "closedir", fd, [&] { return real_closedir()(d); });
}

// ============================================================================ mmap family
DFT_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return mmap_op("mmap", len, prot, flags, fd, off, [&] { return real_mmap()(addr, len, prot, flags, fd, off); });
}

DFT_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept {
  return mmap_op("mmap64", len, prot, flags, fd, off, [&] { return real_mmap64()(addr, len, prot, flags, fd, off); });
}

DFT_EXPORT int munmap(void* addr, size_t len) noexcept {
  return mapping_op(
      "munmap", addr, len, true, [&] { return real_munmap()(addr, len); }, [](ArgList&) {});
}

DFT_EXPORT int msync(void* addr, size_t len, int flags) {
  return mapping_op(
      "msync", addr, len, false, [&] { return real_msync()(addr, len, flags); },
      [&](ArgList& a) { a.add_int("flags", flags); });
}

// In a fork child only the forking thread exists: a mapping-table lock held by another parent
// thread at fork time would never be released.
void dftracer::preload::posix_after_fork_child() noexcept { new (&g_maps_mu) std::mutex(); }
