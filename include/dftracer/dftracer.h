/*
 * dftracer public C/C++ API (link with -ldftracer_core).
 *
 * Events follow the Chrome trace-event format (docs/format.md): a region is a complete event
 * ("ph":"X") with ts = start and dur = end - start, both in µs of wall-clock time
 * (CLOCK_REALTIME since the epoch); an instant is "ph":"i"; metadata is "ph":"M".
 * Region and function events get category "CPP_APP" (C++) or "C_APP" (C); tags added with the
 * *_UPDATE macros land in the event's "args" object.
 *
 * Tracing is on only when DFTRACER_ENABLE is true (see docs/configuration.md) and
 * DFTRACER_C_INIT / DFTRACER_CPP_INIT (or the preload library) has initialised the tracer.
 * When it is off every macro below costs one predictable branch (one relaxed load of
 * dftracer_active_flag) and writes nothing; no file is created.
 *
 * Rules: DFTRACER_*_REGION_START(NAME) and the matching _END(NAME) must be in the same scope
 * (START declares a local named after NAME). Names passed to the C functions must stay valid
 * until the region ends (string literals or __func__); tag keys and string values are copied.
 */
#ifndef DFTRACER_DFTRACER_H
#define DFTRACER_DFTRACER_H

#include <stdint.h>

#include "dftracer/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero while tracing is on. Read it through dftracer_c_is_active(). */
extern DFTRACER_EXPORT int dftracer_active_flag;

static inline int dftracer_c_is_active(void) { return __atomic_load_n(&dftracer_active_flag, __ATOMIC_RELAXED); }

/* Start tracing (no-op unless DFTRACER_ENABLE). log_file: explicit trace file name
 * ("x.pfw" or "x.pfw.gz"; the suffix is replaced by ours) or NULL for
 * <DFTRACER_LOG_FILE>-<hostname>-<pid>.pfw.gz. data_dirs: ":"-separated directories or "all",
 * NULL for DFTRACER_DATA_DIR. process_id: optional rank, recorded as metadata "process_id". */
DFTRACER_EXPORT void dftracer_c_init(const char* log_file, const char* data_dirs, const int* process_id);
/* Flush and close the trace file. Safe to call twice; later events are dropped. */
DFTRACER_EXPORT void dftracer_c_fini(void);
/* Wall-clock time in µs since the epoch. */
DFTRACER_EXPORT int64_t dftracer_c_time_us(void);

typedef struct dftracer_region dftracer_region_t; /* opaque open region */

/* Open a region at now(); returns NULL when tracing is off. name/cat must outlive the region. */
DFTRACER_EXPORT dftracer_region_t* dftracer_c_region_begin(const char* name, const char* cat);
/* Add a tag (args entry) to an open region; NULL region is ignored. key/value are copied. */
DFTRACER_EXPORT void dftracer_c_region_update_int(dftracer_region_t* r, const char* key, int64_t value);
DFTRACER_EXPORT void dftracer_c_region_update_uint(dftracer_region_t* r, const char* key, uint64_t value);
DFTRACER_EXPORT void dftracer_c_region_update_double(dftracer_region_t* r, const char* key, double value);
DFTRACER_EXPORT void dftracer_c_region_update_bool(dftracer_region_t* r, const char* key, int value);
DFTRACER_EXPORT void dftracer_c_region_update_str(dftracer_region_t* r, const char* key, const char* value);
DFTRACER_EXPORT void dftracer_c_region_update_strn(dftracer_region_t* r, const char* key, const char* value,
                                                   uint64_t len);
/* Close the region: writes one complete event (dur = now - start, µs) and frees r. */
DFTRACER_EXPORT void dftracer_c_region_end(dftracer_region_t* r);
/* Close the region as an instant event ("ph":"i", ts = its start) with its tags; frees r. */
DFTRACER_EXPORT void dftracer_c_region_end_instant(dftracer_region_t* r);
/* One complete event with explicit start ts and duration, µs. */
DFTRACER_EXPORT void dftracer_c_log_complete(const char* name, const char* cat, int64_t ts_us, int64_t dur_us);
/* Instant events at now(); the _int/_str forms carry one tag. */
DFTRACER_EXPORT void dftracer_c_instant(const char* name, const char* cat);
DFTRACER_EXPORT void dftracer_c_instant_int(const char* name, const char* cat, const char* key, int64_t value);
DFTRACER_EXPORT void dftracer_c_instant_str(const char* name, const char* cat, const char* key, const char* value);
/* Metadata record {"ph":"M","name":key,"args":{"name":key,"value":value}}. */
DFTRACER_EXPORT void dftracer_c_metadata(const char* key, const char* value);

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------ C macros */
#define DFTRACER_C_INIT(log_file, data_dirs, pid_ptr) dftracer_c_init((log_file), (data_dirs), (pid_ptr))
#define DFTRACER_C_FINI() dftracer_c_fini()

#define DFTRACER_C_REGION_BEGIN_(cat, name) \
  (dftracer_c_is_active() ? dftracer_c_region_begin((name), (cat)) : (dftracer_region_t*)0)

/* A complete event named after the enclosing function, category "C_APP". */
#define DFTRACER_C_FUNCTION_START() \
  dftracer_region_t* dftracer_c_fn_region_ = DFTRACER_C_REGION_BEGIN_("C_APP", __func__)
#define DFTRACER_C_FUNCTION_END() \
  do { \
    if (dftracer_c_fn_region_) dftracer_c_region_end(dftracer_c_fn_region_); \
    dftracer_c_fn_region_ = 0; \
  } while (0)
#define DFTRACER_C_FUNCTION_UPDATE_INT(key, val) \
  do { \
    if (dftracer_c_fn_region_) dftracer_c_region_update_int(dftracer_c_fn_region_, (key), (val)); \
  } while (0)
#define DFTRACER_C_FUNCTION_UPDATE_DOUBLE(key, val) \
  do { \
    if (dftracer_c_fn_region_) dftracer_c_region_update_double(dftracer_c_fn_region_, (key), (val)); \
  } while (0)
#define DFTRACER_C_FUNCTION_UPDATE_STR(key, val) \
  do { \
    if (dftracer_c_fn_region_) dftracer_c_region_update_str(dftracer_c_fn_region_, (key), (val)); \
  } while (0)

/* A complete event named NAME (an identifier), category "C_APP". */
#define DFTRACER_C_REGION_START(NAME) \
  dftracer_region_t* dftracer_c_region_##NAME = DFTRACER_C_REGION_BEGIN_("C_APP", #NAME)
#define DFTRACER_C_REGION_END(NAME) \
  do { \
    if (dftracer_c_region_##NAME) dftracer_c_region_end(dftracer_c_region_##NAME); \
    dftracer_c_region_##NAME = 0; \
  } while (0)
#define DFTRACER_C_REGION_UPDATE_INT(NAME, key, val) \
  do { \
    if (dftracer_c_region_##NAME) dftracer_c_region_update_int(dftracer_c_region_##NAME, (key), (val)); \
  } while (0)
#define DFTRACER_C_REGION_UPDATE_DOUBLE(NAME, key, val) \
  do { \
    if (dftracer_c_region_##NAME) dftracer_c_region_update_double(dftracer_c_region_##NAME, (key), (val)); \
  } while (0)
#define DFTRACER_C_REGION_UPDATE_STR(NAME, key, val) \
  do { \
    if (dftracer_c_region_##NAME) dftracer_c_region_update_str(dftracer_c_region_##NAME, (key), (val)); \
  } while (0)

/* Metadata record key=value; NAME is a label kept for DFTracer v1 source compatibility. */
#define DFTRACER_C_METADATA(NAME, key, value) \
  do { \
    (void)#NAME; \
    if (dftracer_c_is_active()) dftracer_c_metadata((key), (value)); \
  } while (0)
/* Instant event named NAME (identifier), category "C_APP". */
#define DFTRACER_C_INSTANT(NAME) \
  do { \
    if (dftracer_c_is_active()) dftracer_c_instant(#NAME, "C_APP"); \
  } while (0)
#define DFTRACER_C_INSTANT_INT(NAME, key, val) \
  do { \
    if (dftracer_c_is_active()) dftracer_c_instant_int(#NAME, "C_APP", (key), (val)); \
  } while (0)
#define DFTRACER_C_INSTANT_STR(NAME, key, val) \
  do { \
    if (dftracer_c_is_active()) dftracer_c_instant_str(#NAME, "C_APP", (key), (val)); \
  } while (0)

/* ---------------------------------------------------------------- C++ API */
#ifdef __cplusplus
#include <string>
#include <string_view>
#include <type_traits>

namespace dftracer {

// RAII region: a complete event from construction to end()/destruction, µs.
class Region {
 public:
  Region(const char* name, const char* cat) noexcept
      : r_(dftracer_c_is_active() ? dftracer_c_region_begin(name, cat) : nullptr) {}
  ~Region() {
    if (r_) dftracer_c_region_end(r_);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  // Close now (idempotent).
  void end() noexcept {
    if (r_) {
      dftracer_c_region_end(r_);
      r_ = nullptr;
    }
  }
  // Add a tag (args[key] = value); integers, floating point, bool, C/C++ strings.
  template <typename T>
  void update(const char* key, const T& value) noexcept {
    if (r_) put(r_, key, value);
  }
  bool open() const noexcept { return r_ != nullptr; }

  template <typename T>
  static void put(dftracer_region_t* r, const char* key, const T& v) noexcept {
    using U = std::decay_t<T>;
    if constexpr (std::is_same_v<U, bool>) dftracer_c_region_update_bool(r, key, v ? 1 : 0);
    else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) dftracer_c_region_update_int(r, key, (int64_t)v);
    else if constexpr (std::is_integral_v<U>) dftracer_c_region_update_uint(r, key, (uint64_t)v);
    else if constexpr (std::is_floating_point_v<U>) dftracer_c_region_update_double(r, key, (double)v);
    else if constexpr (std::is_enum_v<U>) dftracer_c_region_update_int(r, key, (int64_t)v);
    else {
      std::string_view s(v);
      dftracer_c_region_update_strn(r, key, s.data(), s.size());
    }
  }

 private:
  dftracer_region_t* r_;
};

inline void put_pairs(dftracer_region_t*) noexcept {}
template <typename V, typename... Rest>
inline void put_pairs(dftracer_region_t* r, const char* key, const V& v, const Rest&... rest) noexcept {
  Region::put(r, key, v);
  put_pairs(r, rest...);
}

// Instant event with optional (key, value) tag pairs: instant("name", "cat", "k", 1, "k2", "v").
template <typename... KV>
inline void instant(const char* name, const char* cat, const KV&... kv) noexcept {
  if (!dftracer_c_is_active()) return;
  if constexpr (sizeof...(KV) == 0) {
    dftracer_c_instant(name, cat);
  } else {
    static_assert(sizeof...(KV) % 2 == 0, "instant(): tags come as key, value pairs");
    dftracer_region_t* r = dftracer_c_region_begin(name, cat);
    if (!r) return;
    put_pairs(r, kv...);
    dftracer_c_region_end_instant(r);
  }
}

}  // namespace dftracer

#define DFTRACER_CPP_INIT(log_file, data_dirs, pid_ptr) dftracer_c_init((log_file), (data_dirs), (pid_ptr))
#define DFTRACER_CPP_FINI() dftracer_c_fini()
// Region for the enclosing function (name = __func__, cat "CPP_APP"), ends at scope exit.
#define DFTRACER_CPP_FUNCTION() ::dftracer::Region dftracer_cpp_fn_region_(__func__, "CPP_APP")
#define DFTRACER_CPP_FUNCTION_UPDATE(key, value) dftracer_cpp_fn_region_.update((key), (value))
// Scoped region named NAME (an identifier), ends at scope exit.
#define DFTRACER_CPP_REGION(NAME) ::dftracer::Region dftracer_cpp_region_##NAME(#NAME, "CPP_APP")
// Region named NAME from START to END (same scope).
#define DFTRACER_CPP_REGION_START(NAME) ::dftracer::Region dftracer_cpp_region_##NAME(#NAME, "CPP_APP")
#define DFTRACER_CPP_REGION_END(NAME) dftracer_cpp_region_##NAME.end()
#define DFTRACER_CPP_REGION_UPDATE(NAME, key, value) dftracer_cpp_region_##NAME.update((key), (value))
// Metadata record key=value; NAME is a label kept for DFTracer v1 source compatibility.
#define DFTRACER_CPP_METADATA(NAME, key, value) \
  do { \
    (void)#NAME; \
    if (dftracer_c_is_active()) dftracer_c_metadata((key), (value)); \
  } while (0)
// Instant event named NAME at now(), cat "CPP_APP"; _ARGS takes key, value pairs.
#define DFTRACER_CPP_INSTANT(NAME) ::dftracer::instant(#NAME, "CPP_APP")
#define DFTRACER_CPP_INSTANT_ARGS(NAME, ...) ::dftracer::instant(#NAME, "CPP_APP", __VA_ARGS__)

#endif /* __cplusplus */
#endif /* DFTRACER_DFTRACER_H */
