// Path helpers of the core: one implementation of lexical normalisation, absolute paths,
// component-aware prefix tests and `mkdir -p` (used by config, trace naming, the chunk writer and
// Tracer::is_traced_path). Lexical only: no symlink resolution (parse_data_dirs adds the
// realpath form of each data dir itself).
#pragma once

#include <string>
#include <string_view>

#include "tracer.h"  // normalize_path, path_has_prefix (exported: tests and the preload use them)

namespace dftracer::paths {

// The current working directory, or "/" if it cannot be read.
std::string cwd();
// `p` made absolute (relative to cwd()) and normalised.
std::string absolute(std::string_view p);
// Directory part of an absolute path ("/" for "/x" and for a path without '/').
std::string dirname_of(const std::string& p);
// True if an absolute path needs normalize_path (a "//", "/./" or "/../" component, or a
// trailing "/." or "/.."); a relative path always does. Cheap scan, no allocation.
bool needs_normalization(std::string_view path) noexcept;
// mkdir -p with mode 0755; returns 0 or an errno value (ENOTDIR if a component is a file).
int make_dirs(const std::string& dir);

}  // namespace dftracer::paths
