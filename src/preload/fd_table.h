// fd -> path table of the preload library.
//
// An fd has an entry when it names a traced file (its path), or FdTable::untraced() when it is
// known not to (opened on an untraced path, or found so through /proc/self/fd), or none when it
// was never seen (resolved on first use: preload.h, traced_fd). Lookups are lock-free (two relaxed/acquire
// loads), so they are safe from signal handlers and from any number of threads. An entry is an
// immutable, reference-counted path shared by dup'ed fds (dup/dup2/dup3/fcntl F_DUPFD); close
// drops one reference. Freed entries go through a retire ring and are released only after
// kRetireDepth later retirements, so a reader that loaded a pointer just before a racing close
// never touches freed memory in practice (a reader holds it for one event, ~100 ns).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace dftracer::preload {

struct PathRef {
  std::atomic<int32_t> refs;
  uint32_t len;
  uint32_t frag_len;
  // len bytes + NUL, then frag_len bytes: the args fragment `"fname":"<JSON-escaped path>"`,
  // escaped once at open/dup time so each event copies it with one memcpy.
  char path[1];
  std::string_view view() const noexcept { return {path, len}; }
  std::string_view fname_fragment() const noexcept { return {path + len + 1, frag_len}; }
};

class FdTable {
 public:
  // The entry of fds known not to name a traced file: the address 1, never dereferenced, counted
  // or freed; null and it are the only "addresses" <= 1, so the event path tells both cold cases
  // from a path with one compare (preload.h, traced_fd).
  static PathRef* untraced() noexcept { return reinterpret_cast<PathRef*>(uintptr_t{1}); }
  // True when r is the path of a traced file (not null, not untraced()).
  static bool is_path(const PathRef* r) noexcept { return reinterpret_cast<uintptr_t>(r) > 1; }

  // 512 fds (one 4 KiB page) per chunk: a process that opens one file touches one page, not the
  // 8 of a 4096-fd chunk (calloc's zeroing faults them all in); the top level is .bss.
  static constexpr int kChunkBits = 9;
  static constexpr int kChunks = 8192;  // fds up to 4 Mi
  static constexpr int64_t kMaxFd = int64_t(kChunks) << kChunkBits;

  // Entry of fd: its path, untraced(), or null (never seen). Lock-free.
  PathRef* get(int fd) const noexcept {
    if (static_cast<unsigned>(fd) >= static_cast<uint64_t>(kMaxFd)) return nullptr;
    std::atomic<PathRef*>* c = chunks_[fd >> kChunkBits].load(std::memory_order_acquire);
    if (c == nullptr) return nullptr;
    return c[fd & ((1 << kChunkBits) - 1)].load(std::memory_order_acquire);
  }
  // Make fd name `path` (a new entry); replaces any older entry of fd.
  void set(int fd, std::string_view path) noexcept;
  // Make `newfd` share the entry of `oldfd` (dup family). If oldfd has no entry, newfd is cleared.
  void dup(int oldfd, int newfd) noexcept;
  // Make fd known as not naming a traced file (no /proc lookup for it later).
  void set_untraced(int fd) noexcept { exchange(fd, untraced()); }
  // Give an fd that has no entry the entry r (the caller's reference moves to the table) and
  // return r; if another thread gave it one first, release r and return that one.
  PathRef* install(int fd, PathRef* r) noexcept;
  // Forget fd (close).
  void clear(int fd) noexcept;
  // Remove and return fd's entry (the caller owns one reference; release() it).
  PathRef* take(int fd) noexcept;
  // Forget [first, last] (close_range).
  void clear_range(unsigned first, unsigned last) noexcept;

  static PathRef* make(std::string_view path) noexcept;
  static void acquire(PathRef* r) noexcept {
    if (is_path(r)) r->refs.fetch_add(1, std::memory_order_relaxed);
  }
  static void release(PathRef* r) noexcept;

 private:
  std::atomic<PathRef*>* slot(int fd, bool create) noexcept;
  void exchange(int fd, PathRef* r) noexcept;
  std::atomic<std::atomic<PathRef*>*> chunks_[kChunks] = {};
};

extern FdTable g_fds __attribute__((visibility("hidden")));

}  // namespace dftracer::preload
