// Whole-file statistics, separate from range reading: the context pass (ensure_context), the
// statistics pass (scan_file: counts) and per-checkpoint event statistics for
// filter push-down (checkpoint_stats). Each result is stored in the index when it can be; when
// it cannot (in-memory index, read-only or full disk) it is kept in memory with a warning.
#include <algorithm>
#include <climits>

#include "index_store.h"
#include "reader.h"

namespace dftracer::reader {
namespace {

constexpr int64_t kScanStep = 16;      // checkpoints decoded per read in the whole-file passes
constexpr size_t kMaxStatNames = 256;  // distinct categories / names kept per checkpoint

// Stores the scan results of `idx` in its index file; on failure records why in idx.warnings.
void store_scan(IndexInfo& idx) {
  if (idx.index_path.empty()) return;  // an in-memory index keeps them in memory (its warning says so)
  try {
    save_scan_results(idx);
  } catch (const ReaderError& e) {
    idx.warnings.push_back(idx.path + ": scan results kept in memory: " + e.what());
  }
}

// Distinct values of the rows' codes; false when there are too many or one holds the separator.
bool distinct_values(const DictColumn& col, std::vector<std::string>& out) {
  std::vector<char> seen(col.categories.size(), 0);
  for (int32_t c : col.codes)
    if (c >= 0 && size_t(c) < seen.size()) seen[size_t(c)] = 1;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) continue;
    if (out.size() >= kMaxStatNames || col.categories[i].find('\x1f') != std::string::npos) return false;
    out.push_back(col.categories[i]);
  }
  return true;
}

}  // namespace

void ensure_context(IndexInfo& idx) {
  if (idx.context.scanned) return;
  int64_t n = int64_t(idx.checkpoints.size());
  for (int64_t i = 0; i < n; i += kScanStep) {
    RangeData r = read_checkpoints(idx, i, std::min(n - 1, i + kScanStep - 1));
    collect_context(r.data.data(), r.data.size(), idx.context);
  }
  idx.context.scanned = true;
  if (idx.context.hostname.empty() && idx.context.hh.size() == 1) idx.context.hostname = idx.context.hh.begin()->second;
  store_scan(idx);
}

IndexInfo scan_file(const std::string& trace, const std::string& index_dir) {
  IndexInfo idx = build_index(trace, index_dir, false);
  if (idx.stats_scanned && idx.context.scanned) return idx;
  int64_t n = int64_t(idx.checkpoints.size());
  ensure_context(idx);
  // Parse everything for the counts (rows and skipped lines do not depend on args columns).
  Parser parser;
  parser.set_args_projection(ArgsProjection::only({}));
  int64_t events = 0, meta = 0, skipped = 0, lost_lines = 0, lost_bytes = 0, mismatches = 0;
  for (int64_t i = 0; i < n; i += kScanStep) {
    RangeData r = read_checkpoints(idx, i, std::min(n - 1, i + kScanStep - 1));
    EventColumns cols;
    FileContext ctx = idx.context;
    parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
    events += cols.rows;
    lost_lines += r.lost_lines;
    lost_bytes += r.lost_bytes;
    mismatches += r.header_mismatches;
    meta += int64_t(cols.metadata.size());
    skipped += cols.skipped_lines;
  }
  idx.events = events;
  idx.metadata_records = meta;
  idx.skipped_lines = skipped;
  idx.scan_lost_lines = lost_lines;
  idx.scan_lost_bytes = lost_bytes;
  idx.scan_header_mismatches = mismatches;
  idx.stats_scanned = true;
  store_scan(idx);
  return idx;
}

std::vector<CheckpointStats> checkpoint_stats(const IndexInfo& idx) {
  std::vector<CheckpointStats> out;
  try {
    if (!idx.index_path.empty() && load_checkpoint_stats(idx, out)) return out;
  } catch (const std::exception&) {  // unreadable stats are recomputed (and stored again)
  }
  out.clear();
  IndexInfo full = idx;
  ensure_context(full);  // hashes defined anywhere in the file resolve the same in every checkpoint
  Parser parser;
  parser.set_args_projection(ArgsProjection::only({}));  // only rows, ts, te, cat and name are read
  for (size_t i = 0; i < idx.checkpoints.size(); ++i) {
    CheckpointStats c;
    c.number = int64_t(i);
    RangeData r;
    if (!(idx.checkpoints[i].flags & kLost)) r = read_checkpoints(idx, int64_t(i), int64_t(i));
    if ((idx.checkpoints[i].flags & kLost) || r.lost_bytes > 0) {
      // Damaged data: unknown content, never skipped (its loss is reported when it is loaded).
      c.events = -1;
      c.min_ts = c.min_te = INT64_MIN;
      c.max_ts = c.max_te = INT64_MAX;
    } else {
      EventColumns cols;
      FileContext ctx = full.context;
      parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
      Parser::finish(cols);
      c.events = cols.rows;
      if (cols.rows > 0) {
        c.min_ts = *std::min_element(cols.ts.begin(), cols.ts.end());
        c.max_ts = *std::max_element(cols.ts.begin(), cols.ts.end());
        c.min_te = *std::min_element(cols.te.begin(), cols.te.end());
        c.max_te = *std::max_element(cols.te.begin(), cols.te.end());
      }
      c.cats_known = distinct_values(cols.cat, c.cats);
      c.names_known = distinct_values(cols.name, c.names);
      if (!c.cats_known) c.cats.clear();
      if (!c.names_known) c.names.clear();
    }
    out.push_back(std::move(c));
  }
  if (idx.index_path.empty()) return out;  // an in-memory index keeps nothing
  try {
    save_checkpoint_stats(idx, out);
  } catch (const ReaderError&) {  // not stored: recomputed next time (the results are the same)
  }
  return out;
}

}  // namespace dftracer::reader
