// Kind detection and the strategy table (index_strategy.h).
#include "index_strategy.h"

#include <cstring>

#include "gzip_scan.h"

namespace dftracer::reader {

const IndexStrategy& member_strategy();   // member_index.cpp
const IndexStrategy& inflate_strategy();  // inflate_index.cpp
const IndexStrategy& plain_strategy();    // plain_index.cpp

const IndexStrategy& index_strategy(IndexKind kind) {
  switch (kind) {
    case IndexKind::Member: return member_strategy();
    case IndexKind::Inflate: return inflate_strategy();
    case IndexKind::Plain: break;
  }
  return plain_strategy();
}

namespace {
bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}
}  // namespace

IndexKind detect_index_kind(const File& f, const std::string& path) {
  unsigned char hb[512];
  size_t got = f.pread_full(hb, sizeof hb, 0);
  if (got == 0) return ends_with(path, ".gz") ? IndexKind::Member : IndexKind::Plain;
  if (got >= 2 && hb[0] == format::kGzipId1 && hb[1] == format::kGzipId2) {
    MemberHeader h = parse_member_header(hb, got);
    return h.ok && h.df ? IndexKind::Member : IndexKind::Inflate;
  }
  if (ends_with(path, ".gz") || ends_with(path, ".gzip"))
    throw ReaderError(path + ": not a gzip file (bad magic bytes)");
  return IndexKind::Plain;
}

std::string checkpoint_where(const IndexInfo& idx, const Checkpoint& c) {
  return idx.path + ": checkpoint " + std::to_string(c.number) + " (compressed offset " +
         std::to_string(c.compressed_offset) + ")";
}

}  // namespace dftracer::reader
