// fd -> path table (see fd_table.h).
#include "fd_table.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "../format/json_text.h"

namespace dftracer::preload {

FdTable g_fds;

namespace {
// Retire ring: a released entry is freed once kRetireDepth newer entries were retired after it.
constexpr uint64_t kRetireDepth = 4096;
std::atomic<PathRef*> g_retired[kRetireDepth];
std::atomic<uint64_t> g_retire_next{0};

void retire(PathRef* r) noexcept {
  uint64_t i = g_retire_next.fetch_add(1, std::memory_order_relaxed) % kRetireDepth;
  PathRef* old = g_retired[i].exchange(r, std::memory_order_acq_rel);
  if (old != nullptr) std::free(old);
}
}  // namespace

PathRef* FdTable::make(std::string_view path) noexcept {
  static constexpr char kKey[] = "\"fname\":\"";
  constexpr size_t kKeyLen = sizeof(kKey) - 1;
  // Most paths need no escaping: then the fragment is exactly len + 10 bytes.
  bool plain = json::is_plain(path.data(), path.size());
  size_t frag_max = kKeyLen + 1 + (plain ? path.size() : json::max_escaped(path.size()));
  auto* r = static_cast<PathRef*>(std::malloc(sizeof(PathRef) + path.size() + 1 + frag_max));
  if (r == nullptr) return nullptr;
  new (&r->refs) std::atomic<int32_t>(1);
  r->len = static_cast<uint32_t>(path.size());
  std::memcpy(r->path, path.data(), path.size());
  r->path[path.size()] = '\0';
  char* f = r->path + path.size() + 1;
  char* p = f;
  std::memcpy(p, kKey, kKeyLen);
  p += kKeyLen;
  if (plain) {
    std::memcpy(p, path.data(), path.size());
    p += path.size();
  } else {
    p = json::write_escaped(p, path.data(), path.size());
  }
  *p++ = '"';
  r->frag_len = static_cast<uint32_t>(p - f);
  return r;
}

void FdTable::release(PathRef* r) noexcept {
  if (is_path(r) && r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) retire(r);
}

std::atomic<PathRef*>* FdTable::slot(int fd, bool create) noexcept {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  std::atomic<std::atomic<PathRef*>*>& top = chunks_[fd >> kChunkBits];
  std::atomic<PathRef*>* c = top.load(std::memory_order_acquire);
  if (c == nullptr) {
    if (!create) return nullptr;
    // calloc'ed atomics of pointer type are valid null pointers (lock-free, trivially laid out).
    auto* fresh = static_cast<std::atomic<PathRef*>*>(
        std::calloc(size_t(1) << kChunkBits, sizeof(std::atomic<PathRef*>)));
    if (fresh == nullptr) return nullptr;
    if (top.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) {
      c = fresh;
    } else {
      std::free(fresh);  // another thread installed one; c holds it
    }
  }
  return &c[fd & ((1 << kChunkBits) - 1)];
}

void FdTable::exchange(int fd, PathRef* r) noexcept {
  std::atomic<PathRef*>* s = slot(fd, r != nullptr);
  if (s == nullptr) {
    release(r);
    return;
  }
  if (r == nullptr && s->load(std::memory_order_relaxed) == nullptr) return;
  release(s->exchange(r, std::memory_order_acq_rel));
}

void FdTable::set(int fd, std::string_view path) noexcept { exchange(fd, make(path)); }

void FdTable::dup(int oldfd, int newfd) noexcept {
  PathRef* r = get(oldfd);
  if (r != nullptr) acquire(r);
  exchange(newfd, r);
}

void FdTable::clear(int fd) noexcept { exchange(fd, nullptr); }

PathRef* FdTable::install(int fd, PathRef* r) noexcept {
  std::atomic<PathRef*>* s = slot(fd, true);
  if (s == nullptr) {
    release(r);
    return nullptr;
  }
  PathRef* expected = nullptr;
  if (s->compare_exchange_strong(expected, r, std::memory_order_acq_rel)) return r;
  release(r);
  return expected;
}

PathRef* FdTable::take(int fd) noexcept {
  std::atomic<PathRef*>* s = slot(fd, false);
  if (s == nullptr || s->load(std::memory_order_relaxed) == nullptr) return nullptr;
  return s->exchange(nullptr, std::memory_order_acq_rel);
}

void FdTable::clear_range(unsigned first, unsigned last) noexcept {
  if (first >= static_cast<uint64_t>(kMaxFd)) return;
  if (last >= static_cast<uint64_t>(kMaxFd)) last = static_cast<unsigned>(kMaxFd - 1);
  for (uint64_t fd = first; fd <= last;) {
    if (chunks_[fd >> kChunkBits].load(std::memory_order_acquire) == nullptr) {
      fd = ((fd >> kChunkBits) + 1) << kChunkBits;  // whole chunk empty
      continue;
    }
    clear(static_cast<int>(fd));
    ++fd;
  }
}

}  // namespace dftracer::preload
