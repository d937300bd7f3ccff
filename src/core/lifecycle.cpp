// Lifecycle of the tracer: initialize (fresh start, re-initialisation, hybrid rename), flush,
// finalize, the fork handlers, and the process metadata that opens every trace file. These
// orchestrate the thread buffers, the chunk writer, trace naming and the signal handler.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "paths.h"
#include "tracer_impl.h"

#ifndef DFTRACER_VERSION
#define DFTRACER_VERSION "0.0.0"
#endif

namespace dftracer {

namespace {
thread_local bool t_fork_locked = false;  // this thread ran atfork_prepare (holds every lock)

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

// The process's arguments as glibc passes them to every ELF constructor (argc, argv, envp): the
// command line without opening /proc/self/cmdline (4 system calls per traced process). The
// strings are the ones /proc/self/cmdline shows (the kernel reads the same argv area).
int g_argc = 0;
char** g_argv = nullptr;
#ifdef __GLIBC__
__attribute__((constructor)) void capture_process_args(int argc, char** argv, char**) {
  g_argc = argc;
  g_argv = argv;
}
#endif

// /proc/self/cmdline's bytes (each argument NUL-terminated), from argv when captured.
std::string command_line_bytes() {
  if (g_argv == nullptr || g_argc <= 0) return read_small_file("/proc/self/cmdline");
  std::string out;
  for (int i = 0; i < g_argc && g_argv[i] != nullptr && out.size() < (1u << 20); ++i) {
    out.append(g_argv[i]);
    out.push_back('\0');
  }
  return out;
}

// The executable's path, read once per process image: a forked child (bash forks one per
// command) has the parent's, so it skips the readlink of /proc/self/exe.
std::string exec_path() {
  static std::string* cached = nullptr;  // never freed: usable during exit
  if (cached == nullptr) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return std::string();
    cached = new std::string(buf, static_cast<size_t>(n));
  }
  return *cached;
}

}  // namespace

TracerImpl::TracerImpl() {
  pthread_key_create(&key, &TracerImpl::buffer_dtor);
  const Config& c = config();
  dirs_all = c.trace_all;
  dir_list = c.data_dirs;
  base = c.log_file;
  sem_init(&wake, 0, 0);
  publish_dirs();
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

void TracerImpl::add_metadata(std::string& out, std::string_view key, std::string_view value, int64_t ts,
                              bool process_name) {
  append_metadata(out, next_id.fetch_add(1, std::memory_order_relaxed), key, value, pid, current_tid(), ts,
                  process_name);
}

// "[" then the process metadata records (caller holds buf_mu or is single threaded).
void TracerImpl::begin_file_contents(int64_t ts) {
  release(chunk);
  std::string text = "[\n";
  std::string exe = exec_path();
  std::string exe_name = exe.substr(exe.rfind('/') + 1);
  std::string cmd = command_line_bytes();
  while (!cmd.empty() && cmd.back() == '\0') cmd.pop_back();
  for (auto& c : cmd)
    if (c == '\0') c = ' ';
  add_metadata(text, "process_name", exe_name, ts, true);
  add_metadata(text, "hostname", hostname, ts, false);
  add_metadata(text, "exec_name", exe, ts, false);
  add_metadata(text, "cmd_line", cmd, ts, false);
  add_metadata(text, "version", DFTRACER_VERSION, ts, false);
  add_metadata(text, "start_time", std::to_string(ts), ts, false);
  add_metadata(text, "ppid", std::to_string(getppid()), ts, false);
  if (process_id >= 0) add_metadata(text, "process_id", std::to_string(process_id), ts, false);
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
    add_metadata(text, "core_affinity", cpus, ts, false);
  }
  append_copy(text);
}

// ------------------------------------------------------------------------------- fork
void TracerImpl::atfork_prepare() {
  TracerImpl* t = g_impl;
  if (!t) return;
  t_fork_locked = true;
  defer_signals_begin();  // until atfork_parent/child: this thread holds every tracer lock
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
  pthread_mutex_unlock(&t->pool_mu);
  pthread_mutex_unlock(&t->file_mu);
  pthread_mutex_unlock(&t->q_mu);
  pthread_mutex_unlock(&t->buf_mu);
  pthread_mutex_unlock(&t->reg_mu);
  pthread_mutex_unlock(&t->ctl_mu);
  defer_signals_end();  // pairs with atfork_prepare
}

// The child: drop the parent's unflushed events, never touch the parent's file, start a new
// file <parent base>-<pid> lazily; the writer thread restarts with the child's first event.
void TracerImpl::atfork_child() {
  reset_current_tid();
  TracerImpl* t = g_impl;
  if (!t || !t_fork_locked) return;
  t_fork_locked = false;
  SignalDefer undefer;  // ends the deferral of atfork_prepare, after the child's state is set up
  defer_signals_end();
  ReentryGuard guard;  // reading /proc/self/cmdline below is the tracer's own I/O
  for (pthread_mutex_t* m : {&t->ctl_mu, &t->reg_mu, &t->buf_mu, &t->q_mu, &t->file_mu, &t->pool_mu})
    pthread_mutex_init(m, nullptr);
  pthread_cond_init(&t->done_cv, nullptr);
  t->reset_writer_in_child();
  t->pid = static_cast<int>(getpid());
  t->reset_buffers_locked(true);  // threads other than the forking one do not exist here
  if (t->state.load() == ACTIVE) {
    t->forked_child = true;
    t->parent_base = t->base;
    t->base = t->base + "-" + std::to_string(t->pid);
    t->events_pushed = false;
    t->next_id.store(0);
    t->process_id_logged = false;
    t->begin_file_contents(now_us());
    t->publish_dirs();  // the child's own writer starts with its first event (Tracer::log_event)
  } else {
    // Not tracing now: a later initialize() names the file from DFTRACER_ROOT_PID/TRACE_BASE.
    t->release(t->chunk);
  }
}

void Tracer::raw_fork_prepare() noexcept { TracerImpl::atfork_prepare(); }
void Tracer::raw_fork_parent() noexcept { TracerImpl::atfork_parent(); }
void Tracer::raw_fork_child() noexcept { TracerImpl::atfork_child(); }

Tracer::Tracer() : impl_(new TracerImpl()) { g_impl = impl_; }

Tracer* Tracer::instance() noexcept {
  static Tracer* t = new Tracer();  // never destroyed: usable during exit
  return t;
}

// Tracing already: the same instance continues (e.g. the preload started it, Python names the
// file now). Returns true if process_id is to be recorded (caller logs it after unlocking).
bool TracerImpl::update_session_locked(const char* log_file, const char* data_dirs, const int* pid_given) {
  if (data_dirs) set_dirs(data_dirs);
  if (log_file && *log_file) {
    std::string nb = compute_base(log_file);
    if (nb != base) rename_to(nb);
  }
  if (!pid_given || process_id_logged) return false;
  process_id = *pid_given;
  process_id_logged = true;
  return true;
}

// Fresh start (first call, or after finalize()). Returns false (tracing disabled, warned) if the
// log directory cannot be made or written: fail early, without creating the file.
bool TracerImpl::start_session_locked(const Config& c, const char* log_file, const char* data_dirs,
                                      const int* pid_given) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  hostname = host;
  pid = static_cast<int>(getpid());
  compression = c.compression;
  level = c.compression_level;
  wbs = c.write_buffer_size;
  tcap = std::min<size_t>(wbs, kThreadBufferBytes);
  flush_interval_ms = c.flush_interval_ms;
  agg_on = agg::settings().on;
  agg_interval_us = agg::settings().interval_us;
  process_id = pid_given ? *pid_given : -1;
  process_id_logged = pid_given != nullptr;
  warned = false;
  base = compute_base(log_file);
  if (data_dirs) {
    set_dirs(data_dirs);
  } else {
    dirs_all = c.trace_all;
    dir_list = c.data_dirs;
    publish_dirs();
    if (c.data_dirs_defaulted)
      log_msg(LogLevel::INFO, "DFTRACER_DATA_DIR is not set: tracing I/O on all paths except /proc, /sys, /dev");
  }
  std::string dir = paths::dirname_of(base);
  int rc = paths::make_dirs(dir);
  if (rc == 0 && access(dir.c_str(), W_OK) != 0) rc = errno;
  if (rc) {
    std::fprintf(stderr, "dftracer: warning: cannot write trace files into %s: %s; tracing disabled\n", dir.c_str(),
                 std::strerror(rc));
    state.store(FAILED);
    set_active(false);
    return false;
  }
  export_env();
  // Stale events left in thread buffers by a previous session are dropped.
  pthread_mutex_lock(&reg_mu);
  reset_buffers_locked(false);
  pthread_mutex_unlock(&reg_mu);
  pthread_mutex_lock(&file_mu);
  path.clear();
  file_made = false;
  pthread_mutex_unlock(&file_mu);
  pthread_mutex_lock(&buf_mu);
  next_id.store(0);
  events_pushed = false;
  begin_file_contents(now_us());
  pthread_mutex_unlock(&buf_mu);
  return true;
}

// Once per process: fork handlers, finalize at exit, and (DFTRACER_BIND_SIGNALS) the signal handler.
void TracerImpl::install_process_hooks(const Config& c) {
  if (!atfork_done) {
    pthread_atfork(&TracerImpl::atfork_prepare, &TracerImpl::atfork_parent, &TracerImpl::atfork_child);
    atfork_done = true;
  }
  if (!atexit_done) {
    std::atexit([] { Tracer::instance()->finalize_at_exit(); });
    atexit_done = true;
  }
  if (c.bind_signals && !signals_done) {
    signals::install();
    signals_done = true;
  }
}

void Tracer::initialize(const char* log_file, const char* data_dirs, const int* process_id) noexcept {
  const Config& c = config();
  if (!c.enable) return;
  ReentryGuard guard;
  SignalDefer defer;
  TracerImpl* t = impl_;
  pthread_mutex_lock(&t->ctl_mu);
  int st = t->state.load();
  if (st == ACTIVE) {
    bool log_pid = t->update_session_locked(log_file, data_dirs, process_id);
    pthread_mutex_unlock(&t->ctl_mu);
    if (log_pid) log_metadata("process_id", std::to_string(*process_id));
    return;
  }
  if (st != FAILED && t->start_session_locked(c, log_file, data_dirs, process_id)) {
    t->install_process_hooks(c);
    t->state.store(ACTIVE);
    set_active(true);
    // The writer thread starts with the first event (Tracer::log_event), so a process that logs
    // none (e.g. /bin/true under the preload) never creates a thread.
  }
  pthread_mutex_unlock(&t->ctl_mu);
}

void Tracer::flush() noexcept {
  if (!active()) return;
  ReentryGuard guard;
  SignalDefer defer;
  TracerImpl* t = impl_;
  pthread_mutex_lock(&t->ctl_mu);
  if (t->state.load() == ACTIVE) {
    t->drain_all();
    t->flush_wait();
  }
  pthread_mutex_unlock(&t->ctl_mu);
}

// Flush, stop the writer, close the file (caller checked the state; ctl_mu taken here).
// at_exit: the process ends right after (see stop_writer).
void TracerImpl::end_session(bool at_exit) {
  ReentryGuard guard;
  SignalDefer defer;
  pthread_mutex_lock(&ctl_mu);
  int st = state.load();
  if (st == ACTIVE) {
    drain_all();
    flush_wait();
  }
  if (st == ACTIVE || st == FAILED) {
    set_active(false);
    stop_writer(at_exit);
    pthread_mutex_lock(&file_mu);
    close_fd_locked();
    pthread_mutex_unlock(&file_mu);
    pthread_mutex_lock(&buf_mu);
    release(chunk);
    state.store(st == ACTIVE ? FINALIZED : FAILED);
    pthread_mutex_unlock(&buf_mu);
  }
  pthread_mutex_unlock(&ctl_mu);
}

namespace {
std::atomic<int64_t> g_dropped_args{0}, g_dropped_bytes{0};

// What the Python APIs dropped since the last finalize, into the (still active) trace and on
// stderr; nothing when nothing was dropped.
void report_dropped_args(Tracer* t) noexcept {
  int64_t n = g_dropped_args.exchange(0), bytes = g_dropped_bytes.exchange(0);
  if (n == 0) return;
  char value[160];
  std::snprintf(value, sizeof value, "%lld args, %lld bytes over the %zu-byte args limit of an event",
                static_cast<long long>(n), static_cast<long long>(bytes), kMaxPyArgsBytes);
  t->log_metadata("dropped_args", std::string_view(value));
  std::fprintf(stderr, "dftracer: %lld event args (%lld bytes) dropped: over the %zu-byte args limit of an event\n",
               static_cast<long long>(n), static_cast<long long>(bytes), kMaxPyArgsBytes);
}
}  // namespace

void count_dropped_args(int64_t args, int64_t bytes) noexcept {
  g_dropped_args.fetch_add(args, std::memory_order_relaxed);
  g_dropped_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void Tracer::finalize() noexcept { finalize_impl(false); }

void Tracer::finalize_at_exit() noexcept { finalize_impl(true); }

void Tracer::finalize_impl(bool at_exit) noexcept {
  TracerImpl* t = impl_;
  if (t->state.load() != ACTIVE && t->state.load() != FAILED) return;
  if (t->state.load() == ACTIVE) report_dropped_args(this);
  // One exit policy for every API: a flush signal arriving now (a pool's terminate() SIGTERMs
  // workers on their way out) is delivered once the file is complete, with or without the
  // tracer's handler (DFTRACER_BIND_SIGNALS).
  sigset_t old_mask;
  signals::block_flush_signals(&old_mask);
  t->end_session(at_exit);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

}  // namespace dftracer
