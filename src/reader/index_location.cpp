// Index location policy: next to the trace, or a private cache folder (index_location.h).
#include "index_location.h"

#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "reader.h"

namespace dftracer::reader {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Creates missing directories of `dir` (mode 0700: a cache of trace indexes is private).
void mkdirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0700);
    }
    if (i < dir.size()) cur += dir[i];
  }
}

std::string octal(mode_t m) {
  char t[16];
  std::snprintf(t, sizeof t, "%03o", unsigned(m & 07777));
  return t;
}

// Why `dir` may not hold indexes ("" when it may): it must be a directory, not a symbolic link,
// owned by this user and not writable by group or others; every directory above it must be
// owned by root or this user and, unless sticky (like /tmp), not writable by group or others.
std::string unsafe_cache_dir(const std::string& dir) {
  struct stat st;
  uid_t me = ::geteuid();
  if (::lstat(dir.c_str(), &st) != 0) return dir + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return dir + " is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (st.st_uid != me)
    return dir + " is owned by uid " + str(int64_t(st.st_uid)) + ", not by this user (uid " + str(int64_t(me)) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return dir + " is writable by group or others (mode " + octal(st.st_mode) + ")";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return dir + " is not writable";
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return dir + ": " + std::strerror(errno);
  std::string a = real;
  while (a.size() > 1) {
    size_t slash = a.rfind('/');
    a = slash == 0 ? "/" : a.substr(0, slash);
    if (::lstat(a.c_str(), &st) != 0) return a + ": " + std::strerror(errno);
    if (st.st_uid != 0 && st.st_uid != me) return a + " (above " + dir + ") is owned by another user";
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return a + " (above " + dir + ") is writable by group or others without the sticky bit";
  }
  return "";
}

// The user's cache root: $XDG_CACHE_HOME, $HOME/.cache, or the passwd entry's home; "" if none.
std::string user_cache_root() {
  const char* xdg = ::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return xdg;
  const char* home = ::getenv("HOME");
  if (home && *home == '/') return std::string(home) + "/.cache";
  struct passwd pw, *res = nullptr;
  char buf[4096];
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir && res->pw_dir[0] == '/')
    return std::string(res->pw_dir) + "/.cache";
  return "";
}

}  // namespace

std::string abs_path(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  throw ReaderError(p + ": no such file");
}

IndexLocation locate_index(const std::string& abs, const std::string& index_dir) {
  std::string dir = abs.substr(0, abs.rfind('/'));
  if (dir.empty()) dir = "/";
  std::string idir = index_dir;
  if (idir.empty()) {
    if (::access(dir.c_str(), W_OK) == 0) return {abs + ".zindex", ""};
    const char* env = ::getenv("DFTRACER_INDEX_DIR");
    if (env && *env) {
      idir = env;
    } else {
      std::string root = user_cache_root();
      if (root.empty()) return {"", "no writable index location (trace folder read-only, no home directory)"};
      idir = root + "/dftracer/zindex";
    }
  }
  mkdirs(idir);
  std::string why = unsafe_cache_dir(idir);
  if (!why.empty()) return {"", "index directory refused: " + why};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(abs)));
  return {idir + "/" + abs.substr(abs.rfind('/') + 1) + "-" + hex + ".zindex", ""};
}

std::string index_path_for(const std::string& trace, const std::string& index_dir) {
  return locate_index(abs_path(trace), index_dir).path;
}

}  // namespace dftracer::reader
