// Configuration parsing: env values, YAML (flat and DFTracer v1 nested), errors, paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "core_test_util.h"
#include "tracer.h"

using namespace dftracer;

namespace {
std::map<std::string, std::string> g_env;
const char* fake_getenv(const char* k) {
  auto it = g_env.find(k);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
Config load(const std::map<std::string, std::string>& env, std::string* err = nullptr) {
  g_env = env;
  testing::internal::CaptureStderr();
  Config c = load_config(&fake_getenv);
  std::string e = testing::internal::GetCapturedStderr();
  if (err) *err = e;
  return c;
}
int count(const std::string& s, const std::string& sub) {
  int n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}
}  // namespace

TEST(CoreConfig, Defaults) {
  std::string err;
  Config c = load({}, &err);
  EXPECT_FALSE(c.enable);
  EXPECT_TRUE(c.compression);
  EXPECT_EQ(c.write_buffer_size, 4u << 20);
  EXPECT_TRUE(c.trace_all);  // unset data dir: trace everything (never silently nothing)
  EXPECT_TRUE(c.data_dirs_defaulted);
  EXPECT_EQ(c.init, InitMode::FUNCTION);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(c.log_file, normalize_path(std::string(cwd) + "/dftracer"));
  EXPECT_EQ(err, "");
}

TEST(CoreConfig, BooleanSpellings) {
  for (const char* t : {"1", "true", "TRUE", "yes", "on", " On "})
    EXPECT_TRUE(load({{"DFTRACER_ENABLE", t}}).enable) << t;
  for (const char* f : {"0", "false", "no", "off", "OFF"})
    EXPECT_FALSE(load({{"DFTRACER_ENABLE", f}, {"DFTRACER_TRACE_COMPRESSION", f}}).compression) << f;
}

TEST(CoreConfig, InvalidValueWarnsOnceAndKeepsDefault) {
  std::string err;
  Config c = load({{"DFTRACER_TRACE_COMPRESSION", "maybe"},
                   {"DFTRACER_WRITE_BUFFER_SIZE", "12x"},
                   {"DFTRACER_INIT", "sometimes"},
                   {"DFTRACER_LOG_LEVEL", "loud"}},
                  &err);
  EXPECT_TRUE(c.compression);
  EXPECT_EQ(c.write_buffer_size, 4u << 20);
  EXPECT_EQ(c.init, InitMode::FUNCTION);
  EXPECT_EQ(c.log_level, LogLevel::WARN);
  EXPECT_EQ(count(err, "DFTRACER_TRACE_COMPRESSION"), 1);
  EXPECT_EQ(count(err, "DFTRACER_WRITE_BUFFER_SIZE"), 1);
  EXPECT_EQ(count(err, "DFTRACER_INIT"), 1);
  EXPECT_EQ(count(err, "DFTRACER_LOG_LEVEL"), 1);
  EXPECT_EQ(count(err, "\n"), 4);
}

TEST(CoreConfig, SizesAndLevels) {
  EXPECT_EQ(load({{"DFTRACER_WRITE_BUFFER_SIZE", "8M"}}).write_buffer_size, 8u << 20);
  EXPECT_EQ(load({{"DFTRACER_WRITE_BUFFER_SIZE", "64KiB"}}).write_buffer_size, 64u << 10);
  EXPECT_EQ(load({{"DFTRACER_WRITE_BUFFER_SIZE", "4096"}}).write_buffer_size, 4096u);
  EXPECT_EQ(load({{"DFTRACER_COMPRESSION_LEVEL", "9"}}).compression_level, 9);
  EXPECT_EQ(load({{"DFTRACER_LOG_LEVEL", "debug"}}).log_level, LogLevel::DEBUG);
  EXPECT_EQ(load({{"DFTRACER_INIT", "preload"}}).init, InitMode::PRELOAD);
}

TEST(CoreConfig, DataDirsAreAbsoluteNormalisedAndComponentAware) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  Config c = load({{"DFTRACER_DATA_DIR", "/data/a/:rel/x:/data//b/./c/../d"}});
  EXPECT_FALSE(c.trace_all);
  ASSERT_GE(c.data_dirs.size(), 3u);
  EXPECT_EQ(c.data_dirs[0], "/data/a");
  EXPECT_EQ(c.data_dirs[1], normalize_path(std::string(cwd) + "/rel/x"));
  EXPECT_EQ(c.data_dirs[2], "/data/b/d");
  EXPECT_TRUE(path_has_prefix("/data/a", "/data/a"));
  EXPECT_TRUE(path_has_prefix("/data/a/f.npz", "/data/a"));
  EXPECT_FALSE(path_has_prefix("/data/ab/f.npz", "/data/a"));
  EXPECT_FALSE(path_has_prefix("/data", "/data/a"));
  EXPECT_TRUE(path_has_prefix("/anything", "/"));
  EXPECT_TRUE(load({{"DFTRACER_DATA_DIR", "all"}}).trace_all);
  EXPECT_EQ(normalize_path("/a//b/./c/../"), "/a/b");
  EXPECT_EQ(normalize_path("/../.."), "/");
}

TEST(CoreConfig, YamlFlatNestedAndEnvOverride) {
  std::string dir = dft_test::make_tmpdir();
  std::string y1 = dir + "/flat.yaml";
  std::ofstream(y1) << "enable: yes\nlog_file: " << dir << "/tr\ndata_dirs: [/d1, /d2]\ncompression: off\n"
                    << "write_buffer_size: 1M\nbind_signals: true\n";
  Config a = load({{"DFTRACER_CONFIGURATION", y1}});
  EXPECT_TRUE(a.enable);
  EXPECT_EQ(a.log_file, dir + "/tr");
  ASSERT_EQ(a.data_dirs.size(), 2u);
  EXPECT_EQ(a.data_dirs[1], "/d2");
  EXPECT_FALSE(a.compression);
  EXPECT_EQ(a.write_buffer_size, 1u << 20);
  EXPECT_TRUE(a.bind_signals);
  // env overrides YAML
  Config b = load({{"DFTRACER_CONFIGURATION", y1}, {"DFTRACER_TRACE_COMPRESSION", "1"}, {"DFTRACER_ENABLE", "0"}});
  EXPECT_TRUE(b.compression);
  EXPECT_FALSE(b.enable);

  std::string y2 = dir + "/nested.yaml";
  std::ofstream(y2) << "enable: True\nprofiler:\n  init: PRELOAD\n  log_file: /tmp/x/y\n  data_dirs: all\n"
                    << "  compression: False\nfeatures:\n  io:\n    posix: false\n    stdio: true\n"
                    << "internal:\n  write_buffer_size: 2048\n";
  Config n = load({{"DFTRACER_CONFIGURATION", y2}});
  EXPECT_TRUE(n.enable);
  EXPECT_EQ(n.init, InitMode::PRELOAD);
  EXPECT_EQ(n.log_file, "/tmp/x/y");
  EXPECT_TRUE(n.trace_all);
  EXPECT_FALSE(n.compression);
  EXPECT_TRUE(n.disable_posix);
  EXPECT_FALSE(n.disable_stdio);
  EXPECT_EQ(n.write_buffer_size, 2048u);
}

TEST(CoreConfig, BadYamlWarnsOnceAndDisables) {
  std::string dir = dft_test::make_tmpdir();
  std::string y = dir + "/bad.yaml";
  std::ofstream(y) << "enable: [1, 2\nprofiler: {\n";
  std::string err;
  Config c = load({{"DFTRACER_CONFIGURATION", y}, {"DFTRACER_ENABLE", "1"}}, &err);
  EXPECT_FALSE(c.enable);
  EXPECT_TRUE(c.config_error);
  EXPECT_EQ(count(err, "dftracer: warning"), 1);
  std::string err2;
  Config m = load({{"DFTRACER_CONFIGURATION", dir + "/missing.yaml"}, {"DFTRACER_ENABLE", "1"}}, &err2);
  EXPECT_FALSE(m.enable);
  EXPECT_EQ(count(err2, "dftracer: warning"), 1);
}

TEST(CoreConfig, AggregationSwitchesAndRuleFile) {
  std::string err;
  Config d = load({}, &err);
  EXPECT_FALSE(d.aggregation_enable);
  EXPECT_FALSE(d.aggregation_selective);
  EXPECT_EQ(d.trace_interval_ms, 1000);
  // upstream's spellings load unchanged; the rule file's two lists are read in order
  std::string dir = dft_test::make_tmpdir();
  std::string rules = dir + "/rules.yaml";
  std::ofstream(rules) << "inclusion:\n  - \"cat == 'posix'\"\n  - \"name LIKE 'read%'\"\nexclusion:\n"
                       << "  - \"name == 'stat'\"\n";
  Config c = load({{"DFTRACER_ENABLE", "1"},
                   {"DFTRACER_ENABLE_AGGREGATION", "1"},
                   {"DFTRACER_AGGREGATION_TYPE", "SELECTIVE"},
                   {"DFTRACER_AGGREGATION_FILE", rules},
                   {"DFTRACER_TRACE_INTERVAL_MS", "2000"}},
                  &err);
  EXPECT_EQ(err, "");
  EXPECT_TRUE(c.aggregation_enable);
  EXPECT_TRUE(c.aggregation_selective);
  EXPECT_EQ(c.trace_interval_ms, 2000);
  ASSERT_EQ(c.aggregation_inclusion.size(), 2u);
  EXPECT_EQ(c.aggregation_inclusion[1], "name LIKE 'read%'");
  ASSERT_EQ(c.aggregation_exclusion.size(), 1u);
  EXPECT_EQ(c.aggregation_exclusion[0], "name == 'stat'");
  // bad values: warned, defaults kept; an unreadable rule file turns aggregation off
  Config b = load({{"DFTRACER_ENABLE", "1"},
                   {"DFTRACER_ENABLE_AGGREGATION", "1"},
                   {"DFTRACER_AGGREGATION_TYPE", "SOME"},
                   {"DFTRACER_AGGREGATION_FILE", dir + "/missing.yaml"},
                   {"DFTRACER_TRACE_INTERVAL_MS", "0"}},
                  &err);
  EXPECT_FALSE(b.aggregation_selective);
  EXPECT_EQ(b.trace_interval_ms, 1000);
  EXPECT_FALSE(b.aggregation_enable);
  EXPECT_EQ(count(err, "DFTRACER_AGGREGATION_TYPE"), 1) << err;
  EXPECT_EQ(count(err, "DFTRACER_TRACE_INTERVAL_MS"), 1) << err;
  EXPECT_EQ(count(err, "aggregation disabled"), 1) << err;
  // a list holding something other than strings is an unreadable file too
  std::ofstream(rules) << "inclusion:\n  - {a: 1}\n";
  Config m = load(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_ENABLE_AGGREGATION", "1"}, {"DFTRACER_AGGREGATION_FILE", rules}}, &err);
  EXPECT_FALSE(m.aggregation_enable);
  EXPECT_EQ(count(err, "must be a list of strings"), 1) << err;
}
