// Batch reader: decompress only the requested checkpoints; whole-file scan for stats/context.
#include <zlib.h>
#ifdef DFTRACER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

void store_scan(const IndexInfo& info);  // indexer.cpp

namespace {

std::string where(const IndexInfo& idx, const Checkpoint& c) {
  return idx.path + ": checkpoint " + std::to_string(c.number) + " (compressed offset " +
         std::to_string(c.compressed_offset) + ")";
}

// Kind member: each checkpoint is one whole gzip member, decoded (and CRC-checked) on its own.
// Members of known sizes are inflated in one call with libdeflate when available (whole-buffer
// decoder, ~2x zlib); a cut-short final member needs zlib's streaming decoder.
void read_members(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) {
  const auto& cps = idx.checkpoints;
  int64_t c0 = cps[first].compressed_offset;
  int64_t c1 = cps[last].compressed_offset + cps[last].compressed_size;
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
      r.warnings.push_back(where(idx, c) + ": " + std::to_string(c.compressed_size) +
                           " compressed bytes are not a valid gzip member; their lines are lost");
      continue;
    }
    size_t start = r.data.size();
    int64_t rel = c.compressed_offset - c0;
    int64_t avail = std::max<int64_t>(0, std::min<int64_t>(c.compressed_size, int64_t(got) - rel));
    bool ok = false;
    const char* msg = "size mismatch";
#ifdef DFTRACER_HAVE_LIBDEFLATE
    if (!(c.flags & kTruncated)) {
      r.data.resize(start + size_t(c.uncompressed_size));
      size_t out_n = 0;
      libdeflate_result rc = libdeflate_gzip_decompress(ld, in.get() + rel, size_t(avail), &r.data[start],
                                                        size_t(c.uncompressed_size), &out_n);
      ok = rc == LIBDEFLATE_SUCCESS && int64_t(out_n) == c.uncompressed_size;
      if (rc == LIBDEFLATE_BAD_DATA) msg = "invalid compressed data or checksum";
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
      ok = (rc == Z_STREAM_END && produced == c.uncompressed_size) ||
           ((c.flags & kTruncated) && produced >= c.uncompressed_size && rc != Z_DATA_ERROR);
      if (zs.msg) msg = zs.msg;
    }
    if (ok) {
      r.data.resize(start + size_t(c.uncompressed_size));
    } else {
      r.data.resize(start);
      r.lost_lines += c.num_lines;
      r.lost_bytes += c.uncompressed_size;
      r.warnings.push_back(where(idx, c) + ": corrupt gzip member (" + msg + "): " + std::to_string(c.num_lines) +
                           " lines (" + std::to_string(c.uncompressed_size) + " bytes) lost");
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
      if (raw) {
        raw = false;
        skip_trailer = 8;
      } else {
        inflateReset(&zs);
      }
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      err = zs.msg ? zs.msg : "inflate error";
      break;
    }
  }
  inflateEnd(&zs);
  if (u < u_end) {
    // Keep complete lines decoded so far; the rest of the range is lost.
    int64_t have = std::max<int64_t>(0, u - u_begin);
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

RangeData read_checkpoints(const IndexInfo& idx, int64_t first, int64_t last) {
  RangeData r;
  const auto& cps = idx.checkpoints;
  int64_t n = int64_t(cps.size());
  if (first < 0 || last < first || last >= n)
    throw std::out_of_range(idx.path + ": checkpoint range [" + std::to_string(first) + ", " +
                            std::to_string(last) + "] outside [0, " + std::to_string(n - 1) + "]");
  r.first_line = cps[first].first_line;
  int64_t total = 0;
  for (int64_t i = first; i <= last; ++i) total += cps[i].uncompressed_size;
  r.data.reserve(size_t(total) + 64);
  File f(idx.path);
  if (f.size() != idx.size || f.mtime_ns() != idx.mtime_ns)
    throw ReaderError(idx.path + ": file changed since it was indexed; rebuild the index");
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
        r.warnings.push_back(where(idx, cps[i]) + ": " + std::to_string(cps[i].compressed_size) +
                             " compressed bytes could not be decoded; their lines are lost");
        ++i;
        continue;
      }
      int64_t j = i;
      while (j + 1 <= last && !(cps[j + 1].flags & kLost)) ++j;
      read_inflate_run(f, idx, i, j, r);
      i = j + 1;
    }
  }
  if (last == n - 1 && idx.truncated_bytes > 0)
    r.warnings.push_back(idx.path + ": trace is cut short (truncated final gzip member): " +
                         std::to_string(idx.truncated_bytes) + " bytes dropped");
  r.data.reserve(r.data.size() + 64);
  return r;
}

std::vector<std::string> read_lines(const IndexInfo& idx, int64_t first_line, int64_t n_lines) {
  std::vector<std::string> out;
  const auto& cps = idx.checkpoints;
  if (n_lines <= 0 || first_line < 0 || cps.empty()) return out;
  int64_t end_line = first_line + n_lines;
  // First checkpoint whose line range reaches first_line.
  auto it = std::upper_bound(cps.begin(), cps.end(), first_line,
                             [](int64_t l, const Checkpoint& c) { return l < c.first_line; });
  int64_t a = std::max<int64_t>(0, int64_t(it - cps.begin()) - 1);
  int64_t b = a;
  while (b + 1 < int64_t(cps.size()) && cps[b + 1].first_line < end_line) ++b;
  RangeData r = read_checkpoints(idx, a, b);
  int64_t line = r.first_line;
  const char* p = r.data.data();
  const char* e = p + r.data.size();
  while (p < e && line < end_line) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(e - p)));
    const char* le = nl ? nl : e;
    if (line >= first_line) out.emplace_back(p, size_t(le - p));
    ++line;
    p = nl ? nl + 1 : e;
  }
  return out;
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
  int64_t events = 0, meta = 0, skipped = 0;
  for (int64_t i = 0; i < n; i += step) {
    RangeData r = read_checkpoints(idx, i, std::min(n - 1, i + step - 1));
    EventColumns cols;
    FileContext ctx = idx.context;
    parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
    events += cols.rows;
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
  idx.arg_columns.clear();
  for (auto& [k, t] : types)
    idx.arg_columns.emplace_back(k, t == ArgType::Int ? "Int64" : t == ArgType::Float ? "Float64" : "string");
  idx.stats_scanned = true;
  store_scan(idx);
  return idx;
}

}  // namespace dftracer::reader
