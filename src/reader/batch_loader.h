// Batch loader: checkpoints of a trace -> event columns (docs/index.md, docs/analyzer.md). The
// business rules of loading live here, not in the Python binding, so that C++ users and the
// fuzz targets get them too.
#pragma once

#include <string>
#include <vector>

#include "reader.h"

namespace dftracer::reader {

// A parsed batch: the columns and what could not be delivered.
struct ParsedBatch {
  EventColumns columns;           // finished (Parser::finish): every column has `rows` entries
  int64_t lost_lines = 0;         // lines of damaged members / lost regions in the range
  int64_t lost_bytes = 0;         // bytes not decoded (uncompressed when known, else compressed)
  int64_t header_mismatches = 0;  // members read by plain inflation because their header lied
  std::vector<std::string> warnings;
};

// Checkpoints [first, last] (inclusive) of `trace` parsed into columns, through the process's
// index cache (open_index). The file's identity is carried into every batch: an event without
// its own host (args.hostname, a resolved args.hhash) gets the file's hostname, the one this
// batch's metadata names, else the one of the file's head (checkpoint 0: the tracer writes its
// hostname record first), whatever batch it lands in. When some fhash/hhash stays unresolved, or
// no host is known, and the file's context is not complete, the whole file's context is
// collected once (ensure_context, stored in the index) and the batch is parsed again with it.
// `args` names the args columns to build (default all; reader.h, ArgsProjection): rows, core
// columns and counts are the same whatever it is. Throws ReaderError (unreadable trace or
// index) and std::out_of_range (checkpoints outside the index).
ParsedBatch load_batch(const std::string& trace, int64_t first, int64_t last, const std::string& index_dir = "",
                       const ArgsProjection& args = {});
// Same, parsed into `out` (empty on entry): no move of the finished columns (moving a DictColumn
// rebuilds its lookup table), for callers that own the storage (the Python binding).
void load_batch_into(ParsedBatch& out, const std::string& trace, int64_t first, int64_t last,
                     const std::string& index_dir = "", const ArgsProjection& args = {});

// Per file of load_files: what the analyzer's per-file statistics need.
struct FileLoad {
  std::string path;
  std::string error;     // "" when the file was read
  bool indexed = false;  // the file was indexed: kind and sizes are set
  IndexKind kind = IndexKind::Plain;
  int64_t lines = 0, compressed_bytes = 0, uncompressed_bytes = 0, checkpoints = 0;
  int64_t rows = 0, skipped_lines = 0, lost_bytes = 0, lost_lines = 0, unresolved_hashes = 0;
  int64_t ts_out_of_range_lines = 0, negative_dur_lines = 0;  // of skipped_lines (EventColumns)
  std::vector<std::string> warnings;
};
struct FilesBatch {
  ParsedBatch batch;            // rows of every file, in order (batch.lost_* stay 0: see files)
  std::vector<FileLoad> files;  // rows and counts of each file
};
// Many small files in one batch: each indexed in memory (no SQLite file), read whole and parsed
// with its own complete context. A file that cannot be read gets `error` and no rows; never throws
// for one file's problem. `args`: as in load_batch.
FilesBatch load_files(const std::vector<std::string>& paths, const ArgsProjection& args = {});
// Same, the rows parsed into `out` (empty on entry); returns the per-file counts.
std::vector<FileLoad> load_files_into(ParsedBatch& out, const std::vector<std::string>& paths,
                                      const ArgsProjection& args = {});

// read_lines_checked with the verification rule of line-addressed reads: when a member's line
// count is only its header's claim, or disagrees with the data, the index is rebuilt with every
// member verified (build_index verify=true) and the read redone; `reindexed` says so. Throws
// ReaderError when the numbering still disagrees after re-indexing.
struct VerifiedLines {
  LinesResult result;
  bool reindexed = false;
};
VerifiedLines read_lines_verified(const std::string& trace, int64_t first_line, int64_t n_lines,
                                  const std::string& index_dir = "");

}  // namespace dftracer::reader
