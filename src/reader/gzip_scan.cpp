// Gzip member scanning: header parsing, resynchronisation, one-member inflation (gzip_scan.h).
#include "gzip_scan.h"

#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

namespace dftracer::reader {
namespace {
uint16_t read_le16(const unsigned char* p) { return uint16_t(p[0] | (p[1] << 8)); }
}  // namespace

// Parses a gzip member header from p[0..n). Needs the whole header in the buffer.
GzipHeader parse_gzip_header(const unsigned char* p, size_t n) {
  GzipHeader h;
  if (n < 10 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8) return h;
  int flg = p[3];
  if (flg & 0xe0) return h;
  size_t pos = 10;
  if (flg & 4) {
    if (pos + 2 > n) return h;
    size_t xlen = read_le16(p + pos);
    pos += 2;
    if (pos + xlen > n) return h;
    size_t e = pos, end = pos + xlen;
    while (e + 4 <= end) {
      size_t slen = read_le16(p + e + 2);
      if (e + 4 + slen > end) break;
      if (p[e] == 'D' && p[e + 1] == 'F' && slen == 16) {
        h.compressed_size = read_le32(p + e + 4);
        h.uncompressed_size = read_le32(p + e + 8);
        h.lines = read_le32(p + e + 12);
        h.version = read_le32(p + e + 16);
        h.df = h.version == 1 && h.compressed_size >= 20;
      }
      e += 4 + slen;
    }
    pos = end;
  }
  for (int bit : {8, 16}) {
    if (flg & bit) {
      const void* z = pos < n ? std::memchr(p + pos, 0, n - pos) : nullptr;
      if (!z) return h;
      pos = size_t(static_cast<const unsigned char*>(z) - p) + 1;
    }
  }
  if (flg & 2) pos += 2;
  if (pos > n) return h;
  h.ok = true;
  h.header_len = int64_t(pos);
  return h;
}


int64_t find_gzip_header(const File& f, int64_t from) {
  std::vector<unsigned char> buf(1 << 20);
  while (from < f.size()) {
    size_t got = f.pread_full(buf.data(), buf.size(), from);
    if (got < 10) return -1;
    for (size_t i = 0; i + 10 <= got; ++i) {
      const unsigned char* q = static_cast<const unsigned char*>(std::memchr(buf.data() + i, 0x1f, got - 10 - i + 1));
      if (!q) break;
      i = size_t(q - buf.data());
      if (q[1] == 0x8b && q[2] == 8 && !(q[3] & 0xe0)) {
        GzipHeader h = parse_gzip_header(q, got - i);
        if (h.ok) return from + int64_t(i);
      }
    }
    if (got < buf.size()) return -1;
    from += int64_t(got) - 9;
  }
  return -1;
}

int64_t find_df_header(const File& f, int64_t from) {
  while (from >= 0 && from < f.size()) {
    int64_t at = find_gzip_header(f, from);
    if (at < 0) return -1;
    unsigned char hb[64];
    size_t got = f.pread_full(hb, sizeof hb, at);
    GzipHeader h = parse_gzip_header(hb, got);
    if (h.ok && h.df && at + int64_t(h.compressed_size) <= f.size()) return at;
    from = at + 1;
  }
  return -1;
}


MemberInflate inflate_member(const File& f, int64_t off, FileContext& ctx) {
  MemberInflate r;
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  std::vector<unsigned char> in(1 << 18);
  std::vector<char> out(1 << 18);
  std::string carry;  // bytes of the current unfinished line (capped: context lines are short)
  FileContext local;
  int64_t pos = off;
  for (;;) {
    if (zs.avail_in == 0) {
      size_t got = f.pread_full(in.data(), in.size(), pos);
      pos += int64_t(got);
      zs.next_in = in.data();
      zs.avail_in = uInt(got);
      if (got == 0) break;  // cut short
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = uInt(out.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t n = out.size() - zs.avail_out;
    const char* last = nullptr;
    for (const char* q = out.data(); (q = static_cast<const char*>(std::memchr(q, '\n', size_t(out.data() + n - q))));
         ++q) {
      ++r.newlines;
      last = q;
    }
    if (last) {
      size_t head = size_t(last + 1 - out.data());
      if (!carry.empty()) {
        carry.append(out.data(), head);
        collect_context(carry.data(), carry.size(), local);
        carry.clear();
      } else {
        collect_context(out.data(), head, local);
      }
      r.whole_line_bytes = r.bytes + int64_t(head);
      carry.assign(out.data() + head, n - head);
    } else if (carry.size() < (1u << 20)) {
      carry.append(out.data(), n);
    }
    r.bytes += int64_t(n);
    if (rc == Z_STREAM_END) {
      r.compressed_size = pos - int64_t(zs.avail_in) - off;
      if (!carry.empty()) collect_context(carry.data(), carry.size(), local);  // unterminated last line
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;
    if (rc != Z_OK) {
      r.corrupt = true;
      break;
    }
  }
  inflateEnd(&zs);
  if (!r.corrupt) ctx.merge(local);
  return r;
}

// Checks a 'DF' header against what the hop can see without inflating: the member fits the file,
// its uncompressed size is possible for deflate and equals the trailer's ISIZE, it has no more
// lines than bytes, and a gzip header (or the end of the file, or zero padding to it) follows.
// Returns the first disagreement, or nullptr. CRC32 and the line count need the data: they are

}  // namespace dftracer::reader
