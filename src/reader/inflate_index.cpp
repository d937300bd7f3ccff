// Inflate index kind (any gzip that is not our member format, single or multi-member): one
// inflate pass with zran-style checkpoints at member starts and at deflate block ends after
// >= 1 MiB of output, aligned to the next line start; a range restarts at its first checkpoint
// (bit offset + 32 KiB window) and inflates across members.
#include <zlib.h>

#include <algorithm>
#include <vector>

#include "gzip_scan.h"
#include "index_strategy.h"
#include "line_tracker.h"

namespace dftracer::reader {
namespace {

void index_inflate(const File& f, IndexInfo& info) {
  LineTracker t(info);
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  std::vector<unsigned char> in(1 << 18);
  int64_t in_off = 0;        // file offset of in[0]
  int64_t member_start = 0;  // compressed offset of the current member
  int64_t member_u = 0;      // uncompressed offset of the current member
  bool clean = false;
  bool new_member = true;
  zs.avail_in = 0;
  auto consumed = [&]() { return in_off + int64_t(zs.next_in - in.data()); };
  for (;;) {
    if (zs.avail_in == 0) {
      in_off = zs.next_in ? consumed() : in_off;
      size_t got = f.pread_full(in.data(), in.size(), in_off);
      zs.next_in = in.data();
      zs.avail_in = uInt(got);
      if (got == 0) {
        clean = new_member;  // input ended exactly at a member end
        break;
      }
    }
    if (new_member) {
      Checkpoint cp;
      cp.compressed_offset = consumed();
      cp.flags = kMemberStart;
      member_start = cp.compressed_offset;
      member_u = t.total();
      t.begin_member();
      t.mark(cp);
      new_member = false;
    }
    size_t avail;
    char* out = t.space(1 << 16, &avail);
    zs.next_out = reinterpret_cast<Bytef*>(out);
    zs.avail_out = uInt(std::min<size_t>(avail, 1 << 20));
    uInt before = zs.avail_out;
    int rc = inflate(&zs, Z_BLOCK);
    t.commit(before - zs.avail_out);
    if (rc == Z_STREAM_END) {
      // Trailing zero padding after the last member is tolerated.
      int64_t pos = consumed();
      if (pos >= f.size()) {
        clean = true;
        break;
      }
      unsigned char peek[2] = {0, 0};
      f.pread_full(peek, 2, pos);
      if (peek[0] != format::kGzipId1 || peek[1] != format::kGzipId2) {
        info.lost_bytes += f.size() - pos;
        clean = true;
        break;
      }
      inflateReset(&zs);
      new_member = true;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;  // need input
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      // Corrupt data, CRC32 or ISIZE mismatch: the whole member is a lost region (its lines
      // decoded so far are dropped, never delivered), up to the next gzip header.
      int64_t err_at = consumed();
      int64_t next = find_gzip_header(f, std::max(err_at, member_start + 1));
      int64_t lost_to = next < 0 ? f.size() : next;
      t.drop_member(member_start, lost_to - member_start);
      if (next < 0) {
        clean = true;
        break;
      }
      inflateReset(&zs);
      zs.avail_in = 0;
      zs.next_in = nullptr;
      in_off = next;
      new_member = true;
      continue;
    }
    // At a deflate block boundary (not the last block): maybe add a zran-style checkpoint.
    if ((zs.data_type & 0xc0) == 0x80 && t.total() > member_u && t.since_last_checkpoint() >= kInflateSpan &&
        !t.pending()) {
      Checkpoint cp;
      int bits = zs.data_type & 7;
      int64_t pos = consumed();
      cp.compressed_offset = pos - (bits ? 1 : 0);
      cp.bit_offset = bits;
      int64_t wlen = std::min<int64_t>(kWindowBytes, t.total() - member_u);
      cp.window = t.tail(wlen);
      t.mark(cp);
    }
  }
  inflateEnd(&zs);
  t.finish(clean);
  auto& cps = info.checkpoints;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (cps[i].flags & kLost) continue;
    int64_t next = i + 1 < cps.size() ? cps[i + 1].compressed_offset : f.size();
    cps[i].compressed_size = std::max<int64_t>(0, next - cps[i].compressed_offset);
  }
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
      if (f.pread_full(&ch, 1, pos) != 1) throw ReaderError(checkpoint_where(idx, c) + ": read past end");
      inflatePrime(&zs, c.bit_offset, ch >> (8 - c.bit_offset));
      pos += 1;
    }
    std::string window = load_window(idx, c.number);
    if (!window.empty()) inflateSetDictionary(&zs, reinterpret_cast<const Bytef*>(window.data()), uInt(window.size()));
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
    r.warnings.push_back(checkpoint_where(idx, c) + ": decompression failed (" + err +
                         "): " + std::to_string(want_lines - kept_lines) + " lines lost");
  }
}


class InflateIndex final : public IndexStrategy {
 public:
  IndexKind kind() const override { return IndexKind::Inflate; }
  void build(const File& f, IndexInfo& info, bool /*verify*/) const override {
    index_inflate(f, info);
    info.context.scanned = true;  // the pass collected the FH/HH/SH records of every line
  }
  // Lost regions are counted; each run of readable checkpoints between them is inflated.
  void read(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) const override {
    const auto& cps = idx.checkpoints;
    int64_t i = first;
    while (i <= last) {
      if (cps[size_t(i)].flags & kLost) {
        const Checkpoint& c = cps[size_t(i)];
        r.lost_bytes += c.compressed_size;
        r.lost_lines += c.lost_lines;
        r.warnings.push_back(checkpoint_where(idx, c) + ": gzip member failed (corrupt data, CRC32 or ISIZE): " +
                             std::to_string(c.compressed_size) + " compressed bytes, " + std::to_string(c.lost_lines) +
                             " lines (as decoded) lost");
        ++i;
        continue;
      }
      int64_t j = i;
      while (j + 1 <= last && !(cps[size_t(j + 1)].flags & kLost)) ++j;
      read_inflate_run(f, idx, i, j, r);
      i = j + 1;
    }
  }
};

}  // namespace

const IndexStrategy& inflate_strategy() {
  static const InflateIndex s;
  return s;
}

}  // namespace dftracer::reader
