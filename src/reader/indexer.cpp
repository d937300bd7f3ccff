// build_index: load a trusted index or build one with the file's strategy and save it; the
// in-memory variant for small files (reader.h).
#include "index_location.h"
#include "index_store.h"
#include "index_strategy.h"
#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {
namespace {

IndexInfo build_fresh(const std::string& path, const File& f, bool verify) {
  IndexInfo info;
  info.path = path;
  info.size = f.size();
  info.mtime_ns = f.mtime_ns();
  info.dev = f.dev();
  info.ino = f.ino();
  info.compressed_bytes = f.size();
  info.rebuilt = true;
  info.kind = detect_index_kind(f, path);
  index_strategy(info.kind).build(f, info, verify);
  if (f.size() == 0) info.context.scanned = true;
  for (size_t i = 0; i < info.checkpoints.size(); ++i) {
    info.checkpoints[i].number = int64_t(i);
    info.checkpoints[i].has_window = !info.checkpoints[i].window.empty();
  }
  if (info.context.hostname.empty() && info.context.hh.size() == 1)
    info.context.hostname = info.context.hh.begin()->second;
  return info;
}

}  // namespace

IndexInfo build_index(const std::string& trace, const std::string& index_dir, bool force, bool verify,
                      bool allow_grown) {
  std::string path = abs_path(trace);
  IndexLocation loc = locate_index(path, index_dir);
  File f(path);
  Fingerprint fp = fingerprint(f);
  std::string rejected;
  if (!loc.path.empty() && !force && !verify) {
    IndexInfo info;
    info.path = path;
    info.index_path = loc.path;
    rejected = load_index(info, f, fp);
    if (rejected.empty()) {
      info.dev = f.dev();
      info.ino = f.ino();
      return info;
    }
    if (allow_grown && rejected.rfind("stale (size", 0) == 0 && info.size > 0 && info.size < f.size()) {
      // Still being written: the stored index of its first info.size bytes, if those bytes are
      // the ones indexed (same file, same first/last 4 KiB before that size, trust rules).
      File g(path);
      g.limit(info.size);
      IndexInfo pre;
      pre.path = path;
      pre.index_path = loc.path;
      if (g.dev() == f.dev() && g.ino() == f.ino() && load_index(pre, g, fingerprint(g), true).empty()) {
        pre.dev = g.dev();
        pre.ino = g.ino();
        pre.live_size = f.size();
        return pre;
      }
    }
  }
  IndexInfo info = build_fresh(path, f, verify);
  info.index_path = loc.path;
  // A stale index (the trace changed) or a missing one is rebuilt silently; any other mismatch
  // means the index was damaged or forged: say so.
  if (!rejected.empty() && rejected != "absent" && rejected.rfind("stale", 0) != 0)
    info.warnings.push_back(path + ": index " + loc.path + " rejected (" + rejected + "); rebuilt");
  if (loc.path.empty()) {
    info.warnings.push_back(path + ": index kept in memory: " + loc.warning);
    return info;
  }
  try {
    save_index(info, f, fp);
  } catch (const ReaderError& e) {
    info.warnings.push_back(path + ": index kept in memory: " + e.what());
    info.index_path.clear();
  }
  return info;
}

IndexInfo build_index_in_memory(const std::string& trace) {
  std::string path = abs_path(trace);
  File f(path);
  return build_fresh(path, f, false);
}
}  // namespace dftracer::reader
