// One gzip member (RFC 1952) per buffer, with the dftracer 'D''F' FEXTRA subfield. The layout
// lives in src/format/member.h (docs/format.md); this file only compresses.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>

#include "../format/member.h"
#include "dftracer/export.h"

struct libdeflate_compressor;

namespace dftracer {

using format::kMemberHeaderSize;
using format::kMemberTrailerSize;
using format::kSubfieldVersion;

// Deflate backend. Level 1 (the default) is adaptive: line_deflate (line_deflate.h: matches
// against the last 3 lines and the last line of the same name only; ~5x fewer instructions than
// libdeflate level 6 and smaller on repetitive traces) while it codes <= 20 % of a chunk's bytes
// as literals and its output, estimated from the symbol counts, stays <= 1/20 of the input
// (chunks of >= 128 KiB decide). A chunk whose first 128 KiB fail either test goes to the
// general deflater at level 6, and so do the next 1, 2, 4, ... up to 64 chunks (backoff, reset
// when line_deflate fits again).
// Levels 2..9 always use the general deflater: libdeflate (whole-buffer, 2-3x faster than zlib at
// the same level) when built with it, zlib otherwise. All write the same member layout (raw
// deflate that any inflater reads).
class DFTRACER_EXPORT MemberEncoder {
 public:
  explicit MemberEncoder(int level);
  static const char* backend();  // "libdeflate" or "zlib" (levels 2..9)
  ~MemberEncoder();
  MemberEncoder(const MemberEncoder&) = delete;
  MemberEncoder& operator=(const MemberEncoder&) = delete;
  bool ok() const { return ok_; }
  struct Span {
    const char* p;
    size_t n;
  };
  // Compresses the concatenation of spans (whole lines) into one member, kept in the encoder's
  // own buffer (member_data()/member_size(), valid until the next call). The buffers grow to the
  // largest chunk seen and are never zero-filled or shrunk (the writer's hot path). Returns
  // false on a deflate error.
  bool encode(const Span* spans, size_t count);
  const char* member_data() const { return out_.get(); }
  size_t member_size() const { return out_size_; }
  // Same, the member copied into *out (replaced).
  bool encode(const Span* spans, size_t count, std::string* out) {
    if (!encode(spans, count)) return false;
    out->assign(out_.get(), out_size_);
    return true;
  }
  bool encode(const char* data, size_t n, std::string* out) {
    Span s{data, n};
    return encode(&s, 1, out);
  }

 private:
  static void reserve(std::unique_ptr<char[]>* buf, size_t* cap, size_t n);
  z_stream zs_{};
  libdeflate_compressor* ld_ = nullptr;  // level 1: allocated on first use
  int general_level_ = 6;
  std::unique_ptr<char[]> joined_;  // libdeflate: the spans made contiguous
  size_t joined_cap_ = 0;
  std::unique_ptr<char[]> out_;  // the last member
  size_t out_cap_ = 0, out_size_ = 0;
  bool ok_ = false;
  bool line_ = false;     // level 1: adaptive (line_deflate first)
  int general_skip_ = 0;  // level 1: chunks left that go to the general deflater
  int general_run_ = 0;   // level 1: length of the next such run (backoff)
};

// Counts '\n' bytes.
DFTRACER_EXPORT uint32_t count_lines(const char* data, size_t n);

}  // namespace dftracer
