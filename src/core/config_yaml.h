// C interface of libdftracer_yaml.so, the reader of the YAML configuration file
// (DFTRACER_CONFIGURATION; keys in docs/configuration.md). The core loads it with dlopen only when
// a configuration file is named, so yaml-cpp and the shared C++ runtime it needs are never loaded
// into a traced process that has none (docs/performance.md, "Process start").
#pragma once

extern "C" {
// One setting found in the file: `path` is the YAML key as written ("profiler.log_file"), `env`
// the environment variable it stands for ("DFTRACER_LOG_FILE"), `value` the scalar text (a
// sequence is joined with ':'); invert != 0 for the v1 feature switches whose boolean is the
// opposite of the variable's ("features.io.posix: true" = DFTRACER_DISABLE_POSIX false).
typedef void (*dftracer_yaml_setting_fn)(void* ctx, const char* path, const char* env, int invert, const char* value);
// Reads `file` and calls `setting` once per known key that is set, in the order of the key table.
// Returns 1 on success (also for an empty file), 0 if the file cannot be read or parsed or is
// not a mapping; the reason is printed on stderr ("dftracer: warning: ...").
typedef int (*dftracer_yaml_load_fn)(const char* file, dftracer_yaml_setting_fn setting, void* ctx);
// Aggregation rule file (DFTRACER_AGGREGATION_FILE): calls `rule` once per string of the top-level
// `inclusion` (exclusion = 0) and `exclusion` (1) lists (a single string counts as a list of one).
// Returns 1 on success, 0 if the file cannot be read or parsed, is not a mapping, or a list holds
// something other than strings (the reason is printed on stderr).
typedef void (*dftracer_yaml_rule_fn)(void* ctx, int exclusion, const char* rule);
typedef int (*dftracer_yaml_rules_fn)(const char* file, dftracer_yaml_rule_fn rule, void* ctx);
__attribute__((visibility("default"))) int dftracer_yaml_rules(const char* file, dftracer_yaml_rule_fn rule, void* ctx);
__attribute__((visibility("default"))) int dftracer_yaml_load(const char* file, dftracer_yaml_setting_fn setting,
                                                              void* ctx);
}
