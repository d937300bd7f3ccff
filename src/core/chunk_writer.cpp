// The chunk writer: one background thread per process that compresses queued chunks into gzip
// members (or writes them as plain text) and appends them to the trace file, which it creates
// lazily (O_EXCL, versioned names), keeps on a descriptor of its own descriptor table (or, on an
// application thread's flush, one the application does not use), truncates
// back to the last whole member after a failed write, and renames on request. It also runs the
// timed flush (DFTRACER_FLUSH_INTERVAL) and serves signal handlers' flush requests, so deflate and
// file I/O never run on application threads.
#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "paths.h"
#include "trace_naming.h"
#include "tracer_impl.h"

namespace dftracer {

namespace {
// True on the writer thread once it works in its own descriptor table (use_private_fd_table).
thread_local bool t_private_fds = false;

// Gives the calling (writer) thread its own descriptor table holding nothing: unshare(CLONE_FILES)
// copies the table, close_range empties the copy (the application's files are referenced by the
// copy only for these few µs). A process whose table is shared by several threads pays, on every
// fd system call, a file reference count and, for reads/writes of regular files, the f_pos
// lock: ~90 ns per 4 KiB read on this VM (docs/perf/preload.md, round 5). False (table still
// shared, the previous behaviour) without close_range (Linux < 5.9) or when unshare is refused.
bool use_private_fd_table() {
  errno = 0;
  if (syscall(SYS_close_range, ~0U, 0U, 0U) == 0 || errno != EINVAL) return false;  // probe: first > last
  if (unshare(CLONE_FILES) != 0) return false;
  syscall(SYS_close_range, 0U, ~0U, 0U);
  return true;
}

// Writes all n bytes at offset off (positional: the application's and the writer's descriptors
// of the trace file are separate open files with their own offsets).
bool write_all(int fd, const char* p, size_t n, off_t off, int* err) {
  while (n) {
    ssize_t w = ::pwrite(fd, p, n, off);
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
    off += w;
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
// is the case while the writer thread starts (and after, on kernels where it cannot have its own
// table, use_private_fd_table); a single-threaded process grows it at no such cost.
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

}  // namespace

int TracerImpl::cur_fd() const noexcept { return t_private_fds ? wfd : fd.load(); }
void TracerImpl::set_cur_fd(int f) noexcept {
  if (t_private_fds) wfd = f;
  else fd = f;
}

AppStderr::AppStderr() noexcept {
  if (!t_private_fds) return;
  int e = errno;
  int pfd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0U));
  if (pfd >= 0) {
    int f = static_cast<int>(syscall(SYS_pidfd_getfd, pfd, 2, 0U));
    ::close(pfd);
    if (f >= 0 && (f == 2 || ::dup2(f, 2) == 2)) borrowed = true;
    if (f >= 0 && f != 2) ::close(f);
  }
  errno = e;
}
AppStderr::~AppStderr() noexcept {
  if (borrowed) ::close(2);
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
  auto* w = new WriterThread{this};
  writer_parked = true;  // holds nothing until it first takes q_mu
  int rc = pthread_create(&writer, nullptr, &TracerImpl::writer_main, w);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc == 0) {
    writer_running = true;
    writer_ctl = w;
  } else {
    delete w;
  }
}

// The event path's cold branch (a thread's first event since initialize() or fork): the writer
// thread starts here, so a process that logs no event never creates one; none for an event under
// a LastEventScope (flush_wait() writes it). Lock order: thread buffer, then q_mu.
void TracerImpl::start_writer_for_event() {
  if (writer_running.load(std::memory_order_relaxed) || in_last_event_scope()) return;
  pthread_mutex_lock(&q_mu);
  start_writer_locked();
  pthread_mutex_unlock(&q_mu);
}

// Take the front chunk and write it with q_mu released (caller holds q_mu, nobody is writing).
void TracerImpl::write_front_locked() {
  Chunk c = std::move(queue.front());
  queue.pop_front();
  writing = true;
  pthread_mutex_unlock(&q_mu);
  write_chunk(c);
  release(c);
  pthread_mutex_lock(&q_mu);
  writing = false;
  written.fetch_add(1);
  pthread_cond_broadcast(&done_cv);
}

// Write every queued chunk in order (caller holds q_mu; released while writing).
void TracerImpl::process_queue_locked() {
  while (!queue.empty()) {
    if (writing) {
      pthread_cond_wait(&done_cv, &q_mu);  // a flushing caller writes the front chunk
      continue;
    }
    write_front_locked();
  }
}

// The writer's own flush (timed, or asked for by a signal handler): move every thread's buffered
// events into the chunk and queue it. Never waits for an application thread: a thread buffer held
// by its owner (formatting an event) is skipped until the next flush, and the chunk lock is only
// tried (its holder may be waiting for this thread to make room in the queue).
// wait_for_locks: keep trying (writing queued chunks meanwhile) for up to ~1 s.
void TracerImpl::writer_flush(bool wait_for_locks) {
  if (state.load() != ACTIVE) return;
  for (int i = 0;; ++i) {
    if (pthread_mutex_trylock(&reg_mu) == 0) {
      if (pthread_mutex_trylock(&buf_mu) == 0) break;
      pthread_mutex_unlock(&reg_mu);
    }
    if (!wait_for_locks || i >= kWriterLockRetryMs) return;
    pthread_mutex_lock(&q_mu);
    process_queue_locked();
    pthread_mutex_unlock(&q_mu);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
  if (state.load() == ACTIVE) {
    const int64_t now = agg_on ? now_us() : 0;
    for (ThreadBuffer* b : buffers) {
      // An aggregation table is written once its bucket is over (or for a signal's flush:
      // wait_for_locks), so an idle thread's last bucket reaches the file.
      bool fold = agg_on && b->agg && !b->agg->empty() && (wait_for_locks || now >= b->agg->bucket + agg_interval_us);
      if ((!b->size && !fold) || !b->try_lock_other()) continue;
      if (fold) emit_aggregates_locked(b, false);
      hand_over_locked(b);
      b->unlock();
    }
    enqueue_locked(false, true);
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
  WriterThread* w = static_cast<WriterThread*>(arg);
  TracerImpl* t = w->tracer;
  ReentryGuard guard;  // everything this thread does is the tracer's own work
  t_private_fds = use_private_fd_table();
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
    if (w->abandoned) {  // the process is exiting and no longer waits for this thread
      pthread_mutex_unlock(&t->q_mu);
      return nullptr;
    }
    t->writer_parked = false;
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
    pthread_mutex_lock(&t->q_mu);
    bool done = stopping && t->queue.empty();
    t->writer_parked = !done;  // back to the wait, holding nothing
    pthread_mutex_unlock(&t->q_mu);
    if (done) break;
  }
  if (t_private_fds) {  // this table ends with the thread: nothing else to close
    pthread_mutex_lock(&t->file_mu);
    if (t->wfd >= 0) ::close(t->wfd);
    t->wfd = -1;
    pthread_mutex_unlock(&t->file_mu);
  }
  return nullptr;
}

void TracerImpl::fail_locked(const char* what, int err) {
  if (!warned) {
    warned = true;
    AppStderr app_stderr;
    std::fprintf(stderr, "dftracer: warning: %s %s: %s; tracing disabled\n", what,
                 path.empty() ? base.c_str() : path.c_str(), std::strerror(err));
  }
  state.store(FAILED);
  set_active(false);
}

bool TracerImpl::open_file_locked() {
  int rc = paths::make_dirs(paths::dirname_of(base));
  if (rc) {
    fail_locked("cannot create the directory of trace file", rc);
    return false;
  }
  for (int n = 0; n < kMaxFileVersions; ++n) {
    std::string p = naming::versioned_path(base, n, ext());
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
      set_cur_fd(f);
      file_made = true;
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
// The same when this thread's table has no descriptor of it yet (the other table's thread created
// it: the writer with its own table, or an application thread's flush).
bool TracerImpl::check_fd_locked() {
  struct stat st;
  int lost = cur_fd();
  if (lost >= 0 && fstat(lost, &st) == 0 && st.st_dev == file_dev && st.st_ino == file_ino) return true;
  set_cur_fd(-1);
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
  set_cur_fd(f);
  if (lost >= 0)
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
  if (state.load() == FAILED || c.empty()) return;
  if (!render_chunk(c)) {  // the records become the trace's lines (thread_buffers.cpp)
    pthread_mutex_lock(&file_mu);
    fail_locked("out of memory while formatting events", ENOMEM);
    pthread_mutex_unlock(&file_mu);
    return;
  }
  if (compression) {
    if (!enc) enc = new MemberEncoder(level);
    MemberEncoder::Span span{rendered.get(), rendered_size};
    if (!enc->encode(&span, 1)) {
      pthread_mutex_lock(&file_mu);
      fail_locked("zlib failed while compressing", EIO);
      pthread_mutex_unlock(&file_mu);
      return;
    }
  }
  pthread_mutex_lock(&file_mu);
  if (state.load() != FAILED && (cur_fd() >= 0 || file_made ? check_fd_locked() : open_file_locked())) {
    int err = 0;
    bool ok = true;
    size_t len = 0;
    int f = cur_fd();
    if (compression) {
      ok = write_all(f, enc->member_data(), enc->member_size(), good_size, &err);
      len = enc->member_size();
    } else {
      ok = write_all(f, rendered.get(), rendered_size, good_size, &err);
      len = rendered_size;
    }
    if (ok) {
      good_size += static_cast<off_t>(len);
    } else {
      // Cut a partial member off so that the file stays a valid sequence of members.
      if (ftruncate(f, good_size) != 0) { /* keep the first error */
      }
      fail_locked("cannot write trace file", err);
    }
  }
  pthread_mutex_unlock(&file_mu);
}

// Push the current chunk (even if small) and return once it is written. The calling thread writes
// the queued chunks itself unless the writer is writing one (then it waits for that one and goes
// on): the caller waits anyway, and a parked writer is neither woken nor waited for, which on a
// loaded machine saves a scheduling delay per hand-over (ms). Without a writer (the events came
// under a LastEventScope, or it could not start) this is the only way chunks get written.
void TracerImpl::flush_wait() {
  pthread_mutex_lock(&buf_mu);
  // As the writer's own flush: no back-pressure and no wake-up, since this thread writes the
  // queue itself below (a woken writer would race it for the chunk and not be parked at exit).
  enqueue_locked(false, true);
  pthread_mutex_unlock(&buf_mu);
  uint64_t target = pushed.load();
  pthread_mutex_lock(&q_mu);
  while (written.load() < target) {
    if (writing) {
      pthread_cond_wait(&done_cv, &q_mu);
    } else if (!queue.empty()) {
      write_front_locked();
    } else {
      break;  // nothing queued, nobody writing: the chunks were dropped (stop_writer)
    }
  }
  pthread_mutex_unlock(&q_mu);
}

// Stop the writer thread and drop what is still queued. A writer parked in its timed wait at
// process exit (at_exit) is abandoned: it is not woken or joined (two scheduling delays on a
// loaded machine), and returns at once should it wake before exit_group ends it. A writer that
// is awake is joined as always, so it never touches the file after end_session closes it.
void TracerImpl::stop_writer(bool at_exit) {
  pthread_mutex_lock(&q_mu);
  bool running = writer_running;
  if (running && at_exit && writer_parked && !writing) {
    writer_ctl->abandoned = true;
    running = false;
  } else {
    stop = true;
    sem_post(&wake);
  }
  pthread_mutex_unlock(&q_mu);
  if (running) {
    pthread_join(writer, nullptr);
    delete writer_ctl;
  }
  pthread_mutex_lock(&q_mu);
  writer_ctl = nullptr;
  writer_running = false;
  stop = false;
  for (Chunk& c : queue) release(c);
  queue.clear();
  pthread_mutex_unlock(&q_mu);
}

// Move the output to new_base (hybrid mode: preload started, then initialize(log_file=...)).
void TracerImpl::rename_to(const std::string& new_base) {
  pthread_mutex_lock(&file_mu);
  if (!file_made) {
    base = new_base;
  } else {
    int rc = paths::make_dirs(paths::dirname_of(new_base));
    bool moved = false;
    for (int n = 0; rc == 0 && n < kMaxFileVersions && !moved; ++n) {
      std::string p = naming::versioned_path(new_base, n, ext());
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
              new_base.c_str(), ext(), std::strerror(rc ? rc : EEXIST));
    }
  }
  pthread_mutex_unlock(&file_mu);
  publish_dirs();
  export_env();
}

void TracerImpl::reset_writer_in_child() {
  writer_running = false;
  stop = false;
  writing = false;
  writer_parked = false;
  writer_ctl = nullptr;  // the parent's thread does not exist here
  sem_destroy(&wake);
  sem_init(&wake, 0, 0);
  flush_requested.store(0);
  flush_done.store(0);
  for (Chunk& c : queue) release(c);  // the parent's unwritten events
  queue.clear();
  pushed.store(0);
  written.store(0);
  enc = nullptr;             // the parent's writer may have been mid-deflate: leak, never reuse
  (void)rendered.release();  // likewise its rendering buffer
  rendered_cap = rendered_size = 0;
  fd_table_reserved = false;  // fork copies only the descriptor table's used part
  close_fd_locked();          // the child's copy (unless the application reused the number)
  wfd = -1;                   // the parent's writer's own table: not the child's
  file_made = false;
  path.clear();
  good_size = 0;
  warned = false;
}

}  // namespace dftracer
