// Configuration: YAML file (DFTRACER_CONFIGURATION) then environment overrides.
// Every key is documented in docs/configuration.md.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config_yaml.h"
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
  if (s == "1" || s == "true" || s == "yes" || s == "on") {
    *out = true;
    return true;
  }
  if (s == "0" || s == "false" || s == "no" || s == "off") {
    *out = false;
    return true;
  }
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
  if (k == "DFTRACER_ENABLE") {
    if (parse_bool(value, &b)) {
      c.enable = b;
      c.enable_set = true;
    } else warn_bad(key, value, "1/0/true/false/yes/no/on/off");
  } else if (k == "DFTRACER_INIT") {
    if (!parse_init(value, &c.init)) warn_bad(key, value, "FUNCTION or PRELOAD");
  } else if (k == "DFTRACER_LOG_FILE") {
    std::string s = trim(value);
    if (!s.empty()) c.log_file = s;
    else warn_bad(key, value, "a path prefix");
  } else if (k == "DFTRACER_DATA_DIR") {
    c.data_dirs_raw = trim(value);
    c.data_dirs_defaulted = c.data_dirs_raw.empty();
  } else if (k == "DFTRACER_INC_METADATA") {
    if (parse_bool(value, &b)) c.inc_metadata = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_TRACE_COMPRESSION") {
    if (parse_bool(value, &b)) c.compression = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_COMPRESSION_LEVEL") {
    if (!parse_int_range(value, 1, 9, &c.compression_level)) warn_bad(key, value, "an integer 1..9");
  } else if (k == "DFTRACER_WRITE_BUFFER_SIZE") {
    if (!parse_size(value, &c.write_buffer_size)) warn_bad(key, value, "bytes 256..1G, optional K/M/G suffix");
  } else if (k == "DFTRACER_DISABLE_IO") {
    if (parse_bool(value, &b)) c.disable_io = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_DISABLE_POSIX") {
    if (parse_bool(value, &b)) c.disable_posix = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_DISABLE_STDIO") {
    if (parse_bool(value, &b)) c.disable_stdio = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_FLUSH_INTERVAL") {
    if (!parse_int_range(value, 0, 3600000, &c.flush_interval_ms))
      warn_bad(key, value, "milliseconds 0..3600000 (0: off)");
  } else if (k == "DFTRACER_BIND_SIGNALS") {
    if (parse_bool(value, &b)) c.bind_signals = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_SET_CORE_AFFINITY") {
    if (parse_bool(value, &b)) c.set_core_affinity = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_LOG_LEVEL") {
    if (!parse_level(value, &c.log_level)) warn_bad(key, value, "ERROR, WARN, INFO or DEBUG");
  } else if (k == "DFTRACER_ENABLE_AGGREGATION") {
    if (parse_bool(value, &b)) c.aggregation_enable = b;
    else warn_bad(key, value, "a boolean");
  } else if (k == "DFTRACER_AGGREGATION_TYPE") {
    std::string s = lower(trim(value));
    if (s == "full") c.aggregation_selective = false;
    else if (s == "selective") c.aggregation_selective = true;
    else warn_bad(key, value, "FULL or SELECTIVE");
  } else if (k == "DFTRACER_AGGREGATION_FILE") {
    c.aggregation_file = trim(value);
  } else if (k == "DFTRACER_TRACE_INTERVAL_MS") {
    if (!parse_int_range(value, 1, 86400000, &c.trace_interval_ms)) warn_bad(key, value, "milliseconds 1..86400000");
  }
}

// One setting of the YAML file (config_yaml.h); never throws into the reader.
void on_yaml_setting(void* ctx, const char* path, const char* env, int invert, const char* value) {
  try {
    Config& c = *static_cast<Config*>(ctx);
    std::string v = value;
    if (invert) {
      bool b;
      if (!parse_bool(v, &b)) {
        warn_bad(path, v, "a boolean");
        return;
      }
      v = b ? "0" : "1";
    }
    apply(c, env, v);
  } catch (...) {
  }
}

// The YAML file is read by libdftracer_yaml.so (config_yaml.cpp), loaded from the directory of
// this library only now: yaml-cpp and the shared C++ runtime stay out of processes without one.
void* yaml_library(const char** why) {
  void* lib = nullptr;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&on_yaml_setting), &info) != 0 && info.dli_fname != nullptr) {
    std::string dir = info.dli_fname;
    size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
    lib = dlopen((dir + "/libdftracer_yaml.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (lib == nullptr) lib = dlopen("libdftracer_yaml.so", RTLD_NOW | RTLD_LOCAL);  // the loader's search path
  if (lib == nullptr) *why = dlerror();
  return lib;  // stays loaded (no dlclose)
}

bool load_yaml(Config& c, const std::string& file) {
  const char* why = nullptr;
  void* lib = yaml_library(&why);
  auto load = lib != nullptr ? reinterpret_cast<dftracer_yaml_load_fn>(dlsym(lib, "dftracer_yaml_load")) : nullptr;
  if (load == nullptr) {
    if (why == nullptr) why = dlerror();
    std::fprintf(stderr,
                 "dftracer: warning: cannot read configuration %s (libdftracer_yaml.so: %s); tracing disabled\n",
                 file.c_str(), why != nullptr ? why : "not found");
    return false;
  }
  return load(file.c_str(), &on_yaml_setting, &c) != 0;
}

void on_yaml_rule(void* ctx, int exclusion, const char* rule) {
  try {
    Config& c = *static_cast<Config*>(ctx);
    (exclusion ? c.aggregation_exclusion : c.aggregation_inclusion).push_back(rule);
  } catch (...) {
  }
}

// The rule file of DFTRACER_AGGREGATION_FILE (upstream's layout: top-level `inclusion` and
// `exclusion` lists of rule strings). False (warned) when it cannot be read.
bool load_rules(Config& c) {
  const char* why = nullptr;
  void* lib = yaml_library(&why);
  auto load = lib != nullptr ? reinterpret_cast<dftracer_yaml_rules_fn>(dlsym(lib, "dftracer_yaml_rules")) : nullptr;
  if (load == nullptr) {
    if (why == nullptr) why = dlerror();
    std::fprintf(stderr, "dftracer: warning: cannot read aggregation rules %s (libdftracer_yaml.so: %s)\n",
                 c.aggregation_file.c_str(), why != nullptr ? why : "not found");
    return false;
  }
  return load(c.aggregation_file.c_str(), &on_yaml_rule, &c) != 0;
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
  static const char* const kEnv[] = {"DFTRACER_ENABLE",
                                     "DFTRACER_INIT",
                                     "DFTRACER_LOG_FILE",
                                     "DFTRACER_DATA_DIR",
                                     "DFTRACER_INC_METADATA",
                                     "DFTRACER_TRACE_COMPRESSION",
                                     "DFTRACER_COMPRESSION_LEVEL",
                                     "DFTRACER_WRITE_BUFFER_SIZE",
                                     "DFTRACER_DISABLE_IO",
                                     "DFTRACER_DISABLE_POSIX",
                                     "DFTRACER_DISABLE_STDIO",
                                     "DFTRACER_BIND_SIGNALS",
                                     "DFTRACER_FLUSH_INTERVAL",
                                     "DFTRACER_SET_CORE_AFFINITY",
                                     "DFTRACER_LOG_LEVEL",
                                     "DFTRACER_ENABLE_AGGREGATION",
                                     "DFTRACER_AGGREGATION_TYPE",
                                     "DFTRACER_AGGREGATION_FILE",
                                     "DFTRACER_TRACE_INTERVAL_MS"};
  for (const char* k : kEnv) {
    if (const char* v = getenv_fn(k)) apply(c, k, v);
  }
  if (c.config_error) c.enable = false;
  // SELECTIVE folds what the rules include: without readable rules nothing is folded (never
  // silently everything).
  if (c.enable && c.aggregation_enable && !c.aggregation_file.empty() && !load_rules(c)) {
    std::fprintf(stderr, "dftracer: warning: aggregation disabled (rule file %s unreadable)\n",
                 c.aggregation_file.c_str());
    c.aggregation_enable = false;
  }
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
