// One gzip member (RFC 1952) per buffer, with the dftracer 'D''F' FEXTRA subfield
// (docs/design.md "Gzip member format"; docs/format.md).
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>

struct libdeflate_compressor;

namespace dftracer {

constexpr size_t kMemberHeaderSize = 32;   // 10 fixed + 2 XLEN + 20 subfield
constexpr size_t kMemberTrailerSize = 8;   // CRC32 + ISIZE
constexpr uint32_t kSubfieldVersion = 1;

// Deflate backend: libdeflate (whole-buffer compression, 2-3x faster than zlib at the same level)
// when built with it, zlib otherwise. Both write the same member layout; `level` is 1..9.
class MemberEncoder {
 public:
  explicit MemberEncoder(int level);
  static const char* backend();  // "libdeflate" or "zlib" 
  ~MemberEncoder();
  MemberEncoder(const MemberEncoder&) = delete;
  MemberEncoder& operator=(const MemberEncoder&) = delete;
  bool ok() const { return ok_; }
  struct Span {
    const char* p;
    size_t n;
  };
  // Compresses the concatenation of spans (whole lines) into one member written to *out
  // (replaced). Returns false on a zlib error.
  bool encode(const Span* spans, size_t count, std::string* out);
  bool encode(const char* data, size_t n, std::string* out) {
    Span s{data, n};
    return encode(&s, 1, out);
  }

 private:
  z_stream zs_{};
  libdeflate_compressor* ld_ = nullptr;
  std::string joined_;  // libdeflate: the spans made contiguous
  bool ok_ = false;
};

// Counts '\n' bytes.
uint32_t count_lines(const char* data, size_t n);

}  // namespace dftracer
