// STDIO module: wrappers of the buffered stream calls (cat "STDIO").
//
// The calls are listed in src/format/calls.def (interface STDIO); real.h declares their real
// functions.
//
// FILE* -> path goes through the stream's fd (fileno) in the shared fd table: fopen of a traced
// path registers fileno(fp); fclose removes it (libc closes the fd internally, unseen by us).
// fread/fwrite args: size = item size (bytes), count = number of items asked, ret = items moved.
#include <stdio.h>

#include "ops.h"

using namespace dftracer;
using namespace dftracer::preload;

namespace {

// fd of a stream without touching errno (fileno sets EBADF for fd-less streams).
inline int stream_fd(FILE* fp) noexcept {
  if (fp == nullptr) return -1;
  int e = errno;
  int fd = fileno_unlocked(fp);
  errno = e;
  return fd;
}

// Call on a stream: traced when its fd is in the table.
template <typename Call, typename Fill>
inline auto stream_op(std::string_view name, FILE* fp, Call&& call, Fill&& fill) -> decltype(call()) {
  if (DFT_LIKELY(!g_state.stdio) || fp == nullptr) return call();
  return fd_op(true, kCatStdio, name, stream_fd(fp), call, fill);
}

// fopen family: register the stream's fd when the path is traced.
template <typename Call>
FILE* fopen_op(std::string_view name, const char* path, const char* mode, Call&& call) {
  return open_entry(
      g_state.stdio, kCatStdio, name, AT_FDCWD, path, call, [](FILE* fp) { return fp != nullptr ? stream_fd(fp) : -1; },
      [&](auto& a, FILE* fp, int fd) {
        a.add_str("fmode", mode != nullptr ? std::string_view(mode) : std::string_view());
        a.add_int("fd", fd);
        a.add_int("ret", fp != nullptr ? 0 : -1);
      });
}

template <typename Call>
FILE* freopen_op(std::string_view name, const char* path, const char* mode, FILE* old, Call&& call) {
  // The old stream's fd is closed by libc (or reused when path is null).
  int oldfd = stream_fd(old);
  if (path == nullptr)
    return stream_op(name, old, call, [&](ArgList& a, FILE* fp) {
      a.add_str("fmode", mode != nullptr ? std::string_view(mode) : std::string_view());
      a.add_int("ret", fp != nullptr ? 0 : -1);
    });
  if (oldfd >= 0 && may_mutate() && g_fds.get(oldfd) != nullptr) {
    int e = errno;
    g_fds.clear(oldfd);
    errno = e;
  }
  return fopen_op(name, path, mode, call);
}

// fread/fwrite: item size, items asked, items moved (bytes = ret * size).
template <typename Call>
size_t item_io_op(std::string_view name, FILE* fp, size_t size, size_t n, Call&& call) {
  return stream_op(name, fp, call, [&](auto& a, size_t ret) {
    a.add_uint("size", size);
    a.add_uint("count", n);
    a.add_uint("ret", ret);
  });
}

}  // namespace

DFT_EXPORT FILE* fopen(const char* path, const char* mode) {
  return fopen_op("fopen", path, mode, [&] { return real_fopen()(path, mode); });
}

DFT_EXPORT FILE* fopen64(const char* path, const char* mode) {
  return fopen_op("fopen64", path, mode, [&] { return real_fopen64()(path, mode); });
}

DFT_EXPORT FILE* fdopen(int fd, const char* mode) noexcept {
  return fd_op(
      g_state.stdio, kCatStdio, "fdopen", fd, [&] { return real_fdopen()(fd, mode); },
      [&](ArgList& a, FILE* fp) {
        a.add_str("fmode", mode != nullptr ? std::string_view(mode) : std::string_view());
        a.add_int("ret", fp != nullptr ? 0 : -1);
      });
}

DFT_EXPORT FILE* freopen(const char* path, const char* mode, FILE* fp) {
  return freopen_op("freopen", path, mode, fp, [&] { return real_freopen()(path, mode, fp); });
}

DFT_EXPORT FILE* freopen64(const char* path, const char* mode, FILE* fp) {
  return freopen_op("freopen64", path, mode, fp, [&] { return real_freopen64()(path, mode, fp); });
}

DFT_EXPORT int fclose(FILE* fp) {
  return close_entry(g_state.stdio, kCatStdio, "fclose", stream_fd(fp), [&] { return real_fclose()(fp); });
}

DFT_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* fp) {
  return item_io_op("fread", fp, size, n, [&] { return real_fread()(buf, size, n, fp); });
}

DFT_EXPORT size_t __fread_chk(void* buf, size_t buflen, size_t size, size_t n, FILE* fp) {
  return item_io_op("fread", fp, size, n, [&] { return real___fread_chk()(buf, buflen, size, n, fp); });
}

DFT_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* fp) {
  return item_io_op("fwrite", fp, size, n, [&] { return real_fwrite()(buf, size, n, fp); });
}

DFT_EXPORT int fseek(FILE* fp, long offset, int whence) {
  return stream_op(
      "fseek", fp, [&] { return real_fseek()(fp, offset, whence); },
      [&](auto& a, int ret) {
        a.add_int("offset", offset);
        a.add_int("whence", whence);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int fseeko(FILE* fp, off_t offset, int whence) {
  return stream_op(
      "fseeko", fp, [&] { return real_fseeko()(fp, offset, whence); },
      [&](auto& a, int ret) {
        a.add_int("offset", offset);
        a.add_int("whence", whence);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT int fseeko64(FILE* fp, off64_t offset, int whence) {
  return stream_op(
      "fseeko64", fp, [&] { return real_fseeko64()(fp, offset, whence); },
      [&](auto& a, int ret) {
        a.add_int("offset", offset);
        a.add_int("whence", whence);
        a.add_int("ret", ret);
      });
}

DFT_EXPORT long ftell(FILE* fp) {
  return stream_op(
      "ftell", fp, [&] { return real_ftell()(fp); }, kRetOnly);
}

DFT_EXPORT off_t ftello(FILE* fp) {
  return stream_op(
      "ftello", fp, [&] { return real_ftello()(fp); }, kRetOnly);
}

DFT_EXPORT off64_t ftello64(FILE* fp) {
  return stream_op(
      "ftello64", fp, [&] { return real_ftello64()(fp); }, kRetOnly);
}

DFT_EXPORT int fflush(FILE* fp) {
  return stream_op(
      "fflush", fp, [&] { return real_fflush()(fp); }, kRetOnly);
}
