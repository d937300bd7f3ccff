// Runs the C program tests/cpp/core_c_api.c (compiled as C) and checks its trace exactly.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <string>

#include "core_test_util.h"

extern char** environ;
using namespace dft_test;

static int run_c(const std::string& dir, bool enable) {
  return run_child({{"DFTRACER_ENABLE", enable ? "1" : "0"}, {"DFTRACER_LOG_FILE", dir + "/c"}}, [] {
    const char* argv[] = {DFTRACER_C_CHILD, "4", nullptr};
    pid_t c = 0;
    if (posix_spawn(&c, DFTRACER_C_CHILD, nullptr, nullptr, const_cast<char**>(argv), environ) != 0) _exit(8);
    int cs = 0;
    waitpid(c, &cs, 0);
    _exit(WIFEXITED(cs) ? WEXITSTATUS(cs) : 9);
  });
}

TEST(CoreCApi, CProgramTrace) {
  std::string dir = make_tmpdir();
  int st = run_c(dir, true);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  int bad = -1;
  auto ev = parse_trace(trace_text(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  int fn = 0, region = 0, inst = 0, meta = 0;
  for (auto& e : ev) {
    if (e.ph == "X" && e.name == "c_work") {
      EXPECT_EQ(e.cat, "C_APP");
      EXPECT_EQ(e.args.at("i"), std::to_string(fn));
      EXPECT_EQ(e.args.at("fname"), "/data/c.bin");
      ++fn;
    } else if (e.ph == "X" && e.name == "LOOP_BODY") {
      EXPECT_EQ(e.args.at("sq"), std::to_string(region * region));
      ++region;
    } else if (e.ph == "i") {
      EXPECT_TRUE(e.name == "c_start" || (e.name == "c_end" && e.args.at("state") == "done")) << e.name;
      ++inst;
    } else if (e.ph == "M" && e.name == "c_key") {
      EXPECT_EQ(e.args.at("value"), "c_value");
      ++meta;
    }
  }
  EXPECT_EQ(fn, 4);
  EXPECT_EQ(region, 4);
  EXPECT_EQ(inst, 2);
  EXPECT_EQ(meta, 1);
}

TEST(CoreCApi, CProgramDisabledWritesNothing) {
  std::string dir = make_tmpdir();
  int st = run_c(dir, false);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_TRUE(list_dir(dir).empty());
}
