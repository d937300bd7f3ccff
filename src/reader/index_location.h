// Where the index of a trace lives (docs/index.md, "Index location"). Internal.
#pragma once

#include <string>

namespace dftracer::reader {

struct IndexLocation {
  std::string path;     // "" = keep the index in memory
  std::string warning;  // why it is kept in memory
};
// `abs` is the trace's absolute path; see index_path_for (reader.h) for the rule.
IndexLocation locate_index(const std::string& abs, const std::string& index_dir);

// Absolute path of `p` with symbolic links resolved; throws ReaderError when it does not exist.
std::string abs_path(const std::string& p);

}  // namespace dftracer::reader
