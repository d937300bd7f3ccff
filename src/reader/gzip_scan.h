// Gzip member scanning (RFC 1952) for the indexer: header parsing, finding the next member start,
// and inflating one member on its own. Internal to src/reader.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../format/member.h"
#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

// Member headers are parsed by src/format/member.h (the one description of the layout, shared
// with the writer): format::parse_member_header gives ok/df/header_size and the 'DF' fields,
// which are claims until member_index.cpp checked them against the file.
using format::MemberHeader;
using format::parse_member_header;

// Offset of the next plausible gzip member start at or after `from`; -1 if none.
int64_t find_gzip_header(const File& f, int64_t from);

// Offset of the next gzip header with a 'DF' subfield whose member fits the file; -1 if none.
int64_t find_df_header(const File& f, int64_t from);

// One member inflated on its own (any gzip header) with zlib's CRC32/ISIZE check. Memory is
// bounded (chunks of output; context lines are collected as they complete).
struct MemberInflate {
  int64_t compressed_size = -1;  // bytes with header and trailer; -1 if the file ends first
  int64_t bytes = 0;             // uncompressed bytes decoded
  int64_t whole_line_bytes = 0;  // bytes up to and including the last '\n'
  int64_t newlines = 0;          // '\n' bytes decoded
  bool corrupt = false;          // bad data, CRC32 or ISIZE
};
// Inflates the member at `off`; FH/HH/SH records of its lines are added to `ctx` only when the
// member passes its check.
MemberInflate inflate_member(const File& f, int64_t off, FileContext& ctx);

}  // namespace dftracer::reader
