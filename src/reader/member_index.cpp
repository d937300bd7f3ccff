// Member index kind (our format, docs/format.md): hop from gzip header to gzip header with the
// 'DF' subfield, no inflate; every header is checked against what the hop can see (trailer ISIZE,
// the next header, deflate's expansion limit) before it is trusted. A range is read member by
// member, each decoded and CRC-checked on its own.
#include <zlib.h>
#ifdef DFTRACER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gzip_scan.h"
#include "index_strategy.h"

namespace dftracer::reader {
namespace {


// Checks a 'DF' header against what the hop can see without inflating: the member fits the file,
// its uncompressed size is possible for deflate and equals the trailer's ISIZE, it has no more
// lines than bytes, and a gzip header (or the end of the file, or zero padding to it) follows.
// Returns the first disagreement, or nullptr. CRC32 and the line count need the data: they are
// checked when the member is read (read_members).
const char* df_header_disagreement(const File& f, int64_t off, const MemberHeader& h) {
  int64_t cs = h.fields.member_size;
  if (cs < int64_t(h.header_size + 2 + format::kMemberTrailerSize))
    return "compressed size smaller than header + deflate + trailer";
  if (off + cs > f.size()) return "compressed size runs past the end of the file";
  if (int64_t(h.fields.text_size) > kMaxInflateRatio * cs) return "uncompressed size beyond what deflate can produce";
  if (h.fields.lines > h.fields.text_size) return "more lines than bytes";
  unsigned char t[8 + 512];
  size_t got = f.pread_full(t, sizeof t, off + cs - 8);
  if (got < 8) return "trailer missing";
  if (format::load_u32(t + 4) != h.fields.text_size) return "uncompressed size differs from the trailer's ISIZE";
  if (got > 8) {
    MemberHeader next = parse_member_header(t + 8, got - 8);
    bool zeros = off + cs + int64_t(got - 8) == f.size();
    for (size_t i = 8; i < got && zeros; ++i) zeros = t[i] == 0;
    if (!next.ok && !zeros) return "no gzip header where the next member should start";
  }
  return nullptr;
}

// Inflates a member whose header passed df_header_disagreement and compares the data with every
// header field: compressed bytes consumed, uncompressed size, line count. kBadData: the deflate
// data or its CRC32 is bad; the member stays as its (trailer-consistent) header describes it and
// the reader reports its lines lost, as an unverified index would.
enum class MemberCheck { kMatch, kMismatch, kBadData };
MemberCheck df_member_check(const File& f, int64_t off, const MemberHeader& h, std::vector<unsigned char>& in,
                            std::string& out) {
  in.resize(h.fields.member_size);
  if (f.pread_full(in.data(), h.fields.member_size, off) != h.fields.member_size) return MemberCheck::kMismatch;
  out.resize(size_t(h.fields.text_size) + 1);
#ifdef DFTRACER_HAVE_LIBDEFLATE
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> ld(libdeflate_alloc_decompressor(),
                                                                                  libdeflate_free_decompressor);
  if (!ld) throw ReaderError("libdeflate: out of memory");
  size_t in_n = 0, out_n = 0;
  libdeflate_result rc = libdeflate_gzip_decompress_ex(ld.get(), in.data(), in.size(), out.data(), out.size(), &in_n,
                                                       &out_n);
  if (rc == LIBDEFLATE_BAD_DATA) return MemberCheck::kBadData;
  if (rc != LIBDEFLATE_SUCCESS || in_n != h.fields.member_size || out_n != h.fields.text_size)
    return MemberCheck::kMismatch;
#else
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  zs.next_in = in.data();
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  int rc = inflate(&zs, Z_FINISH);
  bool ok = rc == Z_STREAM_END && zs.avail_in == 0 && zs.total_out == h.fields.text_size;
  inflateEnd(&zs);
  if (rc == Z_DATA_ERROR) return MemberCheck::kBadData;
  if (!ok) return MemberCheck::kMismatch;
#endif
  return count_newlines(out.data(), h.fields.text_size) == int64_t(h.fields.lines) ? MemberCheck::kMatch
                                                                                   : MemberCheck::kMismatch;
}


void index_members(const File& f, IndexInfo& info, bool verify) {
  int64_t off = 0, u = 0, line = 0;
  unsigned char hb[512];
  auto& cps = info.checkpoints;
  std::vector<unsigned char> vin;  // verify mode buffers
  std::string vout;
  while (off < f.size()) {
    size_t got = f.pread_full(hb, sizeof hb, off);
    MemberHeader h = parse_member_header(hb, got);
    Checkpoint cp;
    cp.compressed_offset = off;
    cp.block_offset = u;
    cp.uncompressed_offset = u;
    cp.first_line = line;
    cp.flags = kMemberStart;
    bool zero_tail = true;
    for (size_t i = 0; i < got && zero_tail; ++i) zero_tail = hb[i] == 0;
    if (h.ok && h.df && !df_header_disagreement(f, off, h) &&
        (!verify || df_member_check(f, off, h, vin, vout) != MemberCheck::kMismatch)) {
      if (verify) cp.flags |= kVerified;
      cp.compressed_size = h.fields.member_size;
      cp.uncompressed_size = h.fields.text_size;
      cp.num_lines = h.fields.lines;
      cps.push_back(cp);
      off += h.fields.member_size;
      u += h.fields.text_size;
      line += h.fields.lines;
      continue;
    }
    int64_t lost_lines = 0;
    if (h.ok) {
      // No 'DF' subfield, or one the member disagrees with: plain inflation of this member.
      MemberInflate m = inflate_member(f, off, info.context);
      if (!m.corrupt) {
        bool cut = m.compressed_size < 0;
        int64_t keep = cut ? m.whole_line_bytes : m.bytes;
        cp.compressed_size = cut ? f.size() - off : m.compressed_size;
        cp.uncompressed_size = keep;
        cp.num_lines = m.newlines + ((!cut && m.bytes > m.whole_line_bytes) ? 1 : 0);
        cp.flags |= kVerified;  // all values come from the data
        if (h.df && !cut &&
            (int64_t(h.fields.member_size) != m.compressed_size || int64_t(h.fields.text_size) != m.bytes ||
             int64_t(h.fields.lines) != m.newlines)) {
          cp.flags |= kHeaderMismatch;
          info.header_mismatches += 1;
        }
        if (cut) {
          cp.flags |= kTruncated;
          bool claim_ok = h.df && int64_t(h.fields.text_size) >= m.bytes &&
                          int64_t(h.fields.text_size) <= kMaxInflateRatio * (f.size() - off);
          info.truncated_bytes += (claim_ok ? int64_t(h.fields.text_size) : m.bytes) - keep;
        }
        if (keep > 0) cps.push_back(cp);
        off += cp.compressed_size;
        u += keep;
        line += cp.num_lines;
        continue;
      }
      lost_lines = m.newlines + (m.bytes > m.whole_line_bytes ? 1 : 0);  // decoded before the failure
    }
    if (zero_tail && got < sizeof hb) {  // zero padding at the end
      info.lost_bytes += f.size() - off;
      break;
    }
    // Corrupt header or data: lost region up to the next valid member header.
    int64_t next = find_df_header(f, off + 1);
    int64_t end = next < 0 ? f.size() : next;
    if (next < 0 && !h.ok && got < format::kMemberHeaderSize) {
      info.truncated_bytes += end - off;  // a header cut short at the end of the file
      break;
    }
    cp.flags = kLost;
    cp.compressed_size = end - off;
    cp.uncompressed_size = 0;
    cp.num_lines = 0;
    cp.lost_lines = lost_lines;
    cps.push_back(cp);
    info.lost_bytes += end - off;
    info.lost_lines += lost_lines;
    off = end;
  }
  info.lines = line;
  info.uncompressed_bytes = u;
}

// Plain inflation (zlib, CRC32/ISIZE checked) of the gzip members in in[0..n), appended to
// r.data; the output grows as produced (bounded by the input size x kMaxInflateRatio). Members
// that pass their check are kept; at the first failure the rest of the range is lost.
// `truncated`: the range is a final member cut short (its whole lines are kept, unchecked).
struct PlainResult {
  int64_t members = 0, lines = 0;  // members kept, '\n' in the kept output
  int64_t failed_lines = -1;       // '\n' decoded in the failed member (-1: none failed)
  int64_t failed_bytes = 0;        // bytes decoded in the failed member (or not decoded after it)
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
      if (zs.next_in[0] != format::kGzipId1) {  // not another gzip member
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
    pr.failed_lines = count_newlines(r.data.data() + kept, used - kept) +
                      (used > kept && r.data[used - 1] != '\n' ? 1 : 0);
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
  // The compressed bytes go to this thread's reused buffer when they fit (no fresh memory per
  // read when malloc gives large blocks back to the system: docs/perf/i22-reserve.md).
  constexpr size_t kKeepIn = size_t(2) << 20;
  thread_local std::unique_ptr<unsigned char[]> t_in;
  std::unique_ptr<unsigned char[]> own;
  unsigned char* in;
  if (size_t(c1 - c0) <= kKeepIn) {
    if (!t_in) t_in.reset(new unsigned char[kKeepIn]);
    in = t_in.get();
  } else {
    own.reset(new unsigned char[size_t(c1 - c0)]);
    in = own.get();
  }
  size_t got = f.pread_full(in, size_t(c1 - c0), c0);
  z_stream zs{};
  bool zinit = false;
#ifdef DFTRACER_HAVE_LIBDEFLATE
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> ldp(libdeflate_alloc_decompressor(),
                                                                                   libdeflate_free_decompressor);
  libdeflate_decompressor* ld = ldp.get();
  if (!ld) throw ReaderError("libdeflate: out of memory");
#endif
  for (int64_t i = first; i <= last; ++i) {
    const Checkpoint& c = cps[i];
    if (c.flags & kLost) {
      r.lost_bytes += c.compressed_size;
      r.lost_lines += c.lost_lines;
      r.warnings.push_back(checkpoint_where(idx, c) + ": " + std::to_string(c.compressed_size) +
                           " compressed bytes are not a valid gzip member; " +
                           (c.lost_lines ? std::to_string(c.lost_lines) + " lines (as decoded) are lost"
                                         : std::string("their lines are lost")));
      continue;
    }
    if (c.flags & kHeaderMismatch)
      r.warnings.push_back(checkpoint_where(idx, c) +
                           ": gzip member header disagreed with its data; indexed by plain "
                           "inflation (" +
                           std::to_string(c.num_lines) + " lines)");
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
      libdeflate_result rc = libdeflate_gzip_decompress_ex(ld, in + rel, size_t(avail), &r.data[start],
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
      zs.next_in = in + rel;
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
    PlainResult pr = inflate_plain(in + rel, size_t(avail), truncated, r);
    if (pr.failed_lines < 0 || pr.members > 0) {
      bool same = pr.failed_lines < 0 && pr.members == 1 && pr.lines == c.num_lines &&
                  int64_t(r.data.size() - start) == c.uncompressed_size;
      if (!same) {
        r.header_mismatches += 1;
        if (pr.lines != c.num_lines) r.line_count_mismatch = true;
        r.warnings.push_back(checkpoint_where(idx, c) + ": gzip member header disagrees with its data (" + why +
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
      r.warnings.push_back(checkpoint_where(idx, c) + ": corrupt gzip member (" + pr.error +
                           "): " + std::to_string(lines) + " lines (" + std::to_string(bytes) + " bytes) lost");
    }
  }
  if (zinit) inflateEnd(&zs);
}

class MemberIndex final : public IndexStrategy {
 public:
  IndexKind kind() const override { return IndexKind::Member; }
  void build(const File& f, IndexInfo& info, bool verify) const override { index_members(f, info, verify); }
  void read(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) const override {
    read_members(f, idx, first, last, r);
  }
};

}  // namespace

const IndexStrategy& member_strategy() {
  static const MemberIndex s;
  return s;
}

}  // namespace dftracer::reader
