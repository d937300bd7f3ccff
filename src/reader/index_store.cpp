// SQLite storage of an index: schema, save, load, scan results, windows, checkpoint stats
// (index_store.h). Every return code is checked.
#include "index_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>

#include "index_trust.h"

namespace dftracer::reader {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void exec_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw ReaderError(std::string(sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "index") +
                      ": index: " + m);
  }
}

// One connection. close() reports a failed close; the destructor (after an exception) closes
// quietly: any open transaction is rolled back by SQLite, the error that ended it was thrown.
struct Db {
  sqlite3* db = nullptr;
  std::string path;
  Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    if (db) (void)sqlite3_close_v2(db);
  }
  void exec(const char* sql) { exec_sql(db, sql); }
  void close() {
    int rc = sqlite3_close(db);
    if (rc != SQLITE_OK) throw ReaderError(path + ": cannot close index: " + sqlite3_errstr(rc));
    db = nullptr;
  }
};

// A prepared statement. Binds, steps, resets and finalize() throw ReaderError on failure; the
// destructor finalizes one that an exception left open (its error was already thrown).
struct Stmt {
  sqlite3_stmt* st = nullptr;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK)
      throw ReaderError(std::string("index: ") + sqlite3_errmsg(db));
  }
  ~Stmt() {
    if (st) (void)sqlite3_finalize(st);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK)
      throw ReaderError(std::string("index: ") + what + ": " + sqlite3_errmsg(sqlite3_db_handle(st)));
  }
  void bind(int i, int64_t v) { check(sqlite3_bind_int64(st, i, v), "bind"); }
  void bind(int i, const std::string& v) {
    check(sqlite3_bind_text(st, i, v.data(), int(v.size()), SQLITE_TRANSIENT), "bind");
  }
  void bind_blob(int i, const void* p, size_t n) {
    check(sqlite3_bind_blob(st, i, p, int(n), SQLITE_TRANSIENT), "bind");
  }
  void bind_null(int i) { check(sqlite3_bind_null(st, i), "bind"); }
  bool step() {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw ReaderError(std::string("index: ") + sqlite3_errmsg(sqlite3_db_handle(st)));
  }
  void reset() {
    check(sqlite3_reset(st), "reset");
    check(sqlite3_clear_bindings(st), "clear bindings");
  }
  void finalize() {
    int rc = sqlite3_finalize(st);
    st = nullptr;
    if (rc != SQLITE_OK) throw ReaderError(std::string("index: finalize: ") + sqlite3_errstr(rc));
  }
  // Text of column i ("" for NULL); `ok` is cleared when the column is not TEXT.
  std::string text(int i, bool* ok = nullptr) const {
    if (ok && sqlite3_column_type(st, i) != SQLITE_TEXT) *ok = false;
    const unsigned char* p = sqlite3_column_text(st, i);
    return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(st, i))) : std::string();
  }
  // Integer column i; `ok` is cleared when it is not INTEGER.
  int64_t integer(int i, bool* ok) const {
    if (sqlite3_column_type(st, i) != SQLITE_INTEGER) *ok = false;
    return sqlite3_column_int64(st, i);
  }
};

// Runs `body` in one transaction of `d`: COMMIT when it returns; when it throws, the connection
// is closed by its owner, which rolls the transaction back (the error is rethrown).
template <typename F>
void in_transaction(Db& d, const char* begin, F&& body) {
  d.exec(begin);
  body();
  d.exec("COMMIT");
}

// Tables are created with IF NOT EXISTS and read by name: a later version may add tables or
// metadata keys that this reader ignores; a change old readers would misread bumps
// kIndexFormatVersion (docs/index.md, "Schema").
const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS metadata(key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS checkpoints(
  number INTEGER PRIMARY KEY, compressed_offset INTEGER, compressed_size INTEGER,
  uncompressed_offset INTEGER, uncompressed_size INTEGER, first_line INTEGER, num_lines INTEGER,
  bit_offset INTEGER, block_offset INTEGER, flags INTEGER, window BLOB, lost_lines INTEGER);
CREATE TABLE IF NOT EXISTS context(kind TEXT, hash TEXT, value TEXT, PRIMARY KEY(kind, hash));
)SQL";

void put_meta(sqlite3* db, const char* key, int64_t v) {
  Stmt s(db, "INSERT OR REPLACE INTO metadata(key, value) VALUES(?, ?)");
  s.bind(1, std::string(key));
  s.bind(2, v);
  s.step();
  s.finalize();
}
void put_meta(sqlite3* db, const char* key, const std::string& v) {
  Stmt s(db, "INSERT OR REPLACE INTO metadata(key, value) VALUES(?, ?)");
  s.bind(1, std::string(key));
  s.bind(2, v);
  s.step();
  s.finalize();
}

// Context rows: `map_name` is the stored `kind` column of table context ("FH" | "HH" | "SH").
void write_context(sqlite3* db, const FileContext& ctx) {
  Stmt s(db, "INSERT OR REPLACE INTO context(kind, hash, value) VALUES(?, ?, ?)");
  auto put = [&](const char* map_name, const std::unordered_map<std::string, std::string>& m) {
    for (auto& [k, v] : m) {
      s.reset();
      s.bind(1, std::string(map_name));
      s.bind(2, k);
      s.bind(3, v);
      s.step();
    }
  };
  put("FH", ctx.fh);
  put("HH", ctx.hh);
  put("SH", ctx.sh);
  s.finalize();
  put_meta(db, "context_scanned", int64_t(ctx.scanned));
  put_meta(db, "hostname", ctx.hostname);
}

void write_stats(sqlite3* db, const IndexInfo& info) {
  put_meta(db, "stats_scanned", int64_t(info.stats_scanned));
  put_meta(db, "events", info.events);
  put_meta(db, "metadata_records", info.metadata_records);
  put_meta(db, "skipped_lines", info.skipped_lines);
  put_meta(db, "scan_lost_lines", info.scan_lost_lines);
  put_meta(db, "scan_lost_bytes", info.scan_lost_bytes);
  put_meta(db, "scan_header_mismatches", info.scan_header_mismatches);
}

void open_db(Db& d, const std::string& path, bool write) {
  // Readers open read-write where they may: the last connection of a WAL database deletes its
  // -wal/-shm files on close only if it can write; a read-only one leaves them beside the trace.
  // O_NOFOLLOW: an index path that is a symbolic link is never opened.
  int flags = write ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
                    : (::access(path.c_str(), W_OK) == 0 ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
  d.path = path;
  int rc = sqlite3_open_v2(path.c_str(), &d.db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK)
    throw ReaderError(path + ": cannot open index: " + (d.db ? sqlite3_errmsg(d.db) : sqlite3_errstr(rc)));
  if (sqlite3_busy_timeout(d.db, 30000) != SQLITE_OK) throw ReaderError(path + ": " + sqlite3_errmsg(d.db));
}

std::atomic<int> g_tmp_counter{0};

void remove_db_files(const std::string& p) {
  for (const char* suf : {"", "-wal", "-shm", "-journal"}) ::unlink((p + suf).c_str());
}

}  // namespace

// Writes the index to a private temp file (O_EXCL|O_NOFOLLOW) in WAL mode, then renames it over
// `info.index_path`. On any failure nothing is left behind and ReaderError is thrown.
void save_index(const IndexInfo& info, const File& f, const Fingerprint& fp) {
  std::string tmp = info.index_path + "-tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++);
  remove_db_files(tmp);
  try {
    // Create the file ourselves: a name planted as a symbolic link or a file is never written through.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw ReaderError(tmp + ": cannot create index: " + std::strerror(errno));
    ::close(fd);
    Db d;
    open_db(d, tmp, true);
    // A private temp file renamed into place: no fsync and no rollback journal while building
    // (one transaction); the file is switched to WAL mode before the rename (docs/index.md).
    d.exec("PRAGMA synchronous=OFF; PRAGMA journal_mode=OFF; PRAGMA locking_mode=EXCLUSIVE;");
    d.exec("BEGIN");
    d.exec(kSchema);
    put_meta(d.db, "format_version", int64_t(kIndexFormatVersion));
    put_meta(d.db, "trace_path", info.path);
    put_meta(d.db, "size", info.size);
    put_meta(d.db, "mtime_ns", info.mtime_ns);
    put_meta(d.db, "dev", int64_t(f.dev()));
    put_meta(d.db, "ino", int64_t(f.ino()));
    put_meta(d.db, "head_crc", fp.head_crc);
    put_meta(d.db, "tail_crc", fp.tail_crc);
    put_meta(d.db, "kind", std::string(index_kind_name(info.kind)));
    put_meta(d.db, "lines", info.lines);
    put_meta(d.db, "uncompressed_bytes", info.uncompressed_bytes);
    put_meta(d.db, "truncated_bytes", info.truncated_bytes);
    put_meta(d.db, "lost_bytes", info.lost_bytes);
    Stmt s(d.db, "INSERT INTO checkpoints VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    std::vector<unsigned char> zbuf;
    for (auto& c : info.checkpoints) {
      s.reset();
      s.bind(1, c.number);
      s.bind(2, c.compressed_offset);
      s.bind(3, c.compressed_size);
      s.bind(4, c.uncompressed_offset);
      s.bind(5, c.uncompressed_size);
      s.bind(6, c.first_line);
      s.bind(7, c.num_lines);
      s.bind(8, int64_t(c.bit_offset));
      s.bind(9, c.block_offset);
      s.bind(10, int64_t(c.flags));
      if (!c.window.empty()) {
        uLongf zl = compressBound(uLong(c.window.size()));
        zbuf.resize(zl);
        if (compress2(zbuf.data(), &zl, reinterpret_cast<const Bytef*>(c.window.data()), uLong(c.window.size()), 6) !=
            Z_OK)
          throw ReaderError("index: cannot compress a checkpoint window");
        s.bind_blob(11, zbuf.data(), zl);
      } else {
        s.bind_null(11);
      }
      s.bind(12, c.lost_lines);
      s.step();
    }
    s.finalize();
    write_context(d.db, info.context);
    write_stats(d.db, info);
    d.exec("COMMIT");
    d.exec("PRAGMA journal_mode=WAL;");
    d.exec("PRAGMA locking_mode=NORMAL;");
    d.close();
  } catch (...) {
    remove_db_files(tmp);
    throw;
  }
  ::unlink((tmp + "-wal").c_str());
  ::unlink((tmp + "-shm").c_str());
  if (::rename(tmp.c_str(), info.index_path.c_str()) != 0) {
    int e = errno;
    remove_db_files(tmp);
    throw ReaderError(info.index_path + ": cannot write index: " + std::strerror(e));
  }
}

namespace {
// Strict decimal integer (the whole text).
bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}
}  // namespace

// Loads the index at info.index_path into `info`. Returns "" on success, else why it is not
// used: "absent" when there is no index file, otherwise the reason the index is rejected.
std::string load_index(IndexInfo& info, const File& f, const Fingerprint& fp, bool prefix) {
  struct stat st;
  if (::lstat(info.index_path.c_str(), &st) != 0) return "absent";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid()) return "owned by uid " + str(int64_t(st.st_uid)) + ", not by this user";
  try {
    Db d;
    open_db(d, info.index_path, false);
    std::map<std::string, std::string> meta;
    {
      Stmt s(d.db, "SELECT key, value FROM metadata");
      while (s.step()) meta[s.text(0)] = s.text(1);
    }
    std::string bad;
    auto geti = [&](const char* k) -> int64_t {
      int64_t v = 0;
      auto it = meta.find(k);
      if (it == meta.end() || !parse_int(it->second, &v)) {
        if (bad.empty()) bad = std::string("metadata '") + k + "' missing or not an integer";
      }
      return v;
    };
    // Stale (rebuilt without a warning): another format version, or the trace was moved,
    // replaced, copied or changed since it was indexed.
    if (geti("format_version") != kIndexFormatVersion) return "stale (format version differs)";
    if (meta["trace_path"] != info.path) return "stale (written for another path)";
    if (geti("size") != f.size() || (!prefix && geti("mtime_ns") != f.mtime_ns())) {
      info.size = geti("size");  // (build_index's allow_grown: the size it was written for)
      return "stale (size or mtime changed)";
    }
    if (uint64_t(geti("dev")) != f.dev() || uint64_t(geti("ino")) != f.ino())
      return "stale (the trace was replaced or copied: device/inode differ)";
    if (geti("head_crc") != fp.head_crc || geti("tail_crc") != fp.tail_crc)
      return "written for other content (first/last 4 KiB checksums differ)";
    if (!parse_index_kind(meta["kind"], &info.kind)) return "unknown kind '" + meta["kind"] + "'";
    info.size = f.size();
    info.mtime_ns = f.mtime_ns();
    info.lines = geti("lines");
    info.uncompressed_bytes = geti("uncompressed_bytes");
    info.truncated_bytes = geti("truncated_bytes");
    info.lost_bytes = geti("lost_bytes");
    info.compressed_bytes = f.size();
    info.context.scanned = geti("context_scanned") != 0;
    info.context.hostname = meta["hostname"];
    info.stats_scanned = geti("stats_scanned") != 0;
    info.events = geti("events");
    info.metadata_records = geti("metadata_records");
    info.skipped_lines = geti("skipped_lines");
    info.scan_lost_lines = geti("scan_lost_lines");
    info.scan_lost_bytes = geti("scan_lost_bytes");
    info.scan_header_mismatches = geti("scan_header_mismatches");
    if (!bad.empty()) return bad;
    {
      Stmt n(d.db, "SELECT count(*) FROM checkpoints");
      if (!n.step()) return "no checkpoint count";
      if (sqlite3_column_int64(n.st, 0) > f.size() + 1) return "more checkpoints than file bytes";
    }
    Stmt s(d.db,
           "SELECT number, compressed_offset, compressed_size, uncompressed_offset, uncompressed_size, "
           "first_line, num_lines, bit_offset, block_offset, flags, window IS NOT NULL, lost_lines "
           "FROM checkpoints ORDER BY number");
    bool ok = true;
    while (s.step()) {
      Checkpoint c;
      c.number = s.integer(0, &ok);
      c.compressed_offset = s.integer(1, &ok);
      c.compressed_size = s.integer(2, &ok);
      c.uncompressed_offset = s.integer(3, &ok);
      c.uncompressed_size = s.integer(4, &ok);
      c.first_line = s.integer(5, &ok);
      c.num_lines = s.integer(6, &ok);
      int64_t bit = s.integer(7, &ok);
      c.block_offset = s.integer(8, &ok);
      int64_t flags = s.integer(9, &ok);
      c.has_window = sqlite3_column_int(s.st, 10) != 0;  // loaded on demand by load_window
      c.lost_lines = s.integer(11, &ok);
      if (!ok) return "checkpoint " + str(int64_t(info.checkpoints.size())) + ": a field is not an integer";
      if (bit < 0 || bit > 7 || flags < 0 || flags > kAllCheckpointFlags || c.lost_lines < 0)
        return "checkpoint " + str(c.number) + ": field out of range";
      c.bit_offset = int(bit);
      c.flags = int(flags);
      if (c.number != int64_t(info.checkpoints.size()))
        return "checkpoint numbers are not 0, 1, 2, ... (checkpoint " + str(int64_t(info.checkpoints.size())) +
               " missing)";
      if (c.flags & kLost) info.lost_lines += c.lost_lines;
      if (c.flags & kHeaderMismatch) info.header_mismatches += 1;
      info.checkpoints.push_back(std::move(c));
    }
    Stmt cs(d.db, "SELECT kind, hash, value FROM context");
    while (cs.step()) {
      std::string map_name = cs.text(0, &ok);  // stored as column `kind`
      if (map_name != "FH" && map_name != "HH" && map_name != "SH") return "context row of unknown kind";
      auto& m = map_name == "FH" ? info.context.fh : map_name == "HH" ? info.context.hh : info.context.sh;
      m[cs.text(1, &ok)] = cs.text(2, &ok);
    }
    if (!ok) return "a text field is not text";
    return validate_index(info, f);
  } catch (const std::exception& e) {
    return std::string("unreadable (") + e.what() + ")";
  }
}

Fingerprint fingerprint(const File& f) {
  constexpr int64_t kSpan = 4096;
  unsigned char buf[kSpan] = {};
  Fingerprint fp;
  int64_t n = std::min(kSpan, f.size());
  size_t got = f.pread_full(buf, size_t(n), 0);
  fp.head_crc = int64_t(crc32(0, buf, uInt(got)));
  got = f.pread_full(buf, size_t(n), f.size() - n);
  fp.tail_crc = int64_t(crc32(0, buf, uInt(got)));
  return fp;
}


std::string load_window(const IndexInfo& idx, int64_t number) {
  const Checkpoint& c = idx.checkpoints.at(size_t(number));
  if (!c.window.empty() || !c.has_window) return c.window;
  if (idx.index_path.empty()) throw ReaderError(idx.path + ": window of checkpoint " + str(number) + " missing");
  Db d;
  open_db(d, idx.index_path, false);
  Stmt s(d.db, "SELECT window FROM checkpoints WHERE number = ?");
  s.bind(1, number);
  if (!s.step() || sqlite3_column_type(s.st, 0) != SQLITE_BLOB)
    throw ReaderError(idx.index_path + ": window of checkpoint " + str(number) + " missing");
  const void* b = sqlite3_column_blob(s.st, 0);
  int bl = sqlite3_column_bytes(s.st, 0);
  std::string w(size_t(kWindowBytes), '\0');
  uLongf wl = kWindowBytes;
  if (uncompress(reinterpret_cast<Bytef*>(w.data()), &wl, static_cast<const Bytef*>(b), uLong(bl)) != Z_OK)
    throw ReaderError(idx.index_path + ": corrupt window of checkpoint " + str(number));
  w.resize(wl);
  s.finalize();
  d.close();
  return w;
}

void save_scan_results(const IndexInfo& info) {
  Db d;
  open_db(d, info.index_path, true);
  d.exec("PRAGMA journal_mode=WAL;");
  in_transaction(d, "BEGIN IMMEDIATE", [&] {
    write_context(d.db, info.context);
    write_stats(d.db, info);
  });
  d.close();
}

// ---- per-checkpoint event statistics (filter push-down) ----------------------------------------
// Table checkpoint_stats (created on demand; an index without it simply has no stats yet):
// per checkpoint the number of events, min/max of ts and te (µs) and the distinct categories and
// names ('\x1f'-joined; NULL when unknown: too many distinct values or one holds '\x1f').
// The index file is replaced when its trace changes, so the stats are never stale.

namespace {
const char* kStatsSchema = R"SQL(
CREATE TABLE IF NOT EXISTS checkpoint_stats(
  number INTEGER PRIMARY KEY, events INTEGER, min_ts INTEGER, max_ts INTEGER, min_te INTEGER,
  max_te INTEGER, cats TEXT, names TEXT);
)SQL";

std::string join_values(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += '\x1f';
    s += v[i];
  }
  return s;
}
}  // namespace

bool load_checkpoint_stats(const IndexInfo& idx, std::vector<CheckpointStats>& out) {
  Db d;
  open_db(d, idx.index_path, false);
  {
    Stmt probe(d.db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='checkpoint_stats'");
    if (!probe.step()) return false;
    probe.finalize();
  }
  Stmt s(d.db,
         "SELECT number, events, min_ts, max_ts, min_te, max_te, cats, names FROM checkpoint_stats ORDER BY number");
  out.clear();
  while (s.step()) {
    CheckpointStats c;
    c.number = sqlite3_column_int64(s.st, 0);
    c.events = sqlite3_column_int64(s.st, 1);
    c.min_ts = sqlite3_column_int64(s.st, 2);
    c.max_ts = sqlite3_column_int64(s.st, 3);
    c.min_te = sqlite3_column_int64(s.st, 4);
    c.max_te = sqlite3_column_int64(s.st, 5);
    for (int k = 0; k < 2; ++k) {
      bool& known = k == 0 ? c.cats_known : c.names_known;
      auto& vals = k == 0 ? c.cats : c.names;
      if (sqlite3_column_type(s.st, 6 + k) == SQLITE_NULL) {
        known = false;
        continue;
      }
      known = true;
      std::string t = s.text(6 + k);
      size_t p = 0;
      while (!t.empty() && p <= t.size()) {
        size_t q = t.find('\x1f', p);
        if (q == std::string::npos) q = t.size();
        vals.push_back(t.substr(p, q - p));
        p = q + 1;
      }
    }
    if (c.number != int64_t(out.size())) return false;
    out.push_back(std::move(c));
  }
  s.finalize();
  d.close();
  return out.size() == idx.checkpoints.size();
}

void save_checkpoint_stats(const IndexInfo& idx, const std::vector<CheckpointStats>& stats) {
  Db d;
  open_db(d, idx.index_path, true);
  d.exec("PRAGMA journal_mode=WAL;");
  in_transaction(d, "BEGIN IMMEDIATE", [&] {
    d.exec(kStatsSchema);
    d.exec("DELETE FROM checkpoint_stats");
    Stmt s(d.db, "INSERT INTO checkpoint_stats VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    for (auto& c : stats) {
      s.reset();
      s.bind(1, c.number);
      s.bind(2, c.events);
      s.bind(3, c.min_ts);
      s.bind(4, c.max_ts);
      s.bind(5, c.min_te);
      s.bind(6, c.max_te);
      if (c.cats_known) s.bind(7, join_values(c.cats));
      else s.bind_null(7);
      if (c.names_known) s.bind(8, join_values(c.names));
      else s.bind_null(8);
      s.step();
    }
    s.finalize();
  });
  d.close();
}

}  // namespace dftracer::reader
