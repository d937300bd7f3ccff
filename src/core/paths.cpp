// Path helpers (paths.h); normalize_path and path_has_prefix are declared in tracer.h.
#include "paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace dftracer {

std::string normalize_path(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == ".") {
    } else if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else {
      parts.push_back(part);
    }
    i = j;
  }
  std::string out;
  for (auto p : parts) {
    out += '/';
    out.append(p.data(), p.size());
  }
  if (out.empty()) out = "/";
  return out;
}

bool path_has_prefix(std::string_view path, std::string_view dir) noexcept {
  if (dir == "/") return !path.empty() && path[0] == '/';
  if (path.size() < dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

namespace paths {

std::string cwd() {
  char buf[4096];
  if (getcwd(buf, sizeof(buf))) return buf;
  return "/";
}

std::string absolute(std::string_view p) {
  if (!p.empty() && p[0] == '/') return normalize_path(p);
  return normalize_path(cwd() + "/" + std::string(p));
}

std::string dirname_of(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos || s == 0) return "/";
  return p.substr(0, s);
}

bool needs_normalization(std::string_view path) noexcept {
  if (path.empty() || path[0] != '/') return true;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] == '/' && (path[i + 1] == '/' ||
                           (path[i + 1] == '.' && (i + 2 == path.size() || path[i + 2] == '/' || path[i + 2] == '.'))))
      return true;
  }
  return false;
}

int make_dirs(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  if (dir == "/" || dir.empty()) return 0;
  int rc = make_dirs(dirname_of(dir));
  if (rc) return rc;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  return 0;
}

}  // namespace paths
}  // namespace dftracer
