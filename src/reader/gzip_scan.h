// Gzip member scanning (RFC 1952) for the indexer: header parsing, finding the next member start,
// and inflating one member on its own. Internal to src/reader.
#pragma once

#include <cstddef>
#include <cstdint>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

inline uint32_t read_le32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// A gzip member header; the 'DF' fields are claims, checked before use (member_index.cpp).
struct GzipHeader {
  bool ok = false;          // a syntactically valid gzip header
  bool df = false;          // carries our 'DF' subfield (version 1, plausible compressed size)
  int64_t header_len = 0;   // bytes up to the deflate data
  uint32_t compressed_size = 0;    // 'DF': whole member (header + deflate + trailer), bytes
  uint32_t uncompressed_size = 0;  // 'DF': bytes of text
  uint32_t lines = 0;              // 'DF': '\n' bytes in the text
  uint32_t version = 0;            // 'DF': layout version
};

// Parses a gzip member header from p[0..n). Needs the whole header in the buffer.
GzipHeader parse_gzip_header(const unsigned char* p, size_t n);

// Offset of the next plausible gzip member start at or after `from`; -1 if none.
int64_t find_gzip_header(const File& f, int64_t from);

// Offset of the next gzip header with a 'DF' subfield whose member fits the file; -1 if none.
int64_t find_df_header(const File& f, int64_t from);

// One member inflated on its own (any gzip header) with zlib's CRC32/ISIZE check. Memory is
// bounded (chunks of output; context lines are collected as they complete).
struct MemberInflate {
  int64_t compressed_size = -1;    // bytes with header and trailer; -1 if the file ends first
  int64_t bytes = 0;               // uncompressed bytes decoded
  int64_t whole_line_bytes = 0;    // bytes up to and including the last '\n'
  int64_t newlines = 0;            // '\n' bytes decoded
  bool corrupt = false;            // bad data, CRC32 or ISIZE
};
// Inflates the member at `off`; FH/HH/SH records of its lines are added to `ctx` only when the
// member passes its check.
MemberInflate inflate_member(const File& f, int64_t off, FileContext& ctx);

}  // namespace dftracer::reader
