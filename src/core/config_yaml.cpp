// libdftracer_yaml.so: the YAML configuration reader, loaded by config.cpp with dlopen only when
// DFTRACER_CONFIGURATION names a file (config_yaml.h).
#include "config_yaml.h"

#include <cstdio>
#include <exception>
#include <string>

#include <yaml-cpp/yaml.h>

namespace {

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
    {"enable_aggregation", "DFTRACER_ENABLE_AGGREGATION", false},
    {"aggregation_type", "DFTRACER_AGGREGATION_TYPE", false},
    {"aggregation_file", "DFTRACER_AGGREGATION_FILE", false},
    {"trace_interval_ms", "DFTRACER_TRACE_INTERVAL_MS", false},
    {"features.interval", "DFTRACER_TRACE_INTERVAL_MS", false},
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

int load(const char* file, dftracer_yaml_setting_fn setting, void* ctx) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dftracer: warning: cannot read configuration %s (%s); tracing disabled\n", file, e.what());
    return 0;
  }
  if (root.IsNull()) return 1;  // empty file
  if (!root.IsMap()) {
    std::fprintf(stderr, "dftracer: warning: configuration %s is not a YAML mapping; tracing disabled\n", file);
    return 0;
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
        setting(ctx, k.path, k.env, 0, joined.c_str());
        continue;
      }
      std::fprintf(stderr, "dftracer: warning: configuration key %s in %s must be a scalar; ignored\n", k.path, file);
      continue;
    }
    setting(ctx, k.path, k.env, k.invert ? 1 : 0, n.Scalar().c_str());
  }
  return 1;
}

}  // namespace

int dftracer_yaml_load(const char* file, dftracer_yaml_setting_fn setting, void* ctx) {
  try {
    return load(file, setting, ctx);
  } catch (const std::exception& e) {  // e.g. a scalar that does not convert; never leaves the C interface
    std::fprintf(stderr, "dftracer: warning: cannot read configuration %s (%s); tracing disabled\n", file, e.what());
    return 0;
  }
}

namespace {
int rules(const char* file, dftracer_yaml_rule_fn rule, void* ctx) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dftracer: warning: cannot read aggregation rules %s (%s)\n", file, e.what());
    return 0;
  }
  if (root.IsNull()) return 1;
  if (!root.IsMap()) {
    std::fprintf(stderr, "dftracer: warning: aggregation rules %s: not a YAML mapping\n", file);
    return 0;
  }
  const char* const lists[] = {"inclusion", "exclusion"};
  for (int x = 0; x < 2; ++x) {
    YAML::Node n = root[lists[x]];
    if (!n.IsDefined() || n.IsNull()) continue;
    if (n.IsScalar()) {
      rule(ctx, x, n.Scalar().c_str());
      continue;
    }
    if (!n.IsSequence()) {
      std::fprintf(stderr, "dftracer: warning: aggregation rules %s: %s must be a list of strings\n", file, lists[x]);
      return 0;
    }
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        std::fprintf(stderr, "dftracer: warning: aggregation rules %s: %s must be a list of strings\n", file, lists[x]);
        return 0;
      }
      rule(ctx, x, item.Scalar().c_str());
    }
  }
  return 1;
}
}  // namespace

int dftracer_yaml_rules(const char* file, dftracer_yaml_rule_fn rule, void* ctx) {
  try {
    return rules(file, rule, ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dftracer: warning: cannot read aggregation rules %s (%s)\n", file, e.what());
    return 0;
  }
}
