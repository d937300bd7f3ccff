// One interface for the three index kinds (index_kind.h): how a kind builds its checkpoints and
// how it decodes a range of them. Implementations: member_index.cpp, inflate_index.cpp,
// plain_index.cpp. Internal to src/reader.
#pragma once

#include <string>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

class IndexStrategy {
 public:
  virtual ~IndexStrategy() = default;
  virtual IndexKind kind() const = 0;
  // Fills info.checkpoints (numbers not yet set), lines, uncompressed_bytes and the loss counters
  // (truncated_bytes, lost_bytes, lost_lines, header_mismatches) from the file, and the context
  // when the pass sees every line. `verify` (member kind): inflate every member and compare its
  // 'DF' header with the data. Throws ReaderError on I/O errors.
  virtual void build(const File& f, IndexInfo& info, bool verify) const = 0;
  // Appends the whole lines of checkpoints [first, last] to r.data and counts in r what cannot be
  // delivered (damaged members are never delivered). The caller checked the range and that the
  // checkpoints' sizes fit the file (range_reader.cpp).
  virtual void read(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) const = 0;
  // Largest number of output bytes one compressed byte can give (bounds every allocation).
  virtual int64_t max_expansion() const { return kMaxInflateRatio; }
};

// The strategy of `kind` (static instances).
const IndexStrategy& index_strategy(IndexKind kind);

// Kind for the file's first bytes: member when the first gzip header has the 'DF' subfield,
// inflate for other gzip, plain otherwise (an empty ".gz" file is member kind). Throws
// ReaderError for a non-empty ".gz"/".gzip" file that is not gzip.
IndexKind detect_index_kind(const File& f, const std::string& path);

// "<path>: checkpoint N (compressed offset O)", the prefix of the reader's warnings.
std::string checkpoint_where(const IndexInfo& idx, const Checkpoint& c);

}  // namespace dftracer::reader
