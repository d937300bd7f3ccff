// Gzip member scanning: header parsing, resynchronisation, one-member inflation (gzip_scan.h).
#include "gzip_scan.h"

#include <zlib.h>

#include <cstring>
#include <string>
#include <vector>

namespace dftracer::reader {
int64_t find_gzip_header(const File& f, int64_t from) {
  std::vector<unsigned char> buf(1 << 20);
  while (from < f.size()) {
    size_t got = f.pread_full(buf.data(), buf.size(), from);
    if (got < 10) return -1;
    for (size_t i = 0; i + 10 <= got; ++i) {
      const unsigned char* q = static_cast<const unsigned char*>(
          std::memchr(buf.data() + i, format::kGzipId1, got - 10 - i + 1));
      if (!q) break;
      i = size_t(q - buf.data());
      if (q[1] == format::kGzipId2 && q[2] == format::kMethodDeflate && !(q[3] & format::kFlagReserved)) {
        MemberHeader h = parse_member_header(q, got - i);
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
    MemberHeader h = parse_member_header(hb, got);
    if (h.ok && h.df && at + int64_t(h.fields.member_size) <= f.size()) return at;
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
