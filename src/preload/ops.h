// Wrapper skeletons shared by posix.cpp and stdio.cpp.
//
// None of these are noexcept: many wrapped calls are pthread cancellation points, and glibc
// cancels with a forced unwind that must be able to pass through our frames.
#pragma once

#include <fcntl.h>

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

// Call on an fd: traced when the fd was opened on a traced path.
// fill(ArgList&, ret) adds the call-specific args after fname and fd.
template <typename Call, typename Fill>
inline auto fd_op(bool category, std::string_view cat, std::string_view name, int fd, Call&& call,
                  Fill&& fill) -> decltype(call()) {
  PathRef* p = traced_fd(category, fd);
  if (DFT_LIKELY(p == nullptr)) return call();
  int64_t t0 = now_us();
  auto ret = call();
  int64_t t1 = now_us();
  Recording rec;
  emit(name, cat, t0, t1, [&](ArgList& a) {
    a.add_raw(p->fname_fragment());
    a.add_int("fd", fd);
    fill(a, ret);
  });
  return ret;
}

// Call on a path (relative to dirfd, AT_FDCWD = cwd): traced when the path is traced.
template <typename Call, typename Fill>
inline auto path_op(std::string_view name, int dirfd, const char* path, Call&& call, Fill&& fill)
    -> decltype(call()) {
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

}  // namespace dftracer::preload
