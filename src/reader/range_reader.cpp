// Range reading: checkpoints [first, last] -> raw lines (read_checkpoints) and line-addressed
// reads (read_lines_checked), through the index's strategy (index_strategy.h).
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "index_strategy.h"
#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

// '\n' bytes in [p, p + n).
#if defined(__x86_64__)
// Matches are counted in byte lanes (a compare gives -1, subtracted) for up to 255 blocks of 32
// bytes, then the lanes are summed (sad against zero): ~3 instructions per 32 bytes instead of a
// movemask and popcount each.
__attribute__((target("avx2"))) int64_t count_newlines_avx2(const char* p, size_t n) {
  int64_t c = 0;
  size_t i = 0;
  const __m256i nl = _mm256_set1_epi8('\n');
  const __m256i zero = _mm256_setzero_si256();
  while (i + 128 <= n) {
    size_t blocks = std::min<size_t>((n - i) / 128, 63);  // 4 x 63 = 252 <= 255 per lane
    __m256i acc = zero;
    for (size_t b = 0; b < blocks; ++b, i += 128) {
      const __m256i* v = reinterpret_cast<const __m256i*>(p + i);
      __m256i m0 = _mm256_cmpeq_epi8(_mm256_loadu_si256(v), nl);
      __m256i m1 = _mm256_cmpeq_epi8(_mm256_loadu_si256(v + 1), nl);
      __m256i m2 = _mm256_cmpeq_epi8(_mm256_loadu_si256(v + 2), nl);
      __m256i m3 = _mm256_cmpeq_epi8(_mm256_loadu_si256(v + 3), nl);
      acc = _mm256_sub_epi8(acc, _mm256_add_epi8(_mm256_add_epi8(m0, m1), _mm256_add_epi8(m2, m3)));
    }
    __m256i s = _mm256_sad_epu8(acc, zero);
    c += _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) + _mm256_extract_epi64(s, 2) +
         _mm256_extract_epi64(s, 3);
  }
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    c += __builtin_popcount(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, nl))));
  }
  for (; i < n; ++i) c += p[i] == '\n';
  return c;
}
#endif
int64_t count_newlines(const char* p, size_t n) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return count_newlines_avx2(p, n);
#endif
  return std::count(p, p + n, '\n');
}

namespace {

// Complete members (kind member) or checkpoints (other kinds) the index delivers in full.
std::string complete_parts(const IndexInfo& idx) {
  int64_t n = 0;
  for (const Checkpoint& c : idx.checkpoints) n += !(c.flags & (kLost | kTruncated));
  return std::to_string(n) + (idx.kind == IndexKind::Member ? " complete members" : " complete checkpoints");
}

// The end of the trace as indexed. Grown since (live_size): the program is still writing it; its
// complete members were all delivered and nothing is lost, the rest is simply not there yet.
// Otherwise a cut-short final member: its whole lines were delivered; the bytes after them are lost.
void add_tail(const IndexInfo& idx, int64_t live_size, RangeData& r) {
  if (live_size > idx.size) {
    r.live_size = live_size;
    r.warnings.push_back(idx.path + ": still being written: " + complete_parts(idx) + " loaded (" +
                         std::to_string(idx.size) + " bytes indexed; the file has grown to " +
                         std::to_string(live_size) + " bytes since, not in this analysis)");
    return;
  }
  if (idx.truncated_bytes <= 0) return;
  r.lost_bytes += idx.truncated_bytes;
  r.warnings.push_back(idx.path + ": still being written: " + complete_parts(idx) +
                       " loaded, then an incomplete gzip member (or the trace was cut short: truncated "
                       "final member): " +
                       std::to_string(idx.truncated_bytes) + " bytes dropped");
}

// Checkpoints [first, last] without the tail's count (add_tail).
RangeData read_range(const IndexInfo& idx, int64_t first, int64_t last, TextBuffer buffer = {}) {
  RangeData r;
  r.data = std::move(buffer);
  r.data.clear();
  const auto& cps = idx.checkpoints;
  int64_t n = int64_t(cps.size());
  if (first < 0 || last < first || last >= n)
    throw std::out_of_range(idx.path + ": checkpoint range [" + std::to_string(first) + ", " + std::to_string(last) +
                            "] outside [0, " + std::to_string(n - 1) +
                            "] (the file changed since it was indexed, or a wrong range)");
  r.first_line = cps[size_t(first)].first_line;
  File f(idx.path);
  // Grown since indexing, same file: a trace still being written (appended to); the indexed bytes
  // are read as they were (each member is still CRC-checked) and what was appended is not seen.
  const bool grown = f.size() > idx.size && (idx.dev == 0 || (f.dev() == idx.dev && f.ino() == idx.ino));
  if (grown) {
    r.live_size = f.size();
    f.limit(idx.size);
  } else if (f.size() != idx.size || f.mtime_ns() != idx.mtime_ns) {
    throw ReaderError(idx.path + ": file changed since it was indexed (" + std::to_string(idx.size) + " bytes then, " +
                      std::to_string(f.size()) + " now); rebuild the index");
  }
  const IndexStrategy& strategy = index_strategy(idx.kind);
  // No allocation larger than the compressed bytes can produce (a lying index or header).
  int64_t total = 0;
  for (int64_t i = first; i <= last; ++i) {
    const Checkpoint& c = cps[size_t(i)];
    if (c.uncompressed_size < 0 || c.compressed_size < 0 || c.compressed_offset < 0 ||
        c.compressed_offset + c.compressed_size > f.size())
      throw ReaderError(checkpoint_where(idx, c) + ": index sizes impossible for the file; rebuild the index");
    total += c.uncompressed_size;
  }
  if (total > strategy.max_expansion() * (f.size() - cps[size_t(first)].compressed_offset) + kWindowBytes)
    throw ReaderError(checkpoint_where(idx, cps[size_t(first)]) +
                      ": index claims more data than the file can hold; rebuild the index");
  r.data.reserve(size_t(total) + 64);
  strategy.read(f, idx, first, last, r);
  return r;
}

}  // namespace

RangeData read_checkpoints(const IndexInfo& idx, int64_t first, int64_t last, TextBuffer buffer) {
  RangeData r = read_range(idx, first, last, std::move(buffer));
  int64_t live = std::max(r.live_size, idx.live_size);
  r.live_size = 0;
  if (last == int64_t(idx.checkpoints.size()) - 1) add_tail(idx, live, r);
  r.data.reserve(r.data.size() + 64);
  return r;
}

LinesResult read_lines_checked(const IndexInfo& idx, int64_t first_line, int64_t n_lines, bool require_verified) {
  LinesResult out;
  const auto& cps = idx.checkpoints;
  if (n_lines <= 0 || first_line < 0 || cps.empty()) return out;
  if (require_verified && idx.kind == IndexKind::Member) {
    // Line numbers add up the members' line counts: trusted only once each member was inflated.
    for (auto& c : cps)
      if (!(c.flags & (kLost | kVerified))) {
        out.needs_verified_index = true;
        return out;
      }
  }
  int64_t end_line = n_lines > INT64_MAX - first_line ? INT64_MAX : first_line + n_lines;
  // First checkpoint that ends after first_line (a lost region at L "ends" at L, inclusive).
  auto it = std::partition_point(cps.begin(), cps.end(), [&](const Checkpoint& c) {
    // (the last checkpoint may end in an unterminated line that '\n'-counted num_lines omits)
    return (c.flags & kLost) ? c.first_line < first_line
                             : c.first_line + c.num_lines + (&c == &cps.back() ? 1 : 0) <= first_line;
  });
  for (; it != cps.end() && it->first_line <= end_line; ++it) {
    const Checkpoint& c = *it;
    if (c.flags & kLost) {
      if (c.first_line < end_line) {
        RangeData r = read_range(idx, c.number, c.number);
        out.lost_lines += r.lost_lines;
        out.lost_bytes += r.lost_bytes;
        out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
      }
      continue;
    }
    if (c.first_line >= end_line) break;
    RangeData r = read_range(idx, c.number, c.number);
    out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
    if (r.line_count_mismatch) {  // numbering after this member is wrong: caller re-indexes
      out.line_count_mismatch = true;
      return out;
    }
    if (r.lost_lines > 0 || r.data.empty()) {
      int64_t a = std::max(first_line, c.first_line), b = std::min(end_line, c.first_line + c.num_lines);
      out.lost_lines += std::max<int64_t>(0, b - a);
      out.lost_bytes += r.lost_bytes;
      continue;
    }
    int64_t line = c.first_line;
    const char* p = r.data.data();
    const char* e = p + r.data.size();
    while (p < e && line < end_line) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(e - p)));
      const char* le = nl ? nl : e;
      if (line >= first_line) out.lines.emplace_back(p, size_t(le - p));
      ++line;
      p = nl ? nl + 1 : e;
    }
  }
  if (end_line > idx.lines) {  // the range reaches past the last indexed line
    RangeData t;
    add_tail(idx, idx.live_size, t);
    out.lost_bytes += t.lost_bytes;
    out.warnings.insert(out.warnings.end(), t.warnings.begin(), t.warnings.end());
  }
  return out;
}

std::vector<std::string> read_lines(const IndexInfo& idx, int64_t first_line, int64_t n_lines) {
  return read_lines_checked(idx, first_line, n_lines, false).lines;
}

}  // namespace dftracer::reader
