// Internal API of the dftracer core (see docs/design.md, "Internal C++ API of the core").
// Used by the LD_PRELOAD library (src/preload) and the Python binding (src/core/pybind.cpp).
//
// Units: timestamps and durations are µs (wall clock, CLOCK_REALTIME since the epoch); sizes are
// bytes.  Event layout follows the Chrome trace-event format ("ph" X/i/M), written as one compact
// JSON object per line (docs/format.md).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dftracer/dftracer.h"  // dftracer_active_flag (the one-load "is tracing on" word)
#include "dftracer/export.h"    // DFTRACER_EXPORT: the library is built with -fvisibility=hidden

namespace dftracer {

// Wall-clock time in µs since the epoch (clock_gettime(CLOCK_REALTIME), a vDSO call).
DFTRACER_EXPORT int64_t now_us() noexcept;

enum class InitMode { FUNCTION, PRELOAD };
enum class LogLevel { ERROR = 0, WARN = 1, INFO = 2, DEBUG = 3 };

// Parsed once per process (first call of config()): YAML file named by DFTRACER_CONFIGURATION,
// then environment overrides.  docs/configuration.md lists every key.
struct Config {
  bool enable = false;                  // DFTRACER_ENABLE
  bool enable_set = false;              // DFTRACER_ENABLE was given (env or YAML), true or false
  InitMode init = InitMode::FUNCTION;   // DFTRACER_INIT: who calls initialize()
  std::string log_file = "./dftracer";  // DFTRACER_LOG_FILE, a path prefix (absolute after parse)
  std::string data_dirs_raw;            // DFTRACER_DATA_DIR as given (":"-separated or "all")
  std::vector<std::string> data_dirs;   // absolute, normalised, no trailing '/'
  bool trace_all = true;                // data dir "all" (the default when unset)
  bool data_dirs_defaulted = true;      // DFTRACER_DATA_DIR was not given anywhere
  bool inc_metadata = false;            // DFTRACER_INC_METADATA
  bool compression = true;              // DFTRACER_TRACE_COMPRESSION
  int compression_level = 1;            // DFTRACER_COMPRESSION_LEVEL (deflate 1..9; docs/perf/preload.md)
  size_t write_buffer_size = 4u << 20;  // DFTRACER_WRITE_BUFFER_SIZE, bytes per gzip member
  bool disable_io = false;              // DFTRACER_DISABLE_IO    (preload: no POSIX nor STDIO)
  bool disable_posix = false;           // DFTRACER_DISABLE_POSIX (preload: no POSIX calls)
  bool disable_stdio = false;           // DFTRACER_DISABLE_STDIO (preload: no STDIO calls)
  bool bind_signals = true;             // DFTRACER_BIND_SIGNALS  (flush on fatal signals, see signals::)
  int flush_interval_ms = 500;          // DFTRACER_FLUSH_INTERVAL: writer flushes every N ms (0: off)
  bool set_core_affinity = false;       // DFTRACER_SET_CORE_AFFINITY (record CPU set)
  LogLevel log_level = LogLevel::WARN;  // DFTRACER_LOG_LEVEL
  // Aggregation (docs/aggregation.md): DFTRACER_ENABLE_AGGREGATION, DFTRACER_AGGREGATION_TYPE
  // (FULL or SELECTIVE), DFTRACER_AGGREGATION_FILE (YAML: `inclusion` / `exclusion` rule lists,
  // read into the two vectors), DFTRACER_TRACE_INTERVAL_MS (bucket length).
  bool aggregation_enable = false;
  bool aggregation_selective = false;
  std::string aggregation_file;
  int trace_interval_ms = 1000;
  std::vector<std::string> aggregation_inclusion, aggregation_exclusion;
  std::string config_file;    // DFTRACER_CONFIGURATION
  bool config_error = false;  // bad YAML: tracing forced off
};
DFTRACER_EXPORT const Config& config();

// Bytes of an event's args JSON the Python APIs keep (src/core/py_args.h, docs/python_api.md
// "Args"); what crosses the limit is counted with count_dropped_args(args, bytes) by either
// binding, and the next finalize of an active tracer records the total once: a metadata record
// `dropped_args` ("<n> args, <bytes> bytes over the 1048576-byte args limit of an event") and
// one stderr line. Counters are process-wide (both bindings share them).
constexpr size_t kMaxPyArgsBytes = size_t(1) << 20;
DFTRACER_EXPORT void count_dropped_args(int64_t args, int64_t bytes) noexcept;
// Called by the LD_PRELOAD library's constructor only (before any tracing): in a preloaded
// process, DFTRACER_INIT=PRELOAD enables tracing unless DFTRACER_ENABLE was given explicitly
// (so DFTRACER_ENABLE=0 still wins). Returns config().enable afterwards.
DFTRACER_EXPORT bool enable_for_preload() noexcept;

// Parse a configuration from a YAML file (may be empty) and an environment lookup; exposed for
// tests.  Warnings go to stderr (one per bad key).
DFTRACER_EXPORT Config load_config(const char* (*getenv_fn)(const char*));

// Split a ":"-separated list, resolve relative entries against the cwd, normalise ("." "..", "//",
// trailing "/"). Sets *all when an entry is "all".
DFTRACER_EXPORT std::vector<std::string> parse_data_dirs(std::string_view spec, bool* all);
// Lexical normalisation of an absolute path (no symlink resolution).
DFTRACER_EXPORT std::string normalize_path(std::string_view path);
// Component-aware prefix test: "/a/b" matches "/a/b" and "/a/b/c", not "/a/bc".
DFTRACER_EXPORT bool path_has_prefix(std::string_view path, std::string_view dir) noexcept;

// Event arguments ("args" object). Fixed capacity, no allocation; string values are views and
// must stay valid until the log_* call returns.  Extra entries beyond kCapacity are dropped.
// Keys given as char arrays (string literals) are checked for "needs no JSON escaping" inline,
// which the compiler folds for literals, so the formatter copies them with one memcpy.
class ArgList {
 public:
  static constexpr int kCapacity = 24;
  // RAW: a complete, already escaped `"key":value` JSON fragment, written verbatim (add_raw).
  enum Type : uint8_t { INT, UINT, DOUBLE, BOOL, STR, RAW };
  // Plain data (no constructors) so that an ArgList on the stack costs nothing to create.
  struct Entry {
    const char* kp;
    uint32_t kl;
    Type type;
    bool kplain;  // key is printable ASCII without '"' and '\\': copied without escaping
    union {
      int64_t i;
      uint64_t u;
      double d;
      bool b;
      struct {
        const char* sp;
        size_t sl;
      } s;
    };
    std::string_view key() const noexcept { return std::string_view(kp, kl); }
    std::string_view str() const noexcept { return std::string_view(s.sp, s.sl); }
  };
  void add_int(std::string_view key, int64_t v) noexcept {
    if (Entry* e = next(key, false)) {
      e->type = INT;
      e->i = v;
    }
  }
  void add_uint(std::string_view key, uint64_t v) noexcept {
    if (Entry* e = next(key, false)) {
      e->type = UINT;
      e->u = v;
    }
  }
  void add_double(std::string_view key, double v) noexcept {
    if (Entry* e = next(key, false)) {
      e->type = DOUBLE;
      e->d = v;
    }
  }
  void add_bool(std::string_view key, bool v) noexcept {
    if (Entry* e = next(key, false)) {
      e->type = BOOL;
      e->b = v;
    }
  }
  void add_str(std::string_view key, std::string_view v) noexcept {
    if (Entry* e = next(key, false, 2 + 6 * v.size())) {
      e->type = STR;
      e->s.sp = v.data();
      e->s.sl = v.size();
    }
  }
  // Same, for keys given as char arrays (string literals); NUL-terminated like a C string.
  template <size_t N>
  __attribute__((always_inline)) void add_int(const char (&key)[N], int64_t v) noexcept {
    if (Entry* e = next(lit(key), lit_plain(key))) {
      e->type = INT;
      e->i = v;
    }
  }
  template <size_t N>
  __attribute__((always_inline)) void add_uint(const char (&key)[N], uint64_t v) noexcept {
    if (Entry* e = next(lit(key), lit_plain(key))) {
      e->type = UINT;
      e->u = v;
    }
  }
  template <size_t N>
  __attribute__((always_inline)) void add_double(const char (&key)[N], double v) noexcept {
    if (Entry* e = next(lit(key), lit_plain(key))) {
      e->type = DOUBLE;
      e->d = v;
    }
  }
  template <size_t N>
  __attribute__((always_inline)) void add_bool(const char (&key)[N], bool v) noexcept {
    if (Entry* e = next(lit(key), lit_plain(key))) {
      e->type = BOOL;
      e->b = v;
    }
  }
  template <size_t N>
  __attribute__((always_inline)) void add_str(const char (&key)[N], std::string_view v) noexcept {
    if (Entry* e = next(lit(key), lit_plain(key), 2 + 6 * v.size())) {
      e->type = STR;
      e->s.sp = v.data();
      e->s.sl = v.size();
    }
  }
  // A complete `"key":value` pair, already valid JSON (escaped), copied verbatim; the view must
  // stay valid until the log_* call returns. The preload caches `"fname":"<path>"` per fd.
  void add_raw(std::string_view fragment) noexcept {
    if (Entry* e = next(std::string_view(), true, fragment.size())) {
      e->type = RAW;
      e->s.sp = fragment.data();
      e->s.sl = fragment.size();
    }
  }
  // add(key, v): picks the type from v (integers, floating point, bool, strings).
  template <typename K, typename T>
  void add(const K& key, const T& v) noexcept {
    using U = std::decay_t<T>;
    if constexpr (std::is_same_v<U, bool>) add_bool(key, v);
    else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) add_int(key, v);
    else if constexpr (std::is_integral_v<U>) add_uint(key, v);
    else if constexpr (std::is_floating_point_v<U>) add_double(key, v);
    else add_str(key, std::string_view(v));
  }
  int size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  void clear() noexcept {
    n_ = 0;
    need_ = 0;
  }
  // Upper bound of the bytes the entries take in the output (kept up to date by add_*).
  size_t need() const noexcept { return need_; }
  const Entry& operator[](int i) const noexcept { return e_[i]; }

 private:
  template <size_t N>
  __attribute__((always_inline)) static std::string_view lit(const char (&key)[N]) noexcept {
    return std::string_view(key);  // strlen semantics, as for a const char*
  }
  // Constant trip count: fully unrolled and folded for a literal.
  template <size_t N>
  __attribute__((always_inline)) static bool lit_plain(const char (&key)[N]) noexcept {
    for (size_t i = 0; i < N; ++i) {
      unsigned char c = static_cast<unsigned char>(key[i]);
      if (c == 0) return true;
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
    }
    return true;
  }
  // Output bound of one entry: ',' '"' key '"' ':' and a number (kMaxNumber = 32) or a quoted
  // string (6 bytes per input byte at worst, \u00XX), or a raw fragment as is.
  Entry* next(std::string_view key, bool plain, size_t value_bound = 34) noexcept {
    if (n_ >= kCapacity) return nullptr;
    need_ += 4 + (plain ? key.size() : 6 * key.size()) + value_bound;
    Entry* e = &e_[n_++];
    e->kp = key.data();
    e->kl = static_cast<uint32_t>(key.size());
    e->kplain = plain;
    return e;
  }
  int n_ = 0;
  size_t need_ = 0;
  Entry e_[kCapacity];
};

// Integer arguments of a compact event (Tracer::log_compact): up to kCapacity `"key":integer`
// pairs whose keys are string literals of the caller (static storage: the record keeps the
// pointer and the writer thread reads the key when it formats the line). Keys that need JSON
// escaping are escaped when the line is formatted. Extra entries beyond kCapacity are dropped.
// Plain data, filled inline: the whole array is copied into the record with one memcpy.
class CompactArgs {
 public:
  static constexpr int kCapacity = 7;
  struct Entry {
    const char* key;  // NUL-terminated literal
    uint8_t klen;     // bytes of key (< 256)
    uint8_t flags;    // kUint: written as uint64; kPlain: key needs no escaping
    uint8_t unused[6];
    int64_t v;  // the value (uint64 bits for kUint)
  };
  static constexpr uint8_t kUint = 1, kPlain = 2;
  template <size_t N>
  __attribute__((always_inline)) void add_int(const char (&key)[N], int64_t v) noexcept {
    put(key, 0, v);
  }
  template <size_t N>
  __attribute__((always_inline)) void add_uint(const char (&key)[N], uint64_t v) noexcept {
    put(key, kUint, static_cast<int64_t>(v));
  }
  int size() const noexcept { return n_; }
  const Entry& operator[](int i) const noexcept { return e_[i]; }
  const Entry* entries() const noexcept { return e_; }

 private:
  template <size_t N>
  __attribute__((always_inline)) void put(const char (&key)[N], uint8_t flags, int64_t v) noexcept {
    static_assert(N <= 256, "CompactArgs keys are short literals");
    if (n_ >= kCapacity) return;
    Entry& e = e_[n_++];
    size_t len = std::string_view(key).size();  // strlen semantics, folded for a literal
    bool plain = true;
    for (size_t i = 0; i < len; ++i) {  // folded for a literal
      unsigned char c = static_cast<unsigned char>(key[i]);
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') plain = false;
    }
    e.key = key;
    e.klen = static_cast<uint8_t>(len);
    e.flags = static_cast<uint8_t>(flags | (plain ? kPlain : 0));
    e.v = v;
  }
  int n_ = 0;
  Entry e_[kCapacity];
};

// Thread-local re-entry marker: while a guard is alive on a thread (and always on the tracer's
// writer thread) in_tracer() is true and the preload wrappers must not trace.
struct DFTRACER_EXPORT ReentryGuard {
  ReentryGuard() noexcept;
  ~ReentryGuard() noexcept;
  ReentryGuard(const ReentryGuard&) = delete;
  ReentryGuard& operator=(const ReentryGuard&) = delete;
};
DFTRACER_EXPORT bool in_tracer() noexcept;

// Phase of an event: "ph":"X" (complete: ts and dur) or "ph":"i" (instant: ts only, "s":"t").
enum class Phase : uint8_t { Complete, Instant };

// While alive on a thread, an event it logs does not start the writer thread: the caller flushes
// or finalizes right after (the preload's exec and _exit wrappers), and flush()/finalize() then
// write on the calling thread. Spares a forked child that execs a thread start and its handoffs.
struct DFTRACER_EXPORT LastEventScope {
  LastEventScope() noexcept;
  ~LastEventScope() noexcept;
  LastEventScope(const LastEventScope&) = delete;
  LastEventScope& operator=(const LastEventScope&) = delete;
};

class TracerImpl;

// The per-process tracer. All members are thread safe and never throw.
class DFTRACER_EXPORT Tracer {
 public:
  // Lazily created, never destroyed, never null.
  static Tracer* instance() noexcept;

  // Enabled, initialised, not failed, not finalised: one relaxed load.
  bool active() const noexcept { return __atomic_load_n(&dftracer_active_flag, __ATOMIC_RELAXED) != 0; }

  // Start tracing if config().enable. log_file: explicit trace name (a ".pfw"/".pfw.gz" suffix is
  // stripped, ours appended) or nullptr for <DFTRACER_LOG_FILE>-<hostname>-<pid>. data_dirs:
  // ":"-separated prefixes or "all", nullptr = config. process_id: recorded as metadata
  // "process_id" (events carry the OS pid).  A second call while active keeps the same instance:
  // a new log_file renames the output (hybrid preload + Python mode), new data_dirs replace the
  // old ones.  A call after finalize() starts a new file.
  void initialize(const char* log_file, const char* data_dirs, const int* process_id) noexcept;

  // One event of the given phase: ts in µs; dur in µs for Phase::Complete (a negative duration,
  // e.g. the wall clock stepped back, is written as 0), ignored for Phase::Instant. args may be
  // null. plain_name_cat = the caller checked that name and cat need no JSON escaping
  // (json::is_plain, e.g. string literals of the preload), so they are copied as they are.
  void log_event(Phase phase, std::string_view name, std::string_view cat, int64_t ts, int64_t dur, const ArgList* args,
                 bool plain_name_cat) noexcept;
  // Complete event ("ph":"X"): ts and dur in µs. args may be null. File events carry args "fname".
  void log_complete(std::string_view name, std::string_view cat, int64_t ts, int64_t dur, const ArgList* args,
                    bool plain_name_cat = false) noexcept {
    log_event(Phase::Complete, name, cat, ts, dur, args, plain_name_cat);
  }
  // Instant event ("ph":"i", "s":"t") at ts µs.
  void log_instant(std::string_view name, std::string_view cat, int64_t ts, const ArgList* args) noexcept {
    log_event(Phase::Instant, name, cat, ts, 0, args, false);
  }
  // A complete event ("ph":"X") whose args are `fragment` (a complete, escaped `"key":value`
  // JSON fragment such as the preload's cached `"fname":"<path>"`, copied; may be empty) followed
  // by the integers of `ints`. name and cat are string literals of the caller (static storage,
  // kept by pointer until the writer formats the line; up to 255 bytes each); plain_name_cat as for
  // log_event. The application thread stores a fixed binary record (no number formatting); the
  // writer thread writes the line, the same bytes log_event writes for an ArgList holding
  // add_raw(fragment) and the same integers (event_format.h render_compact).
  void log_compact(std::string_view name, std::string_view cat, int64_t ts, int64_t dur, std::string_view fragment,
                   const CompactArgs& ints, bool plain_name_cat) noexcept;
  // Metadata record ("ph":"M", name=key, args {"name":key,"value":value}).
  void log_metadata(std::string_view key, std::string_view value) noexcept;

  // Flush everything buffered into the file (one or more gzip members) and wait until written.
  // Tracing continues.  The preload calls this before exec*().
  void flush() noexcept;
  // Flush, close the file, stop the writer thread; later events are dropped. Idempotent.
  // Called at exit (atexit), by the preload's exit/_exit wrappers and by the Python layer. The
  // flush signals (signals::is_flush_signal) are blocked on the calling thread meanwhile, so a
  // SIGTERM arriving during finalize (e.g. a pool's terminate()) is delivered once the file is
  // complete.
  void finalize() noexcept;
  // finalize() when the process ends right after (atexit handler, the preload's _exit wrapper):
  // the same file contents, but an idle writer thread is left asleep instead of joined.
  void finalize_at_exit() noexcept;

  // True if the absolute path is inside a data dir (component aware) or, with "all", outside
  // /proc, /sys, /dev and the trace output.  Relative paths are resolved against the cwd.
  bool is_traced_path(std::string_view absolute_path) const noexcept;
  // Current output file ("" before initialize or when disabled).
  std::string trace_path() const;

  // Descriptor of the trace file in the application's descriptor table, or -1 while none is open
  // there (lock-free; the writer thread writes through its own table, so this is -1 until an
  // application thread writes a chunk, e.g. the flush at exit or before exec). It is close-on-exec, never
  // 0..2, and numbered from 1024 up (lower only under a small RLIMIT_NOFILE); the preload's
  // close/close_range/closefrom/dup2/dup3 wrappers keep the application from closing or
  // replacing it, and the writer checks before each chunk that it still names the trace file.
  int trace_fd() const noexcept;
  // The application is about to take descriptor number fd (dup2/dup3 onto it): if the trace file
  // holds fd, move it to another number and close fd, so the application's call behaves exactly
  // as without the tracer. Returns false if the move failed (EMFILE; the writer re-opens the file
  // after the application's call replaced it).
  bool yield_fd(int fd) noexcept;

  // A child made by a raw fork/clone system call (the preload's syscall() wrapper): the handlers
  // pthread_atfork registered, which glibc runs only in fork(). prepare before the system call,
  // then parent in the parent (also when it failed) or child in the child.
  static void raw_fork_prepare() noexcept;
  static void raw_fork_parent() noexcept;
  static void raw_fork_child() noexcept;

  // Diagnostics for tests and the Python layer.
  bool failed() const noexcept;  // output could not be written: tracing stopped
  int pid() const noexcept;      // cached getpid() (updated after fork)

 private:
  Tracer();
  void finalize_impl(bool at_exit) noexcept;
  TracerImpl* impl_;
};

// Cached kernel thread id of the calling thread.
DFTRACER_EXPORT int current_tid() noexcept;

// Signal handling of the tracer (one mechanism for the preload library, the Python binding and
// the C/C++ APIs; docs/format.md "Crash behaviour"). With DFTRACER_BIND_SIGNALS (default on),
// initialize() installs one handler for the signals of kFlushSignals whose action is not SIG_IGN.
// On delivery it hands a flush to the writer thread (async-signal-safe: an atomic flag and
// sem_post; the writer does the locking, compression and write) and waits (at most 2 s) until the
// writer has written every buffered event. If the application's action is the default one, it
// then restores SIG_DFL and re-raises the signal: the process ends with the same status. If the
// application has a handler (installed before or after us), that handler is called with its own
// flags, siginfo and mask (the other flush signals are held back only during the flush). SIG_IGN
// stays ignored. A signal that interrupts the tracer while it holds one of its own locks on that
// thread is held until the lock is released (a few µs: the event being formatted is finished).
// docs/design.md, "Signals", states the whole policy.
namespace signals {
// SIGHUP SIGINT SIGQUIT SIGABRT SIGPIPE SIGTERM SIGXCPU (all end the process by default; SIGKILL
// cannot be caught: the writer's timed flush, DFTRACER_FLUSH_INTERVAL, bounds what it loses), and
// the crash signals SIGSEGV SIGBUS SIGFPE SIGILL (flushed, then their default action or the
// application's handler; never blocked or deferred by the tracer).
DFTRACER_EXPORT bool is_flush_signal(int sig) noexcept;
using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
// The preload library wraps sigaction(); the core must install its handler with libc's.
DFTRACER_EXPORT void set_real_sigaction(SigactionFn fn) noexcept;
// The application's sigaction() on a flush signal, as the preload wrapper forwards it. Returns
// false if the tracer does not manage `sig` (the caller then calls the real sigaction). Otherwise
// performs the call on the application's view of the action (old = what the application set last,
// or the action found at initialize), keeps the tracer's handler in the kernel (or SIG_IGN if the
// application asks for it), sets *rc to 0 (or -1 with errno) and returns true.
DFTRACER_EXPORT bool app_sigaction(int sig, const struct sigaction* act, struct sigaction* old, int* rc) noexcept;
}  // namespace signals

}  // namespace dftracer
