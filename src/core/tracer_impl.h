// Private state of the tracer core, shared by the files that implement it (not installed, not
// exported). Data flow: an application thread stores an event as a record (event_format.h) in
// its ThreadBuffer (thread_buffers.cpp); a full buffer is handed, without copying, to the process
// Chunk; a full chunk is queued to the writer thread (chunk_writer.cpp), which renders its
// records into lines and compresses them into
// one gzip member and appends it to the trace file named by trace_naming.cpp. lifecycle.cpp
// (initialize/flush/finalize/fork) and signals.cpp orchestrate these pieces.
#pragma once

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "aggregation.h"
#include "event_format.h"
#include "gzip_member.h"
#include "tracer.h"

namespace dftracer {

// ------------------------------------------------------------------------------ constants
// Bytes of one thread buffer (capped by DFTRACER_WRITE_BUFFER_SIZE).
constexpr size_t kThreadBufferBytes = 64u << 10;
// Event ids taken by a thread at a time (ids are unique per file without a shared atomic per event).
constexpr uint64_t kIdBlock = 256;
// Back-pressure: an application thread waits while this many chunks are queued to the writer.
constexpr size_t kMaxQueuedChunks = 4;
// Spare thread buffers kept in the pool: enough for every chunk in flight plus a few threads.
constexpr size_t kPoolSlackBuffers = 16;
// Versions ".1" ... tried when the trace file (or a rename target) exists already.
constexpr int kMaxFileVersions = 1000;
// A signal handler waits at most this many 1 ms steps for the writer's flush.
constexpr int kSignalFlushWaitMs = 2000;
// The writer's own flush retries taking the buffer locks for at most this many 1 ms steps.
constexpr int kWriterLockRetryMs = 1000;
// Spins of another thread trying a thread buffer's lock before it gives up (never waits for an
// owner that may be blocked).
constexpr int kTryLockSpins = 1024;

// Lifecycle of the tracer (TracerImpl::state).
enum RunState : int { UNINIT = 0, ACTIVE = 1, FINALIZED = 2, FAILED = 3 };

// ------------------------------------------------------------------------------ clock.cpp
// The forked child's first current_tid() re-reads the kernel thread id.
void reset_current_tid() noexcept;
// True while a LastEventScope (tracer.h) is alive on this thread: its events start no writer.
bool in_last_event_scope() noexcept;

// ------------------------------------------------------------------------------ signals.cpp
// While a SignalDefer is alive this thread holds tracer locks that the writer needs, so a signal
// whose default action ends the process is held and re-raised when the last one ends.
struct SignalDefer {
  SignalDefer() noexcept;
  ~SignalDefer() noexcept;
  SignalDefer(const SignalDefer&) = delete;
  SignalDefer& operator=(const SignalDefer&) = delete;
};
// The same as a pair of calls, for atfork_prepare / atfork_parent / atfork_child.
void defer_signals_begin() noexcept;
void defer_signals_end() noexcept;
namespace signals {
void install() noexcept;  // initialize(): take over the flush signals (once per process)
// Blocks the flush signals on the calling thread (old: the previous mask, for pthread_sigmask).
void block_flush_signals(sigset_t* old) noexcept;
}  // namespace signals

// ------------------------------------------------------------------------------ thread_buffers.cpp
// One application thread's event buffer: a sequence of records (event_format.h), rendered into
// lines by the writer (render_chunk). Renamed from "ThreadState": the preload has its own,
// unrelated per-thread state (its re-entry flags).
struct ThreadBuffer {
  // 0 free, 1 held by the owning thread (formatting an event), 2 held by another thread (drain).
  // A signal handler that finds its own thread's buffer at 1 knows it interrupted the formatting.
  std::atomic<int> busy{0};
  volatile sig_atomic_t pending_sig = 0;  // fatal signal deferred until the owner unlocks
  char* buf = nullptr;
  size_t size = 0;
  size_t cap = 0;
  int tid = 0;
  uint64_t id_next = 0, id_end = 0;  // block of event ids reserved by this thread
  uint32_t nev = 0;                  // events ("X"/"i") in buf since the last drain (metadata lines excluded)
  IdsPrefix ids;                     // ,"pid":P,"tid":T,"ts":
  agg::AggTable* agg = nullptr;      // this thread's aggregation table (aggregation.h), under `busy`

  void lock(int who = 1) noexcept {
    if (__builtin_expect(busy.exchange(who, std::memory_order_acquire) == 0, 1)) return;
    lock_slow(who);
  }
  void lock_slow(int who) noexcept;  // contended: spin, then yield
  // Another thread's try: spins briefly, never waits for an owner that may be blocked.
  bool try_lock_other() noexcept;
  void unlock() noexcept { busy.store(0, std::memory_order_release); }
  void set_ids(int pid, int new_tid) noexcept {
    tid = new_tid;
    ids.set(pid, new_tid);
  }
  // Empty, with a fresh id block (stale events are dropped).
  void reset(int pid, int new_tid) noexcept {
    size = 0;
    if (agg) {
      agg->clear();
      agg->bucket = INT64_MIN;
    }
    set_ids(pid, new_tid);
    id_next = id_end = 0;
    nev = 0;
  }
};
// The calling thread's buffer, or null before its first event (tracer.cpp).
ThreadBuffer* current_thread_buffer() noexcept;
void set_current_thread_buffer(ThreadBuffer* b) noexcept;

// A filled thread buffer handed over as is (no copy): a chunk is a list of pieces. A thread
// buffer's piece holds records (event_format.h), rendered by the writer with the `,"pid":P,
// "tid":T,"ts":` text of its thread (ids, copied at the hand-over); other pieces are text.
struct Piece {
  char* data;
  size_t size;
  size_t cap;
  bool records = false;
  IdsPrefix ids;
};
struct Chunk {
  std::vector<Piece> pieces;
  size_t bytes = 0;
  bool has_events = false;  // holds at least one event line (not only "[" and metadata)
  bool empty() const { return pieces.empty(); }
};

class TracerImpl;
// One writer thread's record (its argument). abandoned (q_mu): the process exits without waiting
// for this thread, which must return at once if it wakes (stop_writer). Leaked when abandoned.
struct WriterThread {
  TracerImpl* tracer;
  bool abandoned = false;
};

// Data dirs as Tracer::is_traced_path reads them (lock-free, published by pointer).
struct DirSet {
  bool all = true;
  std::vector<std::string> dirs;
  std::string exclude;  // trace output base path (string prefix)
};

// ------------------------------------------------------------------------------ the tracer
class TracerImpl {
 public:
  TracerImpl();

  // locks (order: ctl, reg, [thread buffer], buf, q, file; pool is a leaf lock)
  pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t buf_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t file_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

  std::atomic<int> state{UNINIT};  // RunState
  pthread_key_t key{};

  // --- thread buffers and the process chunk (thread_buffers.cpp)
  std::vector<ThreadBuffer*> buffers;  // reg_mu
  Chunk chunk;                         // buf_mu
  bool events_pushed = false;          // buf_mu: an event reached the writer, so the file exists (lazy create)
  std::vector<char*> free_bufs;        // pool_mu: spare thread buffers of tcap bytes
  size_t wbs = 4u << 20;               // DFTRACER_WRITE_BUFFER_SIZE: chunk bytes per gzip member
  size_t tcap = kThreadBufferBytes;    // bytes of a thread buffer
  std::atomic<uint64_t> next_id{0};
  // Aggregation of this session (aggregation.h): on, and the bucket length in µs.
  bool agg_on = false;
  int64_t agg_interval_us = 1000000;

  // --- chunk writer (chunk_writer.cpp)
  std::deque<Chunk> queue;                  // q_mu
  std::atomic<bool> writer_running{false};  // written under q_mu; read by signal handlers
  bool stop = false;                        // q_mu
  // q_mu: a thread (the writer, or a flushing caller) took the queue's front chunk and is writing
  // it; the others wait (done_cv), so chunks reach the file in queue order.
  bool writing = false;
  // q_mu: the writer is parked in its timed wait, holding nothing. At process exit such a writer
  // is abandoned (never woken or joined; exit_group ends it): see stop_writer().
  bool writer_parked = false;
  WriterThread* writer_ctl = nullptr;  // q_mu: the running writer's own record
  pthread_t writer{};
  bool fd_table_reserved = false;  // q_mu: table grown for the trace fd in this process (not inherited by fork)
  std::atomic<uint64_t> pushed{0}, written{0};
  // Writer wake-up: sem_post is async-signal-safe, so signal handlers can ring it too.
  sem_t wake;
  std::atomic<uint64_t> flush_requested{0}, flush_done{0};  // handler flush requests / served
  int flush_interval_ms = 500;                              // DFTRACER_FLUSH_INTERVAL (0: no timed flush)
  // Trace file descriptor: written under file_mu, read lock-free by Tracer::trace_fd() (the
  // preload's close/dup2 wrappers protect it). file_dev/file_ino identify the file it must name.
  std::atomic<int> fd{-1};
  // The writer thread works in its own descriptor table (writer_main: unshare(CLONE_FILES)), so
  // the application's table stays unshared and its fd system calls keep the kernel's
  // single-threaded fast path (no file reference count or f_pos lock per read). wfd: the trace
  // file in the writer's table (file_mu), fd: in the application's (opened by path when an
  // application thread writes, e.g. the flush at exit). file_made: the session's file exists.
  int wfd = -1;
  bool file_made = false;
  int cur_fd() const noexcept;  // wfd on the writer thread with its own table, else fd
  void set_cur_fd(int f) noexcept;
  dev_t file_dev = 0;            // file_mu
  ino_t file_ino = 0;            // file_mu
  std::string path;              // file_mu
  off_t good_size = 0;           // file_mu
  bool warned = false;           // file_mu
  MemberEncoder* enc = nullptr;  // writer thread
  bool compression = true;
  int level = 1;

  // --- naming and process identity (trace_naming.cpp, lifecycle.cpp)
  std::string base;         // ctl_mu + file_mu: trace path without extension
  std::string parent_base;  // forked child: the parent's base (its inherited name)
  int pid = 0;
  std::string hostname;
  bool forked_child = false;
  int process_id = -1;
  bool process_id_logged = false;

  // --- data dirs (lifecycle.cpp)
  std::atomic<const DirSet*> dirs{nullptr};
  bool dirs_all = true;               // ctl_mu
  std::vector<std::string> dir_list;  // ctl_mu

  bool atexit_done = false, atfork_done = false, signals_done = false;

  // --- thread buffers (thread_buffers.cpp)
  ThreadBuffer* buffer() {
    ThreadBuffer* b = current_thread_buffer();
    return __builtin_expect(b != nullptr, 1) ? b : new_buffer();
  }
  ThreadBuffer* new_buffer();
  static void buffer_dtor(void* p);
  // Room for `need` more bytes in b (inline fast path of the event path).
  void ensure(ThreadBuffer* b, size_t need) {
    if (__builtin_expect(b->size + need > b->cap, 0)) make_room(b, need);
  }
  void make_room(ThreadBuffer* b, size_t need);
  // The one hand-over of a thread buffer to the chunk (caller holds buf_mu and the buffer).
  void hand_over_locked(ThreadBuffer* b);
  void drain_locked(ThreadBuffer* b);
  // Writes b's aggregation table as lines into b (caller holds b) and empties it. may_drain: the
  // buffer may be handed to the chunk to make room (not while holding buf_mu). False when the
  // lines do not fit without that (the table is kept).
  bool emit_aggregates_locked(ThreadBuffer* b, bool may_drain);
  void drain_all();
  // Drop all buffered events, fresh ids (caller holds reg_mu); fork_child: other threads are gone.
  void reset_buffers_locked(bool fork_child);
  char* get_buffer();
  void release(Piece& p);
  void release(Chunk& c);
  void append_copy(const std::string& text);
  // Writer side: the trace text of a chunk (its records rendered, text pieces copied), contiguous
  // in rendered / rendered_size, valid until the next call. The buffer grows to the largest
  // chunk's text and is kept. Returns false when out of memory.
  bool render_chunk(const Chunk& c);
  std::unique_ptr<char[]> rendered;  // the thread that writes (writing, under q_mu)
  size_t rendered_cap = 0, rendered_size = 0;
  // The one queue push (caller holds buf_mu). from_writer: the writer's own flush (no
  // back-pressure: it empties the queue itself).
  bool enqueue_locked(bool force, bool from_writer);

  // --- chunk writer (chunk_writer.cpp)
  void start_writer_locked();  // grows the descriptor table first (reserve_fd_table)
  __attribute__((noinline, cold)) void start_writer_for_event();
  static void* writer_main(void* arg);
  void writer_flush(bool wait_for_locks);
  void process_queue_locked();
  void write_front_locked();  // caller holds q_mu, !writing, queue not empty
  void write_chunk(const Chunk& c);
  bool open_file_locked();
  bool check_fd_locked();
  bool move_fd_locked(int wanted);
  void close_fd_locked();
  void fail_locked(const char* what, int err);
  void flush_wait();
  // at_exit: the process exits right after (atexit handler, _exit): a parked writer is left
  // asleep instead of woken and joined.
  void stop_writer(bool at_exit);
  void rename_to(const std::string& new_base);
  // Fork child: the parent's writer thread, queue and descriptor are not ours (never written).
  void reset_writer_in_child();
  const char* ext() const { return compression ? ".pfw.gz" : ".pfw"; }

  // --- naming (trace_naming.cpp)
  bool is_child() const;
  std::string compute_base(const char* log_file) const;
  void export_env() const;

  // --- lifecycle (lifecycle.cpp)
  bool update_session_locked(const char* log_file, const char* data_dirs, const int* pid_given);
  bool start_session_locked(const Config& c, const char* log_file, const char* data_dirs, const int* pid_given);
  void install_process_hooks(const Config& c);
  void end_session(bool at_exit);
  void publish_dirs();
  void set_dirs(const char* spec);
  // One metadata line (next id, this thread) appended to out (event_format.h append_metadata).
  void add_metadata(std::string& out, std::string_view key, std::string_view value, int64_t ts, bool process_name);
  void begin_file_contents(int64_t ts);
  static void atfork_prepare();
  static void atfork_parent();
  static void atfork_child();

  // --- signals (signals.cpp): ask the writer for a flush (async-signal-safe); wait: until done.
  void signal_flush(bool wait) noexcept;
};

// The one tracer of the process (set by the Tracer constructor), for signal, fork and thread-exit
// handlers, which get no object.
extern TracerImpl* g_impl;

// Sets dftracer_active_flag.
inline void set_active(bool on) noexcept { __atomic_store_n(&dftracer_active_flag, on ? 1 : 0, __ATOMIC_RELAXED); }

// While alive on the writer thread with its own descriptor table, fd 2 of that table is the
// application's stderr (pidfd_getfd), so the tracer's warnings reach it; elsewhere a no-op.
struct AppStderr {
  AppStderr() noexcept;
  ~AppStderr() noexcept;
  AppStderr(const AppStderr&) = delete;
  AppStderr& operator=(const AppStderr&) = delete;
  bool borrowed = false;
};

// "dftracer: <level>: message" on stderr when the level is enabled by DFTRACER_LOG_LEVEL.
void log_msg(LogLevel lvl, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace dftracer
