// Batch loader (batch_loader.h): range read + parse, with the whole-file context rule.
#include "batch_loader.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dftracer::reader {
namespace {

// The file's identity (its hostname, and the FH/HH/SH records written with it) is a property of
// the whole file, not of one batch: the tracer writes it in the file's first lines. A batch that
// starts later learns it from checkpoint 0, read once per file version in this process.
using FileKey = std::tuple<std::string, int64_t, int64_t, uint64_t, uint64_t>;  // path size mtime dev ino
std::mutex g_head_mu;
std::map<FileKey, std::shared_ptr<const FileContext>> g_heads;

std::shared_ptr<const FileContext> head_context(const IndexInfo& idx) {
  FileKey key{idx.path, idx.size, idx.mtime_ns, idx.dev, idx.ino};
  {
    std::lock_guard<std::mutex> lk(g_head_mu);
    auto it = g_heads.find(key);
    if (it != g_heads.end()) return it->second;
  }
  auto head = std::make_shared<FileContext>();
  if (!idx.checkpoints.empty() && !(idx.checkpoints[0].flags & kLost)) {
    RangeData r = read_checkpoints(idx, 0, 0);
    collect_context(r.data.data(), r.data.size(), *head);
    if (head->hostname.empty() && head->hh.size() == 1) head->hostname = head->hh.begin()->second;
  }
  std::lock_guard<std::mutex> lk(g_head_mu);
  if (g_heads.size() >= 256) g_heads.clear();
  g_heads[key] = head;
  return head;
}

int64_t rows_without_host(const EventColumns& c) {
  return int64_t(std::count(c.hostname.codes.begin(), c.hostname.codes.end(), -1));
}

}  // namespace

// ---- Column blocks (reader.h: NoInitAllocator) ------------------------------------------------
//
// Under Dask's workers every freed block of >= 128 KiB goes back to the system
// (MALLOC_TRIM_THRESHOLD_ set by the nanny fixes malloc's mmap threshold at 128 KiB), so the
// columns of a batch that its task drops before loading the next one (the summary's load tasks:
// reduce, drop) were fresh memory again in every batch: a page fault per 4 KiB, ~2.5 µs each on
// this machine (docs/perf/i26-faults.md). Freed column blocks are kept here, up to
// kColumnCacheBytes in all (process-wide: a frame may be freed by any thread), and handed to the
// next column that asks for a block of the same size class. Sizes are rounded up to 1/8 of their
// power of two (<= 12.5 % more address space; only the pages a column writes become resident, as
// before), so that the columns of the next batch, a few lines longer or shorter, fit. Blocks of
// a batch whose frame is held are not freed, so nothing changes for them.
namespace {
constexpr size_t kColumnCacheBytes = size_t(32) << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kColumnCacheOn = false;  // (keep use-after-free of a column visible to ASan)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kColumnCacheOn = false;
#else
constexpr bool kColumnCacheOn = true;
#endif
#else
constexpr bool kColumnCacheOn = true;
#endif

size_t column_class(size_t bytes) {
  size_t top = size_t(1) << (63 - __builtin_clzll(bytes));  // bytes >= kColumnBlockMin > 0
  size_t step = top >> 3;
  return (bytes + step - 1) / step * step;
}

struct CachedBlock {
  void* p;
  size_t cls;       // its class size
  size_t resident;  // bytes from its start that an earlier column wrote (resident since)
};
struct ColumnCache {
  std::mutex mu;
  std::vector<CachedBlock> blocks;
  size_t bytes = 0;
  // Blocks handed out again, until freed: their resident bytes (column_block_resident).
  std::unordered_map<const void*, size_t> warm;
};
// Never destroyed: the cached blocks stay reachable (leak checkers) and usable until exit.
ColumnCache& column_cache() {
  static ColumnCache* c = new ColumnCache;
  return *c;
}
}  // namespace

void* column_block_alloc(size_t bytes) {
  size_t cls = column_class(bytes);
  if (kColumnCacheOn) {
    ColumnCache& c = column_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    for (size_t i = c.blocks.size(); i-- > 0;) {
      if (c.blocks[i].cls != cls) continue;
      CachedBlock b = c.blocks[i];
      try {
        c.warm[b.p] = b.resident;
      } catch (...) {  // (no memory for the entry: the block is simply treated as fresh)
      }
      c.blocks[i] = c.blocks.back();
      c.blocks.pop_back();
      c.bytes -= cls;
      return b.p;
    }
  }
  return ::operator new(cls);
}

void column_block_note_resident(const void* p, size_t bytes) noexcept {
  if (!kColumnCacheOn || p == nullptr || bytes == 0) return;
  ColumnCache& c = column_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  try {
    size_t& r = c.warm[p];
    r = std::max(r, bytes);
  } catch (...) {  // (no memory for the entry: the block is simply treated as fresh)
  }
}

size_t column_block_resident(const void* p) noexcept {
  if (!kColumnCacheOn || p == nullptr) return 0;
  ColumnCache& c = column_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  auto it = c.warm.find(p);
  return it == c.warm.end() ? 0 : it->second;
}

void column_block_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  size_t cls = column_class(bytes);
  if (kColumnCacheOn) {
    ColumnCache& c = column_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    // The column that had it wrote its rows, i.e. (nearly) its whole allocation (the reader
    // reserves the index's line count); the pages written in an earlier life stay resident.
    size_t resident = bytes;
    auto it = c.warm.find(p);
    if (it != c.warm.end()) {
      resident = std::max(resident, it->second);
      c.warm.erase(it);
    }
    if (c.bytes + cls <= kColumnCacheBytes) {
      try {
        c.blocks.push_back(CachedBlock{p, cls, std::min(resident, cls)});
        c.bytes += cls;
        return;
      } catch (...) {  // (no memory for the list: free the block instead)
      }
    }
  }
  ::operator delete(p);
}

ParsedBatch load_batch(const std::string& trace, int64_t first, int64_t last, const std::string& index_dir,
                       const ArgsProjection& args) {
  ParsedBatch b;
  load_batch_into(b, trace, first, last, index_dir, args);
  return b;
}

// Checkpoints are inflated and parsed a few MiB at a time (kChunkBytes of text): the text is
// parsed while it is still in cache and its buffer is reused, instead of inflating the whole
// batch into one fresh buffer (page faults, and every byte written to and read back from DRAM).
constexpr int64_t kChunkBytes = int64_t(4) << 20;

// The chunk text buffer of this thread, reused by every chunk of every batch it loads: a fresh
// multi-MiB buffer per chunk is fresh memory (a page fault per 4 KiB) whenever malloc gives
// large blocks back to the system at free, as it does under Dask's workers
// (MALLOC_TRIM_THRESHOLD_ set: mmap for every block >= 128 KiB; docs/perf/i22-reserve.md).
// Sized once for a whole chunk (pages are only touched as text is written); a larger buffer
// (a single checkpoint above kChunkBytes) is freed after use.
namespace {
constexpr size_t kKeepBytes = size_t(kChunkBytes) + 64;
thread_local TextBuffer t_chunk_text;

RangeData read_chunk(const IndexInfo& idx, int64_t first, int64_t last) {
  if (t_chunk_text.capacity() < kKeepBytes) t_chunk_text.reserve(kKeepBytes);
  return read_checkpoints(idx, first, last, std::move(t_chunk_text));
}

void keep_chunk_buffer(RangeData& r) {
  if (r.data.capacity() <= kKeepBytes) t_chunk_text = std::move(r.data);
}
}  // namespace

void load_batch_into(ParsedBatch& b, const std::string& trace, int64_t first, int64_t last,
                     const std::string& index_dir, const ArgsProjection& args) {
  std::shared_ptr<const IndexInfo> idx = open_index(trace, index_dir, true);
  if (first < 0 || first > last || last >= int64_t(idx->checkpoints.size()))
    (void)read_checkpoints(*idx, first, last);  // its error for a bad range (IndexError)
  if (first > last || first < 0) return;        // (an empty range it accepted: no rows)
  int64_t lines = 0;
  for (int64_t i = first; i <= last; ++i) lines += idx->checkpoints[size_t(i)].num_lines;
  FileContext ctx = idx->context;
  Parser parser;
  parser.set_args_projection(args);
  // Parses [first, last] chunk by chunk into b.columns with `c`; what reading could not deliver
  // is collected in `lost` (once: a reparse reads the same checkpoints again).
  auto parse_range = [&](FileContext& c, RangeData* lost) {
    for (int64_t i = first; i <= last;) {
      int64_t j = i, bytes = idx->checkpoints[size_t(i)].uncompressed_size;
      while (j < last && bytes + idx->checkpoints[size_t(j + 1)].uncompressed_size <= kChunkBytes)
        bytes += idx->checkpoints[size_t(++j)].uncompressed_size;
      RangeData r = read_chunk(*idx, i, j);
      parser.parse(r.data.data(), r.data.size(), r.data.capacity(), c, b.columns);
      keep_chunk_buffer(r);
      if (lost) {
        lost->lost_lines += r.lost_lines;
        lost->lost_bytes += r.lost_bytes;
        lost->header_mismatches += r.header_mismatches;
        for (auto& w : r.warnings) lost->warnings.push_back(std::move(w));
      }
      i = j + 1;
    }
  };
  RangeData lost;
  b.columns.reserve_rows = lines;
  parse_range(ctx, &lost);
  bool reparse = false;
  if (b.columns.unresolved_hashes > 0) {
    reparse = !idx->context.scanned;  // hashes defined outside this batch
  } else if (rows_without_host(b.columns) > 0) {
    // Events without their own host take the file's: the one this batch met, else the file
    // head's (checkpoint 0, read once per file in this process), else the whole file's.
    std::string host = ctx.hostname;
    if (host.empty() && first > 0) host = head_context(*idx)->hostname;
    if (!host.empty()) {
      int32_t code = b.columns.hostname.intern(host);
      for (int32_t& c : b.columns.hostname.codes)
        if (c < 0) c = code;
    } else {
      reparse = !idx->context.scanned;
    }
  }
  if (reparse) {
    // Complete the file's context once (stored in the index), then parse again with it.
    IndexInfo full_idx = *idx;
    ensure_context(full_idx);
    b.columns = EventColumns{};
    b.columns.reserve_rows = lines;
    FileContext full = full_idx.context;
    parse_range(full, nullptr);
  }
  Parser::finish(b.columns);
  b.lost_lines = lost.lost_lines;
  b.lost_bytes = lost.lost_bytes;
  b.header_mismatches = lost.header_mismatches;
  b.warnings = std::move(lost.warnings);
}

FilesBatch load_files(const std::vector<std::string>& paths, const ArgsProjection& args) {
  FilesBatch out;
  out.files = load_files_into(out.batch, paths, args);
  return out;
}

std::vector<FileLoad> load_files_into(ParsedBatch& batch, const std::vector<std::string>& paths,
                                      const ArgsProjection& args) {
  std::vector<FileLoad> files(paths.size());
  Parser parser;
  parser.set_args_projection(args);
  EventColumns& cols = batch.columns;
  for (size_t k = 0; k < paths.size(); ++k) {
    FileLoad& fl = files[k];
    fl.path = paths[k];
    int64_t rows0 = cols.rows, skipped0 = cols.skipped_lines, unresolved0 = cols.unresolved_hashes;
    int64_t bad_ts0 = cols.ts_out_of_range_lines, bad_dur0 = cols.negative_dur_lines;
    try {
      IndexInfo idx = build_index_in_memory(paths[k]);
      fl.indexed = true;
      fl.kind = idx.kind;
      fl.lines = idx.lines;
      fl.compressed_bytes = idx.compressed_bytes;
      fl.uncompressed_bytes = idx.uncompressed_bytes;
      fl.checkpoints = int64_t(idx.checkpoints.size());
      if (!idx.checkpoints.empty()) {
        RangeData r = read_checkpoints(idx, 0, fl.checkpoints - 1);
        FileContext ctx = idx.context;
        if (!ctx.scanned) {  // the whole file is here: its FH/HH/SH records are too
          collect_context(r.data.data(), r.data.size(), ctx);
          if (ctx.hostname.empty() && ctx.hh.size() == 1) ctx.hostname = ctx.hh.begin()->second;
        }
        parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
        fl.lost_bytes = r.lost_bytes;
        fl.lost_lines = r.lost_lines;
        batch.header_mismatches += r.header_mismatches;
        fl.warnings = std::move(r.warnings);
      }
    } catch (const std::exception& e) {
      fl.error = e.what();
    }
    fl.rows = cols.rows - rows0;
    fl.skipped_lines = cols.skipped_lines - skipped0;
    fl.unresolved_hashes = cols.unresolved_hashes - unresolved0;
    fl.ts_out_of_range_lines = cols.ts_out_of_range_lines - bad_ts0;
    fl.negative_dur_lines = cols.negative_dur_lines - bad_dur0;
  }
  Parser::finish(cols);
  return files;
}

VerifiedLines read_lines_verified(const std::string& trace, int64_t first_line, int64_t n_lines,
                                  const std::string& index_dir) {
  VerifiedLines out;
  out.result = read_lines_checked(*open_index(trace, index_dir), first_line, n_lines);
  if (out.result.line_count_mismatch || out.result.needs_verified_index) {
    bool mismatch = out.result.line_count_mismatch;
    IndexInfo v = build_index(trace, index_dir, true, true);
    int64_t mismatches = v.header_mismatches;
    out.reindexed = true;
    // the verified index itself: one kept in memory (read-only folder, full disk, a directory at
    // <trace>.zindex) would otherwise be rebuilt unverified by open_index and never agree
    std::shared_ptr<const IndexInfo> vi = open_index_with(trace, index_dir, false, &v);
    out.result = read_lines_checked(*vi, first_line, n_lines);
    if (out.result.line_count_mismatch || out.result.needs_verified_index)
      throw ReaderError(trace + ": line numbering still disagrees with the data after re-indexing");
    if (mismatch || mismatches)
      out.result.warnings.insert(
          out.result.warnings.begin(),
          trace + ": " + std::to_string(mismatches) +
              " gzip member header(s) disagreed with their data; re-indexed with every member verified");
  }
  return out;
}

}  // namespace dftracer::reader
