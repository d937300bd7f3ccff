// The per-process tracer: per-thread event buffers, one process-wide chunk that becomes one
// gzip member (or plain bytes) when it reaches DFTRACER_WRITE_BUFFER_SIZE, and a background
// writer thread that compresses and writes chunks, so deflate never runs on application threads.
#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "gzip_member.h"
#include "../format/event.h"
#include "../format/json_text.h"
#include "tracer.h"

#ifndef DFTRACER_VERSION
#define DFTRACER_VERSION "0.0.0"
#endif

extern "C" {
__attribute__((visibility("default"))) int dftracer_active_flag = 0;
}

namespace dftracer {

namespace {
thread_local int t_guard = 0;
thread_local int t_last_event = 0;  // LastEventScope depth
thread_local int t_tid = 0;
// Signals: while t_defer > 0 this thread holds tracer locks that the writer needs, so a signal
// whose default action ends the process is held in t_pending_sig and re-raised by ~SignalDefer.
thread_local int t_defer = 0;
thread_local volatile sig_atomic_t t_pending_sig = 0;

struct SignalDefer {
  SignalDefer() noexcept { ++t_defer; }
  ~SignalDefer() noexcept {
    if (--t_defer == 0 && t_pending_sig != 0) {
      int sig = t_pending_sig;
      t_pending_sig = 0;
      raise(sig);  // the tracer's handler runs again, now without our locks held
    }
  }
  SignalDefer(const SignalDefer&) = delete;
  SignalDefer& operator=(const SignalDefer&) = delete;
};

void set_active(bool on) { __atomic_store_n(&dftracer_active_flag, on ? 1 : 0, __ATOMIC_RELAXED); }

void log_msg(LogLevel lvl, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void log_msg(LogLevel lvl, const char* fmt, ...) {
  if (static_cast<int>(lvl) > static_cast<int>(config().log_level)) return;
  static const char* const kNames[] = {"error", "warning", "info", "debug"};
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "dftracer: %s: %s\n", kNames[static_cast<int>(lvl)], buf);
}

std::string strip_trace_suffix(std::string s) {
  for (const char* suf : {".pfw.gz", ".pfw", ".gz"}) {
    size_t n = std::strlen(suf);
    if (s.size() > n && s.compare(s.size() - n, n, suf) == 0) {
      s.resize(s.size() - n);
      break;
    }
  }
  return s;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return normalize_path(p);
  char buf[4096];
  std::string cwd = getcwd(buf, sizeof(buf)) ? buf : "/";
  return normalize_path(cwd + "/" + p);
}

std::string dirname_of(const std::string& p) {
  size_t s = p.rfind('/');
  if (s == std::string::npos || s == 0) return "/";
  return p.substr(0, s);
}

// mkdir -p; returns 0 or errno.
int make_dirs(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  if (dir == "/" || dir.empty()) return 0;
  int rc = make_dirs(dirname_of(dir));
  if (rc) return rc;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  return 0;
}

bool write_all(int fd, const char* p, size_t n, int* err) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (w == 0) {
      *err = ENOSPC;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Lowest descriptor number the trace file asks for: 1024, just above FD_SETSIZE, so select()-sized
// fd sets and the daemon idiom "close 3..1023" never meet it, and the application's own numbers
// (always the lowest free ones) stay what they would be without the tracer; or the highest number
// RLIMIT_NOFILE allows when that is lower. Never below 3 (stdin, stdout, stderr).
int trace_fd_floor() {
  struct rlimit rl;
  rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
  if (lim == RLIM_INFINITY || lim > 1025) return 1024;
  return std::max(3, static_cast<int>(lim) - 1);
}

bool same_file(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// Close-on-exec duplicate of f on the lowest free number >= trace_fd_floor(), or, if all of
// those are taken, >= half of it, a quarter, ... >= 3. -1 (errno set) if none is free.
int dup_fd_up(int f) {
  int h = -1;
  for (int floor = trace_fd_floor(); h < 0; floor /= 2) {
    if (floor < 3) floor = 3;
    h = ::fcntl(f, F_DUPFD_CLOEXEC, floor);
    if (floor == 3) break;
  }
  return h;
}

// Grows this process's descriptor table to hold trace_fd_floor(), so that the trace file's
// F_DUPFD_CLOEXEC later does not have to. The kernel waits for an RCU grace period (10-20 ms on
// this VM) when it grows the table of a process whose table is shared by several threads, which
// is the case once the writer thread runs; a single-threaded process grows it at no such cost.
// Called before the writer thread is created (one fcntl + close, never seen by the application:
// the number is above everything it owns and closed at once).
void reserve_fd_table() {
  for (int f = 0; f < 3; ++f) {
    int h = ::fcntl(f, F_DUPFD_CLOEXEC, trace_fd_floor());
    if (h >= 0) {
      ::close(h);
      return;
    }
  }
}

// Moves descriptor f up (dup_fd_up) and closes f (unless another thread of the application put
// its own file on that number meanwhile). Returns the new number, or -1 (errno set; f closed).
int move_fd_up(int f) {
  int h = dup_fd_up(f);
  int e = errno;
  if (h < 0 || same_file(f, h)) ::close(f);
  errno = e;
  return h;
}

std::string read_small_file(const char* path) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  ssize_t r;
  while ((r = ::read(fd, buf, sizeof(buf))) > 0 && out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(r));
  ::close(fd);
  return out;
}

std::string exec_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

int64_t now_us() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

ReentryGuard::ReentryGuard() noexcept { ++t_guard; }
ReentryGuard::~ReentryGuard() noexcept { --t_guard; }
bool in_tracer() noexcept { return t_guard > 0; }
LastEventScope::LastEventScope() noexcept { ++t_last_event; }
LastEventScope::~LastEventScope() noexcept { --t_last_event; }

int current_tid() noexcept {
  if (__builtin_expect(t_tid == 0, 0)) t_tid = static_cast<int>(syscall(SYS_gettid));
  return t_tid;
}

// ---------------------------------------------------------------------------- thread state
struct ThreadState {
  // 0 free, 1 held by the owning thread (formatting an event), 2 held by another thread (drain).
  // A signal handler that finds its own thread's state at 1 knows it interrupted the formatting.
  std::atomic<int> busy{0};
  volatile sig_atomic_t pending_sig = 0;  // fatal signal deferred until the owner unlocks
  char* buf = nullptr;
  size_t size = 0;
  size_t cap = 0;
  int tid = 0;
  uint64_t id_next = 0, id_end = 0;  // block of event ids reserved by this thread
  uint32_t nev = 0;     // events ("X"/"i") in buf since the last drain (metadata lines excluded)
  char ptid[64];        // ,"pid":P,"tid":T,"ts":
  size_t ptid_len = 0;

  void lock(int who = 1) noexcept {
    while (busy.exchange(who, std::memory_order_acquire)) {
      for (int i = 0; i < 64 && busy.load(std::memory_order_relaxed); ++i) __builtin_ia32_pause();
      if (busy.load(std::memory_order_relaxed)) sched_yield();
    }
  }
  // Another thread's try: spins briefly, never waits for an owner that may be blocked.
  bool try_lock_other() noexcept {
    for (int i = 0; i < 1024; ++i) {
      int expected = 0;
      if (busy.compare_exchange_weak(expected, 2, std::memory_order_acquire)) return true;
      __builtin_ia32_pause();
    }
    return false;
  }
  void unlock() noexcept { busy.store(0, std::memory_order_release); }
  void set_ids(int pid, int new_tid) {
    tid = new_tid;
    char* p = json::write_lit(ptid, ",\"pid\":");
    p = json::write_i64(p, pid);
    p = json::write_lit(p, ",\"tid\":");
    p = json::write_i64(p, new_tid);
    p = json::write_lit(p, ",\"ts\":");
    ptid_len = static_cast<size_t>(p - ptid);
  }
};

namespace {
thread_local ThreadState* t_state = nullptr;
}

struct DirSet {
  bool all = true;
  std::vector<std::string> dirs;
  std::string exclude;  // trace output base path (string prefix)
};

// A filled thread buffer handed over as is (no copy): a chunk is a list of pieces.
struct Piece {
  char* data;
  size_t size;
  size_t cap;
};
struct Chunk {
  std::vector<Piece> pieces;
  size_t bytes = 0;
  bool has_events = false;  // holds at least one event line (not only "[" and metadata)
  bool empty() const { return pieces.empty(); }
};

enum Phase : int { UNINIT = 0, ACTIVE = 1, FINALIZED = 2, FAILED = 3 };
constexpr uint64_t kIdBlock = 256;

class TracerImpl {
 public:
  TracerImpl();

  // locks (order: ctl, reg, [thread state], buf, q, file)
  pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t file_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;  // leaf lock
  pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

  std::atomic<int> phase{UNINIT};
  pthread_key_t key{};

  std::vector<ThreadState*> states;  // reg_mu
  Chunk chunk;                       // buf_mu
  bool events_pushed = false;        // buf_mu: an event reached the writer, so the file exists (lazy create)
  std::deque<Chunk> queue;           // q_mu
  std::vector<char*> free_bufs;      // pool_mu: spare thread buffers of tcap bytes
  std::atomic<bool> writer_running{false};  // written under q_mu; read by signal handlers
  bool stop = false;                 // q_mu
  pthread_t writer{};
  std::atomic<uint64_t> pushed{0}, written{0};
  // Writer wake-up: sem_post is async-signal-safe, so signal handlers can ring it too.
  sem_t wake;
  std::atomic<uint64_t> flush_requested{0}, flush_done{0};  // handler flush requests / served
  int flush_interval_ms = 500;       // DFTRACER_FLUSH_INTERVAL (0: no timed flush)

  // Trace file descriptor: written under file_mu, read lock-free by Tracer::trace_fd() (the
  // preload's close/dup2 wrappers protect it). file_dev/file_ino identify the file it must name.
  std::atomic<int> fd{-1};
  dev_t file_dev = 0;                // file_mu
  ino_t file_ino = 0;                // file_mu
  std::string base;                  // ctl_mu + file_mu
  std::string parent_base;           // forked child: the parent's base (its inherited name)
  std::string path;                  // file_mu
  off_t good_size = 0;               // file_mu
  bool warned = false;               // file_mu
  MemberEncoder* enc = nullptr;      // writer thread

  bool compression = true;
  int level = 1;
  size_t wbs = 4u << 20;
  size_t tcap = 64u << 10;
  int pid = 0;
  std::string hostname;
  std::atomic<uint64_t> next_id{0};
  std::atomic<const DirSet*> dirs{nullptr};
  bool dirs_all = true;                   // ctl_mu
  std::vector<std::string> dir_list;      // ctl_mu
  bool forked_child = false;
  bool atexit_done = false, atfork_done = false, signals_done = false;
  bool fd_table_reserved = false;         // reserve_fd_table() done in this process (not inherited by fork)
  bool process_id_logged = false;
  int process_id = -1;

  // --- helpers
  ThreadState* state() {
    ThreadState* s = t_state;
    return __builtin_expect(s != nullptr, 1) ? s : new_state();
  }
  ThreadState* new_state();
  static void state_dtor(void* p);
  void ensure(ThreadState* s, size_t need);
  void drain_locked(ThreadState* s);
  char* get_buffer();
  void release(Piece& p);
  void release(Chunk& c);
  void append_copy(const std::string& text);
  bool push_locked(bool force = false);
  void start_writer_locked();
  static void* writer_main(void* arg);
  void write_chunk(const Chunk& c);
  bool open_file_locked();
  bool check_fd_locked();
  bool move_fd_locked(int wanted);
  void close_fd_locked();
  void fail_locked(const char* what, int err);
  std::string ext() const { return compression ? ".pfw.gz" : ".pfw"; }
  std::string compute_base(const char* log_file);
  void publish_dirs();
  void set_dirs(const char* spec);
  void begin_file_contents(int64_t ts);
  void metadata_line(std::string& out, std::string_view key, std::string_view value, int64_t ts, bool perfetto_name);
  void drain_all();
  void flush_wait();
  void stop_writer();
  void writer_flush(bool wait_for_locks);
  void process_queue_locked();
  void rename_to(const std::string& new_base);
  void export_env();
  bool is_child() const;

  // fork
  static void atfork_prepare();
  static void atfork_parent();
  static void atfork_child();
  // signals
  void signal_flush(bool wait) noexcept;
};

namespace {
TracerImpl* g_impl = nullptr;
thread_local bool t_fork_locked = false;
}  // namespace

TracerImpl::TracerImpl() {
  pthread_key_create(&key, &TracerImpl::state_dtor);
  const Config& c = config();
  dirs_all = c.trace_all;
  dir_list = c.data_dirs;
  base = c.log_file;
  sem_init(&wake, 0, 0);
  publish_dirs();
}

ThreadState* TracerImpl::new_state() {
  SignalDefer defer;  // reg_mu below
  auto* s = new ThreadState();
  s->cap = tcap;
  s->buf = static_cast<char*>(std::malloc(s->cap));
  s->set_ids(pid ? pid : static_cast<int>(getpid()), current_tid());
  pthread_mutex_lock(&reg_mu);
  states.push_back(s);
  pthread_mutex_unlock(&reg_mu);
  pthread_setspecific(key, s);
  t_state = s;
  return s;
}

// Thread exit: hand the remaining events to the process chunk, then free.
void TracerImpl::state_dtor(void* p) {
  auto* s = static_cast<ThreadState*>(p);
  TracerImpl* t = g_impl;
  if (!t || !s) return;
  SignalDefer defer;
  pthread_mutex_lock(&t->reg_mu);
  for (size_t i = 0; i < t->states.size(); ++i) {
    if (t->states[i] == s) {
      t->states[i] = t->states.back();
      t->states.pop_back();
      break;
    }
  }
  pthread_mutex_unlock(&t->reg_mu);
  s->lock();
  t->drain_locked(s);
  s->unlock();
  std::free(s->buf);
  delete s;
  t_state = nullptr;
}

void TracerImpl::ensure(ThreadState* s, size_t need) {
  if (s->size + need <= s->cap) return;
  drain_locked(s);
  if (need > s->cap) {
    size_t cap = s->cap;
    while (cap < need) cap *= 2;
    char* nb = static_cast<char*>(std::realloc(s->buf, cap));
    if (!nb) return;
    s->buf = nb;
    s->cap = cap;
  }
}

// Hand the thread's buffer to the process chunk without copying; the thread gets a spare one.
void TracerImpl::drain_locked(ThreadState* s) {
  if (!s->size) return;
  pthread_mutex_lock(&buf_mu);
  if (phase.load(std::memory_order_relaxed) == ACTIVE) {
    if (char* fresh = get_buffer()) {
      chunk.pieces.push_back(Piece{s->buf, s->size, s->cap});
      chunk.bytes += s->size;
      chunk.has_events |= s->nev != 0;
      s->buf = fresh;
      s->cap = tcap;
      if (chunk.bytes >= wbs) push_locked(true);
    }  // out of memory: these events are dropped, the buffer is reused
  }
  s->size = 0;
  s->nev = 0;
  pthread_mutex_unlock(&buf_mu);
}

char* TracerImpl::get_buffer() {
  pthread_mutex_lock(&pool_mu);
  char* b = nullptr;
  if (!free_bufs.empty()) {
    b = free_bufs.back();
    free_bufs.pop_back();
  }
  pthread_mutex_unlock(&pool_mu);
  return b ? b : static_cast<char*>(std::malloc(tcap));
}

void TracerImpl::release(Piece& p) {
  if (!p.data) return;
  bool keep = false;
  if (p.cap == tcap) {
    pthread_mutex_lock(&pool_mu);
    // Enough spares for every chunk in flight plus a few threads.
    if (free_bufs.size() < 6 * (wbs / tcap + 1) + 16) {
      free_bufs.push_back(p.data);
      keep = true;
    }
    pthread_mutex_unlock(&pool_mu);
  }
  if (!keep) std::free(p.data);
  p.data = nullptr;
}

void TracerImpl::release(Chunk& c) {
  for (Piece& p : c.pieces) release(p);
  c.pieces.clear();
  c.bytes = 0;
}

// Copy text into the chunk as its own piece (caller holds buf_mu).
void TracerImpl::append_copy(const std::string& text) {
  if (text.empty()) return;
  char* d = static_cast<char*>(std::malloc(text.size()));
  if (!d) return;
  std::memcpy(d, text.data(), text.size());
  chunk.pieces.push_back(Piece{d, text.size(), text.size()});
  chunk.bytes += text.size();
}

// Hand the process chunk to the writer (caller holds buf_mu). The trace file is created lazily:
// until a chunk with an event is pushed, a chunk of only "[" and metadata records is kept back
// (force: pushed anyway, so memory stays bounded), so a process that logs no event leaves no file.
// Returns true if the chunk was pushed.
bool TracerImpl::push_locked(bool force) {
  if (chunk.empty()) return false;
  if (!events_pushed && !chunk.has_events && !force) return false;
  events_pushed = true;
  pthread_mutex_lock(&q_mu);
  // Back-pressure: at most 4 chunks in flight, so memory stays bounded.
  while (queue.size() >= 4 && writer_running && phase.load() == ACTIVE) pthread_cond_wait(&done_cv, &q_mu);
  queue.push_back(std::move(chunk));
  pushed.fetch_add(1);
  chunk = Chunk();
  chunk.pieces.reserve(wbs / tcap + 4);
  if (t_last_event == 0) start_writer_locked();  // else flush_wait() writes it on this thread
  sem_post(&wake);
  pthread_mutex_unlock(&q_mu);
  return true;
}

void TracerImpl::start_writer_locked() {
  if (writer_running) return;
  if (!fd_table_reserved) {
    reserve_fd_table();  // while the process may still be single threaded
    fd_table_reserved = true;
  }
  stop = false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // the writer never takes signals
  int rc = pthread_create(&writer, nullptr, &TracerImpl::writer_main, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc == 0) writer_running = true;
}

// Write every queued chunk in order (caller holds q_mu; released while writing).
void TracerImpl::process_queue_locked() {
  while (!queue.empty()) {
    Chunk c = std::move(queue.front());
    queue.pop_front();
    pthread_mutex_unlock(&q_mu);
    write_chunk(c);
    release(c);
    pthread_mutex_lock(&q_mu);
    written.fetch_add(1);
    pthread_cond_broadcast(&done_cv);
  }
}

// The writer's own flush (timed, or asked for by a signal handler): move every thread's buffered
// events into the chunk and queue it. Never waits for an application thread: a thread buffer held
// by its owner (formatting an event) is skipped until the next flush, and the chunk lock is only
// tried (its holder may be waiting for this thread to make room in the queue).
// wait_for_locks: keep trying (writing queued chunks meanwhile) for up to ~1 s.
void TracerImpl::writer_flush(bool wait_for_locks) {
  if (phase.load() != ACTIVE) return;
  for (int i = 0;; ++i) {
    if (pthread_mutex_trylock(&reg_mu) == 0) {
      if (pthread_mutex_trylock(&buf_mu) == 0) break;
      pthread_mutex_unlock(&reg_mu);
    }
    if (!wait_for_locks || i >= 1000) return;
    pthread_mutex_lock(&q_mu);
    process_queue_locked();
    pthread_mutex_unlock(&q_mu);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
  if (phase.load() == ACTIVE) {
    for (ThreadState* s : states) {
      if (!s->size || !s->try_lock_other()) continue;
      if (s->size) {
        if (char* fresh = get_buffer()) {
          chunk.pieces.push_back(Piece{s->buf, s->size, s->cap});
          chunk.bytes += s->size;
          chunk.has_events |= s->nev != 0;
          s->buf = fresh;
          s->cap = tcap;
          s->size = 0;
          s->nev = 0;
        }
      }
      s->unlock();
    }
    if (!chunk.empty() && (events_pushed || chunk.has_events)) {
      events_pushed = true;
      pthread_mutex_lock(&q_mu);
      queue.push_back(std::move(chunk));  // no back-pressure: this thread empties the queue
      pushed.fetch_add(1);
      chunk = Chunk();
      chunk.pieces.reserve(wbs / tcap + 4);
      pthread_mutex_unlock(&q_mu);
    }
  }
  pthread_mutex_unlock(&buf_mu);
  pthread_mutex_unlock(&reg_mu);
}

namespace {
struct timespec mono_after(const struct timespec& from, int ms) {
  struct timespec t = from;
  t.tv_sec += ms / 1000;
  t.tv_nsec += static_cast<long>(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}
bool mono_reached(const struct timespec& now, const struct timespec& deadline) {
  return now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}
}  // namespace

// The writer thread: writes queued chunks; every flush_interval_ms it also flushes the thread
// buffers itself (timed flush: bounds what SIGKILL can lose), and serves signal handlers' flush
// requests. Woken by sem_post (chunk queued, flush requested, stop) or by the timeout.
void* TracerImpl::writer_main(void* arg) {
  auto* t = static_cast<TracerImpl*>(arg);
  t_guard = 1;  // everything this thread does is the tracer's own work
  const int interval = t->flush_interval_ms;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  struct timespec next_tick = mono_after(now, interval);
  while (true) {
    if (interval > 0) {
      while (sem_clockwait(&t->wake, CLOCK_MONOTONIC, &next_tick) != 0 && errno == EINTR) {
      }
    } else {
      while (sem_wait(&t->wake) != 0 && errno == EINTR) {
      }
    }
    pthread_mutex_lock(&t->q_mu);
    t->process_queue_locked();
    bool stopping = t->stop;
    pthread_mutex_unlock(&t->q_mu);
    uint64_t requested = t->flush_requested.load();
    bool tick = false;
    if (interval > 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (mono_reached(now, next_tick)) {
        tick = true;
        next_tick = mono_after(now, interval);
      }
    }
    if (!stopping && (tick || requested != t->flush_done.load())) {
      t->writer_flush(requested != t->flush_done.load());
      pthread_mutex_lock(&t->q_mu);
      t->process_queue_locked();
      pthread_mutex_unlock(&t->q_mu);
      t->flush_done.store(requested);
    }
    if (stopping) {
      pthread_mutex_lock(&t->q_mu);
      bool done = t->queue.empty();
      pthread_mutex_unlock(&t->q_mu);
      if (done) break;
    }
  }
  return nullptr;
}

void TracerImpl::fail_locked(const char* what, int err) {
  if (!warned) {
    warned = true;
    std::fprintf(stderr, "dftracer: warning: %s %s: %s; tracing disabled\n", what, path.empty() ? base.c_str() : path.c_str(),
                 std::strerror(err));
  }
  phase.store(FAILED);
  set_active(false);
}

bool TracerImpl::open_file_locked() {
  int rc = make_dirs(dirname_of(base));
  if (rc) {
    fail_locked("cannot create the directory of trace file", rc);
    return false;
  }
  for (int n = 0; n < 1000; ++n) {
    std::string p = n == 0 ? base + ext() : base + "." + std::to_string(n) + ext();
    int f = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f >= 0) {
      struct stat st;
      int e = 0;
      if ((f = move_fd_up(f)) < 0 || fstat(f, &st) != 0) {
        e = errno;
        if (f >= 0) ::close(f);
        ::unlink(p.c_str());
        path = p;
        fail_locked("cannot get a descriptor (>= 3) for trace file", e);
        return false;
      }
      fd = f;
      file_dev = st.st_dev;
      file_ino = st.st_ino;
      path = p;
      good_size = 0;
      if (n) log_msg(LogLevel::INFO, "%s exists; writing %s", (base + ext()).c_str(), p.c_str());
      return true;
    }
    if (errno != EEXIST) {
      int e = errno;
      path = p;
      fail_locked("cannot create trace file", e);
      return false;
    }
  }
  fail_locked("cannot create trace file (too many existing versions)", EEXIST);
  return false;
}

// True if fd still names the trace file (same st_dev/st_ino as at open). The application may have
// closed it (close_range, a daemon's close loop, raw system calls no wrapper sees) and reused the
// number, or dup2'ed its own file onto it. Checked before every chunk write (one fstat per gzip
// member, not per event). If not, the number is left to the application (never written, never
// closed) and the trace file is re-opened by path, positioned at the end of what was written.
bool TracerImpl::check_fd_locked() {
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_dev == file_dev && st.st_ino == file_ino) return true;
  int lost = fd;
  fd = -1;
  int f = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  int e = errno;
  if (f >= 0) {
    if (fstat(f, &st) != 0 || st.st_dev != file_dev || st.st_ino != file_ino) {
      e = ESTALE;  // the path names another file now: never write into it
      ::close(f);
      f = -1;
    } else if ((f = move_fd_up(f)) < 0) {
      e = errno;
    } else if (::lseek(f, good_size, SEEK_SET) != good_size) {
      e = errno;
      ::close(f);
      f = -1;
    }
  }
  if (f < 0) {
    fail_locked("lost the descriptor of trace file and cannot re-open", e);
    return false;
  }
  fd = f;
  log_msg(LogLevel::INFO, "descriptor %d of %s was closed or replaced by the application; re-opened as %d", lost,
          path.c_str(), f);
  return true;
}

// The application wants descriptor number `wanted` (dup2/dup3 onto it): if the trace file holds
// it, move the trace file to another number and free `wanted`. On failure nothing changes; the
// application's call then replaces our descriptor and check_fd_locked() re-opens the file.
bool TracerImpl::move_fd_locked(int wanted) {
  if (fd < 0 || fd != wanted) return true;
  int h = dup_fd_up(wanted);
  if (h < 0) return false;
  fd = h;
  ::close(wanted);
  return true;
}

// Close the trace descriptor if it still names the trace file (else it is the application's now).
void TracerImpl::close_fd_locked() {
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == file_dev && st.st_ino == file_ino) ::close(fd);
  fd = -1;
}

void TracerImpl::write_chunk(const Chunk& c) {
  if (phase.load() == FAILED || c.empty()) return;
  if (compression) {
    if (!enc) enc = new MemberEncoder(level);
    std::vector<MemberEncoder::Span> spans;
    spans.reserve(c.pieces.size());
    for (const Piece& p : c.pieces) spans.push_back(MemberEncoder::Span{p.data, p.size});
    if (!enc->encode(spans.data(), spans.size())) {
      pthread_mutex_lock(&file_mu);
      fail_locked("zlib failed while compressing", EIO);
      pthread_mutex_unlock(&file_mu);
      return;
    }
  }
  pthread_mutex_lock(&file_mu);
  if (phase.load() != FAILED && (fd >= 0 ? check_fd_locked() : open_file_locked())) {
    int err = 0;
    bool ok = true;
    size_t len = 0;
    if (compression) {
      ok = write_all(fd, enc->member_data(), enc->member_size(), &err);
      len = enc->member_size();
    } else {
      for (const Piece& p : c.pieces) {
        if (!(ok = write_all(fd, p.data, p.size, &err))) break;
        len += p.size;
      }
    }
    if (ok) {
      good_size += static_cast<off_t>(len);
    } else {
      // Cut a partial member off so that the file stays a valid sequence of members.
      if (ftruncate(fd, good_size) != 0) { /* keep the first error */ }
      fail_locked("cannot write trace file", err);
    }
  }
  pthread_mutex_unlock(&file_mu);
}

bool TracerImpl::is_child() const {
  if (forked_child) return true;
  const char* r = std::getenv("DFTRACER_ROOT_PID");
  return r && *r && std::atoi(r) != static_cast<int>(getpid());
}

std::string TracerImpl::compute_base(const char* log_file) {
  int mypid = static_cast<int>(getpid());
  bool child = is_child();
  if (log_file && *log_file) {
    // An explicit name is used as given (a spawned worker naming itself "...-<pid>" keeps that
    // name); only the name this process inherited (the parent's, or DFTRACER_TRACE_BASE) gets
    // "-<pid>", so parent and child never share a file.
    std::string b = absolute(strip_trace_suffix(log_file));
    const char* inherited = std::getenv("DFTRACER_TRACE_BASE");
    if (child && ((forked_child && b == parent_base) || (inherited && b == inherited)))
      b += "-" + std::to_string(mypid);
    return b;
  }
  if (forked_child) return base;  // already <parent base>-<pid>
  const char* inherited = std::getenv("DFTRACER_TRACE_BASE");
  if (child && inherited && *inherited) return std::string(inherited) + "-" + std::to_string(mypid);
  return config().log_file + "-" + hostname + "-" + std::to_string(mypid);
}

void TracerImpl::export_env() {
  if (is_child()) return;  // descendants name themselves after the root
  setenv("DFTRACER_ROOT_PID", std::to_string(getpid()).c_str(), 1);
  setenv("DFTRACER_TRACE_BASE", base.c_str(), 1);
}

void TracerImpl::publish_dirs() {
  auto* d = new DirSet();
  d->all = dirs_all;
  d->dirs = dir_list;
  d->exclude = base;
  // Old sets are leaked on purpose: readers hold no lock; updates happen a handful of times.
  dirs.store(d, std::memory_order_release);
}

void TracerImpl::set_dirs(const char* spec) {
  bool all = false;
  std::vector<std::string> d = parse_data_dirs(spec, &all);
  if (!all && d.empty()) {
    log_msg(LogLevel::WARN, "data_dirs '%s' names no directory; tracing all paths", spec);
    all = true;
  }
  dirs_all = all;
  dir_list = d;
  std::string joined = all ? "all" : "";
  for (auto& x : d) {
    if (!joined.empty()) joined += ':';
    joined += x;
  }
  if (!is_child()) setenv("DFTRACER_DATA_DIR", joined.c_str(), 1);  // spawned children inherit
  publish_dirs();
}

void TracerImpl::metadata_line(std::string& out, std::string_view key, std::string_view value, int64_t ts,
                               bool perfetto_name) {
  size_t need = 160 + json::max_escaped(key.size()) * 2 + json::max_escaped(value.size());
  size_t old = out.size();
  out.resize(old + need);
  char* p = &out[old];
  p = json::write_lit(p, "{\"id\":");
  p = json::write_u64(p, next_id.fetch_add(1, std::memory_order_relaxed));
  p = json::write_lit(p, ",\"name\":");
  p = json::write_quoted(p, key);
  p = json::write_lit(p, ",\"cat\":\"" DFT_TRACER_CATEGORY "\",\"pid\":");
  p = json::write_i64(p, pid);
  p = json::write_lit(p, ",\"tid\":");
  p = json::write_i64(p, current_tid());
  p = json::write_lit(p, ",\"ts\":");
  p = json::write_i64(p, ts);
  p = json::write_lit(p, ",\"ph\":\"M\",\"args\":{\"name\":");
  if (perfetto_name) {
    p = json::write_quoted(p, value);  // Chrome "process_name": args.name is the name itself
  } else {
    p = json::write_quoted(p, key);
    p = json::write_lit(p, ",\"value\":");
    p = json::write_quoted(p, value);
  }
  p = json::write_lit(p, "}}\n");
  out.resize(static_cast<size_t>(p - &out[0]));
}

// "[" then the process metadata records (caller holds buf_mu or is single threaded).
void TracerImpl::begin_file_contents(int64_t ts) {
  release(chunk);
  std::string text = "[\n";
  std::string exe = exec_path();
  std::string exe_name = exe.substr(exe.rfind('/') + 1);
  std::string cmd = read_small_file("/proc/self/cmdline");
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  for (auto& c : cmd) if (c == '\0') c = ' ';
  metadata_line(text, "process_name", exe_name, ts, true);
  metadata_line(text, "hostname", hostname, ts, false);
  metadata_line(text, "exec_name", exe, ts, false);
  metadata_line(text, "cmd_line", cmd, ts, false);
  metadata_line(text, "version", DFTRACER_VERSION, ts, false);
  metadata_line(text, "start_time", std::to_string(ts), ts, false);
  metadata_line(text, "ppid", std::to_string(getppid()), ts, false);
  if (process_id >= 0) metadata_line(text, "process_id", std::to_string(process_id), ts, false);
  if (config().set_core_affinity) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i) {
        if (CPU_ISSET(i, &set)) {
          if (!cpus.empty()) cpus += ',';
          cpus += std::to_string(i);
        }
      }
    }
    metadata_line(text, "core_affinity", cpus, ts, false);
  }
  append_copy(text);
}

void TracerImpl::drain_all() {
  pthread_mutex_lock(&reg_mu);
  for (ThreadState* s : states) {
    s->lock(2);
    drain_locked(s);
    s->unlock();
  }
  pthread_mutex_unlock(&reg_mu);
}

// Push the current chunk (even if small) and wait until the writer has written it.
void TracerImpl::flush_wait() {
  pthread_mutex_lock(&buf_mu);
  push_locked();
  pthread_mutex_unlock(&buf_mu);
  uint64_t target = pushed.load();
  pthread_mutex_lock(&q_mu);
  if (!writer_running) {
    // No writer (the events came under a LastEventScope, or it could not start): write here,
    // holding q_mu throughout so that no writer starts and writes meanwhile.
    while (!queue.empty()) {
      Chunk c = std::move(queue.front());
      queue.pop_front();
      write_chunk(c);
      release(c);
      written.fetch_add(1);
    }
  }
  while (written.load() < target && writer_running) pthread_cond_wait(&done_cv, &q_mu);
  pthread_mutex_unlock(&q_mu);
}

void TracerImpl::stop_writer() {
  pthread_mutex_lock(&q_mu);
  bool running = writer_running;
  stop = true;
  sem_post(&wake);
  pthread_mutex_unlock(&q_mu);
  if (running) pthread_join(writer, nullptr);
  pthread_mutex_lock(&q_mu);
  writer_running = false;
  stop = false;
  for (Chunk& c : queue) release(c);
  queue.clear();
  pthread_mutex_unlock(&q_mu);
}

// Move the output to new_base (hybrid mode: preload started, then initialize(log_file=...)).
void TracerImpl::rename_to(const std::string& new_base) {
  pthread_mutex_lock(&file_mu);
  if (fd < 0) {
    base = new_base;
  } else {
    int rc = make_dirs(dirname_of(new_base));
    bool moved = false;
    for (int n = 0; rc == 0 && n < 1000 && !moved; ++n) {
      std::string p = n == 0 ? new_base + ext() : new_base + "." + std::to_string(n) + ext();
      // link + unlink never replaces an existing file.
      if (::link(path.c_str(), p.c_str()) == 0) {
        ::unlink(path.c_str());
        path = p;
        moved = true;
      } else if (errno != EEXIST) {
        rc = errno;
      }
    }
    if (moved) {
      base = new_base;
    } else {
      log_msg(LogLevel::WARN, "cannot move trace file %s to %s%s: %s; keeping the old name", path.c_str(),
              new_base.c_str(), ext().c_str(), std::strerror(rc ? rc : EEXIST));
    }
  }
  pthread_mutex_unlock(&file_mu);
  publish_dirs();
  export_env();
}

// ------------------------------------------------------------------------------- fork
void TracerImpl::atfork_prepare() {
  TracerImpl* t = g_impl;
  if (!t) return;
  t_fork_locked = true;
  ++t_defer;  // until atfork_parent/child: this thread holds every tracer lock
  pthread_mutex_lock(&t->ctl_mu);
  pthread_mutex_lock(&t->reg_mu);
  pthread_mutex_lock(&t->buf_mu);
  pthread_mutex_lock(&t->q_mu);
  pthread_mutex_lock(&t->file_mu);
  pthread_mutex_lock(&t->pool_mu);
}

void TracerImpl::atfork_parent() {
  TracerImpl* t = g_impl;
  if (!t || !t_fork_locked) return;
  t_fork_locked = false;
  SignalDefer undefer;  // pairs with the ++t_defer of atfork_prepare (two decrements below)
  --t_defer;
  pthread_mutex_unlock(&t->pool_mu);
  pthread_mutex_unlock(&t->file_mu);
  pthread_mutex_unlock(&t->q_mu);
  pthread_mutex_unlock(&t->buf_mu);
  pthread_mutex_unlock(&t->reg_mu);
  pthread_mutex_unlock(&t->ctl_mu);
}

// The child: drop the parent's unflushed events, never touch the parent's file, start a new
// file <parent base>-<pid> lazily; the writer thread restarts on the first full chunk.
void TracerImpl::atfork_child() {
  t_tid = 0;
  TracerImpl* t = g_impl;
  if (!t || !t_fork_locked) return;
  t_fork_locked = false;
  SignalDefer undefer;  // pairs with the ++t_defer of atfork_prepare
  --t_defer;
  ReentryGuard guard;  // reading /proc/self/cmdline below is the tracer's own I/O
  for (pthread_mutex_t* m : {&t->ctl_mu, &t->reg_mu, &t->buf_mu, &t->q_mu, &t->file_mu, &t->pool_mu}) pthread_mutex_init(m, nullptr);
  pthread_cond_init(&t->done_cv, nullptr);
  t->writer_running = false;
  t->stop = false;
  sem_destroy(&t->wake);
  sem_init(&t->wake, 0, 0);
  t->flush_requested.store(0);
  t->flush_done.store(0);
  for (Chunk& c : t->queue) t->release(c);  // the parent's unwritten events
  t->queue.clear();
  t->pushed.store(0);
  t->written.store(0);
  t->enc = nullptr;     // the parent's writer may have been mid-deflate: leak, never reuse
  t->close_fd_locked();  // the child's copy (unless the application reused the number)
  t->path.clear();
  t->good_size = 0;
  t->warned = false;
  t->pid = static_cast<int>(getpid());
  t->fd_table_reserved = false;  // fork copies only the descriptor table's used part
  ThreadState* mine = t_state;
  for (ThreadState* s : t->states) {
    if (s != mine) {  // threads other than the forking one do not exist in the child
      std::free(s->buf);
      delete s;
    }
  }
  t->states.clear();
  if (mine) {
    mine->busy.store(false);
    mine->size = 0;
    mine->set_ids(t->pid, current_tid());
    mine->id_next = mine->id_end = 0;
    mine->nev = 0;
    t->states.push_back(mine);
  }
  if (t->phase.load() == ACTIVE) {
    t->forked_child = true;
    t->parent_base = t->base;
    t->base = t->base + "-" + std::to_string(t->pid);
    t->events_pushed = false;
    t->next_id.store(0);
    t->process_id_logged = false;
    t->begin_file_contents(now_us());
    t->publish_dirs();  // the child's own writer starts with its first event (log_complete)
  } else {
    // Not tracing now: a later initialize() names the file from DFTRACER_ROOT_PID/TRACE_BASE.
    t->release(t->chunk);
  }
}

// ---------------------------------------------------------------------------- signals
// Called from a signal handler: ask the writer thread for a flush (async-signal-safe: atomics,
// sem_post, nanosleep). wait: until the writer has written every event buffered now (~2 s max).
void TracerImpl::signal_flush(bool wait) noexcept {
  if (phase.load() != ACTIVE || !writer_running.load()) return;
  uint64_t mine = flush_requested.fetch_add(1) + 1;
  sem_post(&wake);
  if (!wait) return;
  for (int i = 0; i < 2000 && flush_done.load() < mine && writer_running.load(); ++i) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

namespace signals {
namespace {
constexpr int kFlushSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGPIPE, SIGTERM, SIGXCPU};
constexpr int kMaxSig = 65;

// Per signal: the action the application sees (two slots, switched atomically, so a handler never
// reads a half-written one), whether the tracer manages the signal, and whether our handler is in
// the kernel (not when the application asked for SIG_IGN).
struct Slot {
  struct sigaction app[2];
  std::atomic<int> cur{0};
  std::atomic<bool> managed{false};
  std::atomic<bool> installed{false};
};
Slot g_slots[kMaxSig];
std::atomic<bool> g_slot_lock{false};
SigactionFn g_real_sigaction = &::sigaction;

bool is_ign(const struct sigaction& a) { return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN; }
bool is_dfl(const struct sigaction& a) { return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL; }

void on_signal(int sig, siginfo_t* info, void* ctx);

// Our handler with the application's flags and mask (so its handler runs as it asked).
struct sigaction ours_for(const struct sigaction& app) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = &on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (!is_dfl(app) && !is_ign(app)) {
    sa.sa_flags = SA_SIGINFO | (app.sa_flags & (SA_RESTART | SA_ONSTACK | SA_NODEFER));
    sa.sa_mask = app.sa_mask;
  }
  for (int s : kFlushSignals) sigaddset(&sa.sa_mask, s);  // one flush at a time
  return sa;
}

// All signals blocked while the slot lock is held: a handler on this thread cannot spin on it.
struct SlotLock {
  sigset_t old;
  SlotLock() noexcept {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (g_slot_lock.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  ~SlotLock() noexcept {
    g_slot_lock.store(false, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
};

void set_app_locked(Slot& sl, const struct sigaction& a) {
  int next = 1 - sl.cur.load(std::memory_order_relaxed);
  sl.app[next] = a;
  sl.cur.store(next, std::memory_order_release);
}

// The application's action took effect in the kernel: restore the default and re-raise. Inside
// the handler the signal is blocked, so it is delivered when the handler returns.
void reraise_default(int sig) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  g_slots[sig].installed.store(false);
  g_real_sigaction(sig, &dfl, nullptr);
  raise(sig);
}

void on_signal(int sig, siginfo_t* info, void* ctx) {
  int saved = errno;
  Slot& sl = g_slots[sig];
  struct sigaction app = sl.app[sl.cur.load(std::memory_order_acquire)];
  bool dfl = is_dfl(app);
  TracerImpl* t = g_impl;
  // A vfork or raw clone child shares or copied our memory without the atfork handlers: hands off.
  bool own = t && static_cast<int>(syscall(SYS_getpid)) == t->pid && t->phase.load() == ACTIVE;
  if (own) {
    t_guard++;
    if (dfl) {
      ThreadState* s = t_state;
      if (t_defer > 0) {  // this thread holds locks the writer needs
        t_pending_sig = sig;
        t_guard--;
        errno = saved;
        return;
      }
      if (s && s->busy.load(std::memory_order_relaxed) == 1) {
        // Interrupted while formatting an event into this thread's buffer (only the owner
        // takes it as 1): finish it first; log_complete re-raises when it unlocks the buffer.
        s->pending_sig = sig;
        t_guard--;
        errno = saved;
        return;
      }
      t->signal_flush(true);
    } else if (!is_ign(app)) {
      // The application's handler decides (it may _exit): write what is buffered first, unless
      // this thread holds a tracer lock (then the flush is only requested, not waited for).
      ThreadState* s = t_state;
      bool holding = t_defer > 0 || (s && s->busy.load(std::memory_order_relaxed) == 1);
      t->signal_flush(!holding);
    }
    t_guard--;
  }
  if (dfl) {
    reraise_default(sig);
  } else if (!is_ign(app)) {
    if (app.sa_flags & SA_RESETHAND) {
      SlotLock lock;
      struct sigaction d;
      std::memset(&d, 0, sizeof(d));
      d.sa_handler = SIG_DFL;
      sigemptyset(&d.sa_mask);
      set_app_locked(sl, d);
    }
    errno = saved;
    if (app.sa_flags & SA_SIGINFO) app.sa_sigaction(sig, info, ctx);
    else app.sa_handler(sig);
  }
  errno = saved;
}

// initialize(): take over the flush signals (once per process; handlers survive fork).
void install() noexcept {
  SlotLock lock;  // one for all seven signals (two sigprocmask calls, not fourteen)
  for (int sig : kFlushSignals) {
    Slot& sl = g_slots[sig];
    if (sl.managed.load()) continue;
    struct sigaction cur;
    if (g_real_sigaction(sig, nullptr, &cur) != 0) continue;
    set_app_locked(sl, cur);
    sl.managed.store(true);
    if (is_ign(cur)) continue;  // ignored stays ignored (and is inherited across exec)
    struct sigaction sa = ours_for(cur);
    if (g_real_sigaction(sig, &sa, nullptr) == 0) sl.installed.store(true);
  }
}
}  // namespace

bool is_flush_signal(int sig) noexcept {
  for (int s : kFlushSignals)
    if (s == sig) return true;
  return false;
}

void set_real_sigaction(SigactionFn fn) noexcept {
  if (fn) g_real_sigaction = fn;
}

bool app_sigaction(int sig, const struct sigaction* act, struct sigaction* old, int* rc) noexcept {
  if (sig <= 0 || sig >= kMaxSig || !g_slots[sig].managed.load()) return false;
  Slot& sl = g_slots[sig];
  SlotLock lock;
  if (old) *old = sl.app[sl.cur.load()];
  *rc = 0;
  if (act) {
    int r;
    if (is_ign(*act)) {
      r = g_real_sigaction(sig, act, nullptr);
      if (r == 0) sl.installed.store(false);
    } else {
      struct sigaction sa = ours_for(*act);
      r = g_real_sigaction(sig, &sa, nullptr);
      if (r == 0) sl.installed.store(true);
    }
    if (r != 0) {
      *rc = -1;  // errno from the real call
      return true;
    }
    set_app_locked(sl, *act);
  }
  return true;
}
}  // namespace signals

// Called by log_complete when it unlocks its buffer with a deferred fatal signal.
static void __attribute__((noinline, cold)) deliver_pending(ThreadState* s) {
  int sig = s->pending_sig;
  s->pending_sig = 0;
  if (sig != 0) raise(sig);
}

// ------------------------------------------------------------------------------ Tracer
Tracer::Tracer() : impl_(new TracerImpl()) { g_impl = impl_; }

Tracer* Tracer::instance() noexcept {
  static Tracer* t = new Tracer();  // never destroyed: usable during exit
  return t;
}

void Tracer::initialize(const char* log_file, const char* data_dirs, const int* process_id) noexcept {
  const Config& c = config();
  if (!c.enable) return;
  ReentryGuard guard;
  SignalDefer defer;
  TracerImpl* t = impl_;
  pthread_mutex_lock(&t->ctl_mu);
  int ph = t->phase.load();
  if (ph == FAILED) {
    pthread_mutex_unlock(&t->ctl_mu);
    return;
  }
  if (ph == ACTIVE) {
    // Same instance continues (e.g. preload started it, Python names the file now).
    if (data_dirs) t->set_dirs(data_dirs);
    if (log_file && *log_file) {
      std::string nb = t->compute_base(log_file);
      if (nb != t->base) t->rename_to(nb);
    }
    if (process_id && !t->process_id_logged) {
      t->process_id = *process_id;
      t->process_id_logged = true;
      pthread_mutex_unlock(&t->ctl_mu);
      log_metadata("process_id", std::to_string(*process_id));
      return;
    }
    pthread_mutex_unlock(&t->ctl_mu);
    return;
  }
  // Fresh start (first call, or after finalize()).
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  t->hostname = host;
  t->pid = static_cast<int>(getpid());
  t->compression = c.compression;
  t->level = c.compression_level;
  t->wbs = c.write_buffer_size;
  t->tcap = std::min<size_t>(t->wbs, 64u << 10);
  t->flush_interval_ms = c.flush_interval_ms;
  t->process_id = process_id ? *process_id : -1;
  t->process_id_logged = process_id != nullptr;
  t->warned = false;
  t->base = t->compute_base(log_file);
  if (data_dirs) {
    t->set_dirs(data_dirs);
  } else {
    t->dirs_all = c.trace_all;
    t->dir_list = c.data_dirs;
    t->publish_dirs();
    if (c.data_dirs_defaulted)
      log_msg(LogLevel::INFO, "DFTRACER_DATA_DIR is not set: tracing I/O on all paths except /proc, /sys, /dev");
  }
  // Fail early (and without creating the file) if the log directory cannot be made.
  int rc = make_dirs(dirname_of(t->base));
  if (rc == 0 && access(dirname_of(t->base).c_str(), W_OK) != 0) rc = errno;
  if (rc) {
    std::fprintf(stderr, "dftracer: warning: cannot write trace files into %s: %s; tracing disabled\n",
                 dirname_of(t->base).c_str(), std::strerror(rc));
    t->phase.store(FAILED);
    set_active(false);
    pthread_mutex_unlock(&t->ctl_mu);
    return;
  }
  t->export_env();
  // Stale events left in thread buffers by a previous session are dropped.
  pthread_mutex_lock(&t->reg_mu);
  for (ThreadState* s : t->states) {
    s->lock(2);
    s->size = 0;
    if (s->cap < t->tcap) {
      if (char* nb = static_cast<char*>(std::realloc(s->buf, t->tcap))) {
        s->buf = nb;
        s->cap = t->tcap;
      }
    }
    s->set_ids(t->pid, s == t_state ? current_tid() : s->tid);
    s->id_next = s->id_end = 0;
    s->nev = 0;
    s->unlock();
  }
  pthread_mutex_unlock(&t->reg_mu);
  pthread_mutex_lock(&t->file_mu);
  t->path.clear();
  pthread_mutex_unlock(&t->file_mu);
  pthread_mutex_lock(&t->buf_mu);
  t->next_id.store(0);
  t->events_pushed = false;
  t->begin_file_contents(now_us());
  pthread_mutex_unlock(&t->buf_mu);
  if (!t->atfork_done) {
    pthread_atfork(&TracerImpl::atfork_prepare, &TracerImpl::atfork_parent, &TracerImpl::atfork_child);
    t->atfork_done = true;
  }
  if (!t->atexit_done) {
    std::atexit([] { Tracer::instance()->finalize(); });
    t->atexit_done = true;
  }
  if (c.bind_signals && !t->signals_done) {
    signals::install();
    t->signals_done = true;
  }
  t->phase.store(ACTIVE);
  set_active(true);
  // The writer thread starts with the first event (log_complete), so a process that logs none
  // (e.g. /bin/true under the preload) never creates a thread.
  pthread_mutex_unlock(&t->ctl_mu);
}

void Tracer::log_complete(std::string_view name, std::string_view cat, int64_t ts, int64_t dur,
                          const ArgList* args, bool plain_name_cat) noexcept {
  if (!active()) return;
  TracerImpl* t = impl_;
  ThreadState* s = t->state();
  size_t need = 160 + json::max_escaped(name.size() + cat.size());
  int n = args ? args->size() : 0;
  if (n) need += 10 + args->need();
  s->lock();
  t->ensure(s, need);
  if (s->size + need > s->cap) {  // out of memory for a huge event: drop it
    s->unlock();
    if (__builtin_expect(s->pending_sig != 0, 0)) deliver_pending(s);
    return;
  }
  char* p = s->buf + s->size;
  if (__builtin_expect(s->id_next == s->id_end, 0)) {
    // Ids are unique per file; each thread takes them in blocks to avoid a shared atomic per event.
    s->id_next = t->next_id.fetch_add(kIdBlock, std::memory_order_relaxed);
    s->id_end = s->id_next + kIdBlock;
    // The first event of a thread since initialize() or fork starts the writer (timed flush
    // from the first event on); lock order: thread state, then q_mu.
    if (!t->writer_running.load(std::memory_order_relaxed) && t_last_event == 0) {
      pthread_mutex_lock(&t->q_mu);
      t->start_writer_locked();
      pthread_mutex_unlock(&t->q_mu);
    }
  }
  p = json::write_lit(p, "{\"id\":");
  p = json::write_u64(p, s->id_next++);
  p = json::write_lit(p, ",\"name\":\"");
  if (plain_name_cat) p = json::copy_short(p, name.data(), name.size());
  else p = json::write_escaped(p, name.data(), name.size());
  p = json::write_lit(p, "\",\"cat\":\"");
  if (plain_name_cat) p = json::copy_short(p, cat.data(), cat.size());
  else p = json::write_escaped(p, cat.data(), cat.size());
  *p++ = '"';
  std::memcpy(p, s->ptid, sizeof(s->ptid));  // fixed-size copy (need reserves 160 bytes)
  p += s->ptid_len;
  p = json::write_i64(p, ts);
  if (dur >= 0) {
    p = json::write_lit(p, ",\"dur\":");
    p = json::write_i64(p, dur);
    p = json::write_lit(p, ",\"ph\":\"X\"");
  } else {
    p = json::write_lit(p, ",\"ph\":\"i\",\"s\":\"t\"");
  }
  if (n) {
    p = json::write_lit(p, ",\"args\":");
    char* open = p;  // every entry starts with ','; the first one becomes '{'
    for (int i = 0; i < n; ++i) {
      const ArgList::Entry& e = (*args)[i];
      *p++ = ',';
      if (e.type == ArgList::RAW) {
        std::memcpy(p, e.s.sp, e.s.sl);
        p += e.s.sl;
        continue;
      }
      *p++ = '"';
      if (e.kplain) {
        p = json::copy_short(p, e.kp, e.kl);
      } else {
        p = json::write_escaped(p, e.kp, e.kl);
      }
      *p++ = '"';
      *p++ = ':';
      switch (e.type) {
        case ArgList::INT: p = json::write_i64(p, e.i); break;
        case ArgList::UINT: p = json::write_u64(p, e.u); break;
        case ArgList::DOUBLE: p = json::write_double(p, e.d); break;
        case ArgList::BOOL:
          if (e.b) p = json::write_lit(p, "true");
          else p = json::write_lit(p, "false");
          break;
        case ArgList::STR: p = json::write_quoted(p, e.str()); break;
        case ArgList::RAW: break;
      }
    }
    *open = '{';
    *p++ = '}';
  }
  *p++ = '}';
  *p++ = '\n';
  s->size = static_cast<size_t>(p - s->buf);
  ++s->nev;
  s->unlock();
  if (__builtin_expect(s->pending_sig != 0, 0)) deliver_pending(s);  // a fatal signal came meanwhile
}

void Tracer::log_instant(std::string_view name, std::string_view cat, int64_t ts, const ArgList* args) noexcept {
  log_complete(name, cat, ts, -1, args);
}

void Tracer::log_metadata(std::string_view key, std::string_view value) noexcept {
  if (!active()) return;
  TracerImpl* t = impl_;
  ThreadState* s = t->state();
  std::string line;
  t->metadata_line(line, key, value, now_us(), false);
  s->lock();
  t->ensure(s, line.size());
  if (s->size + line.size() <= s->cap) {
    std::memcpy(s->buf + s->size, line.data(), line.size());
    s->size += line.size();
  }
  s->unlock();
  if (__builtin_expect(s->pending_sig != 0, 0)) deliver_pending(s);
}

void Tracer::flush() noexcept {
  if (!active()) return;
  ReentryGuard guard;
  SignalDefer defer;
  TracerImpl* t = impl_;
  pthread_mutex_lock(&t->ctl_mu);
  if (t->phase.load() == ACTIVE) {
    t->drain_all();
    t->flush_wait();
  }
  pthread_mutex_unlock(&t->ctl_mu);
}

void Tracer::finalize() noexcept {
  TracerImpl* t = impl_;
  if (t->phase.load() != ACTIVE && t->phase.load() != FAILED) return;
  ReentryGuard guard;
  SignalDefer defer;
  pthread_mutex_lock(&t->ctl_mu);
  int ph = t->phase.load();
  if (ph == ACTIVE) {
    t->drain_all();
    t->flush_wait();
    set_active(false);
  }
  if (ph == ACTIVE || ph == FAILED) {
    set_active(false);
    t->stop_writer();
    pthread_mutex_lock(&t->file_mu);
    t->close_fd_locked();
    pthread_mutex_unlock(&t->file_mu);
    pthread_mutex_lock(&t->buf_mu);
    t->release(t->chunk);
    t->phase.store(ph == ACTIVE ? FINALIZED : FAILED);
    pthread_mutex_unlock(&t->buf_mu);
  }
  pthread_mutex_unlock(&t->ctl_mu);
}

bool Tracer::is_traced_path(std::string_view path) const noexcept {
  const DirSet* d = impl_->dirs.load(std::memory_order_acquire);
  if (!d) return false;
  std::string tmp;
  bool needs_norm = path.empty() || path[0] != '/';
  if (!needs_norm) {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      if (path[i] == '/' && (path[i + 1] == '/' || (path[i + 1] == '.' && (i + 2 == path.size() || path[i + 2] == '/' ||
                                                                            path[i + 2] == '.')))) {
        needs_norm = true;
        break;
      }
    }
  }
  if (needs_norm) {
    try {
      tmp = absolute(std::string(path));
    } catch (...) {
      return false;
    }
    path = tmp;
  }
  if (d->all) {
    if (path_has_prefix(path, "/proc") || path_has_prefix(path, "/sys") || path_has_prefix(path, "/dev")) return false;
    if (!d->exclude.empty() && path.compare(0, d->exclude.size(), d->exclude) == 0) return false;
    return true;
  }
  for (const auto& dir : d->dirs)
    if (path_has_prefix(path, dir)) return true;
  return false;
}

std::string Tracer::trace_path() const {
  TracerImpl* t = impl_;
  if (t->phase.load() == UNINIT) return std::string();
  pthread_mutex_lock(&t->file_mu);
  std::string p = t->fd >= 0 || !t->path.empty() ? t->path : t->base + t->ext();
  pthread_mutex_unlock(&t->file_mu);
  return p;
}

int Tracer::trace_fd() const noexcept { return impl_->fd.load(std::memory_order_relaxed); }

bool Tracer::yield_fd(int fd) noexcept {
  TracerImpl* t = impl_;
  if (fd < 0 || t->fd.load(std::memory_order_relaxed) != fd) return true;
  ReentryGuard guard;  // our fcntl/close are the tracer's own
  pthread_mutex_lock(&t->file_mu);
  bool ok = t->move_fd_locked(fd);
  pthread_mutex_unlock(&t->file_mu);
  return ok;
}

uint64_t Tracer::events_logged() const noexcept { return impl_->next_id.load(); }
bool Tracer::failed() const noexcept { return impl_->phase.load() == FAILED; }
int Tracer::pid() const noexcept { return impl_->pid; }

}  // namespace dftracer
