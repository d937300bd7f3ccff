// libFuzzer target: arbitrary bytes as a trace file (.gz) -> index, read every checkpoint, parse.
// Then index validation (docs/index.md, "Trust rules"): the last bytes of the input forge the
// SQLite index (set a checkpoint or metadata field to a chosen value, or delete checkpoints); the
// forged index is opened again and must be rejected and rebuilt, or be consistent enough that
// reading every checkpoint stays within the file (no crash, no huge allocation under ASan).
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "batch_loader.h"
#include "reader.h"

namespace {

using namespace dftracer::reader;

// Every checkpoint of `idx` read and parsed on its own, then through the batch loader (the
// analyzer's path: index cache, whole-file context rule), and a line-addressed read.
void read_all(const IndexInfo& idx) {
  int64_t n = int64_t(idx.checkpoints.size());
  for (int64_t i = 0; i < n; ++i) {
    RangeData r = read_checkpoints(idx, i, i);
    Parser p;
    FileContext ctx = idx.context;
    EventColumns cols;
    p.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
  }
  if (n) {
    ParsedBatch b = load_batch(idx.path, 0, n - 1);
    if (b.columns.ts.size() != size_t(b.columns.rows)) __builtin_trap();
    read_lines(idx, 0, 5);
  }
}

// Values a forger would try: edges, negatives, sizes beyond the file.
int64_t pick_value(uint8_t sel, int64_t file_size) {
  switch (sel % 10) {
    case 0: return 0;
    case 1: return -1;
    case 2: return -5;
    case 3: return 1000000000000LL;
    case 4: return INT64_MAX;
    case 5: return INT64_MIN;
    case 6: return file_size;
    case 7: return file_size + 1;
    case 8: return 7;
    default: return int64_t(sel) * 97;
  }
}

// Applies up to 3 forgeries described by `tail` (4 bytes each) to the index at `ipath`.
void forge(const std::string& ipath, const uint8_t* tail, size_t n, int64_t file_size) {
  static const char* kColumns[] = {"compressed_offset", "compressed_size", "uncompressed_offset",
                                   "uncompressed_size", "first_line",      "num_lines",
                                   "bit_offset",        "block_offset",    "flags"};
  static const char* kMeta[] = {"kind", "lines", "uncompressed_bytes", "lost_bytes", "truncated_bytes", "events"};
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(ipath.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  for (size_t k = 0; k + 4 <= n && k < 12; k += 4) {
    uint8_t op = tail[k], row = tail[k + 1], col = tail[k + 2], val = tail[k + 3];
    char sql[256];
    if (op % 4 == 0) {
      std::snprintf(sql, sizeof sql, "UPDATE checkpoints SET %s = %lld WHERE number = %d", kColumns[col % 9],
                    static_cast<long long>(pick_value(val, file_size)), row % 8);
    } else if (op % 4 == 1) {
      std::snprintf(sql, sizeof sql, "DELETE FROM checkpoints WHERE number = %d", row % 8);
    } else if (op % 4 == 2) {
      const char* key = kMeta[col % 6];
      if (std::strcmp(key, "kind") == 0)
        std::snprintf(sql, sizeof sql, "UPDATE metadata SET value = '%s' WHERE key = 'kind'",
                      val % 3 == 0   ? "member"
                      : val % 3 == 1 ? "inflate"
                                     : "plain");
      else
        std::snprintf(sql, sizeof sql, "UPDATE metadata SET value = %lld WHERE key = '%s'",
                      static_cast<long long>(pick_value(val, file_size)), key);
    } else {
      std::snprintf(sql, sizeof sql, "UPDATE checkpoints SET %s = '%c' WHERE number = %d", kColumns[col % 9],
                    'a' + val % 26, row % 8);
    }
    sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  }
  sqlite3_close(db);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::string dir = [] {
    char t[] = "/tmp/dft-fuzz-XXXXXX";
    return std::string(mkdtemp(t));
  }();
  std::string path = dir + "/in.pfw.gz";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    IndexInfo idx = build_index(path, "", true);
    read_all(idx);
    if (!idx.index_path.empty() && size >= 4) {
      size_t tail = std::min<size_t>(12, size);
      forge(idx.index_path, data + size - tail, tail, int64_t(size));
      IndexInfo again = build_index(path, "", false);
      // Trusted or rebuilt, it must describe the same file.
      if (again.lines != idx.lines || again.uncompressed_bytes != idx.uncompressed_bytes) __builtin_trap();
      read_all(again);
    }
  } catch (const ReaderError&) {
  }
  ::unlink((path + ".zindex").c_str());
  return 0;
}
