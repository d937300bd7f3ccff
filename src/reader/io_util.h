// Small POSIX file helpers for the reader (internal).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "reader.h"

namespace dftracer::reader {

// '\n' bytes in [p, p + n) (AVX2 when the CPU has it; batch.cpp).
int64_t count_newlines(const char* p, size_t n);

class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw ReaderError(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) throw ReaderError(path + ": cannot stat: " + std::strerror(errno));
    size_ = st.st_size;
    dev_ = uint64_t(st.st_dev);
    ino_ = uint64_t(st.st_ino);
    mtime_ns_ = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int64_t size() const { return size_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  uint64_t dev() const { return dev_; }  // file identity (st_dev, st_ino)
  uint64_t ino() const { return ino_; }
  // The file as it was when it had `size` bytes (a trace still being written: the index of its
  // first `size` bytes); reads stop there. No-op unless size < size().
  void limit(int64_t size) {
    if (size >= 0 && size < size_) size_ = size;
  }
  // Reads up to n bytes at off, never past size() (the size at open, or the limit: bytes a
  // writer appends meanwhile are not seen); returns bytes read (short only at that end).
  size_t pread_full(void* buf, size_t n, int64_t off) const {
    if (off >= size_) return 0;
    if (int64_t(n) > size_ - off) n = size_t(size_ - off);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(buf) + got, n - got, off + int64_t(got));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw ReaderError(path_ + ": read error: " + std::strerror(errno));
      }
      if (r == 0) break;
      got += size_t(r);
    }
    return got;
  }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  int64_t mtime_ns_ = 0;
  uint64_t dev_ = 0, ino_ = 0;
};

}  // namespace dftracer::reader
