// C API (include/dftracer/dftracer.h); the C++ macros use it too.
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "dftracer/dftracer.h"
#include "tracer.h"

using dftracer::ArgList;
using dftracer::Tracer;

// An open region. Tags go straight into an ArgList; tag keys and string values are copied
// into an inline arena (spilling to the heap only when it is full). States are recycled through
// a per-thread free list, so a region costs no allocation in steady state.
struct dftracer_region {
  const char* name;
  const char* cat;
  int64_t ts;
  ArgList args;
  size_t used;
  char arena[480];
  std::deque<std::string> spill;
  dftracer_region* next_free;

  // Stable copy of s (the arena never moves; spilled strings live in a deque).
  std::string_view keep(const char* s, size_t n) {
    if (used + n <= sizeof(arena)) {
      char* p = arena + used;
      if (n) std::memcpy(p, s, n);
      used += n;
      return std::string_view(p, n);
    }
    spill.emplace_back(s, n);
    return spill.back();
  }
};

namespace {
struct FreeList {
  dftracer_region* head = nullptr;
  int count = 0;
};
thread_local FreeList t_free;

dftracer_region* region_alloc() {
  FreeList& fl = t_free;
  dftracer_region* r = fl.head;
  if (r) {
    fl.head = r->next_free;
    --fl.count;
    if (!r->spill.empty()) r->spill.clear();
  } else {
    r = new dftracer_region();
  }
  r->args.clear();
  r->used = 0;
  return r;
}

void region_free(dftracer_region* r) {
  FreeList& fl = t_free;
  if (fl.count < 64) {
    r->next_free = fl.head;
    fl.head = r;
    ++fl.count;
  } else {
    delete r;
  }
}

inline std::string_view key_of(dftracer_region* r, const char* key) { return r->keep(key, std::strlen(key)); }

void region_finish(dftracer_region* r, bool instant) {
  Tracer* tr = Tracer::instance();
  if (tr->active()) {
    if (instant) tr->log_instant(r->name, r->cat, r->ts, &r->args);
    else tr->log_complete(r->name, r->cat, r->ts, dftracer::now_us() - r->ts, &r->args);
  }
  region_free(r);
}
}  // namespace

extern "C" {

void dftracer_c_init(const char* log_file, const char* data_dirs, const int* process_id) {
  Tracer::instance()->initialize(log_file, data_dirs, process_id);
}

void dftracer_c_fini(void) { Tracer::instance()->finalize(); }

int64_t dftracer_c_time_us(void) { return dftracer::now_us(); }

dftracer_region_t* dftracer_c_region_begin(const char* name, const char* cat) {
  if (!dftracer_c_is_active()) return nullptr;
  dftracer_region* r = region_alloc();
  r->name = name ? name : "";
  r->cat = cat ? cat : "";
  r->ts = dftracer::now_us();
  return r;
}

void dftracer_c_region_update_int(dftracer_region_t* r, const char* key, int64_t value) {
  if (r && key) r->args.add_int(key_of(r, key), value);
}
void dftracer_c_region_update_uint(dftracer_region_t* r, const char* key, uint64_t value) {
  if (r && key) r->args.add_uint(key_of(r, key), value);
}
void dftracer_c_region_update_double(dftracer_region_t* r, const char* key, double value) {
  if (r && key) r->args.add_double(key_of(r, key), value);
}
void dftracer_c_region_update_bool(dftracer_region_t* r, const char* key, int value) {
  if (r && key) r->args.add_bool(key_of(r, key), value != 0);
}
void dftracer_c_region_update_strn(dftracer_region_t* r, const char* key, const char* value, uint64_t len) {
  if (!r || !key || r->args.size() >= ArgList::kCapacity) return;
  std::string_view k = key_of(r, key);
  r->args.add_str(k, r->keep(value ? value : "", value ? len : 0));
}
void dftracer_c_region_update_str(dftracer_region_t* r, const char* key, const char* value) {
  dftracer_c_region_update_strn(r, key, value ? value : "", value ? std::strlen(value) : 0);
}

void dftracer_c_region_end(dftracer_region_t* r) {
  if (r) region_finish(r, false);
}
void dftracer_c_region_end_instant(dftracer_region_t* r) {
  if (r) region_finish(r, true);
}

void dftracer_c_log_complete(const char* name, const char* cat, int64_t ts_us, int64_t dur_us) {
  Tracer* t = Tracer::instance();
  if (t->active()) t->log_complete(name ? name : "", cat ? cat : "", ts_us, dur_us, nullptr);
}

void dftracer_c_instant(const char* name, const char* cat) {
  Tracer* t = Tracer::instance();
  if (t->active()) t->log_instant(name ? name : "", cat ? cat : "", dftracer::now_us(), nullptr);
}

void dftracer_c_instant_int(const char* name, const char* cat, const char* key, int64_t value) {
  Tracer* t = Tracer::instance();
  if (!t->active()) return;
  ArgList a;
  a.add_int(key ? key : "", value);
  t->log_instant(name ? name : "", cat ? cat : "", dftracer::now_us(), &a);
}

void dftracer_c_instant_str(const char* name, const char* cat, const char* key, const char* value) {
  Tracer* t = Tracer::instance();
  if (!t->active()) return;
  ArgList a;
  a.add_str(key ? key : "", value ? value : "");
  t->log_instant(name ? name : "", cat ? cat : "", dftracer::now_us(), &a);
}

void dftracer_c_metadata(const char* key, const char* value) {
  Tracer* t = Tracer::instance();
  if (t->active()) t->log_metadata(key ? key : "", value ? value : "");
}

}  // extern "C"
