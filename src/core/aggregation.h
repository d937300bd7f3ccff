// Aggregation in the tracer (docs/aggregation.md): with DFTRACER_ENABLE_AGGREGATION the complete
// events of a thread are folded, per (name, cat) and time bucket of DFTRACER_TRACE_INTERVAL_MS,
// into one record in upstream DFTracer 2.2.0's layout ("ph":3, args.dft_cnt and per-field
// <key>_min/_max/_sum). FULL folds every event outside the tracer's own category; SELECTIVE folds
// those the rule file (DFTRACER_AGGREGATION_FILE: `inclusion` / `exclusion` lists of rule strings)
// includes and does not exclude, and the others stay full events.
//
// Each thread folds into its own table (AggTable), kept in its ThreadBuffer and guarded by that
// buffer's lock, so the event path takes no shared lock. A table is written as text lines into its
// thread's buffer when an event falls into another bucket, when the writer's timed flush finds the
// bucket over, on flush()/finalize(), at thread exit and on a signal flush; a forked child drops
// the parent's table (the parent writes it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "event_format.h"

namespace dftracer {
namespace agg {

// ------------------------------------------------------------------------------ rules
// One compiled rule: fields cat, name (strings), ts, dur (integers, µs); operators == != < <= >
// >= on numbers, == != LIKE ('%' any run, '_' one character) and IN {a,b,...} on strings; AND,
// OR, NOT and parentheses. Values are 'quoted', "quoted" or bare words/numbers. String matches
// are case-sensitive.
struct Node;
class Rule {
 public:
  // Compiles `text`; on failure returns null and sets *err to the reason.
  static std::unique_ptr<Rule> parse(std::string_view text, std::string* err);
  bool matches(std::string_view name, std::string_view cat, int64_t ts, int64_t dur) const noexcept;
  // The rule reads ts or dur (its answer changes from call to call of one function).
  bool per_call() const noexcept { return per_call_; }
  ~Rule();

 private:
  Rule() = default;
  std::unique_ptr<Node> root_;
  bool per_call_ = false;
};

// The aggregation settings of a session (from config(); rules compiled once, warnings printed).
struct Settings {
  bool on = false;
  bool selective = false;
  int64_t interval_us = 1000000;
  std::vector<std::unique_ptr<Rule>> inclusion, exclusion;
  // FULL, or SELECTIVE: aggregated when some inclusion rule matches (or there is none) and no
  // exclusion rule does. Never for the tracer's own category.
  bool wants(std::string_view name, std::string_view cat, int64_t ts, int64_t dur) const noexcept {
    return wants_given(static_part(name, cat), name, cat, ts, dur);
  }
  // The answer of the rules that read only cat and name (the same for every call of a function):
  // bit 1 some such inclusion rule matches, bit 2 some such exclusion rule matches (or the
  // tracer's own category). Callers may cache it per function.
  uint8_t static_part(std::string_view name, std::string_view cat) const noexcept;
  // wants() given static_part(): evaluates only the rules on ts / dur.
  bool wants_given(uint8_t st, std::string_view name, std::string_view cat, int64_t ts, int64_t dur) const noexcept;
};
// Built from config() on first use; never destroyed.
const Settings& settings();

// ------------------------------------------------------------------------------ per-thread table
// One field's statistics over the calls of an entry that carry it.
struct AggField {
  std::string key;
  const char* kptr = nullptr;  // literal key pointer of compact events (fast match), else null
  bool dbl = false;            // any value was a double: written as doubles
  uint64_t n = 0;
  int64_t imin = 0, imax = 0, isum = 0;
  double dmin = 0, dmax = 0, dsum = 0;
  void add_int(int64_t v) noexcept;
  void add_double(double v) noexcept;
};

// The calls of one (name, cat, failed, item size) in the current bucket. `failed` (args.ret < 0)
// and the fread/fwrite item size ("size") are part of the key so that the bytes of a record stay
// exact (ret_sum, or ret_sum * size, over calls that all succeeded with one item size).
struct AggEntry {
  std::string name, cat;
  const char* nptr = nullptr;  // literal pointers of compact events (fast match), else null
  const char* cptr = nullptr;
  uint64_t hash = 0;
  bool failed = false;
  bool has_size = false;
  int64_t size = 0;
  bool plain = false;                    // name and cat need no JSON escaping
  uint64_t cnt = 0;                      // calls in this bucket (0: slot kept for reuse)
  int64_t dmin = 0, dmax = 0, dsum = 0;  // dur, µs
  std::vector<AggField> fields;          // first-seen order
};

// One integer or double argument handed to AggTable::add.
struct AggArg {
  std::string_view key;
  const char* kptr;  // literal pointer or null
  bool dbl;
  int64_t i;
  double d;
};

class AggTable {
 public:
  int64_t bucket = INT64_MIN;  // start µs of the bucket the entries belong to
  bool empty() const noexcept { return live_ == 0; }
  // Folds one call. name/cat literal pointers (compact events) or null.
  void add(std::string_view name, std::string_view cat, const char* nptr, const char* cptr, bool plain, int64_t dur,
           const AggArg* args, int nargs) noexcept;
  // Upper bound of the text bytes of write_lines.
  size_t text_bound(const IdsPrefix& ids) const noexcept;
  // Writes one line per live entry at out (text_bound bytes) and empties the table; returns the
  // end and the number of lines in *lines.
  char* write_lines(char* out, const IdsPrefix& ids, uint32_t* lines) noexcept;
  void clear() noexcept;

 private:
  AggEntry* find(std::string_view name, std::string_view cat, const char* nptr, const char* cptr, uint64_t h,
                 bool failed, bool has_size, int64_t size);
  std::vector<AggEntry> entries_;  // insertion order
  std::vector<int32_t> slots_;     // open addressing into entries_ (-1 empty)
  size_t live_ = 0;                // entries with cnt > 0
  size_t last_ = 0;                // last entry hit (consecutive calls of one function)
};

}  // namespace agg
}  // namespace dftracer
