// SQLite storage of an index (docs/index.md, "Schema"). Every SQLite return code is checked: a
// failed open, prepare, bind, step, reset, finalize or exec throws ReaderError naming the index
// file; callers turn that into a rebuild (load) or the documented in-memory fallback (save).
// Internal to src/reader.
#pragma once

#include <string>
#include <vector>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

// A cheap content fingerprint: CRC-32 of the first and of the last 4 KiB of the trace. With
// (st_dev, st_ino), size and mtime it ties an index to one file's bytes.
struct Fingerprint {
  int64_t head_crc = 0, tail_crc = 0;
};
Fingerprint fingerprint(const File& f);

// Writes `info` to a private temp file (O_EXCL|O_NOFOLLOW), switched to WAL mode, then renamed
// over info.index_path. On any failure nothing is left behind and ReaderError is thrown.
void save_index(const IndexInfo& info, const File& f, const Fingerprint& fp);

// Loads the index at info.index_path into `info` and checks it (index_trust.h). Returns "" when
// it can be used, "absent" when there is no index file, "stale ..." when the trace changed since,
// otherwise why it is rejected (damaged or forged); when stale, info.size is the size it was
// written for. `prefix`: `f` is limited to that size (File::limit, a trace still being written)
// and its mtime is not compared. Never throws.
std::string load_index(IndexInfo& info, const File& f, const Fingerprint& fp, bool prefix = false);

// Stores the context and the scan statistics of `info` (file_scan.cpp) into its existing index
// file in one transaction. Throws ReaderError when the index cannot be written.
void save_scan_results(const IndexInfo& info);

// Per-checkpoint statistics stored in table checkpoint_stats: false when the table is absent or
// does not cover every checkpoint of `idx` (then `out` is unspecified). Throws ReaderError when
// the index cannot be read.
bool load_checkpoint_stats(const IndexInfo& idx, std::vector<CheckpointStats>& out);
// Replaces table checkpoint_stats of the index file. Throws ReaderError when it cannot be written.
void save_checkpoint_stats(const IndexInfo& idx, const std::vector<CheckpointStats>& stats);

}  // namespace dftracer::reader
