// First difference between two parsed batches (rows, every column value and null, args columns
// with their dtypes, metadata records, counters), or "" when equal. Used by the tests and the
// parser fuzz target to check that the fast path and the simdjson path agree.
#pragma once

#include <cstring>
#include <string>

#include "reader.h"

namespace dftracer::reader {

inline std::string columns_diff(const EventColumns& a, const EventColumns& b) {
  auto row_str = [](const DictColumn& d, size_t r) {
    int32_t c = d.codes[r];
    return c < 0 ? std::string("\x01<null>") : d.categories[size_t(c)];
  };
  auto dict = [&](const char* what, const DictColumn& x, const DictColumn& y, int64_t rows) -> std::string {
    if (x.codes.size() != size_t(rows) || y.codes.size() != size_t(rows)) return std::string(what) + ": length";
    for (size_t r = 0; r < size_t(rows); ++r)
      if (row_str(x, r) != row_str(y, r)) return std::string(what) + ": row " + std::to_string(r);
    return "";
  };
  if (a.rows != b.rows) return "rows " + std::to_string(a.rows) + " vs " + std::to_string(b.rows);
  if (a.skipped_lines != b.skipped_lines) return "skipped_lines";
  if (a.unresolved_hashes != b.unresolved_hashes) return "unresolved_hashes";
  if (a.replaced_utf8_lines != b.replaced_utf8_lines) return "replaced_utf8_lines";
  if (a.skipped_examples != b.skipped_examples) return "skipped_examples";
  const std::pair<const char*, const DictColumn*> dicts[][2] = {{{"name", &a.name}, {"name", &b.name}},
                                                                {{"cat", &a.cat}, {"cat", &b.cat}},
                                                                {{"ph", &a.ph}, {"ph", &b.ph}},
                                                                {{"hostname", &a.hostname}, {"hostname", &b.hostname}},
                                                                {{"fname", &a.fname}, {"fname", &b.fname}}};
  for (auto& d : dicts) {
    std::string w = dict(d[0].first, *d[0].second, *d[1].second, a.rows);
    if (!w.empty()) return w;
  }
  if (a.pid != b.pid || a.tid != b.tid || a.ts != b.ts || a.dur != b.dur || a.te != b.te) return "pid/tid/ts/dur/te";
  if (a.size_mask != b.size_mask || a.offset_mask != b.offset_mask) return "size/offset null";
  for (size_t r = 0; r < a.size.size() && r < b.size.size(); ++r)
    if ((!a.size_mask[r] && a.size[r] != b.size[r]) || (!a.offset_mask[r] && a.offset[r] != b.offset[r]))
      return "size/offset row " + std::to_string(r);
  if (a.args.size() != b.args.size()) return "number of args columns";
  for (size_t k = 0; k < a.args.size(); ++k) {
    const ArgColumn& x = a.args[k];
    const ArgColumn& y = b.args[k];
    std::string w = "args." + x.key;
    if (x.key != y.key || x.type != y.type || x.length() != y.length()) return w + ": key/type/length";
    if (x.type == ArgType::String) {
      w = dict(w.c_str(), x.strings, y.strings, x.length());
      if (!w.empty()) return w;
      continue;
    }
    if (x.mask != y.mask) return w + ": nulls";
    for (size_t r = 0; r < x.mask.size(); ++r) {
      if (x.mask[r]) continue;
      bool same = x.type == ArgType::Int ? x.ints[r] == y.ints[r]
                                         : std::memcmp(&x.floats[r], &y.floats[r], sizeof(double)) == 0;
      if (!same) return w + ": row " + std::to_string(r);
    }
  }
  if (a.metadata.size() != b.metadata.size()) return "metadata count";
  for (size_t i = 0; i < a.metadata.size(); ++i) {
    const MetaRecord& x = a.metadata[i];
    const MetaRecord& y = b.metadata[i];
    if (x.name != y.name || x.cat != y.cat || x.ph != y.ph || x.key != y.key || x.value != y.value ||
        x.args != y.args || x.pid != y.pid || x.tid != y.tid || x.ts != y.ts || x.dur != y.dur ||
        x.has_ts != y.has_ts || x.has_dur != y.has_dur)
      return "metadata record " + std::to_string(i);
  }
  return "";
}

}  // namespace dftracer::reader
