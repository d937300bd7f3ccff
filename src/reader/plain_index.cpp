// Plain index kind: uncompressed JSON lines, a checkpoint every ~1 MiB at a line start (memchr
// line scan); a range is read with one pread.
#include <algorithm>

#include "index_strategy.h"
#include "line_tracker.h"

namespace dftracer::reader {
namespace {

void index_plain(const File& f, IndexInfo& info) {
  LineTracker t(info);
  int64_t off = 0;
  Checkpoint first;
  t.mark(first);
  while (off < f.size()) {
    size_t avail;
    char* p = t.space(1 << 20, &avail);
    size_t want = std::min<size_t>(avail, 1 << 20);
    size_t got = f.pread_full(p, want, off);
    if (got == 0) break;
    if (t.since_last_checkpoint() >= kInflateSpan && !t.pending()) {
      Checkpoint cp;
      t.mark(cp);
    }
    t.commit(got);
    off += int64_t(got);
  }
  t.finish(true);
  for (auto& c : info.checkpoints) {
    c.compressed_offset = c.uncompressed_offset;
    c.compressed_size = c.uncompressed_size;
    c.block_offset = c.uncompressed_offset;
  }
}

class PlainIndex final : public IndexStrategy {
 public:
  IndexKind kind() const override { return IndexKind::Plain; }
  void build(const File& f, IndexInfo& info, bool /*verify*/) const override {
    if (f.size() > 0) index_plain(f, info);
    info.context.scanned = true;  // the pass collected the FH/HH/SH records of every line
  }
  void read(const File& f, const IndexInfo& idx, int64_t first, int64_t last, RangeData& r) const override {
    const auto& cps = idx.checkpoints;
    int64_t off = cps[size_t(first)].uncompressed_offset;
    int64_t total = cps[size_t(last)].uncompressed_offset + cps[size_t(last)].uncompressed_size - off;
    size_t start = r.data.size();
    r.data.resize(start + size_t(total));
    size_t got = f.pread_full(&r.data[start], size_t(total), off);
    r.data.resize(start + got);
  }
  int64_t max_expansion() const override { return 1; }
};

}  // namespace

const IndexStrategy& plain_strategy() {
  static const PlainIndex s;
  return s;
}

}  // namespace dftracer::reader
