#include "gzip_member.h"

#include <cstring>

namespace dftracer {
namespace {
inline void put_u16(unsigned char* p, uint32_t v) {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
inline void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
}  // namespace

uint32_t count_lines(const char* data, size_t n) {
  uint32_t lines = 0;
  const char* p = data;
  const char* end = data + n;
  while (p < end) {
    const void* q = std::memchr(p, '\n', static_cast<size_t>(end - p));
    if (!q) break;
    ++lines;
    p = static_cast<const char*>(q) + 1;
  }
  return lines;
}

MemberEncoder::MemberEncoder(int level) {
  // Raw deflate (windowBits -15); the gzip framing is ours. memLevel 9: best ratio.
  ok_ = deflateInit2(&zs_, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) == Z_OK;
}

MemberEncoder::~MemberEncoder() {
  if (ok_) deflateEnd(&zs_);
}

bool MemberEncoder::encode(const Span* spans, size_t count, std::string* out) {
  if (!ok_) return false;
  if (deflateReset(&zs_) != Z_OK) return false;  // empty history per member
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += spans[i].n;
  size_t bound = deflateBound(&zs_, static_cast<uLong>(n)) + 16 * count;
  out->resize(kMemberHeaderSize + bound + kMemberTrailerSize);
  unsigned char* base = reinterpret_cast<unsigned char*>(&(*out)[0]);
  zs_.next_out = base + kMemberHeaderSize;
  zs_.avail_out = static_cast<uInt>(bound);
  uLong crc = crc32(0L, Z_NULL, 0);
  uint32_t lines = 0;
  int rc = Z_OK;
  for (size_t i = 0; i < count; ++i) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(spans[i].p));
    zs_.avail_in = static_cast<uInt>(spans[i].n);
    rc = deflate(&zs_, i + 1 == count ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR || zs_.avail_in != 0) return false;
    crc = crc32(crc, reinterpret_cast<const Bytef*>(spans[i].p), static_cast<uInt>(spans[i].n));
    lines += count_lines(spans[i].p, spans[i].n);
  }
  if (count == 0) rc = deflate(&zs_, Z_FINISH);
  if (rc != Z_STREAM_END) return false;
  size_t clen = zs_.total_out;
  size_t total = kMemberHeaderSize + clen + kMemberTrailerSize;
  // Header: ID1 ID2 CM FLG(FEXTRA) MTIME(0) XFL(0) OS(3 = Unix) XLEN(20)
  static const unsigned char kFixed[10] = {0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 3};
  std::memcpy(base, kFixed, 10);
  put_u16(base + 10, 20);
  base[12] = 'D';
  base[13] = 'F';
  put_u16(base + 14, 16);
  put_u32(base + 16, static_cast<uint32_t>(total));
  put_u32(base + 20, static_cast<uint32_t>(n));
  put_u32(base + 24, lines);
  put_u32(base + 28, kSubfieldVersion);
  put_u32(base + kMemberHeaderSize + clen, static_cast<uint32_t>(crc));
  put_u32(base + kMemberHeaderSize + clen + 4, static_cast<uint32_t>(n));
  out->resize(total);
  return true;
}

}  // namespace dftracer
