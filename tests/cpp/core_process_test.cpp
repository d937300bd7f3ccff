// Processes: fork children, spawned children (inherited env), SIGKILL and SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core_test_util.h"
#include "dftracer/dftracer.h"
#include "tracer.h"

extern char** environ;
using namespace dft_test;

namespace {
std::vector<Event> xs(const std::string& path, int* bad) {
  std::vector<Event> out;
  for (auto& e : parse_trace(trace_text(path), bad))
    if (e.ph == "X") out.push_back(e);
  return out;
}
void ev(const char* name, int i) {
  dftracer::Region r(name, "T");
  r.update("i", i);
}
}  // namespace

TEST(CoreProcess, ForkChildGetsOwnFileParentIntact) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/f"}}, [&] {
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    for (int i = 0; i < 100; ++i) ev("parent_before", i);
    pid_t c = fork();
    if (c == 0) {
      for (int i = 0; i < 50; ++i) ev("child", i);
      exit(0);  // atexit finalize writes the child's own file
    }
    for (int i = 0; i < 100; ++i) ev("parent_after", i);
    int cs = 0;
    waitpid(c, &cs, 0);
    if (!WIFEXITED(cs) || WEXITSTATUS(cs) != 0) _exit(9);
    std::FILE* f = std::fopen((dir + "/child.pid").c_str(), "w");
    std::fprintf(f, "%d", c);
    std::fclose(f);
    DFTRACER_CPP_FINI();
  });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  std::string cpid = read_file(dir + "/child.pid");
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 3u);
  std::string parent_file, child_file;
  for (auto& f : files) {
    if (f == "child.pid") continue;
    if (f.find("-" + cpid + ".pfw.gz") != std::string::npos) child_file = f;
    else parent_file = f;
  }
  ASSERT_FALSE(child_file.empty());
  ASSERT_FALSE(parent_file.empty());
  // child name = <parent base>-<child pid>
  EXPECT_EQ(child_file, parent_file.substr(0, parent_file.size() - 7) + "-" + cpid + ".pfw.gz");
  int bad = -1;
  auto p = xs(dir + "/" + parent_file, &bad);
  EXPECT_EQ(bad, 0);
  ASSERT_EQ(p.size(), 200u);
  std::set<int64_t> ppids;
  for (auto& e : p) {
    EXPECT_NE(e.name, "child");
    ppids.insert(e.pid);
  }
  EXPECT_EQ(ppids.size(), 1u);
  auto c = xs(dir + "/" + child_file, &bad);
  EXPECT_EQ(bad, 0);
  ASSERT_EQ(c.size(), 50u);  // the parent's unflushed events were dropped in the child
  for (auto& e : c) {
    EXPECT_EQ(e.name, "child");
    EXPECT_EQ(e.pid, std::stoll(cpid));
  }
  EXPECT_EQ(std::system(("gzip -t " + dir + "/*.pfw.gz").c_str()), 0);
}

TEST(CoreProcess, SpawnedChildTracesIntoItsOwnFile) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/s"}, {"DFTRACER_TRACE_COMPRESSION", "0"}},
                     [&] {
                       int rank = 3;
                       DFTRACER_CPP_INIT((dir + "/trace-3-of-4.pfw").c_str(), nullptr, &rank);
                       ev("before_spawn", 0);
                       const char* argv[] = {DFTRACER_C_CHILD, "5", nullptr};
                       pid_t c = 0;
                       if (posix_spawn(&c, DFTRACER_C_CHILD, nullptr, nullptr, const_cast<char**>(argv), environ) != 0)
                         _exit(8);
                       int cs = 0;
                       waitpid(c, &cs, 0);
                       if (!WIFEXITED(cs) || WEXITSTATUS(cs) != 0) _exit(9);
                       std::FILE* f = std::fopen((dir + "/child.pid").c_str(), "w");
                       std::fprintf(f, "%d", c);
                       std::fclose(f);
                       DFTRACER_CPP_FINI();
                     });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::string cpid = read_file(dir + "/child.pid");
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[1], "trace-3-of-4-" + cpid + ".pfw");
  EXPECT_EQ(files[2], "trace-3-of-4.pfw");
  int bad = -1;
  auto c = parse_trace(read_file(dir + "/" + files[1]), &bad);
  EXPECT_EQ(bad, 0);
  int x = 0;
  for (auto& e : c) {
    EXPECT_EQ(e.pid, std::stoll(cpid));
    if (e.ph == "X") ++x;
  }
  EXPECT_EQ(x, 5 * 2);  // the C program writes a function + a region event per iteration
  auto p = xs(dir + "/" + files[2], &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(p.size(), 1u);
}

TEST(CoreProcess, SigkillLeavesReadablePrefix) {
  std::string dir = make_tmpdir();
  std::string log = dir + "/k";
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    setenv("DFTRACER_ENABLE", "1", 1);
    setenv("DFTRACER_LOG_FILE", log.c_str(), 1);
    setenv("DFTRACER_WRITE_BUFFER_SIZE", "4K", 1);
    unsetenv("DFTRACER_ROOT_PID");
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    for (int64_t i = 0;; ++i) ev("spin", static_cast<int>(i));
  }
  // Wait (no timing assertion) until several members are on disk, then kill.
  std::string path;
  for (int i = 0; i < 20000; ++i) {
    auto files = list_dir(dir);
    if (!files.empty()) {
      struct stat sb;
      path = dir + "/" + files[0];
      if (stat(path.c_str(), &sb) == 0 && sb.st_size > 20000) break;
    }
    usleep(1000);
  }
  kill(c, SIGKILL);
  int st = 0;
  waitpid(c, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st));
  ASSERT_FALSE(path.empty());
  std::string bytes = read_file(path);
  uint64_t tail = 0;
  auto members = walk_members(bytes, &tail);
  ASSERT_GE(members.size(), 2u);
  std::string text;
  for (auto& m : members) {
    EXPECT_TRUE(m.inflated_ok);
    EXPECT_EQ(m.lines, m.real_lines);
    text += m.data;
  }
  EXPECT_LT(tail, bytes.size());
  int bad = -1;
  auto evs = parse_trace(text, &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_GT(evs.size(), 100u);
}

TEST(CoreProcess, SigtermWithBoundSignalsFlushesEverything) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/t"}, {"DFTRACER_BIND_SIGNALS", "on"}},
                     [] {
                       signal(SIGTERM, SIG_DFL);
                       DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
                       for (int i = 0; i < 1000; ++i) ev("before_term", i);
                       raise(SIGTERM);
                       for (;;) pause();
                     });
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  int bad = -1;
  auto x = xs(dir + "/" + files[0], &bad);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(x.size(), 1000u);
  EXPECT_EQ(std::system(("gzip -t " + dir + "/" + files[0]).c_str()), 0);
}

// A process that logs no event (only its metadata records) leaves no file; one event creates it.
TEST(CoreProcess, NoEventsNoFile) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/none"}}, [] {
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    dftracer::Tracer::instance()->log_metadata("note", "metadata only");
    dftracer::Tracer::instance()->flush();
    if (fork() == 0) {  // forked child: no event either
      DFTRACER_CPP_FINI();
      _exit(0);
    }
    int cs = 0;
    wait(&cs);
    DFTRACER_CPP_FINI();
  });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(list_dir(dir).size(), 0u);

  st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/one"}}, [] {
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    dftracer::Tracer::instance()->log_metadata("note", "then one event");
    ev("only", 1);
    DFTRACER_CPP_FINI();
  });
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto files = list_dir(dir);
  ASSERT_EQ(files.size(), 1u);
  int bad = -1;
  auto all = parse_trace(trace_text(dir + "/" + files[0]), &bad);
  EXPECT_EQ(bad, 0);
  int x = 0, note = 0;
  for (auto& e : all) {
    x += e.ph == "X";
    note += e.ph == "M" && e.name == "note";
  }
  EXPECT_EQ(x, 1);
  EXPECT_EQ(note, 1);
}

// Issue 2 item 7 / DLIO N4: in a child, an explicit name is used as given; only the inherited
// name (DFTRACER_TRACE_BASE) gets "-<pid>".
TEST(CoreProcess, ExplicitNameInSpawnedChildUsedAsGiven) {
  std::string dir = make_tmpdir();
  for (int inherited = 0; inherited < 2; ++inherited) {
    int st = run_child({{"DFTRACER_ENABLE", "1"},
                        {"DFTRACER_ROOT_PID", "1"},
                        {"DFTRACER_TRACE_BASE", dir + "/root"},
                        {"DFTRACER_TRACE_COMPRESSION", "0"}},
                       [&] {
                         std::string name = inherited ? dir + "/root.pfw"
                                                      : dir + "/worker-" + std::to_string(getpid()) + ".pfw";
                         DFTRACER_CPP_INIT(name.c_str(), nullptr, nullptr);
                         ev("w", 0);
                         std::FILE* f = std::fopen((dir + "/pid" + std::to_string(inherited)).c_str(), "w");
                         std::fprintf(f, "%d", getpid());
                         std::fclose(f);
                         DFTRACER_CPP_FINI();
                       });
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  std::string p0 = read_file(dir + "/pid0"), p1 = read_file(dir + "/pid1");
  auto files = list_dir(dir);
  std::vector<std::string> want = {"pid0", "pid1", "root-" + p1 + ".pfw", "worker-" + p0 + ".pfw"};
  EXPECT_EQ(files, want);
}

// The writer thread blocks every asynchronous signal (a process-directed SIGTERM/SIGINT goes to
// an application thread).
TEST(CoreProcess, WriterThreadBlocksSignals) {
  std::string dir = make_tmpdir();
  int st = run_child({{"DFTRACER_ENABLE", "1"}, {"DFTRACER_LOG_FILE", dir + "/sig"}}, [] {
    DFTRACER_CPP_INIT(nullptr, nullptr, nullptr);
    ev("x", 0);
    dftracer::Tracer::instance()->flush();  // starts the writer thread
    int threads = 0, blocked = 0;
    std::string self = std::to_string(getpid());
    for (auto& tid : list_dir("/proc/self/task")) {
      if (tid == self) continue;
      std::string s = read_file("/proc/self/task/" + tid + "/status");
      size_t at = s.find("SigBlk:");
      if (at == std::string::npos) _exit(3);
      unsigned long long mask = std::stoull(s.substr(at + 7, s.find('\n', at) - at - 7), nullptr, 16);
      ++threads;
      blocked += (mask >> (SIGTERM - 1) & 1) && (mask >> (SIGINT - 1) & 1) && (mask >> (SIGUSR1 - 1) & 1);
    }
    DFTRACER_CPP_FINI();
    _exit(threads == 1 && blocked == 1 ? 0 : 10 + threads * 2 + blocked);
  });
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// In a preloaded process DFTRACER_INIT=PRELOAD enables tracing unless DFTRACER_ENABLE says no.
TEST(CoreProcess, InitPreloadEnablesUnlessExplicitlyDisabled) {
  auto check = [](std::map<std::string, std::string> env) {
    int st = run_child(env, [] { _exit(dftracer::enable_for_preload() && dftracer::config().enable ? 1 : 0); });
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(check({{"DFTRACER_INIT", "PRELOAD"}}), 1);
  EXPECT_EQ(check({{"DFTRACER_INIT", "preload"}, {"DFTRACER_ENABLE", "1"}}), 1);
  EXPECT_EQ(check({{"DFTRACER_INIT", "PRELOAD"}, {"DFTRACER_ENABLE", "0"}}), 0);
  EXPECT_EQ(check({{"DFTRACER_INIT", "FUNCTION"}}), 0);
  EXPECT_EQ(check({}), 0);
}
