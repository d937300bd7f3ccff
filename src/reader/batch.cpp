// Batch reader: decompress only the requested checkpoints; whole-file scan for stats/context.
#include <immintrin.h>
#include <zlib.h>
#ifdef DFTRACER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

void store_scan(const IndexInfo& info);  // indexer.cpp
RangeData read_range(const IndexInfo& idx, int64_t first, int64_t last);  // without the cut-short tail

// '\n' bytes in [p, p + n).
#if defined(__x86_64__)
__attribute__((target("avx2"))) int64_t count_newlines_avx2(const char* p, size_t n) {
  int64_t c = 0;
  size_t i = 0;
  const __m256i nl = _mm256_set1_epi8('\n');
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

constexpr int64_t kWindowBytes = 32768;  // inflate kind: decoding restarts up to a window earlier

std::string where(const IndexInfo& idx, const Checkpoint& c) {
  return idx.path + ": checkpoint " + std::to_string(c.number) + " (compressed offset " +
         std::to_string(c.compressed_offset) + ")";
}

// Plain inflation (zlib, CRC32/ISIZE checked) of the gzip members in in[0..n), appended to
// r.data; the output grows as produced (bounded by the input size x kMaxInflateRatio). Members
// that pass their check are kept; at the first failure the rest of the range is lost.
// `truncated`: the range is a final member cut short (its whole lines are kept, unchecked).
struct PlainResult {
  int64_t members = 0, lines = 0;       // members kept, '\n' in the kept output
  int64_t failed_lines = -1;            // '\n' decoded in the failed member (-1: none failed)
  int64_t failed_bytes = 0;             // bytes decoded in the failed member (or not decoded after it)
  std::string error;
};
PlainResult inflate_plain(const unsigned char* in, size_t n, bool truncated, RangeData& r) {
  PlainResult pr;
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  const size_t start = r.data.size();
  const size_t chunk = std::min<size_t>(std::max<size_t>(n * 4, 1 << 16), 64u << 20);
  size_t kept = start, used = start;
  zs.next_in = const_cast<unsigned char*>(in);
  zs.avail_in = uInt(n);
  int rc = Z_OK;
  for (;;) {
    if (r.data.size() - used < 4096) r.data.resize(used + chunk);
    zs.next_out = reinterpret_cast<Bytef*>(&r.data[used]);
    zs.avail_out = uInt(r.data.size() - used);
    rc = inflate(&zs, Z_NO_FLUSH);
    used = r.data.size() - zs.avail_out;
    if (rc == Z_STREAM_END) {
      kept = used;
      pr.members += 1;
      if (zs.avail_in == 0) break;
      if (zs.next_in[0] != 0x1f) {  // not another gzip member
        pr.error = "bytes that are not a gzip member";
        pr.failed_lines = 0;
        break;
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && zs.avail_out == 0)) continue;
    if (rc == Z_BUF_ERROR && truncated) {  // a final member cut short: keep its whole lines
      size_t k = used;
      while (k > kept && r.data[k - 1] != '\n') --k;
      kept = k;
      pr.members += 1;
      break;
    }
    pr.error = rc == Z_BUF_ERROR ? "member runs past its compressed size" : (zs.msg ? zs.msg : "inflate error");
    pr.failed_bytes = int64_t(used - kept);
    pr.failed_lines = count_newlines(r.data.data() + kept, used - kept) + (used > kept && r.data[used - 1] != '\n' ? 1 : 0);
    break;
  }
  inflateEnd(&zs);
  r.data.resize(kept);
  pr.lines = count_newlines(r.data.data() + start, kept - start);
  return pr;
}

// Kind member: each checkpoint is one whole gzip member, decoded (and CRC-checked) on its own.
// Members of known sizes are inflated in one call with libdeflate when available (whole-buffer
// decoder, ~2x zlib). The result must match the index exactly (compressed bytes consumed,
// uncompressed size, line count); otherwise the member is read again by plain inflation, which
// keeps every member in the range that passes its CRC32/ISIZE check and counts the rest as lost.
void read_members(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) {
  const auto& cps = idx.checkpoints;
  int64_t c0 = cps[first].compressed_offset;
  int64_t c1 = cps[last].compressed_offset + cps[last].compressed_size;
  if (c0 < 0 || c1 < c0 || c1 > f.size())
    throw ReaderError(idx.path + ": index checkpoints lie outside the file; rebuild the index");
  std::unique_ptr<unsigned char[]> in(new unsigned char[size_t(c1 - c0)]);
  size_t got = f.pread_full(in.get(), size_t(c1 - c0), c0);
  z_stream zs{};
  bool zinit = false;
#ifdef DFTRACER_HAVE_LIBDEFLATE
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> ldp(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  libdeflate_decompressor* ld = ldp.get();
  if (!ld) throw ReaderError("libdeflate: out of memory");
#endif
  for (int64_t i = first; i <= last; ++i) {
    const Checkpoint& c = cps[i];
    if (c.flags & kLost) {
      r.lost_bytes += c.compressed_size;
      r.lost_lines += c.lost_lines;
      r.warnings.push_back(where(idx, c) + ": " + std::to_string(c.compressed_size) +
                           " compressed bytes are not a valid gzip member; " +
                           (c.lost_lines ? std::to_string(c.lost_lines) + " lines (as decoded) are lost"
                                         : std::string("their lines are lost")));
      continue;
    }
    if (c.flags & kHeaderMismatch)
      r.warnings.push_back(where(idx, c) + ": gzip member header disagreed with its data; indexed by plain "
                           "inflation (" + std::to_string(c.num_lines) + " lines)");
    size_t start = r.data.size();
    int64_t rel = c.compressed_offset - c0;
    int64_t avail = std::max<int64_t>(0, std::min<int64_t>(c.compressed_size, int64_t(got) - rel));
    bool ok = false;
    std::string why;
    const bool truncated = c.flags & kTruncated;
#ifdef DFTRACER_HAVE_LIBDEFLATE
    if (!truncated) {
      r.data.resize(start + size_t(c.uncompressed_size));
      size_t in_n = 0, out_n = 0;
      libdeflate_result rc = libdeflate_gzip_decompress_ex(ld, in.get() + rel, size_t(avail), &r.data[start],
                                                           size_t(c.uncompressed_size), &in_n, &out_n);
      ok = rc == LIBDEFLATE_SUCCESS && int64_t(in_n) == c.compressed_size && int64_t(out_n) == c.uncompressed_size;
      if (rc == LIBDEFLATE_SUCCESS && !ok) why = "sizes differ from the index";
    } else
#endif
    {
      if (!zinit) {
        if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
        zinit = true;
      }
      r.data.resize(start + size_t(c.uncompressed_size) + 1);
      inflateReset(&zs);
      zs.next_in = in.get() + rel;
      zs.avail_in = uInt(avail);
      zs.next_out = reinterpret_cast<Bytef*>(&r.data[start]);
      zs.avail_out = uInt(c.uncompressed_size + 1);
      int rc = inflate(&zs, Z_FINISH);
      int64_t produced = int64_t(c.uncompressed_size + 1 - zs.avail_out);
      ok = (rc == Z_STREAM_END && produced == c.uncompressed_size && zs.avail_in == 0) ||
           (truncated && produced >= c.uncompressed_size && rc != Z_DATA_ERROR);
    }
    if (ok) {
      r.data.resize(start + size_t(c.uncompressed_size));
      if (count_newlines(r.data.data() + start, size_t(c.uncompressed_size)) == c.num_lines) continue;
      why = "line count differs from the index";
    }
    // Plain inflation of the member's compressed range.
    r.data.resize(start);
    PlainResult pr = inflate_plain(in.get() + rel, size_t(avail), truncated, r);
    if (pr.failed_lines < 0 || pr.members > 0) {
      bool same = pr.failed_lines < 0 && pr.members == 1 && pr.lines == c.num_lines &&
                  int64_t(r.data.size() - start) == c.uncompressed_size;
      if (!same) {
        r.header_mismatches += 1;
        if (pr.lines != c.num_lines) r.line_count_mismatch = true;
        r.warnings.push_back(where(idx, c) + ": gzip member header disagrees with its data (" + why +
                             "): read by plain inflation: " + std::to_string(pr.members) + " member(s), " +
                             std::to_string(pr.lines) + " lines (index: " + std::to_string(c.num_lines) + ")");
      }
    }
    if (pr.failed_lines >= 0) {
      // A member failed its check: none of its lines is delivered.
      // The member's own failure: its indexed (trailer-consistent) sizes; else what was decoded.
      int64_t kept_bytes = int64_t(r.data.size() - start);
      int64_t lines = pr.members == 0 ? c.num_lines : std::max<int64_t>(pr.failed_lines, c.num_lines - pr.lines);
      int64_t bytes = pr.members == 0 ? c.uncompressed_size
                                      : std::max<int64_t>(pr.failed_bytes, c.uncompressed_size - kept_bytes);
      r.lost_lines += lines;
      r.lost_bytes += bytes;
      if (pr.members > 0) r.line_count_mismatch = true;
      r.warnings.push_back(where(idx, c) + ": corrupt gzip member (" + pr.error + "): " + std::to_string(lines) +
                           " lines (" + std::to_string(bytes) + " bytes) lost");
    }
  }
  if (zinit) inflateEnd(&zs);
}

// Kind inflate: start at a zran-style point (or member start) and inflate across members.
void read_inflate_run(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) {
  const auto& cps = idx.checkpoints;
  const Checkpoint& c = cps[first];
  int64_t u_begin = c.uncompressed_offset;
  int64_t u_end = cps[last].uncompressed_offset + cps[last].uncompressed_size;
  int64_t want_lines = 0;
  for (int64_t i = first; i <= last; ++i) want_lines += cps[i].num_lines;
  z_stream zs{};
  int64_t pos = c.compressed_offset;
  std::vector<unsigned char> in(1 << 18);
  bool raw = !(c.flags & kMemberStart);
  if (inflateInit2(&zs, raw ? -15 : 31) != Z_OK) throw ReaderError("zlib init failed");
  if (raw) {
    if (c.bit_offset) {
      unsigned char ch;
      if (f.pread_full(&ch, 1, pos) != 1) throw ReaderError(where(idx, c) + ": read past end");
      inflatePrime(&zs, c.bit_offset, ch >> (8 - c.bit_offset));
      pos += 1;
    }
    std::string window = load_window(idx, c.number);
    if (!window.empty())
      inflateSetDictionary(&zs, reinterpret_cast<const Bytef*>(window.data()), uInt(window.size()));
  }
  int64_t u = c.block_offset;  // uncompressed offset of the next produced byte
  size_t start = r.data.size();
  r.data.resize(start + size_t(u_end - u_begin));
  std::vector<char> skip(1 << 16);
  std::string err;
  int skip_trailer = 0;
  int64_t checked_u = u_begin;  // output up to the end of the last member that passed its CRC here
  while (u < u_end) {
    if (zs.avail_in == 0) {
      size_t got = f.pread_full(in.data(), in.size(), pos);
      pos += int64_t(got);
      if (got == 0) {
        err = "unexpected end of file";
        break;
      }
      zs.next_in = in.data();
      zs.avail_in = uInt(got);
    }
    if (skip_trailer) {  // raw mode ended a member: skip its CRC32/ISIZE, then parse gzip headers
      uInt k = std::min<uInt>(uInt(skip_trailer), zs.avail_in);
      zs.next_in += k;
      zs.avail_in -= k;
      skip_trailer -= int(k);
      if (skip_trailer == 0) inflateReset2(&zs, 31);
      continue;
    }
    if (u < u_begin) {
      zs.next_out = reinterpret_cast<Bytef*>(skip.data());
      zs.avail_out = uInt(std::min<int64_t>(int64_t(skip.size()), u_begin - u));
    } else {
      zs.next_out = reinterpret_cast<Bytef*>(&r.data[start + size_t(u - u_begin)]);
      zs.avail_out = uInt(u_end - u);
    }
    uInt before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    u += before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (raw) {  // started mid-member: its CRC cannot be checked here (it was at index time)
        raw = false;
        skip_trailer = 8;
      } else {
        inflateReset(&zs);
      }
      checked_u = std::max(checked_u, std::min(u, u_end));
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      err = zs.msg ? zs.msg : "inflate error";
      break;
    }
  }
  inflateEnd(&zs);
  const char* got_b = r.data.data() + start;
  size_t got_n = size_t(u_end - u_begin);
  if (u >= u_end && count_newlines(got_b, got_n) + (got_n && got_b[got_n - 1] != '\n' ? 1 : 0) != want_lines) {
    err = "line count differs from the index";
    u = checked_u = u_begin;
  }
  if (u < u_end) {
    // Keep the whole lines of members that ended (and passed their CRC) in this read; the lines
    // of the member that failed are never delivered.
    int64_t have = std::max<int64_t>(0, std::min(u, checked_u) - u_begin);
    const char* b = r.data.data() + start;
    int64_t keep = have;
    while (keep > 0 && b[keep - 1] != '\n') --keep;
    int64_t kept_lines = std::count(b, b + keep, '\n');
    r.data.resize(start + size_t(keep));
    r.lost_lines += want_lines - kept_lines;
    r.lost_bytes += (u_end - u_begin) - keep;
    r.warnings.push_back(where(idx, c) + ": decompression failed (" + err + "): " +
                         std::to_string(want_lines - kept_lines) + " lines lost");
  }
}

}  // namespace

namespace {
// A cut-short final member: its whole lines were delivered; the bytes after them are lost.
void add_truncation(const IndexInfo& idx, RangeData& r) {
  if (idx.truncated_bytes <= 0) return;
  r.lost_bytes += idx.truncated_bytes;
  r.warnings.push_back(idx.path + ": trace is cut short (truncated final gzip member): " +
                       std::to_string(idx.truncated_bytes) + " bytes dropped");
}
}  // namespace

RangeData read_checkpoints(const IndexInfo& idx, int64_t first, int64_t last) {
  RangeData r = read_range(idx, first, last);
  if (last == int64_t(idx.checkpoints.size()) - 1) add_truncation(idx, r);
  r.data.reserve(r.data.size() + 64);
  return r;
}

RangeData read_range(const IndexInfo& idx, int64_t first, int64_t last) {
  RangeData r;
  const auto& cps = idx.checkpoints;
  int64_t n = int64_t(cps.size());
  if (first < 0 || last < first || last >= n)
    throw std::out_of_range(idx.path + ": checkpoint range [" + std::to_string(first) + ", " +
                            std::to_string(last) + "] outside [0, " + std::to_string(n - 1) + "]");
  r.first_line = cps[first].first_line;
  File f(idx.path);
  if (f.size() != idx.size || f.mtime_ns() != idx.mtime_ns)
    throw ReaderError(idx.path + ": file changed since it was indexed; rebuild the index");
  // No allocation larger than the compressed bytes can produce (a lying index or header).
  int64_t total = 0;
  for (int64_t i = first; i <= last; ++i) {
    const Checkpoint& c = cps[i];
    if (c.uncompressed_size < 0 || c.compressed_size < 0 || c.compressed_offset < 0 ||
        c.compressed_offset + c.compressed_size > f.size())
      throw ReaderError(where(idx, c) + ": index sizes impossible for the file; rebuild the index");
    total += c.uncompressed_size;
  }
  if (total > (idx.kind == "plain" ? 1 : kMaxInflateRatio) * (f.size() - cps[first].compressed_offset) + kWindowBytes)
    throw ReaderError(where(idx, cps[first]) + ": index claims more data than the file can hold; rebuild the index");
  r.data.reserve(size_t(total) + 64);
  if (idx.kind == "member") {
    read_members(f, idx, first, last, r);
  } else if (idx.kind == "plain") {
    int64_t off = cps[first].uncompressed_offset;
    r.data.resize(size_t(total));
    size_t got = f.pread_full(r.data.data(), size_t(total), off);
    r.data.resize(got);
  } else {
    int64_t i = first;
    while (i <= last) {
      if (cps[i].flags & kLost) {
        r.lost_bytes += cps[i].compressed_size;
        r.lost_lines += cps[i].lost_lines;
        r.warnings.push_back(where(idx, cps[i]) + ": gzip member failed (corrupt data, CRC32 or ISIZE): " +
                             std::to_string(cps[i].compressed_size) + " compressed bytes, " +
                             std::to_string(cps[i].lost_lines) + " lines (as decoded) lost");
        ++i;
        continue;
      }
      int64_t j = i;
      while (j + 1 <= last && !(cps[j + 1].flags & kLost)) ++j;
      read_inflate_run(f, idx, i, j, r);
      i = j + 1;
    }
  }
  return r;
}

LinesResult read_lines_checked(const IndexInfo& idx, int64_t first_line, int64_t n_lines, bool require_verified) {
  LinesResult out;
  const auto& cps = idx.checkpoints;
  if (n_lines <= 0 || first_line < 0 || cps.empty()) return out;
  if (require_verified && idx.kind == "member") {
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
    add_truncation(idx, t);
    out.lost_bytes += t.lost_bytes;
    out.warnings.insert(out.warnings.end(), t.warnings.begin(), t.warnings.end());
  }
  return out;
}

std::vector<std::string> read_lines(const IndexInfo& idx, int64_t first_line, int64_t n_lines) {
  return read_lines_checked(idx, first_line, n_lines, false).lines;
}

void ensure_context(IndexInfo& idx) {
  if (idx.context.scanned) return;
  int64_t n = int64_t(idx.checkpoints.size());
  const int64_t step = 16;
  for (int64_t i = 0; i < n; i += step) {
    RangeData r = read_checkpoints(idx, i, std::min(n - 1, i + step - 1));
    collect_context(r.data.data(), r.data.size(), idx.context);
  }
  idx.context.scanned = true;
  if (idx.context.hostname.empty() && idx.context.hh.size() == 1) idx.context.hostname = idx.context.hh.begin()->second;
  store_scan(idx);
}

IndexInfo scan_file(const std::string& trace, const std::string& index_dir) {
  IndexInfo idx = build_index(trace, index_dir, false);
  if (idx.stats_scanned && idx.context.scanned) return idx;
  int64_t n = int64_t(idx.checkpoints.size());
  const int64_t step = 16;
  ensure_context(idx);
  // Pass 2: parse everything for counts and args dtypes.
  Parser parser;
  std::map<std::string, ArgType> types;
  int64_t events = 0, meta = 0, skipped = 0, lost_lines = 0, lost_bytes = 0, mismatches = 0;
  for (int64_t i = 0; i < n; i += step) {
    RangeData r = read_checkpoints(idx, i, std::min(n - 1, i + step - 1));
    EventColumns cols;
    FileContext ctx = idx.context;
    parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
    events += cols.rows;
    lost_lines += r.lost_lines;
    lost_bytes += r.lost_bytes;
    mismatches += r.header_mismatches;
    meta += int64_t(cols.metadata.size());
    skipped += cols.skipped_lines;
    for (auto& a : cols.args) {
      auto it = types.find(a.key);
      if (it == types.end())
        types[a.key] = a.type;
      else
        it->second = std::max(it->second, a.type);
    }
  }
  idx.events = events;
  idx.metadata_records = meta;
  idx.skipped_lines = skipped;
  idx.scan_lost_lines = lost_lines;
  idx.scan_lost_bytes = lost_bytes;
  idx.scan_header_mismatches = mismatches;
  idx.arg_columns.clear();
  for (auto& [k, t] : types)
    idx.arg_columns.emplace_back(k, t == ArgType::Int ? "Int64" : t == ArgType::Float ? "Float64" : "string");
  idx.stats_scanned = true;
  store_scan(idx);
  return idx;
}

}  // namespace dftracer::reader
