// Indexer, range reader and parser of DFTracer traces (docs/index.md, docs/design.md).
//
// Indexing (paper §IV-C): one SQLite index per trace file, built once, then any range of
// checkpoints is decompressed and parsed on its own. The index kinds are in index_kind.h; the
// batch loader (checkpoints -> columns) is in batch_loader.h. Files of this folder:
//   gzip_scan      gzip member headers, finding members, inflating one member on its own
//   line_tracker   lines and line-aligned checkpoints over a decoded stream
//   *_index        the three index strategies (index_strategy.h): build and read per kind
//   index_store    SQLite schema, save/load (every return code checked)
//   index_trust    checks of a loaded index against the trace (docs/index.md, "Trust rules")
//   index_location where an index lives; index_cache: per-process cache (open_index)
//   indexer        build_index: load a trusted index or build and save one
//   range_reader   read_checkpoints / read_lines_checked
//   file_scan      whole-file statistics (scan_file, ensure_context, checkpoint_stats)
//   batch_loader   load_batch / load_files / read_lines_verified; parser: JSON lines -> columns
// Offsets and sizes are bytes; timestamps and durations are µs (Chrome trace-event format).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "index_kind.h"

namespace dftracer::reader {

// 2: lost_lines column, CRC-failed inflate members lost whole; dev, ino, head_crc, tail_crc;
//    context and scan stats of DFTracer 2.x integer phases
// 3: no arg_columns table (scan_file no longer builds args columns to find their dtypes); an
//    index of another version is stale and rebuilt without a warning
inline constexpr int kIndexFormatVersion = 3;
inline constexpr int64_t kInflateSpan = 1 << 20;  // uncompressed bytes between inflate/plain checkpoints
inline constexpr int64_t kWindowBytes = 32768;    // deflate history stored at an inflate-kind checkpoint
// Deflate expands at most 1032:1 (258-byte matches coded in 2 bits); any size claim beyond
// kMaxInflateRatio x compressed bytes is a lie and is never used to size a buffer.
inline constexpr int64_t kMaxInflateRatio = 1032;

// Raised for unreadable inputs (missing file, I/O error, unusable index directory).
struct ReaderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum CheckpointFlags : int {
  kMemberStart = 1,     // compressed_offset is a gzip member header (no window needed)
  kLost = 2,            // undecodable region (corrupt header/data); num_lines = 0
  kTruncated = 4,       // final member/stream cut short: only its complete lines are indexed
  kHeaderMismatch = 8,  // member's 'DF' header disagreed with its data; indexed by plain inflation
  kVerified = 16,       // member inflated at index time: sizes, CRC32 and line count match the data
  kAllCheckpointFlags = 31,
};

struct Checkpoint {
  int64_t number = 0;
  int64_t compressed_offset = 0;    // member start, or the byte holding the first bits of the block
  int64_t compressed_size = 0;      // member size (kind member) or bytes to the next checkpoint
  int64_t uncompressed_offset = 0;  // first byte of the checkpoint's first line
  int64_t uncompressed_size = 0;    // bytes of whole lines in this checkpoint
  int64_t first_line = 0;           // 0-based line number of its first line
  int64_t num_lines = 0;
  int bit_offset = 0;        // 0-7 bits of compressed_offset's byte already used (inflate kind)
  int64_t block_offset = 0;  // uncompressed offset where decoding restarts (<= uncompressed_offset)
  int flags = 0;
  int64_t lost_lines = 0;   // kLost: lines known to be lost in the region (as decoded)
  bool has_window = false;  // a window is stored (loaded lazily, see load_window)
  std::string window;       // raw 32 KiB (or shorter) history; stored zlib-compressed
};

// Per-file context used to decode any batch on its own (DFTracer v1 hashed traces).
struct FileContext {
  bool scanned = false;                                     // maps are complete for the whole file
  std::string hostname;                                     // single host of the file, if known
  std::unordered_map<std::string, std::string> fh, hh, sh;  // hash (as text) -> string
  // Adds the maps of `from` (its records win, as later records do in collect_context) and its
  // hostname when this one has none.
  void merge(const FileContext& from) {
    for (auto& [k, v] : from.fh) fh[k] = v;
    for (auto& [k, v] : from.hh) hh[k] = v;
    for (auto& [k, v] : from.sh) sh[k] = v;
    if (hostname.empty()) hostname = from.hostname;
  }
};

struct IndexInfo {
  std::string path;        // absolute trace path
  std::string index_path;  // SQLite file
  IndexKind kind = IndexKind::Plain;
  int64_t size = 0;  // trace file size, bytes
  int64_t mtime_ns = 0;
  uint64_t dev = 0, ino = 0;       // identity of the trace file (st_dev, st_ino)
  int64_t lines = 0;               // lines (as `sed` counts them) in indexed content
  int64_t compressed_bytes = 0;    // file bytes
  int64_t uncompressed_bytes = 0;  // bytes of indexed content
  int64_t truncated_bytes = 0;     // bytes dropped at a cut-short end
  int64_t lost_bytes = 0;          // compressed bytes in undecodable regions found at index time
  int64_t lost_lines = 0;          // lines in those regions (sum of their checkpoints' lost_lines)
  int64_t header_mismatches = 0;   // members whose 'DF' header disagreed with their data (kHeaderMismatch)
  // The trace is still being written: it had grown to live_size bytes (> size) when this index
  // of its first `size` bytes was opened for reading (open_index); 0 otherwise.
  int64_t live_size = 0;
  bool rebuilt = false;  // built (or rebuilt) by this call
  // Index trouble met by this call: an index rejected as inconsistent with the file (rebuilt),
  // or an index kept in memory because no safe writable location exists (docs/index.md).
  std::vector<std::string> warnings;
  std::vector<Checkpoint> checkpoints;
  FileContext context;
  // Filled by scan_file (stats over all lines), empty until then.
  bool stats_scanned = false;
  int64_t events = 0, metadata_records = 0, skipped_lines = 0;
  // What reading every checkpoint could not deliver (the analyzer's per-file counts): lines and
  // bytes lost (lost regions, members failing CRC32/ISIZE, a cut-short tail) and lying headers.
  int64_t scan_lost_lines = 0, scan_lost_bytes = 0, scan_header_mismatches = 0;
};

// Where the index of `trace` lives: `<trace>.zindex` when the trace directory is writable and no
// `index_dir` is given, else `<index_dir | $DFTRACER_INDEX_DIR | $XDG_CACHE_HOME/dftracer/zindex |
// ~/.cache/dftracer/zindex>/<name>-<hash>.zindex` (home from $HOME, else the passwd entry).
// "" when the index must stay in memory: no such folder, or it is refused (a symbolic link, not
// owned by this user, writable by group or others, or under a folder another user controls).
std::string index_path_for(const std::string& trace, const std::string& index_dir);

// Opens a valid index or builds one. An index is used only if it matches the file (format
// version, path, size, mtime, device, inode, CRC-32 of the first and last 4 KiB) and is
// consistent with it (docs/index.md, "Trust rules"); otherwise it is rebuilt, with a message in
// `warnings` unless it was merely stale. When the index cannot be written (no safe folder, full
// disk) it is kept in memory (index_path "") with a warning and no temp file is left behind.
// Member kind: each 'DF' header is checked against the member trailer and the next header;
// `verify` also inflates every member and compares all header fields with the data (used when a
// read found a line count the hop cannot see; implies force).
// Throws ReaderError when the trace cannot be read.
// `allow_grown` (readers of an index a planner just built, open_index): when the trace only grew
// since its stored index was written (same file, the indexed bytes unchanged: a trace still being
// written), that index of its first bytes is used as it is (live_size set) instead of a new one,
// so checkpoint numbers planned on it stay valid.
IndexInfo build_index(const std::string& trace, const std::string& index_dir = "", bool force = false,
                      bool verify = false, bool allow_grown = false);

// Indexes `trace` in memory only (no SQLite file is read or written): for small files, where
// the index costs more than reading the whole file. Throws ReaderError like build_index.
IndexInfo build_index_in_memory(const std::string& trace);

// build_index through a per-process cache: reused while the trace (size, mtime) and the index
// file (inode, size, mtime) are unchanged. Checkpoint windows are not loaded (see load_window).
// `allow_grown` (checkpoint-addressed reads: batches planned on an index): a trace that only
// grew since its index was written keeps that index (build_index's allow_grown); line-addressed
// reads (read_lines, dftracer-cat) want the file as it is now and rebuild it.
std::shared_ptr<const IndexInfo> open_index(const std::string& trace, const std::string& index_dir = "",
                                            bool allow_grown = false);

// open_index with `built` (not null): that index, just built by the caller (e.g. with verify),
// replaces the cached one and is returned. An index kept in memory (no safe writable location)
// exists only in this cache, so this is how a verified in-memory index reaches later reads.
std::shared_ptr<const IndexInfo> open_index_with(const std::string& trace, const std::string& index_dir,
                                                 bool allow_grown, IndexInfo* built);

// The raw window of checkpoint `number` (empty if it has none); read from the index file when
// it was not loaded with the index.
std::string load_window(const IndexInfo& idx, int64_t number);

// Per-checkpoint event statistics for filter push-down (docs/index.md, table checkpoint_stats).
struct CheckpointStats {
  int64_t number = 0;
  int64_t events = 0;                          // event rows (-1: damaged checkpoint, content unknown)
  int64_t min_ts = 0, max_ts = 0;              // µs; both 0 when events == 0
  int64_t min_te = 0, max_te = 0;              // µs
  bool cats_known = true, names_known = true;  // false: too many distinct values to keep
  std::vector<std::string> cats, names;        // distinct categories / names of its events
};

// Stats of every checkpoint of `idx`, read from the index or computed (one parse of each
// checkpoint) and stored there. Throws ReaderError when the trace cannot be read.
std::vector<CheckpointStats> checkpoint_stats(const IndexInfo& idx);

// Parses every line once (no args columns built) and stores events/metadata/skipped counts, what
// reading could not deliver and the full per-file context in the index (kept until the trace
// changes).
IndexInfo scan_file(const std::string& trace, const std::string& index_dir = "");

// Makes idx.context complete for the whole file (one pass over metadata lines), stored in the index.
void ensure_context(IndexInfo& idx);

// Text read from a trace: a byte buffer like std::string (size, capacity, a '\0' after the last
// byte) whose resize() leaves the new bytes unwritten, for the inflater or read() to fill:
// std::string's resize first writes zeros over every byte (a memset of all text read; C++17 has
// no resize_and_overwrite).
class TextBuffer {
 public:
  TextBuffer() = default;
  TextBuffer(const TextBuffer& o) { append(o.data(), o.size()); }
  TextBuffer(TextBuffer&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) { o.release(); }
  TextBuffer& operator=(const TextBuffer& o) {
    if (this != &o) {
      clear();
      append(o.data(), o.size());
    }
    return *this;
  }
  TextBuffer& operator=(TextBuffer&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_;
      n_ = o.n_;
      cap_ = o.cap_;
      o.release();
    }
    return *this;
  }
  ~TextBuffer() { std::free(p_); }
  char* data() noexcept { return p_ ? p_ : empty_(); }
  const char* data() const noexcept { return p_ ? p_ : empty_(); }
  size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  // Bytes that can be held without reallocating; the allocation has one more (the '\0').
  size_t capacity() const noexcept { return cap_; }
  char& operator[](size_t i) noexcept { return p_[i]; }
  const char& operator[](size_t i) const noexcept { return p_[i]; }
  void clear() noexcept { set_size(0); }
  void reserve(size_t n) {
    if (n > cap_) grow_to(n);
  }
  // Size n; bytes past the old size are not written (the caller fills them).
  void resize(size_t n) {
    if (n > cap_) grow_to(std::max(n, cap_ * 2));
    set_size(n);
  }
  void append(const char* s, size_t k) {
    size_t at = n_;
    resize(n_ + k);
    if (k) std::memcpy(p_ + at, s, k);
  }
  std::string_view view() const noexcept { return std::string_view(data(), n_); }
  friend bool operator==(const TextBuffer& a, std::string_view b) noexcept { return a.view() == b; }
  friend bool operator!=(const TextBuffer& a, std::string_view b) noexcept { return a.view() != b; }

 private:
  static char* empty_() noexcept {
    static char z = 0;
    return &z;
  }
  void set_size(size_t n) noexcept {
    n_ = n;
    if (p_) p_[n] = 0;
  }
  void release() noexcept {
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  void grow_to(size_t cap) {
    // only the n_ bytes in use are kept: a cleared buffer is not copied
    char* q = static_cast<char*>(std::malloc(cap + 1));
    if (!q) throw std::bad_alloc();
    if (n_) std::memcpy(q, p_, n_);
    q[n_] = 0;
    std::free(p_);
    p_ = q;
    cap_ = cap;
  }
  char* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

// Raw content of checkpoints [first, last] (inclusive), padded for simdjson.
struct RangeData {
  TextBuffer data;  // whole lines; capacity has >= 64 bytes of padding
  int64_t first_line = 0;
  int64_t lost_lines = 0;            // lines of members that failed to decode
  int64_t lost_bytes = 0;            // bytes (uncompressed when known, else compressed) not decoded
  int64_t header_mismatches = 0;     // members read by plain inflation because their header lied
  bool line_count_mismatch = false;  // delivered lines != the index's num_lines (numbering is off)
  int64_t live_size = 0;             // the file had grown to this size since it was indexed (0: it had not)
  std::vector<std::string> warnings;
};
// Never delivers the lines of a member that fails its CRC32/ISIZE: they are counted in
// lost_lines/lost_bytes with a warning naming the checkpoint. A trace that only grew since it was
// indexed (still being written) is read as it was then (its complete members are all delivered;
// live_size and a "still being written" warning on the last checkpoint say so). Throws
// ReaderError when the file otherwise changed since indexing (shrunk, rewritten, replaced) or the
// index claims more output than the compressed range can hold.
// `buffer`: storage to reuse for r.data (its capacity is kept, its content dropped): a caller that
// reads chunk after chunk passes the previous chunk's data back, so the text is not fresh memory
// (page faults) each time.
RangeData read_checkpoints(const IndexInfo& idx, int64_t first, int64_t last, TextBuffer buffer = {});

// Lines [first_line, first_line + n_lines) (0-based, without '\n') and what could not be read:
// lines of lost regions and corrupt members that fall in the range (a lost region between line
// L-1 and L is in the range when first_line <= L < end, or L == end == idx.lines).
struct LinesResult {
  std::vector<std::string> lines;
  int64_t lost_lines = 0, lost_bytes = 0;
  bool line_count_mismatch = false;   // the index's line numbering disagrees with the data
  bool needs_verified_index = false;  // member kind: line numbers before the range are header claims
  std::vector<std::string> warnings;
};
// `require_verified` (member kind): return at once with needs_verified_index when a member's line
// count is only its header's claim (no kVerified flag); the caller re-indexes with verify=true.
LinesResult read_lines_checked(const IndexInfo& idx, int64_t first_line, int64_t n_lines, bool require_verified = true);
// The lines only, numbered as the index says (no verification required).
std::vector<std::string> read_lines(const IndexInfo& idx, int64_t first_line, int64_t n_lines);

// ---- Parser ------------------------------------------------------------------------------------

// Column storage allocator: blocks of >= kColumnBlockMin bytes come from column_block_alloc and
// go back through column_block_free (batch_loader.cpp), a bounded process-wide cache of freed
// column blocks, so that a batch dropped before the next one is loaded (the summary's load
// tasks) gives its pages to the next batch instead of back to the system, as it did under Dask's
// MALLOC_TRIM_THRESHOLD_ (docs/perf/i26-faults.md). Otherwise as std::allocator.
constexpr size_t kColumnBlockMin = size_t(128) << 10;
// The parser faults column storage in ahead of its rows this many bytes at a time (parser.cpp,
// populate_ahead): a column of n bytes has min(capacity, n rounded up to it) resident.
constexpr size_t kPopulateBytes = size_t(256) << 10;
void* column_block_alloc(size_t bytes);
void column_block_free(void* p, size_t bytes) noexcept;
// Bytes from the start of block `p` known resident (a block the cache handed out again: pages an
// earlier column wrote, not given back since); 0 for a fresh block or any other pointer.
size_t column_block_resident(const void* p) noexcept;
// Records that the first `bytes` of block `p` (>= kColumnBlockMin, from column_block_alloc and
// freed through column_block_free, which forgets it) are resident: a block a thread keeps and
// hands to its next batch (py_reader's code vectors).
void column_block_note_resident(const void* p, size_t bytes) noexcept;
template <typename T>
struct ColumnAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = ColumnAllocator<U>;
  };
  ColumnAllocator() = default;
  template <typename U>
  ColumnAllocator(const ColumnAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / 2 / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) < kColumnBlockMin) return std::allocator<T>::allocate(n);
    return static_cast<T*>(column_block_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < kColumnBlockMin) return std::allocator<T>::deallocate(p, n);
    column_block_free(p, n * sizeof(T));
  }
};
template <typename T, typename U>
bool operator==(const ColumnAllocator<T>&, const ColumnAllocator<U>&) noexcept {
  return true;
}
template <typename T, typename U>
bool operator!=(const ColumnAllocator<T>&, const ColumnAllocator<U>&) noexcept {
  return false;
}
// (A column compares equal to a std::vector of the same values, as before the allocator.)
template <typename T>
bool operator==(const std::vector<T, ColumnAllocator<T>>& a, const std::vector<T>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}
template <typename T>
bool operator==(const std::vector<T>& a, const std::vector<T, ColumnAllocator<T>>& b) {
  return b == a;
}
template <typename T>
bool operator!=(const std::vector<T, ColumnAllocator<T>>& a, const std::vector<T>& b) {
  return !(a == b);
}
template <typename T>
bool operator!=(const std::vector<T>& a, const std::vector<T, ColumnAllocator<T>>& b) {
  return !(b == a);
}

// Allocator of column storage: resize(n) leaves the new values unwritten (default-
// initialisation) instead of writing zeros. The parser grows core columns ahead of the rows it
// writes (Parser::Impl::grow_core) and writes every value of every row it keeps; with
// std::allocator each growth first zero-filled the storage it was about to overwrite (a
// memset of every core column, docs/perf/i22-commit.md). resize(n, v), copies and moves are as
// with std::allocator.
template <typename T>
struct NoInitAllocator : ColumnAllocator<T> {
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <typename U>
  NoInitAllocator(const NoInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
template <typename T>
using ColumnVector = std::vector<T, NoInitAllocator<T>>;

// Dictionary-encoded string column: codes index `categories`, -1 = null. Interning uses an
// open-addressing hash table of codes (no node allocation per lookup).
struct DictColumn {
  ColumnVector<int32_t> codes;
  std::deque<std::string> categories;  // stable storage: `views` point into it

  DictColumn() = default;
  DictColumn(const DictColumn& o) : codes(o.codes), categories(o.categories) { reindex(); }
  DictColumn(DictColumn&& o) noexcept : codes(std::move(o.codes)), categories(std::move(o.categories)) { reindex(); }
  DictColumn& operator=(const DictColumn& o) {
    codes = o.codes;
    categories = o.categories;
    reindex();
    return *this;
  }
  DictColumn& operator=(DictColumn&& o) noexcept {
    codes = std::move(o.codes);
    categories = std::move(o.categories);
    reindex();
    return *this;
  }
  static uint64_t hash(std::string_view s) noexcept {
    // 8 bytes at a time, multiply-xorshift mix; good enough for short keys and paths.
    uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
    const char* p = s.data();
    size_t n = s.size();
    while (n >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n) {
      // w = the last n bytes, little endian (as a memcpy into a zeroed word), read without a
      // variable-length memcpy call and without reading outside `s`
      uint64_t w;
      if (s.size() >= 8) {
        std::memcpy(&w, s.data() + s.size() - 8, 8);
        w >>= 8 * (8 - n);
      } else if (n >= 4) {
        uint32_t lo, hi;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + n - 4, 4);
        w = lo | (uint64_t(hi) << (8 * (n - 4)));
      } else {
        w = uint64_t(uint8_t(p[0])) | (uint64_t(uint8_t(p[n / 2])) << (8 * (n / 2))) |
            (uint64_t(uint8_t(p[n - 1])) << (8 * (n - 1)));
      }
      h = (h ^ w) * 0x94d049bb133111ebull;
      h ^= h >> 29;
    }
    return h * 0x9e3779b97f4a7c15ull;
  }
  void reindex() {
    views.clear();
    hashes.clear();
    size_t n_slots = 64;  // power of two, load <= 1/2 (a full table would never end a probe)
    while (n_slots < 2 * categories.size() + 2) n_slots *= 2;
    slots.assign(n_slots, -1);
    last_code = -1;
    for (auto& c : categories) {
      views.emplace_back(c);
      hashes.push_back(hash(c));
    }
    for (size_t i = 0; i < views.size(); ++i) insert_slot(int32_t(i));
  }
  // Inline equality of short strings (libc memcmp's call costs more than the compare here). The
  // tail is compared as one word overlapping the previous ones, not byte by byte.
  __attribute__((always_inline)) static bool equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    const char* x = a.data();
    const char* y = b.data();
    size_t n = a.size();
    if (n >= 8) {
      uint64_t u, v;
      for (size_t i = 0; i + 8 < n; i += 8) {
        std::memcpy(&u, x + i, 8);
        std::memcpy(&v, y + i, 8);
        if (u != v) return false;
      }
      std::memcpy(&u, x + n - 8, 8);
      std::memcpy(&v, y + n - 8, 8);
      return u == v;
    }
    if (n >= 4) {
      uint32_t u0, v0, u1, v1;
      std::memcpy(&u0, x, 4);
      std::memcpy(&v0, y, 4);
      std::memcpy(&u1, x + n - 4, 4);
      std::memcpy(&v1, y + n - 4, 4);
      return u0 == v0 && u1 == v1;
    }
    return n == 0 || (x[0] == y[0] && x[n / 2] == y[n / 2] && x[n - 1] == y[n - 1]);
  }
  // Code of `s`, added when new. Same as the previous call is checked inline; rows repeat a lot.
  __attribute__((always_inline)) int32_t intern(std::string_view s) {
    if (last_code >= 0 && equal(s, views[size_t(last_code)])) return last_code;
    return intern_lookup(s);
  }
  // Same, trying `hint` first (a code likely to match, e.g. the category last seen with a name).
  __attribute__((always_inline)) int32_t intern(std::string_view s, int32_t hint) {
    if (hint >= 0 && size_t(hint) < views.size() && equal(s, views[size_t(hint)])) return last_code = hint;
    return intern(s);
  }
  __attribute__((noinline)) int32_t intern_lookup(std::string_view s) {
    if (slots.empty()) reindex();
    uint64_t h = hash(s);
    size_t mask = slots.size() - 1;
    for (size_t i = size_t(h >> 7) & mask;; i = (i + 1) & mask) {
      int32_t c = slots[i];
      if (c < 0) break;
      if (hashes[size_t(c)] == h && equal(views[size_t(c)], s)) return last_code = c;
    }
    int32_t c = int32_t(categories.size());
    categories.emplace_back(s);
    views.emplace_back(categories.back());
    hashes.push_back(h);
    if (views.size() * 2 > slots.size()) {
      slots.assign(slots.size() * 2, -1);
      for (int32_t k = 0; k < c; ++k) insert_slot(k);
    }
    insert_slot(c);
    return last_code = c;
  }
  // Code of `s` when it is the last code interned or found, else -1 (nothing is added, no hashing).
  int32_t find_last(std::string_view s) const {
    return last_code >= 0 && equal(s, views[size_t(last_code)]) ? last_code : -1;
  }
  // Code of `s`, or -1 when it is not interned (nothing is added).
  int32_t find(std::string_view s) {
    if (last_code >= 0 && equal(s, views[size_t(last_code)])) return last_code;
    if (slots.empty()) return -1;
    uint64_t h = hash(s);
    size_t mask = slots.size() - 1;
    for (size_t i = size_t(h >> 7) & mask;; i = (i + 1) & mask) {
      int32_t c = slots[i];
      if (c < 0) return -1;
      if (hashes[size_t(c)] == h && equal(views[size_t(c)], s)) return last_code = c;
    }
  }
  // Frees the lookup table (after parsing).
  void drop_lookup() {
    std::vector<std::string_view>().swap(views);
    std::vector<uint64_t>().swap(hashes);
    std::vector<int32_t>().swap(slots);
    last_code = -1;
  }

 private:
  void insert_slot(int32_t c) {
    size_t mask = slots.size() - 1;
    size_t i = size_t(hashes[size_t(c)] >> 7) & mask;
    while (slots[i] >= 0) i = (i + 1) & mask;
    slots[i] = c;
  }
  std::vector<std::string_view> views;
  std::vector<uint64_t> hashes;
  std::vector<int32_t> slots;  // code or -1; size is a power of two, load <= 1/2
  int32_t last_code = -1;
};

enum class ArgType : int { Int = 0, Float = 1, String = 2 };

struct ArgColumn {
  std::string key;
  ArgType type = ArgType::Int;
  std::vector<int64_t, ColumnAllocator<int64_t>> ints;  // when Int
  std::vector<double, ColumnAllocator<double>> floats;  // when Float
  DictColumn strings;                                   // when String (codes)
  std::vector<uint8_t, ColumnAllocator<uint8_t>> mask;  // 1 = null (pandas mask convention), for Int and Float
  int64_t length() const;
};

struct MetaRecord {
  std::string name, cat, ph, key, value, args;
  int64_t pid = 0, tid = 0, ts = 0, dur = 0;
  bool has_ts = false, has_dur = false;
};

// Which args columns a parse builds. Core columns (name ... offset) are always built. Args keys
// left out are still read and checked (a line is accepted or skipped exactly as without a
// projection) and still feed the byte and duration rules (`ret`, `size`, `dur_sum`, ...); only
// their columns are not built. Names are column names as delivered: an args key named like a
// core column is `arg_<key>` (docs/index.md).
// Bounded args columns (docs/index.md, "Args columns"): without a projection at most
// kMaxArgColumns args keys of a batch become columns (the first ones met); every other key's
// value goes, as its exact JSON text, into one string column `args_extra` holding a JSON object
// of the event's remaining args (null values are left out, as they are absent in columns). An
// args key literally named `args_extra` always goes there. Memory per event is then bounded by
// its line, whatever the number of distinct keys.
inline constexpr size_t kMaxArgColumns = 256;
inline constexpr const char* kArgsExtraColumn = "args_extra";

struct ArgsProjection {
  bool all = true;                   // every args column (no projection)
  std::vector<std::string> columns;  // when !all: the args columns to build (others are dropped)
  // when !all: the keys left out go to `args_extra` instead of being dropped (a global column
  // choice made by the analyzer over all batches, so that every batch has the same columns)
  bool extra = false;
  // Only `columns` (none when empty).
  static ArgsProjection only(std::vector<std::string> columns, bool extra = false) {
    ArgsProjection p;
    p.all = false;
    p.columns = std::move(columns);
    p.extra = extra;
    return p;
  }
  bool wants(std::string_view column) const {
    if (all) return true;
    for (auto& c : columns)
      if (c == column) return true;
    return false;
  }
};

struct EventColumns {
  int64_t rows = 0;
  int64_t reserve_rows = 0;  // expected rows (lines): columns reserve this many
  DictColumn name, cat, ph, hostname, fname;
  ColumnVector<int64_t> pid, tid, ts, dur, te;
  ColumnVector<int64_t> size, offset;
  ColumnVector<uint8_t> size_mask, offset_mask;  // 1 = null
  std::vector<ArgColumn> args;                   // sorted by key at finish()
  std::vector<MetaRecord> metadata;
  int64_t skipped_lines = 0;
  int64_t unresolved_hashes = 0;  // fhash/hhash not found in any map
  int64_t replaced_utf8_lines = 0;
  // Skipped lines by reason (also counted in skipped_lines): event ts outside [0, kMaxTs) or an
  // end time ts + dur at or beyond kMaxTs; negative dur.
  int64_t ts_out_of_range_lines = 0, negative_dur_lines = 0;
  // Args keys put into `args_extra` -> events that had them (bounded args columns).
  std::unordered_map<std::string, int64_t> extra_keys;
  std::vector<std::string> skipped_examples;  // first few skipped lines
};

// Timestamp sanity of event lines (not metadata records): ts in [0, kMaxTs) µs since the epoch
// (2100-01-01T00:00:00Z), ts + dur < kMaxTs, dur >= 0. Timestamps before 1990 are accepted as
// relative (µs since some origin, as the Chrome trace-event format allows); negative ones are not.
inline constexpr int64_t kMaxTs = 4102444800000000;

// Parses newline-separated JSON lines into columns. `ctx` may be updated with batch-local
// FH/HH/SH records. Never throws on bad lines: they are counted in skipped_lines.
class Parser {
 public:
  Parser();
  ~Parser();
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  // `buf` must have >= 64 readable bytes after `len` (simdjson padding).
  void parse(const char* buf, size_t len, size_t capacity, FileContext& ctx, EventColumns& out);
  // Lines in the tracer's own layout are read by a hand-written scanner that falls back to
  // simdjson on anything unusual (same results); off = every line through simdjson (tests).
  void set_fast_path(bool on);
  int64_t fast_lines() const;  // lines taken by the fast path so far
  // Args columns the following parse() calls build (default: all).
  void set_args_projection(ArgsProjection projection);
  // Pads all columns to out.rows and sorts args columns by key.
  static void finish(EventColumns& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Collects FH/HH/SH maps (and hostname) from metadata lines in `buf` (cheap substring prefilter).
void collect_context(const char* buf, size_t len, FileContext& ctx);

// DFTracer 2.x integer phase -> letter: 1 "X" complete, 2 "C" counter, 3 "A" aggregated,
// 4 "M" metadata, other "?" (upstream TracePhaseType; docs/index.md).
const char* phase_letter(int64_t code);

// Byte rule of an event name (docs/index.md): `size` = args.ret (kRet), args.ret × args.size
// (kRetTimesSize, fread/fwrite) or args.size (kSize, H5Dread/H5Dwrite) when ret >= 0; kNoSize:
// null. Leading '_' and a "_chk" suffix are ignored (__read_chk is read).
enum SizeKind : int8_t { kNoSize = 0, kRet = 1, kRetTimesSize = 2, kSize = 3 };
SizeKind size_kind_of(std::string_view name);

}  // namespace dftracer::reader
