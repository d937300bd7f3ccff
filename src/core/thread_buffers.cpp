// Per-thread event buffers and the process chunk: an application thread stores event records in
// its own buffer (no shared lock per event; the writer renders them, render_chunk); a full buffer is handed to the
// chunk without copying (hand_over_locked, the one hand-over used by the application's drain and by the writer's
// flush), and a full chunk is queued to the writer (enqueue_locked, the one queue push).
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "tracer_impl.h"

namespace dftracer {

void ThreadBuffer::lock_slow(int who) noexcept {
  do {
    for (int i = 0; i < 64 && busy.load(std::memory_order_relaxed); ++i) __builtin_ia32_pause();
    if (busy.load(std::memory_order_relaxed)) sched_yield();
  } while (busy.exchange(who, std::memory_order_acquire));
}

bool ThreadBuffer::try_lock_other() noexcept {
  for (int i = 0; i < kTryLockSpins; ++i) {
    int expected = 0;
    if (busy.compare_exchange_weak(expected, 2, std::memory_order_acquire)) return true;
    __builtin_ia32_pause();
  }
  return false;
}

ThreadBuffer* TracerImpl::new_buffer() {
  SignalDefer defer;  // reg_mu below
  auto* b = new ThreadBuffer();
  b->cap = tcap;
  b->buf = static_cast<char*>(std::malloc(b->cap));
  b->set_ids(pid ? pid : static_cast<int>(getpid()), current_tid());
  pthread_mutex_lock(&reg_mu);
  buffers.push_back(b);
  pthread_mutex_unlock(&reg_mu);
  pthread_setspecific(key, b);
  set_current_thread_buffer(b);
  return b;
}

// Thread exit: hand the remaining events to the process chunk, then free.
void TracerImpl::buffer_dtor(void* p) {
  auto* b = static_cast<ThreadBuffer*>(p);
  TracerImpl* t = g_impl;
  if (!t || !b) return;
  SignalDefer defer;
  pthread_mutex_lock(&t->reg_mu);
  for (size_t i = 0; i < t->buffers.size(); ++i) {
    if (t->buffers[i] == b) {
      t->buffers[i] = t->buffers.back();
      t->buffers.pop_back();
      break;
    }
  }
  pthread_mutex_unlock(&t->reg_mu);
  b->lock();
  t->emit_aggregates_locked(b, true);
  t->drain_locked(b);
  b->unlock();
  std::free(b->buf);
  delete b->agg;
  delete b;
  set_current_thread_buffer(nullptr);
}

// No room for `need` more bytes: drain first, then grow (for one event larger than the buffer).
void TracerImpl::make_room(ThreadBuffer* b, size_t need) {
  drain_locked(b);
  if (need > b->cap) {
    size_t cap = b->cap;
    while (cap < need) cap *= 2;
    char* nb = static_cast<char*>(std::realloc(b->buf, cap));
    if (!nb) return;
    b->buf = nb;
    b->cap = cap;
  }
}

// Hand the thread's buffer to the process chunk without copying; the thread gets a spare one.
// Out of memory for a spare: the events stay in the buffer.
void TracerImpl::hand_over_locked(ThreadBuffer* b) {
  if (!b->size) return;
  char* fresh = get_buffer();
  if (!fresh) return;
  chunk.pieces.push_back(Piece{b->buf, b->size, b->cap, true, b->ids});
  chunk.bytes += b->size;
  chunk.has_events |= b->nev != 0;
  b->buf = fresh;
  b->cap = tcap;
  b->size = 0;
  b->nev = 0;
}

// The owner (or a flush holding the buffer) empties it; a full chunk goes to the writer. Events
// that cannot be handed over (not tracing, out of memory) are dropped so the buffer has room.
void TracerImpl::drain_locked(ThreadBuffer* b) {
  if (!b->size) return;
  pthread_mutex_lock(&buf_mu);
  if (state.load(std::memory_order_relaxed) == ACTIVE) {
    hand_over_locked(b);
    if (chunk.bytes >= wbs) enqueue_locked(true, false);
  }
  b->size = 0;
  b->nev = 0;
  pthread_mutex_unlock(&buf_mu);
}

bool TracerImpl::emit_aggregates_locked(ThreadBuffer* b, bool may_drain) {
  if (!b->agg || b->agg->empty()) return true;
  size_t need = text_record_bytes(b->agg->text_bound(b->ids));
  if (b->size + need > b->cap) {
    if (!may_drain) return false;
    make_room(b, need);
    if (b->size + need > b->cap) {  // out of memory: the table's calls are lost
      b->agg->clear();
      return false;
    }
  }
  char* rec = b->buf + b->size;
  uint32_t lines = 0;
  char* p = b->agg->write_lines(begin_text_record(rec), b->ids, &lines);
  b->size = static_cast<size_t>(end_text_record(rec, p) - b->buf);
  b->nev += lines;
  return true;
}

void TracerImpl::drain_all() {
  pthread_mutex_lock(&reg_mu);
  for (ThreadBuffer* b : buffers) {
    b->lock(2);
    emit_aggregates_locked(b, true);
    drain_locked(b);
    b->unlock();
  }
  pthread_mutex_unlock(&reg_mu);
}

// Drop every buffered event and give each buffer a fresh id block and this process's ids
// (caller holds reg_mu). fork_child: only the forking thread exists, the others' buffers go.
void TracerImpl::reset_buffers_locked(bool fork_child) {
  ThreadBuffer* mine = current_thread_buffer();
  size_t kept = 0;
  for (ThreadBuffer* b : buffers) {
    if (fork_child && b != mine) {
      std::free(b->buf);
      delete b->agg;
      delete b;
      continue;
    }
    if (fork_child) b->busy.store(0);
    else b->lock(2);
    if (b->cap < tcap) {
      if (char* nb = static_cast<char*>(std::realloc(b->buf, tcap))) {
        b->buf = nb;
        b->cap = tcap;
      }
    }
    b->reset(pid, b == mine ? current_tid() : b->tid);
    b->unlock();
    buffers[kept++] = b;
  }
  buffers.resize(kept);
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
    // Spares for every chunk in flight (the queue plus the one being filled, written and
    // encoded) plus a few threads.
    if (free_bufs.size() < (kMaxQueuedChunks + 2) * (wbs / tcap + 1) + kPoolSlackBuffers) {
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
  chunk.pieces.push_back(Piece{d, text.size(), text.size(), false, IdsPrefix()});
  chunk.bytes += text.size();
}

// The records of the chunk's thread-buffer pieces become lines, in order, in one contiguous
// buffer (the encoder's single input span). A damaged record ends its piece (never rendered).
bool TracerImpl::render_chunk(const Chunk& c) {
  size_t at = 0;
  // Sized once for the chunk (a record's line is rarely twice its record), so growing, which
  // copies, is the exception.
  if (rendered_cap < 2 * c.bytes + (64u << 10)) {
    size_t cap = 2 * c.bytes + (64u << 10);
    char* nb = new (std::nothrow) char[cap];  // default-initialised: no zero fill
    if (nb) {
      rendered.reset(nb);
      rendered_cap = cap;
    }
  }
  CompactRenderer r;
  auto room = [&](size_t need) {
    if (at + need <= rendered_cap) return true;
    size_t cap = rendered_cap ? rendered_cap : (1u << 20);
    while (cap < at + need) cap *= 2;
    char* nb = new (std::nothrow) char[cap];  // default-initialised: no zero fill
    if (!nb) return false;
    if (at) std::memcpy(nb, rendered.get(), at);
    rendered.reset(nb);
    rendered_cap = cap;
    return true;
  };
  for (const Piece& piece : c.pieces) {
    if (!piece.records) {
      if (!room(piece.size)) return false;
      std::memcpy(rendered.get() + at, piece.data, piece.size);
      at += piece.size;
      continue;
    }
    r.reset(&piece.ids);
    const char* p = piece.data;
    size_t left = piece.size;
    while (left) {
      size_t size = record_size(p, left);
      if (size == 0) break;
      if (!room(record_text_bound(p, size))) return false;
      at = static_cast<size_t>(render_record(rendered.get() + at, p, size, r) - rendered.get());
      p += size;
      left -= size;
    }
  }
  rendered_size = at;
  return true;
}

// Hand the process chunk to the writer (caller holds buf_mu). The trace file is created lazily:
// until a chunk with an event is pushed, a chunk of only "[" and metadata records is kept back
// (force: pushed anyway, so memory stays bounded), so a process that logs no event leaves no file.
// from_writer: the writer thread's own flush (no back-pressure: it empties the queue itself; it
// is running and awake). Returns true if the chunk was pushed.
bool TracerImpl::enqueue_locked(bool force, bool from_writer) {
  if (chunk.empty()) return false;
  if (!events_pushed && !chunk.has_events && !force) return false;
  events_pushed = true;
  pthread_mutex_lock(&q_mu);
  if (!from_writer) {
    while (queue.size() >= kMaxQueuedChunks && writer_running && state.load() == ACTIVE)
      pthread_cond_wait(&done_cv, &q_mu);
  }
  queue.push_back(std::move(chunk));
  pushed.fetch_add(1);
  chunk = Chunk();
  chunk.pieces.reserve(wbs / tcap + 4);
  if (!from_writer) {
    if (!in_last_event_scope()) start_writer_locked();  // else flush_wait() writes it on this thread
    sem_post(&wake);
  }
  pthread_mutex_unlock(&q_mu);
  return true;
}

}  // namespace dftracer
