// The per-process tracer's recording path: an event is stored as a record (event_format.h) in
// the calling thread's buffer under that buffer's own lock, never a shared one: a line formatted
// on the spot (log_event), or a compact binary record that the writer formats (log_compact,
// the preload's fd events). Buffers become
// gzip members in the writer thread (chunk_writer.cpp); docs/design.md shows the whole flow.
#include <signal.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "paths.h"
#include "tracer_impl.h"

extern "C" {
DFTRACER_EXPORT int dftracer_active_flag = 0;
}

namespace dftracer {

TracerImpl* g_impl = nullptr;

namespace {
thread_local ThreadBuffer* t_buffer = nullptr;

// Called when a thread unlocks its buffer with a deferred fatal signal (signals.cpp).
__attribute__((noinline, cold)) void deliver_pending(ThreadBuffer* b) {
  int sig = b->pending_sig;
  b->pending_sig = 0;
  if (sig != 0) raise(sig);
}

// Locks b and makes room for one record of `need` bytes with an event id ready in b->id_next.
// False, with b unlocked, when the buffer cannot grow that far (a huge event is dropped).
inline bool begin_record(TracerImpl* t, ThreadBuffer* b, size_t need) noexcept {
  b->lock();
  t->ensure(b, need);
  if (__builtin_expect(b->size + need > b->cap, 0)) {
    b->unlock();
    if (__builtin_expect(b->pending_sig != 0, 0)) deliver_pending(b);
    return false;
  }
  if (__builtin_expect(b->id_next == b->id_end, 0)) {
    b->id_next = t->next_id.fetch_add(kIdBlock, std::memory_order_relaxed);
    b->id_end = b->id_next + kIdBlock;
    // A thread's first event since initialize() or fork starts the writer (timed flush from then on).
    if (!t->writer_running.load(std::memory_order_relaxed)) t->start_writer_for_event();
  }
  return true;
}

// Aggregation (aggregation.h): folds one complete event into the calling thread's table under
// its buffer's lock. False: the settings keep this event in full (the caller writes it).
__attribute__((noinline)) bool fold_event(TracerImpl* t, std::string_view name, std::string_view cat, const char* nptr,
                                          const char* cptr, int64_t ts, int64_t dur, const agg::AggArg* args,
                                          int nargs) noexcept {
  const agg::Settings& s = agg::settings();
  if (s.selective && nptr != nullptr) {
    // Literal name/cat (preload): the rules on cat and name are evaluated once per function and
    // thread; only those on ts / dur run per call.
    static thread_local const char* last_name = nullptr;
    static thread_local const char* last_cat = nullptr;
    static thread_local uint8_t last_static = 0;
    if (nptr != last_name || cptr != last_cat) {
      last_static = s.static_part(name, cat);
      last_name = nptr;
      last_cat = cptr;
    }
    if (!s.wants_given(last_static, name, cat, ts, dur)) return false;
  } else if (!s.wants(name, cat, ts, dur)) {
    return false;
  }
  ThreadBuffer* b = t->buffer();
  b->lock();
  if (__builtin_expect(b->agg == nullptr, 0)) {
    b->agg = new (std::nothrow) agg::AggTable();
    if (!b->agg) {
      b->unlock();
      if (__builtin_expect(b->pending_sig != 0, 0)) deliver_pending(b);
      return false;
    }
  }
  int64_t r = ts % t->agg_interval_us;
  int64_t bucket = ts - (r < 0 ? r + t->agg_interval_us : r);
  if (bucket != b->agg->bucket) {  // another bucket: write the finished one first
    t->emit_aggregates_locked(b, true);
    b->agg->bucket = bucket;
  }
  b->agg->add(name, cat, nptr, cptr, false, dur, args, nargs);
  b->unlock();
  if (__builtin_expect(b->pending_sig != 0, 0)) deliver_pending(b);
  // The timed flush writes finished buckets of idle threads: it needs the writer running.
  if (!t->writer_running.load(std::memory_order_relaxed)) t->start_writer_for_event();
  return true;
}

// Counts the record that now ends at `end`, unlocks b and delivers a fatal signal deferred meanwhile.
inline void end_record(ThreadBuffer* b, const char* end) noexcept {
  b->size = static_cast<size_t>(end - b->buf);
  ++b->nev;
  b->unlock();
  if (__builtin_expect(b->pending_sig != 0, 0)) deliver_pending(b);
}
}  // namespace

ThreadBuffer* current_thread_buffer() noexcept { return t_buffer; }
void set_current_thread_buffer(ThreadBuffer* b) noexcept { t_buffer = b; }

void log_msg(LogLevel lvl, const char* fmt, ...) {
  if (static_cast<int>(lvl) > static_cast<int>(config().log_level)) return;
  static const char* const kNames[] = {"error", "warning", "info", "debug"};
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  AppStderr err;
  std::fprintf(stderr, "dftracer: %s: %s\n", kNames[static_cast<int>(lvl)], buf);
}

void Tracer::log_event(Phase phase, std::string_view name, std::string_view cat, int64_t ts, int64_t dur,
                       const ArgList* args, bool plain_name_cat) noexcept {
  if (!active()) return;
  TracerImpl* t = impl_;
  if (__builtin_expect(t->agg_on, 0) && phase == Phase::Complete) {
    agg::AggArg a[ArgList::kCapacity];
    int n = 0;
    for (int i = 0; args && i < args->size(); ++i) {
      const ArgList::Entry& e = (*args)[i];
      agg::AggArg& x = a[n];
      x.key = e.key();
      x.kptr = nullptr;  // keys of this path may be temporary: matched by content
      x.dbl = false;
      x.d = 0;
      switch (e.type) {
        case ArgList::INT: x.i = e.i; break;
        case ArgList::UINT: x.i = static_cast<int64_t>(e.u); break;
        case ArgList::BOOL: x.i = e.b ? 1 : 0; break;
        case ArgList::DOUBLE:
          x.dbl = true;
          x.d = e.d;
          x.i = 0;
          break;
        default: continue;  // strings (file names, tags) are not aggregated
      }
      ++n;
    }
    if (fold_event(t, name, cat, nullptr, nullptr, ts, dur, a, n)) return;
  }
  ThreadBuffer* b = t->buffer();
  if (!begin_record(t, b, text_record_bytes(event_bound(name, cat, args)))) return;
  EventFields e{b->id_next++, phase, name, cat, plain_name_cat, &b->ids, ts, dur, args};
  char* rec = b->buf + b->size;
  char* p = format_event(begin_text_record(rec), e);
  end_record(b, end_text_record(rec, p));
}

void Tracer::log_compact(std::string_view name, std::string_view cat, int64_t ts, int64_t dur,
                         std::string_view fragment, const CompactArgs& ints, bool plain_name_cat) noexcept {
  if (!active()) return;
  if (__builtin_expect(name.size() > 255 || cat.size() > 255, 0)) {  // not a literal of ours: the general path
    ArgList a;
    if (!fragment.empty()) a.add_raw(fragment);
    for (int i = 0; i < ints.size(); ++i) {
      std::string_view key(ints[i].key, ints[i].klen);
      if (ints[i].flags & CompactArgs::kUint) a.add_uint(key, static_cast<uint64_t>(ints[i].v));
      else a.add_int(key, ints[i].v);
    }
    log_event(Phase::Complete, name, cat, ts, dur, &a, plain_name_cat);
    return;
  }
  TracerImpl* t = impl_;
  if (__builtin_expect(t->agg_on, 0)) {
    agg::AggArg a[CompactArgs::kCapacity];
    int n = ints.size();
    for (int i = 0; i < n; ++i) {
      const CompactArgs::Entry& e = ints[i];
      a[i] = agg::AggArg{std::string_view(e.key, e.klen), e.key, false, e.v, 0.0};
    }
    // name, cat and keys are the caller's literals: matched by pointer first
    if (fold_event(t, name, cat, name.data(), cat.data(), ts, dur, a, n)) return;
  }
  ThreadBuffer* b = t->buffer();
  if (!begin_record(t, b, compact_record_bytes(ints.size(), fragment.size()))) return;
  end_record(b, write_compact(b->buf + b->size, b->id_next++, name, cat, plain_name_cat, ts, dur, fragment, ints));
}

void Tracer::log_metadata(std::string_view key, std::string_view value) noexcept {
  if (!active()) return;
  TracerImpl* t = impl_;
  ThreadBuffer* b = t->buffer();
  std::string line;
  t->add_metadata(line, key, value, now_us(), false);
  b->lock();
  size_t need = text_record_bytes(line.size());
  t->ensure(b, need);
  if (b->size + need <= b->cap) {
    char* rec = b->buf + b->size;
    char* p = begin_text_record(rec);
    std::memcpy(p, line.data(), line.size());
    b->size = static_cast<size_t>(end_text_record(rec, p + line.size()) - b->buf);
  }
  b->unlock();
  if (__builtin_expect(b->pending_sig != 0, 0)) deliver_pending(b);
}

bool Tracer::is_traced_path(std::string_view path) const noexcept {
  const DirSet* d = impl_->dirs.load(std::memory_order_acquire);
  if (!d) return false;
  std::string tmp;
  if (paths::needs_normalization(path)) {
    try {
      tmp = paths::absolute(path);
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
  if (t->state.load() == UNINIT) return std::string();
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

bool Tracer::failed() const noexcept { return impl_->state.load() == FAILED; }
int Tracer::pid() const noexcept { return impl_->pid; }

}  // namespace dftracer
