// Tracer::is_traced_path (data dirs, "all", exclusions) and re-initialisation after finalize.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core_test_util.h"
#include "dftracer/dftracer.h"
#include "tracer.h"

using namespace dft_test;

TEST(CorePaths, DataDirsComponentAwareAndRuntimeChange) {
  std::string dir = make_tmpdir();
  int st = run_child(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/p"}, {"DFTRACER_DATA_DIR", "/data/a:rel"}}, [&] {
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd))) _exit(3);
        auto* t = dftracer::Tracer::instance();  // config read here: "rel" -> <cwd>/rel
        if (chdir(dir.c_str()) != 0) _exit(2);
        int bad = 0;
        bad += !t->is_traced_path("/data/a");
        bad += !t->is_traced_path("/data/a/x/y.npz");
        bad += t->is_traced_path("/data/ab/y.npz");
        bad += t->is_traced_path("/data");
        bad += !t->is_traced_path("/data/b/../a/z");  // normalised
        bad += !t->is_traced_path("/data//a/./z");
        // "rel" was resolved against the cwd when the configuration was read.
        bad += !t->is_traced_path(std::string(cwd) + "/rel/f");
        bad += t->is_traced_path(dir + "/rel/f");
        // initialize() replaces the data dirs at run time.
        DFTRACER_CPP_INIT(nullptr, "/scratch:/tmp/x", nullptr);
        bad += t->is_traced_path("/data/a/x");
        bad += !t->is_traced_path("/scratch/ckpt/1.pt");
        bad += !t->is_traced_path("/tmp/x");
        bad += t->is_traced_path("/tmp/xy");
        // "all": everything except /proc, /sys, /dev and the trace output.
        DFTRACER_CPP_INIT(nullptr, "all", nullptr);
        bad += !t->is_traced_path("/data/ab/y.npz");
        bad += !t->is_traced_path("/etc/hosts");
        bad += t->is_traced_path("/proc/self/maps");
        bad += t->is_traced_path("/sys/kernel");
        bad += t->is_traced_path("/dev/null");
        bad += !t->is_traced_path("/device/x");
        bad += t->is_traced_path(t->trace_path());
        bad += !t->is_traced_path("relative/file");  // resolved against the cwd
        DFTRACER_CPP_FINI();
        _exit(bad);
      });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST(CorePaths, UnsetDataDirMeansAll) {
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", "/tmp/dft_unused/x"}}, [] {
    auto* t = dftracer::Tracer::instance();
    _exit(t->is_traced_path("/any/where") && !t->is_traced_path("/proc/1/stat") ? 0 : 1);
  });
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST(CorePaths, InitializeAfterFinalizeStartsANewFile) {
  std::string dir = make_tmpdir();
  int st = run_child(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/r"}, {"DFTRACER_TRACE_COMPRESSION", "no"}}, [] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        { DFTRACER_CPP_REGION(first); }
        DFTRACER_CPP_FINI();
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        { DFTRACER_CPP_REGION(second); }
        { DFTRACER_CPP_REGION(second); }
        DFTRACER_CPP_FINI();
      });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 2u);
  // r-<host>-<pid>.1.pfw sorts before r-<host>-<pid>.pfw
  int bad = -1;
  auto second = parse_trace(read_file(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  auto first = parse_trace(read_file(dir + "/" + files[1]), &bad);
  EXPECT_EQ(bad, 0);
  int n1 = 0, n2 = 0;
  for (auto& e : first) n1 += e.ph == "X" && e.name == "first";
  for (auto& e : second) n2 += e.ph == "X" && e.name == "second";
  EXPECT_EQ(n1, 1);
  EXPECT_EQ(n2, 2);
  EXPECT_NE(files[0].find(".1.pfw"), std::string::npos);
}
