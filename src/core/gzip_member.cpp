#include "gzip_member.h"

#include <algorithm>
#include <cstring>

#include "line_deflate.h"

#ifdef DFTRACER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace dftracer {

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

namespace {
constexpr size_t kLiteralShareMax = 5;      // line_deflate kept while literals <= 1/5 of the bytes
constexpr size_t kMinRatio = 20;            // and while its output is estimated <= 1/20 of them
                                            // (estimates at the probe: the mixes where libdeflate 6
                                            // is smaller 1/9.3..1/15.1, the preload trace 1/31..1/35;
                                            // docs/perf/preload.md, "Encoder, round 5")
constexpr size_t kProbeBytes = 128u << 10;  // decided after this much of a chunk
constexpr int kGeneralRunMax = 64;          // most chunks sent to the general deflater before a retry
constexpr int kGeneralLevel = 6;            // at this level
}  // namespace

MemberEncoder::MemberEncoder(int level) {
  if (level <= 1) {
    line_ = true;
    level = kGeneralLevel;
  }
#ifdef DFTRACER_HAVE_LIBDEFLATE
  // Level 1 allocates the general compressor (~650 KiB, its static Huffman codes: 34 k
  // instructions) on the first chunk that needs it: a short-lived process seldom does.
  general_level_ = level;
  if (!line_) ld_ = libdeflate_alloc_compressor(level);
  ok_ = line_ || ld_ != nullptr;
#else
  // Raw deflate (windowBits -15); the gzip framing is ours. memLevel 9: best ratio.
  ok_ = deflateInit2(&zs_, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) == Z_OK;
#endif
}

MemberEncoder::~MemberEncoder() {
#ifdef DFTRACER_HAVE_LIBDEFLATE
  if (ld_) libdeflate_free_compressor(ld_);
#else
  if (ok_) deflateEnd(&zs_);
#endif
}

const char* MemberEncoder::backend() {
#ifdef DFTRACER_HAVE_LIBDEFLATE
  return "libdeflate";
#else
  return "zlib";
#endif
}

void MemberEncoder::reserve(std::unique_ptr<char[]>* buf, size_t* cap, size_t n) {
  if (n <= *cap) return;
  buf->reset(new char[n]);  // default-initialised: no zero fill
  *cap = n;
}

bool MemberEncoder::encode(const Span* spans, size_t count) {
  out_size_ = 0;
  if (!ok_) return false;
  size_t n = 0;
  for (size_t i = 0; i < count; ++i) n += spans[i].n;
  uint32_t lines = 0;
  size_t clen = 0;
  unsigned char* base = nullptr;
  uint32_t crc = 0;
  bool use_line = line_ && general_skip_ == 0;
  if (line_ && general_skip_ > 0) --general_skip_;
#ifndef DFTRACER_HAVE_LIBDEFLATE
  if (use_line)  // zlib streams the spans; line_deflate needs them contiguous
#endif
  {
    // Whole-buffer compression: one contiguous input (a memcpy is cheap next to deflate).
    const char* in = count == 1 ? spans[0].p : nullptr;
    if (count != 1) {
      reserve(&joined_, &joined_cap_, n);
      size_t at = 0;
      for (size_t i = 0; i < count; ++i) {
        if (spans[i].n) std::memcpy(joined_.get() + at, spans[i].p, spans[i].n);
        at += spans[i].n;
      }
      in = joined_.get();
    }
    if (use_line) {
      size_t bound = line_deflate_bound(n);
      reserve(&out_, &out_cap_, kMemberHeaderSize + bound + kMemberTrailerSize);
      base = reinterpret_cast<unsigned char*>(out_.get());
      size_t literals = 0, nlines = 0;
      clen = line_deflate(in, n, base + kMemberHeaderSize, bound, &literals, kProbeBytes, kLiteralShareMax, &nlines,
                          kMinRatio);
      lines = static_cast<uint32_t>(nlines);
      // Small chunks (timed flushes, the metadata at the start) do not decide.
      bool poor = clen == 0 || (n >= kProbeBytes && literals * kLiteralShareMax > n);
      if (clen == 0 && !poor) return false;  // out of room: cannot happen with the bound
      if (poor) {  // the lines do not repeat recent ones: general deflater for a while (backoff)
        general_run_ = general_run_ ? std::min(2 * general_run_, kGeneralRunMax) : 1;
        general_skip_ = general_run_;
      } else {
        general_run_ = 0;
      }
      use_line = clen != 0;  // gave up: this chunk goes to the general deflater
    }
    if (use_line) {
#ifdef DFTRACER_HAVE_LIBDEFLATE
      crc = libdeflate_crc32(0, in, n);
#else
      crc = static_cast<uint32_t>(crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(in), n));
#endif
    }
#ifdef DFTRACER_HAVE_LIBDEFLATE
    if (!use_line) {
      if (ld_ == nullptr && (ld_ = libdeflate_alloc_compressor(general_level_)) == nullptr) return false;
      size_t bound = libdeflate_deflate_compress_bound(ld_, n);
      reserve(&out_, &out_cap_, kMemberHeaderSize + bound + kMemberTrailerSize);
      base = reinterpret_cast<unsigned char*>(out_.get());
      clen = libdeflate_deflate_compress(ld_, in, n, base + kMemberHeaderSize, bound);
      if (clen == 0) return false;
      crc = libdeflate_crc32(0, in, n);
      lines = count_lines(in, n);
    }
#endif
  }
#ifndef DFTRACER_HAVE_LIBDEFLATE
  if (!use_line) {
    if (deflateReset(&zs_) != Z_OK) return false;  // empty history per member
    size_t bound = deflateBound(&zs_, static_cast<uLong>(n)) + 16 * count;
    reserve(&out_, &out_cap_, kMemberHeaderSize + bound + kMemberTrailerSize);
    base = reinterpret_cast<unsigned char*>(out_.get());
    zs_.next_out = base + kMemberHeaderSize;
    zs_.avail_out = static_cast<uInt>(bound);
    uLong zcrc = crc32(0L, Z_NULL, 0);
    int rc = Z_OK;
    for (size_t i = 0; i < count; ++i) {
      zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(spans[i].p));
      zs_.avail_in = static_cast<uInt>(spans[i].n);
      rc = deflate(&zs_, i + 1 == count ? Z_FINISH : Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR || zs_.avail_in != 0) return false;
      zcrc = crc32(zcrc, reinterpret_cast<const Bytef*>(spans[i].p), static_cast<uInt>(spans[i].n));
      lines += count_lines(spans[i].p, spans[i].n);
    }
    if (count == 0) rc = deflate(&zs_, Z_FINISH);
    if (rc != Z_STREAM_END) return false;
    clen = zs_.total_out;
    crc = static_cast<uint32_t>(zcrc);
  }
#endif
  size_t total = kMemberHeaderSize + clen + kMemberTrailerSize;
  format::encode_member_header(base, static_cast<uint32_t>(total), static_cast<uint32_t>(n), lines);
  format::encode_member_trailer(base + kMemberHeaderSize + clen, crc, static_cast<uint32_t>(n));
  out_size_ = total;
  return true;
}

}  // namespace dftracer
