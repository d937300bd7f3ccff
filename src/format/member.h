// The gzip member layout of compressed traces (docs/format.md, "Compression: a concatenation of
// gzip members"): every tracer buffer becomes one RFC 1952 member whose FEXTRA field holds one
// 'D''F' subfield with the member's sizes and line count, so an indexer can hop from header to
// header without inflating. This header is the only place the layout is written down: the writer
// (src/core/gzip_member.cpp), the indexer (src/reader/gzip_scan.h), the C++ test oracle and, via
// the binding's encode_member(), every Python fixture use it. Header-only, C++17, no allocation.
//
// Member bytes (integers little-endian):
//   0  1f 8b 08 04     ID1 ID2, CM = 8 (deflate), FLG = FEXTRA
//   4  MTIME = 0 (4)   8 XFL = 0   9 OS = 3 (Unix)
//  10  XLEN = 20 (2)
//  12  'D' 'F'         subfield id        14 SLEN = 16 (2)
//  16  member size     header + deflate data + trailer, bytes (u32)
//  20  text size       uncompressed bytes (u32)
//  24  line count      '\n' bytes in the text (u32)
//  28  version         kSubfieldVersion (u32)
//  32  raw deflate data (RFC 1951, empty history)
//  end-8 CRC-32 of the text (u32), end-4 ISIZE = text size mod 2^32 (u32)
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace dftracer::format {

// ---- RFC 1952 ---------------------------------------------------------------------------------
inline constexpr unsigned char kGzipId1 = 0x1f;
inline constexpr unsigned char kGzipId2 = 0x8b;
inline constexpr unsigned char kMethodDeflate = 8;
// FLG bits.
inline constexpr unsigned char kFlagHeaderCrc = 2;    // FHCRC: CRC16 after the optional fields
inline constexpr unsigned char kFlagExtra = 4;        // FEXTRA: XLEN + subfields
inline constexpr unsigned char kFlagName = 8;         // FNAME: zero-terminated
inline constexpr unsigned char kFlagComment = 16;     // FCOMMENT: zero-terminated
inline constexpr unsigned char kFlagReserved = 0xe0;  // must be zero
inline constexpr unsigned char kOsUnix = 3;
inline constexpr size_t kFixedHeaderSize = 10;  // ID1 ID2 CM FLG MTIME(4) XFL OS
inline constexpr size_t kSubfieldHeadSize = 4;  // SI1 SI2 LEN(2)

// ---- our member header (offsets from the member start) ------------------------------------------
inline constexpr size_t kExtraLenOffset = 10;  // XLEN (u16)
inline constexpr uint16_t kExtraLen = 20;      // our FEXTRA field: the one 'DF' subfield
inline constexpr size_t kSubfieldOffset = 12;  // SI1 SI2
inline constexpr char kSubfieldId1 = 'D';
inline constexpr char kSubfieldId2 = 'F';
inline constexpr size_t kSubfieldLenOffset = 14;  // SLEN (u16)
inline constexpr uint16_t kSubfieldLen = 16;      // four u32 fields
inline constexpr size_t kMemberSizeOffset = 16;   // u32: whole member, bytes
inline constexpr size_t kTextSizeOffset = 20;     // u32: uncompressed bytes
inline constexpr size_t kLineCountOffset = 24;    // u32: '\n' bytes
inline constexpr size_t kVersionOffset = 28;      // u32
inline constexpr uint32_t kSubfieldVersion = 1;
inline constexpr size_t kMemberHeaderSize = 32;  // where the deflate data starts
inline constexpr size_t kMemberTrailerSize = 8;  // CRC-32, ISIZE
// Smallest member size a 'DF' field may claim: fixed header, 2 bytes of deflate, trailer.
inline constexpr uint32_t kMinMemberSize = kFixedHeaderSize + 2 + kMemberTrailerSize;

static_assert(kMemberHeaderSize == kFixedHeaderSize + 2 + kExtraLen, "header = fixed + XLEN + extra");
static_assert(kExtraLen == kSubfieldHeadSize + kSubfieldLen, "extra = one subfield");
static_assert(kVersionOffset + 4 == kMemberHeaderSize, "version is the last header field");

// ---- little-endian fields ---------------------------------------------------------------------
inline uint16_t load_u16(const unsigned char* p) noexcept { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t load_u32(const unsigned char* p) noexcept {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
inline void store_u16(unsigned char* p, uint32_t v) noexcept {
  p[0] = static_cast<unsigned char>(v);
  p[1] = static_cast<unsigned char>(v >> 8);
}
inline void store_u32(unsigned char* p, uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// The four u32 fields of the 'DF' subfield.
struct MemberFields {
  uint32_t member_size = 0;  // header + deflate data + trailer, bytes
  uint32_t text_size = 0;    // uncompressed bytes
  uint32_t lines = 0;        // '\n' bytes in the text
  uint32_t version = kSubfieldVersion;
};

// Writes the kMemberHeaderSize header bytes of one member to out[0..32).
inline void encode_member_header(unsigned char* out, uint32_t member_size, uint32_t text_size,
                                 uint32_t lines) noexcept {
  static constexpr unsigned char kFixed[kFixedHeaderSize] = {kGzipId1, kGzipId2, kMethodDeflate, kFlagExtra, 0, 0, 0,
                                                             0,        0,        kOsUnix};  // MTIME 0, XFL 0
  std::memcpy(out, kFixed, kFixedHeaderSize);
  store_u16(out + kExtraLenOffset, kExtraLen);
  out[kSubfieldOffset] = static_cast<unsigned char>(kSubfieldId1);
  out[kSubfieldOffset + 1] = static_cast<unsigned char>(kSubfieldId2);
  store_u16(out + kSubfieldLenOffset, kSubfieldLen);
  store_u32(out + kMemberSizeOffset, member_size);
  store_u32(out + kTextSizeOffset, text_size);
  store_u32(out + kLineCountOffset, lines);
  store_u32(out + kVersionOffset, kSubfieldVersion);
}

// Writes the kMemberTrailerSize trailer bytes (CRC-32 of the text, ISIZE) to out[0..8).
inline void encode_member_trailer(unsigned char* out, uint32_t crc32, uint32_t text_size) noexcept {
  store_u32(out, crc32);
  store_u32(out + 4, text_size);
}

// Result of parse_member_header.
struct MemberHeader {
  bool ok = false;            // a syntactically valid gzip member header lies in the buffer
  const char* why = nullptr;  // when !ok: what is wrong (static string)
  bool df = false;            // carries a usable 'DF' subfield (version 1, member size >= 20)
  size_t header_size = 0;     // bytes up to the deflate data (ok only)
  MemberFields fields;        // of the last 'DF' subfield of SLEN 16 (valid when df)
};

// Parses the gzip member header at p[0..n): any RFC 1952 header (FEXTRA with any subfields,
// FNAME, FCOMMENT, FHCRC), with our 'DF' fields when present. Reads nothing outside p[0..n);
// the whole header must be in the buffer (a header cut by n is !ok: "... past the buffer").
// `df` is only a claim of the header: the caller checks the sizes against the file (a member
// size smaller than header + deflate + trailer, a trailer that disagrees) before trusting them.
inline MemberHeader parse_member_header(const unsigned char* p, size_t n) noexcept {
  MemberHeader h;
  if (n < kFixedHeaderSize) {
    h.why = "shorter than the 10-byte gzip header";
    return h;
  }
  if (p[0] != kGzipId1 || p[1] != kGzipId2) {
    h.why = "no gzip magic (1f 8b)";
    return h;
  }
  if (p[2] != kMethodDeflate) {
    h.why = "compression method is not deflate";
    return h;
  }
  unsigned flg = p[3];
  if (flg & kFlagReserved) {
    h.why = "reserved FLG bits set";
    return h;
  }
  size_t pos = kFixedHeaderSize;
  if (flg & kFlagExtra) {
    if (pos + 2 > n) {
      h.why = "FEXTRA length past the buffer";
      return h;
    }
    size_t xlen = load_u16(p + pos);
    pos += 2;
    if (pos + xlen > n) {
      h.why = "FEXTRA field past the buffer";
      return h;
    }
    size_t e = pos, end = pos + xlen;
    while (e + kSubfieldHeadSize <= end) {
      size_t slen = load_u16(p + e + 2);
      if (e + kSubfieldHeadSize + slen > end) break;  // a subfield overrunning XLEN ends the list
      if (p[e] == kSubfieldId1 && p[e + 1] == kSubfieldId2 && slen == kSubfieldLen) {
        const unsigned char* f = p + e + kSubfieldHeadSize;
        h.fields.member_size = load_u32(f);
        h.fields.text_size = load_u32(f + 4);
        h.fields.lines = load_u32(f + 8);
        h.fields.version = load_u32(f + 12);
        h.df = h.fields.version == kSubfieldVersion && h.fields.member_size >= kMinMemberSize;
      }
      e += kSubfieldHeadSize + slen;
    }
    pos = end;
  }
  for (unsigned bit : {kFlagName, kFlagComment}) {
    if (flg & bit) {
      const void* z = pos < n ? std::memchr(p + pos, 0, n - pos) : nullptr;
      if (z == nullptr) {
        h.why = bit == kFlagName ? "FNAME not terminated in the buffer" : "FCOMMENT not terminated in the buffer";
        h.df = false;
        return h;
      }
      pos = size_t(static_cast<const unsigned char*>(z) - p) + 1;
    }
  }
  if (flg & kFlagHeaderCrc) pos += 2;
  if (pos > n) {
    h.why = "FHCRC past the buffer";
    h.df = false;
    return h;
  }
  h.ok = true;
  h.header_size = pos;
  return h;
}

}  // namespace dftracer::format
