// Per-process cache of opened indexes (open_index, reader.h).
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "reader.h"

namespace dftracer::reader {

namespace {
struct CacheEntry {
  std::shared_ptr<const IndexInfo> info;
  int64_t size = 0, mtime_ns = 0;  // trace
  uint64_t dev = 0, ino = 0;
  uint64_t idx_ino = 0;
  int64_t idx_size = 0, idx_mtime_ns = 0;  // index file (unused for an in-memory index)
};
std::mutex g_cache_mu;
std::map<std::string, CacheEntry> g_cache;  // key: index_dir + '\0' + absolute trace path

bool stat_ns(const std::string& p, struct stat& st) { return ::stat(p.c_str(), &st) == 0; }
int64_t mtime_of(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }
}  // namespace

std::shared_ptr<const IndexInfo> open_index(const std::string& trace, const std::string& index_dir, bool allow_grown) {
  return open_index_with(trace, index_dir, allow_grown, nullptr);
}

std::shared_ptr<const IndexInfo> open_index_with(const std::string& trace, const std::string& index_dir,
                                                 bool allow_grown, IndexInfo* built) {
  char real[PATH_MAX];
  bool resolved = ::realpath(trace.c_str(), real) != nullptr;
  std::string key = index_dir + '\0' + (resolved ? std::string(real) : trace);
  struct stat ts, is;
  if (resolved && !built && stat_ns(real, ts)) {
    std::lock_guard<std::mutex> lk(g_cache_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      const CacheEntry& e = it->second;
      bool same_trace = e.size == ts.st_size && e.mtime_ns == mtime_of(ts) && e.dev == uint64_t(ts.st_dev) &&
                        e.ino == uint64_t(ts.st_ino);
      bool same_index = e.info->index_path.empty() ||
                        (stat_ns(e.info->index_path, is) && uint64_t(is.st_ino) == e.idx_ino &&
                         int64_t(is.st_size) == e.idx_size && mtime_of(is) == e.idx_mtime_ns);
      // grown since (same file, index file untouched): a trace still being written, read as indexed
      bool grown = allow_grown && !e.info->index_path.empty() && int64_t(ts.st_size) > e.size &&
                   e.dev == uint64_t(ts.st_dev) && e.ino == uint64_t(ts.st_ino);
      if ((same_trace || grown) && same_index) return e.info;
      g_cache.erase(it);
    }
  }
  // allow_grown: the index this run planned its batches on, even when the trace grew since
  auto info = built ? std::make_shared<IndexInfo>(std::move(*built))
                    : std::make_shared<IndexInfo>(build_index(trace, index_dir, false, false, allow_grown));
  CacheEntry e;
  e.size = info->size;
  e.mtime_ns = info->mtime_ns;
  e.dev = info->dev;
  e.ino = info->ino;
  if (!info->index_path.empty()) {
    for (auto& c : info->checkpoints) std::string().swap(c.window);  // loaded on demand
    if (!stat_ns(info->index_path, is)) return info;
    e.idx_ino = uint64_t(is.st_ino);
    e.idx_size = int64_t(is.st_size);
    e.idx_mtime_ns = mtime_of(is);
  }
  e.info = info;
  std::lock_guard<std::mutex> lk(g_cache_mu);
  if (g_cache.size() >= 256) g_cache.clear();
  g_cache[key] = e;
  return info;
}

// Stores stats/context computed by scan (see batch.cpp) into an existing index. Best effort: an

}  // namespace dftracer::reader
