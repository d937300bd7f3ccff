// Wrapper skeletons shared by posix.cpp and stdio.cpp, one per shape of call: on an fd (fd_op),
// on a path (path_op), opening (open_entry), closing (close_entry).
//
// None of these are noexcept: many wrapped calls are pthread cancellation points, and glibc
// cancels with a forced unwind that must be able to pass through our frames.
#pragma once

#include <fcntl.h>

#include <type_traits>

#include "preload.h"

namespace dftracer::preload {

// Drop a stale entry for a freshly returned fd (its earlier close was not seen, e.g. closed
// inside libc). Keeps errno.
inline void forget_fd(int fd) noexcept {
  if (fd < 0 || !may_mutate() || g_fds.get(fd) == nullptr) return;
  int e = errno;
  g_fds.clear(fd);
  errno = e;
}

// A freshly returned fd opened on a path that is not traced: known as such, so that its first
// read or write does not look it up in /proc. Keeps errno.
inline void untraced_fd(int fd) noexcept {
  if (fd < 0 || !may_mutate() || g_fds.get(fd) == FdTable::untraced()) return;
  int e = errno;
  g_fds.set_untraced(fd);
  errno = e;
}

// Call on an fd: traced when the fd was opened on a traced path. fill(args, ret) adds the
// call-specific args after fname and fd: a fill that takes CompactArgs (integers only; generic
// lambdas `auto& a` do) makes the event a compact record (emit_compact), formatted by the writer;
// one that takes ArgList& (string args) is formatted on this thread (emit).
template <typename Call, typename Fill>
inline auto fd_op(bool category, std::string_view cat, std::string_view name, int fd, Call&& call, Fill&& fill)
    -> decltype(call()) {
  PathRef* p = traced_fd(category, fd);
  if (DFT_LIKELY(p == nullptr)) return call();
  int64_t t0 = now_us();
  auto ret = call();
  int64_t t1 = now_us();
  Recording rec;
  if constexpr (std::is_invocable_v<Fill&, CompactArgs&, decltype(ret)>) {
    emit_compact(name, cat, t0, t1, p->fname_fragment(), [&](CompactArgs& a) {
      a.add_int("fd", fd);
      fill(a, ret);
    });
  } else {
    emit(name, cat, t0, t1, [&](ArgList& a) {
      a.add_raw(p->fname_fragment());
      a.add_int("fd", fd);
      fill(a, ret);
    });
  }
  return ret;
}

// fill for calls whose only argument worth recording is the result.
inline constexpr auto kRetOnly = [](auto& a, auto ret) { a.add_int("ret", static_cast<int64_t>(ret)); };

// Call on a path (relative to dirfd, AT_FDCWD = cwd): traced when the path is traced.
template <typename Call, typename Fill>
inline auto path_op(std::string_view name, int dirfd, const char* path, Call&& call, Fill&& fill) -> decltype(call()) {
  if (DFT_LIKELY(!gate(g_state.posix))) return call();
  char abs[kPathCap];
  int n = 0;
  if (!traced_path(dirfd, path, abs, &n)) return call();
  int64_t t0 = now_us();
  auto ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(name, kCatPosix, t0, t1, [&](ArgList& a) {
    a.add_str("fname", std::string_view(abs, n));
    fill(a, ret);
  });
  return ret;
}

// Open family (open*, creat*, opendir, fopen*): `call` opens `path` (relative to dirfd,
// AT_FDCWD = cwd) and fd_of(result) is the new fd, or -1. The fd table learns it: the path when
// traced, a stale entry cleared otherwise. fill(ArgList&, result, fd) adds the args after fname.
template <typename Call, typename FdOf, typename Fill>
inline auto open_entry(bool category, std::string_view cat, std::string_view name, int dirfd, const char* path,
                       Call&& call, FdOf&& fd_of, Fill&& fill) -> decltype(call()) {
  char abs[kPathCap];
  int n = 0;
  if (DFT_LIKELY(!gate(category))) {
    auto r = call();
    forget_fd(fd_of(r));  // unknown: resolved on first use, should tracing apply then
    return r;
  }
  if (!traced_path(dirfd, path, abs, &n)) {
    auto r = call();
    untraced_fd(fd_of(r));
    return r;
  }
  int64_t t0 = now_us();
  auto r = call();
  int64_t t1 = now_us();
  Recording rec;
  int fd = fd_of(r);
  std::string_view p(abs, n);
  if (fd >= 0) g_fds.set(fd, p);
  emit(name, cat, t0, t1, [&](ArgList& a) {
    a.add_str("fname", p);
    fill(a, r, fd);
  });
  return r;
}

// Close family (close, closedir, fclose): real_close() closes `fd` (closedir and fclose close it
// inside libc). The fd's path is taken out of the table first, so a concurrent open reusing the
// number gets a fresh entry. Traced when fd was opened on a traced path and `category` is on.
template <typename RealClose>
inline int close_entry(bool category, std::string_view cat, std::string_view name, int fd, RealClose&& real_close) {
  if (fd < 0 || !may_mutate() || g_fds.get(fd) == nullptr) return real_close();
  int e = errno;
  PathRef* p = g_fds.take(fd);
  errno = e;
  if (!FdTable::is_path(p) || !gate(category)) {
    int ret = real_close();
    e = errno;
    FdTable::release(p);
    errno = e;
    return ret;
  }
  int64_t t0 = now_us();
  int ret = real_close();
  int64_t t1 = now_us();
  Recording rec;
  emit_compact(name, cat, t0, t1, p->fname_fragment(), [&](CompactArgs& a) {
    a.add_int("fd", fd);
    a.add_int("ret", ret);
  });
  FdTable::release(p);
  return ret;
}

}  // namespace dftracer::preload
