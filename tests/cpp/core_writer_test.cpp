// End-to-end writer tests; each scenario runs in a forked child with its own environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core_test_util.h"
#include "dftracer/dftracer.h"
#include "tracer.h"

using namespace dft_test;

namespace {
int count_sub(const std::string& s, const std::string& sub) {
  int n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}
std::vector<Event> of_ph(const std::vector<Event>& ev, const std::string& ph) {
  std::vector<Event> out;
  for (auto& e : ev)
    if (e.ph == ph) out.push_back(e);
  return out;
}
void work(int i) {
  DFTRACER_CPP_FUNCTION();
  DFTRACER_CPP_FUNCTION_UPDATE("i", i);
  DFTRACER_CPP_FUNCTION_UPDATE("fname", std::string("/data/file_") + std::to_string(i % 7));
}
}  // namespace

TEST(CoreWriter, TenThousandEventsFromFourThreads) {
  std::string dir = make_tmpdir();
  int st = run_child(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/app"}, {"DFTRACER_WRITE_BUFFER_SIZE", "16K"}}, [] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
          ts.emplace_back([t] {
            for (int i = 0; i < 2500; ++i) work(t * 2500 + i);
          });
        for (auto& th : ts) th.join();
        DFTRACER_CPP_FINI();
      });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  std::string path = dir + "/" + files[0];
  EXPECT_EQ(files[0].rfind("app-" + hostname() + "-", 0), 0u);
  EXPECT_EQ(files[0].substr(files[0].size() - 7), ".pfw.gz");
  EXPECT_EQ(std::system(("gzip -t '" + path + "'").c_str()), 0);

  uint64_t tail = 1;
  std::string bytes = read_file(path);
  auto members = walk_members(bytes, &tail);
  EXPECT_EQ(tail, 0u);
  ASSERT_GT(members.size(), 10u);  // 16 KiB members
  uint64_t total_lines = 0, total_c = 0;
  for (auto& m : members) {
    EXPECT_TRUE(m.inflated_ok);
    EXPECT_EQ(m.lines, m.real_lines);
    EXPECT_EQ(m.version, 1u);
    EXPECT_FALSE(m.data.empty());
    EXPECT_EQ(m.data.back(), '\n');  // whole lines only
    total_lines += m.lines;
    total_c += m.csize;
  }
  EXPECT_EQ(total_c, bytes.size());
  EXPECT_EQ(members[0].data.substr(0, 2), "[\n");

  int bad = -1;
  auto ev = parse_trace(trace_text(path), &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(ev.size() + 1, total_lines);
  auto x = of_ph(ev, "X");
  ASSERT_EQ(x.size(), 10000u);
  std::set<int64_t> tids, is, ids;
  for (auto& e : x) {
    tids.insert(e.tid);
    is.insert(std::stoll(e.args.at("i")));
    EXPECT_EQ(e.name, "work");
    EXPECT_EQ(e.cat, "CPP_APP");
    EXPECT_GE(e.dur, 0);
    EXPECT_EQ(e.args.at("fname").rfind("/data/file_", 0), 0u);
  }
  for (auto& e : ev) ids.insert(e.id);
  EXPECT_EQ(tids.size(), 4u);
  EXPECT_EQ(is.size(), 10000u);
  EXPECT_EQ(ids.size(), ev.size());  // ids unique
  // Metadata records near the top.
  std::set<std::string> meta;
  for (auto& e : of_ph(ev, "M")) meta.insert(e.name);
  for (const char* k : {"process_name", "hostname", "exec_name", "cmd_line", "version", "start_time"})
    EXPECT_EQ(meta.count(k), 1u) << k;
  EXPECT_EQ(ev[1].ph, "M");
}

TEST(CoreWriter, EscapingEndToEndAndPlainFile) {
  std::string dir = make_tmpdir();
  const std::string nasty = std::string("q\"b\\s/n\nt\tz") + std::string(1, '\0') + "bad\xff\xc3" + "end";
  int st = run_child(
      {{"DFTRACER_ENABLE", "yes"}, {"DFTRACER_LOG_FILE", dir + "/p"}, {"DFTRACER_TRACE_COMPRESSION", "0"}}, [&] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        dftracer::ArgList a;
        a.add_str("fname", nasty);
        a.add_int("neg", -5);
        a.add_double("d", 0.25);
        a.add_bool("b", false);
        a.add_uint("u", 18446744073709551615ull);
        dftracer::Tracer::instance()->log_complete(nasty, "c\"at", 10, 3, &a);
        dftracer::Tracer::instance()->log_metadata(nasty, nasty);
        DFTRACER_CPP_INSTANT_ARGS(tick, "k", 1, "s", "v");
        DFTRACER_CPP_INSTANT(tock);
        DFTRACER_CPP_METADATA(meta, "key", "value");
        DFTRACER_CPP_FINI();
      });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(files[0].substr(files[0].size() - 4), ".pfw");
  std::string text = read_file(dir + "/" + files[0]);
  EXPECT_EQ(text.substr(0, 2), "[\n");
  int bad = -1;
  auto ev = parse_trace(text, &bad);
  EXPECT_EQ(bad, 0);
  const std::string expected = std::string("q\"b\\s/n\nt\tz") + std::string(1, '\0') + "bad\xef\xbf\xbd\xef\xbf\xbd" +
                               "end";
  auto x = of_ph(ev, "X");
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(x[0].name, expected);
  EXPECT_EQ(x[0].cat, "c\"at");
  EXPECT_EQ(x[0].ts, 10);
  EXPECT_EQ(x[0].dur, 3);
  EXPECT_EQ(x[0].args.at("fname"), expected);
  EXPECT_EQ(x[0].args.at("neg"), "-5");
  EXPECT_EQ(x[0].args.at("d"), "0.25");
  EXPECT_EQ(x[0].args.at("b"), "false");
  EXPECT_EQ(x[0].args.at("u"), "18446744073709551615");
  auto i = of_ph(ev, "i");
  ASSERT_EQ(i.size(), 2u);
  EXPECT_EQ(i[0].name, "tick");
  EXPECT_EQ(i[0].args.at("k"), "1");
  EXPECT_EQ(i[0].args.at("s"), "v");
  EXPECT_EQ(i[1].name, "tock");
  EXPECT_TRUE(i[1].args.empty());
  int found = 0;
  for (auto& e : of_ph(ev, "M")) {
    if (e.name == expected && e.args.at("value") == expected) ++found;
    if (e.name == "key" && e.args.at("value") == "value") ++found;
  }
  EXPECT_EQ(found, 2);
  // Raw bytes: the NUL is escaped, no raw control byte appears inside a line.
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_NE(text.find("\\u0000"), std::string::npos);
}

TEST(CoreWriter, DisabledModeCreatesNoFile) {
  std::string dir = make_tmpdir();
  for (const char* en : {"0", ""}) {
    std::map<std::string, std::string> env = {{"DFTRACER_LOG_FILE", dir + "/sub/x"}};
    if (*en) env["DFTRACER_ENABLE"] = en;
    int st = run_child(env, [] {
      DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
      EXPECT_EQ(dftracer_c_is_active(), 0);
      for (int i = 0; i < 100; ++i) work(i);
      dftracer::Tracer::instance()->flush();
      DFTRACER_CPP_FINI();
      if (dftracer::Tracer::instance()->trace_path() != "") _exit(3);
    });
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  EXPECT_TRUE(list_dir(dir).empty());
}

TEST(CoreWriter, UnwritableDirectoryWarnsOnceAndAppContinues) {
  std::string err;
  int st = run_child_capture(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", "/dev/null/sub/trace"}},
      [] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        for (int i = 0; i < 1000; ++i) work(i);
        DFTRACER_CPP_FINI();
        std::fprintf(stderr, "app-finished\n");
        exit(7);
      },
      &err);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
  EXPECT_EQ(count_sub(err, "dftracer: warning"), 1) << err;
  EXPECT_EQ(count_sub(err, "app-finished"), 1);
}

TEST(CoreWriter, WriteFailureMidRunKeepsValidMembers) {
  // RLIMIT_FSIZE makes write() fail with EFBIG after ~40 KB, like a full disk.
  std::string dir = make_tmpdir();
  std::string err;
  int st = run_child_capture(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/full"}, {"DFTRACER_WRITE_BUFFER_SIZE", "8K"}},
      [] {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {40000, 40000};
        setrlimit(RLIMIT_FSIZE, &rl);
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        for (int i = 0; i < 20000; ++i) work(i);
        DFTRACER_CPP_FINI();
        exit(dftracer::Tracer::instance()->failed() ? 5 : 6);
      },
      &err);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 5);
  EXPECT_EQ(count_sub(err, "dftracer: warning"), 1) << err;
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  std::string bytes = read_file(dir + "/" + files[0]);
  EXPECT_LE(bytes.size(), 40000u);
  uint64_t tail = 1;
  auto members = walk_members(bytes, &tail);
  EXPECT_EQ(tail, 0u);  // the partial member was cut off
  ASSERT_GT(members.size(), 0u);
  for (auto& m : members) EXPECT_TRUE(m.inflated_ok);
  EXPECT_EQ(std::system(("gzip -t '" + dir + "/" + files[0] + "'").c_str()), 0);
}

TEST(CoreWriter, DoubleInitDoubleFinalizeAndLateEvents) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/d"}}, [] {
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    for (int i = 0; i < 10; ++i) work(i);
    DFTRACER_CPP_FINI();
    DFTRACER_CPP_FINI();
    for (int i = 0; i < 10; ++i) work(i);  // after finalize: dropped
    DFTRACER_C_FINI();
  });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  int bad = -1;
  auto ev = parse_trace(trace_text(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(of_ph(ev, "X").size(), 10u);
  EXPECT_EQ(std::system(("gzip -t '" + dir + "/" + files[0] + "'").c_str()), 0);
}

TEST(CoreWriter, ExplicitNameHybridRenameAndNoClobber) {
  std::string dir = make_tmpdir();
  // An existing file with the requested name must not be clobbered.
  std::ofstream(dir + "/trace-1-of-2.pfw.gz") << "keep";
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/pre"}, {"DFTRACER_INIT", "PRELOAD"}},
                     [&] {
                       auto* t = dftracer::Tracer::instance();
                       t->initialize(nullptr, nullptr, nullptr);  // as the preload library does
                       for (int i = 0; i < 5; ++i) work(i);
                       t->flush();  // the file now exists under the default name
                       if (list_dir(dir).size() != 2) _exit(4);
                       int rank = 0;
                       DFTRACER_CPP_INIT((dir + "/trace-0-of-2.pfw").c_str(), "all", &rank);
                       for (int i = 0; i < 7; ++i) work(i);
                       if (t->trace_path() != dir + "/trace-0-of-2.pfw.gz") _exit(5);
                       t->initialize((dir + "/trace-1-of-2.pfw.gz").c_str(), nullptr, nullptr);
                       if (t->trace_path() != dir + "/trace-1-of-2.1.pfw.gz") _exit(6);
                       DFTRACER_CPP_FINI();
                     });
  ASSERT_TRUE(WIFEXITED(st)) << st;
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], "trace-1-of-2.1.pfw.gz");
  EXPECT_EQ(files[1], "trace-1-of-2.pfw.gz");
  EXPECT_EQ(read_file(dir + "/trace-1-of-2.pfw.gz"), "keep");
  int bad = -1;
  auto ev = parse_trace(trace_text(dir + "/trace-1-of-2.1.pfw.gz"), &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(of_ph(ev, "X").size(), 12u);  // one file per process holds all events
  int pid_meta = 0;
  for (auto& e : of_ph(ev, "M"))
    if (e.name == "process_id" && e.args.at("value") == "0") ++pid_meta;
  EXPECT_EQ(pid_meta, 1);
}

TEST(CoreWriter, EventLargerThanTheBuffers) {
  std::string dir = make_tmpdir();
  const std::string big(300000, 'x');  // 300 KB arg with 1 KiB write buffers
  int st = run_child(
      {{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/big"}, {"DFTRACER_WRITE_BUFFER_SIZE", "1K"}}, [&] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        for (int i = 0; i < 50; ++i) work(i);
        {
          DFTRACER_CPP_REGION(huge);
          DFTRACER_CPP_REGION_UPDATE(huge, "blob", big);
        }
        for (int i = 0; i < 50; ++i) work(i);
        DFTRACER_CPP_FINI();
      });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  uint64_t tail = 1;
  auto members = walk_members(read_file(dir + "/" + files[0]), &tail);
  EXPECT_EQ(tail, 0u);
  EXPECT_GE(members.size(), 4u);  // ~2 KiB members plus the one holding the 300 KB event
  int bad = -1;
  auto ev = parse_trace(trace_text(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  int huge = 0, small = 0;
  for (auto& e : of_ph(ev, "X")) {
    if (e.name == "huge") {
      ++huge;
      EXPECT_EQ(e.args.at("blob"), big);
    } else {
      ++small;
    }
  }
  EXPECT_EQ(huge, 1);
  EXPECT_EQ(small, 100);
}

namespace {
volatile sig_atomic_t g_app_handler_calls = 0;
void app_handler(int) { g_app_handler_calls = g_app_handler_calls + 1; }
}  // namespace

TEST(CoreWriter, BoundSignalChainsToTheApplicationHandler) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/s"}, {"DFTRACER_BIND_SIGNALS", "1"}},
                     [&] {
                       signal(SIGINT, app_handler);  // installed before the tracer binds
                       DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
                       for (int i = 0; i < 30; ++i) work(i);
                       raise(SIGINT);
                       if (g_app_handler_calls != 1) _exit(4);
                       // The events so far are on disk already, and tracing goes on.
                       std::string text = trace_text(dftracer::Tracer::instance()->trace_path());
                       int bad = -1;
                       if (of_ph(parse_trace(text, &bad), "X").size() != 30 || bad != 0) _exit(5);
                       for (int i = 0; i < 20; ++i) work(i);
                       DFTRACER_CPP_FINI();
                     });
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  int bad = -1;
  auto ev = parse_trace(trace_text(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(of_ph(ev, "X").size(), 50u);
}

// Literal keys (copied without escaping when plain, escaped when not), runtime keys and raw
// pre-escaped fragments give the exact args bytes.
TEST(CoreWriter, LiteralKeysAndRawFragmentsExactBytes) {
  std::string dir = make_tmpdir();
  int st = run_child(
      {{"DFTRACER_ENABLE", "yes"}, {"DFTRACER_LOG_FILE", dir + "/p"}, {"DFTRACER_TRACE_COMPRESSION", "0"}}, [&] {
        DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
        dftracer::ArgList a;
        a.add_raw("\"fname\":\"/d/x\\\"y\"");
        a.add_int("fd", 7);
        a.add_uint("count", 1234567890123ull);
        a.add_str("k\"q\xff", "v");  // literal that needs escaping
        std::string rk = "r\\k";
        a.add_int(rk, -1);  // runtime key
        a.add("offset", int64_t(0));
        a.add_bool("b", true);
        dftracer::Tracer::instance()->log_complete("read", "POSIX", 1795297461386105, 0, &a);
        a.clear();
        a.add_raw("\"only\":1");
        dftracer::Tracer::instance()->log_complete("x", "y", 99, 100000000, &a);
        DFTRACER_CPP_FINI();
      });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  std::string text = read_file(dir + "/" + files[0]);
  EXPECT_NE(text.find("\"name\":\"read\",\"cat\":\"POSIX\","), std::string::npos);
  EXPECT_NE(text.find(",\"ts\":1795297461386105,\"dur\":0,\"ph\":\"X\",\"args\":{\"fname\":\"/d/x\\\"y\","
                      "\"fd\":7,\"count\":1234567890123,\"k\\\"q\xef\xbf\xbd\":\"v\",\"r\\\\k\":-1,"
                      "\"offset\":0,\"b\":true}}\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(",\"ts\":99,\"dur\":100000000,\"ph\":\"X\",\"args\":{\"only\":1}}\n"), std::string::npos) << text;
  int bad = -1;
  auto ev = parse_trace(text, &bad);
  EXPECT_EQ(bad, 0);
}
