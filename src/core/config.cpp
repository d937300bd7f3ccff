// Configuration: YAML file (DFTRACER_CONFIGURATION) then environment overrides.
// Every key is documented in docs/configuration.md.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "paths.h"
#include "tracer.h"

namespace dftracer {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

void warn_bad(const char* key, std::string_view value, const char* expected) {
  std::fprintf(stderr, "dftracer: warning: invalid value '%.*s' for %s (expected %s); using the default\n",
               static_cast<int>(value.size()), value.data(), key, expected);
}

bool parse_bool(std::string_view v, bool* out) {
  std::string s = lower(trim(v));
  if (s == "1" || s == "true" || s == "yes" || s == "on") { *out = true; return true; }
  if (s == "0" || s == "false" || s == "no" || s == "off") { *out = false; return true; }
  return false;
}

// Bytes with an optional K/M/G suffix (powers of 1024).
bool parse_size(std::string_view v, size_t* out) {
  std::string s = lower(trim(v));
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || s[0] == '-') return false;
  std::string suf = trim(end);
  unsigned long long mult = 1;
  if (suf.empty() || suf == "b") mult = 1;
  else if (suf == "k" || suf == "kb" || suf == "kib") mult = 1ull << 10;
  else if (suf == "m" || suf == "mb" || suf == "mib") mult = 1ull << 20;
  else if (suf == "g" || suf == "gb" || suf == "gib") mult = 1ull << 30;
  else return false;
  unsigned long long r = n * mult;
  // Members carry u32 sizes: keep one buffer well below 4 GiB.
  if (r < 256 || r > (1ull << 30)) return false;
  *out = static_cast<size_t>(r);
  return true;
}

bool parse_int_range(std::string_view v, int lo, int hi, int* out) {
  std::string s = trim(v);
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(s.c_str(), &end, 10);
  if (errno || end == s.c_str() || *end || n < lo || n > hi) return false;
  *out = static_cast<int>(n);
  return true;
}

bool parse_level(std::string_view v, LogLevel* out) {
  std::string s = lower(trim(v));
  if (s == "error") *out = LogLevel::ERROR;
  else if (s == "warn" || s == "warning") *out = LogLevel::WARN;
  else if (s == "info") *out = LogLevel::INFO;
  else if (s == "debug") *out = LogLevel::DEBUG;
  else return false;
  return true;
}

bool parse_init(std::string_view v, InitMode* out) {
  std::string s = lower(trim(v));
  if (s == "function") *out = InitMode::FUNCTION;
  else if (s == "preload") *out = InitMode::PRELOAD;
  else return false;
  return true;
}

// Apply one setting given as text. `key` is the env var name (used in warnings).
void apply(Config& c, const char* key, std::string_view value) {
  std::string k(key);
  bool b;
  if (k == "DFTRACER_ENABLE") { if (parse_bool(value, &b)) { c.enable = b; c.enable_set = true; } else warn_bad(key, value, "1/0/true/false/yes/no/on/off"); }
  else if (k == "DFTRACER_INIT") { if (!parse_init(value, &c.init)) warn_bad(key, value, "FUNCTION or PRELOAD"); }
  else if (k == "DFTRACER_LOG_FILE") { std::string s = trim(value); if (!s.empty()) c.log_file = s; else warn_bad(key, value, "a path prefix"); }
  else if (k == "DFTRACER_DATA_DIR") { c.data_dirs_raw = trim(value); c.data_dirs_defaulted = c.data_dirs_raw.empty(); }
  else if (k == "DFTRACER_INC_METADATA") { if (parse_bool(value, &b)) c.inc_metadata = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_TRACE_COMPRESSION") { if (parse_bool(value, &b)) c.compression = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_COMPRESSION_LEVEL") { if (!parse_int_range(value, 1, 9, &c.compression_level)) warn_bad(key, value, "an integer 1..9"); }
  else if (k == "DFTRACER_WRITE_BUFFER_SIZE") { if (!parse_size(value, &c.write_buffer_size)) warn_bad(key, value, "bytes 256..1G, optional K/M/G suffix"); }
  else if (k == "DFTRACER_DISABLE_IO") { if (parse_bool(value, &b)) c.disable_io = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_DISABLE_POSIX") { if (parse_bool(value, &b)) c.disable_posix = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_DISABLE_STDIO") { if (parse_bool(value, &b)) c.disable_stdio = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_FLUSH_INTERVAL") { if (!parse_int_range(value, 0, 3600000, &c.flush_interval_ms)) warn_bad(key, value, "milliseconds 0..3600000 (0: off)"); }
  else if (k == "DFTRACER_BIND_SIGNALS") { if (parse_bool(value, &b)) c.bind_signals = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_SET_CORE_AFFINITY") { if (parse_bool(value, &b)) c.set_core_affinity = b; else warn_bad(key, value, "a boolean"); }
  else if (k == "DFTRACER_LOG_LEVEL") { if (!parse_level(value, &c.log_level)) warn_bad(key, value, "ERROR, WARN, INFO or DEBUG"); }
}

// YAML key path -> env var name.  Flat keys ("log_file") and the DFTracer v1 nested layout
// ("profiler: {log_file: ...}") are both accepted.
struct YamlKey {
  const char* path;
  const char* env;
  bool invert;  // v1 "features.io.posix: true" means DISABLE_POSIX false
};
const YamlKey kYamlKeys[] = {
    {"enable", "DFTRACER_ENABLE", false},
    {"init", "DFTRACER_INIT", false},
    {"profiler.init", "DFTRACER_INIT", false},
    {"log_file", "DFTRACER_LOG_FILE", false},
    {"profiler.log_file", "DFTRACER_LOG_FILE", false},
    {"data_dirs", "DFTRACER_DATA_DIR", false},
    {"data_dir", "DFTRACER_DATA_DIR", false},
    {"profiler.data_dirs", "DFTRACER_DATA_DIR", false},
    {"log_level", "DFTRACER_LOG_LEVEL", false},
    {"profiler.log_level", "DFTRACER_LOG_LEVEL", false},
    {"compression", "DFTRACER_TRACE_COMPRESSION", false},
    {"profiler.compression", "DFTRACER_TRACE_COMPRESSION", false},
    {"compression_level", "DFTRACER_COMPRESSION_LEVEL", false},
    {"profiler.compression_level", "DFTRACER_COMPRESSION_LEVEL", false},
    {"inc_metadata", "DFTRACER_INC_METADATA", false},
    {"features.metadata", "DFTRACER_INC_METADATA", false},
    {"set_core_affinity", "DFTRACER_SET_CORE_AFFINITY", false},
    {"features.core_affinity", "DFTRACER_SET_CORE_AFFINITY", false},
    {"disable_io", "DFTRACER_DISABLE_IO", false},
    {"features.io.enable", "DFTRACER_DISABLE_IO", true},
    {"disable_posix", "DFTRACER_DISABLE_POSIX", false},
    {"features.io.posix", "DFTRACER_DISABLE_POSIX", true},
    {"disable_stdio", "DFTRACER_DISABLE_STDIO", false},
    {"features.io.stdio", "DFTRACER_DISABLE_STDIO", true},
    {"bind_signals", "DFTRACER_BIND_SIGNALS", false},
    {"internal.bind_signals", "DFTRACER_BIND_SIGNALS", false},
    {"flush_interval", "DFTRACER_FLUSH_INTERVAL", false},
    {"internal.flush_interval", "DFTRACER_FLUSH_INTERVAL", false},
    {"write_buffer_size", "DFTRACER_WRITE_BUFFER_SIZE", false},
    {"internal.write_buffer_size", "DFTRACER_WRITE_BUFFER_SIZE", false},
};

YAML::Node lookup(const YAML::Node& root, const std::string& path) {
  YAML::Node cur;
  cur.reset(root);
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node next = cur[part];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(next);
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

bool load_yaml(Config& c, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dftracer: warning: cannot read configuration %s (%s); tracing disabled\n", file.c_str(),
                 e.what());
    return false;
  }
  if (root.IsNull()) return true;  // empty file
  if (!root.IsMap()) {
    std::fprintf(stderr, "dftracer: warning: configuration %s is not a YAML mapping; tracing disabled\n",
                 file.c_str());
    return false;
  }
  for (const YamlKey& k : kYamlKeys) {
    YAML::Node n = lookup(root, k.path);
    if (!n.IsDefined() || n.IsNull()) continue;
    if (!n.IsScalar()) {
      if (n.IsSequence() && std::string(k.env) == "DFTRACER_DATA_DIR") {
        std::string joined;
        for (const auto& item : n) {
          if (!joined.empty()) joined += ':';
          joined += item.as<std::string>("");
        }
        apply(c, k.env, joined);
        continue;
      }
      std::fprintf(stderr, "dftracer: warning: configuration key %s in %s must be a scalar; ignored\n", k.path,
                   file.c_str());
      continue;
    }
    std::string v = n.Scalar();
    if (k.invert) {
      bool b;
      if (!parse_bool(v, &b)) { warn_bad(k.path, v, "a boolean"); continue; }
      v = b ? "0" : "1";
    }
    apply(c, k.env, v);
  }
  return true;
}

const char* real_getenv(const char* k) { return std::getenv(k); }

}  // namespace

std::vector<std::string> parse_data_dirs(std::string_view spec, bool* all) {
  std::vector<std::string> dirs;
  *all = false;
  size_t i = 0;
  std::string base;
  while (i <= spec.size()) {
    size_t j = spec.find(':', i);
    if (j == std::string_view::npos) j = spec.size();
    std::string e = trim(spec.substr(i, j - i));
    i = j + 1;
    if (e.empty()) continue;
    if (lower(e) == "all") {
      *all = true;
      continue;
    }
    if (e[0] != '/') {
      if (base.empty()) base = paths::cwd();
      e = base + "/" + e;
    }
    std::string n = normalize_path(e);
    bool dup = false;
    for (auto& d : dirs) dup |= d == n;
    if (!dup) dirs.push_back(n);
    // Also match the symlink-resolved form of the directory.
    char real[4096];
    if (realpath(n.c_str(), real) && n != real) {
      std::string r = real;
      bool dup2 = false;
      for (auto& d : dirs) dup2 |= d == r;
      if (!dup2) dirs.push_back(r);
    }
  }
  return dirs;
}

Config load_config(const char* (*getenv_fn)(const char*)) {
  Config c;
  if (const char* f = getenv_fn("DFTRACER_CONFIGURATION"); f && *f) {
    c.config_file = f;
    if (!load_yaml(c, c.config_file)) c.config_error = true;
  }
  static const char* const kEnv[] = {
      "DFTRACER_ENABLE",        "DFTRACER_INIT",         "DFTRACER_LOG_FILE",          "DFTRACER_DATA_DIR",
      "DFTRACER_INC_METADATA",  "DFTRACER_TRACE_COMPRESSION", "DFTRACER_COMPRESSION_LEVEL",
      "DFTRACER_WRITE_BUFFER_SIZE", "DFTRACER_DISABLE_IO", "DFTRACER_DISABLE_POSIX", "DFTRACER_DISABLE_STDIO",
      "DFTRACER_BIND_SIGNALS",  "DFTRACER_FLUSH_INTERVAL", "DFTRACER_SET_CORE_AFFINITY", "DFTRACER_LOG_LEVEL"};
  for (const char* k : kEnv) {
    if (const char* v = getenv_fn(k)) apply(c, k, v);
  }
  if (c.config_error) c.enable = false;
  // Resolve the log prefix to an absolute path.
  c.log_file = paths::absolute(c.log_file);
  // Data dirs: unset means "all" (never silently trace nothing).
  if (c.data_dirs_raw.empty()) {
    c.trace_all = true;
    c.data_dirs.clear();
  } else {
    bool all = false;
    c.data_dirs = parse_data_dirs(c.data_dirs_raw, &all);
    c.trace_all = all;
    if (!all && c.data_dirs.empty()) {
      warn_bad("DFTRACER_DATA_DIR", c.data_dirs_raw, "':'-separated directories or 'all'");
      c.trace_all = true;
    }
  }
  return c;
}

namespace {
Config& config_storage() {
  static Config c = load_config(&real_getenv);
  return c;
}
}  // namespace

const Config& config() { return config_storage(); }

bool enable_for_preload() noexcept {
  Config& c = config_storage();
  if (!c.enable && !c.enable_set && !c.config_error && c.init == InitMode::PRELOAD) c.enable = true;
  return c.enable;
}

}  // namespace dftracer
