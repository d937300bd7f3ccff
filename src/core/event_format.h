// Event formatting: pure functions from an event's fields to its JSON line (docs/format.md), so
// that the bytes can be unit-tested and fuzzed without a tracer. Header-only and inlined into the
// tracer's hot path (Tracer::log_event).
//
// Line layout (one compact JSON object, '\n'-terminated):
//   {"id":N,"name":"...","cat":"...","pid":P,"tid":T,"ts":µs,"dur":µs,"ph":"X"[,"args":{...}]}
//   {"id":N,"name":"...","cat":"...","pid":P,"tid":T,"ts":µs,"ph":"i","s":"t"[,"args":{...}]}
//   {"id":N,"name":key,"cat":"dftracer","pid":P,"tid":T,"ts":µs,"ph":"M","args":{"name":key,"value":v}}
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "../format/event.h"
#include "../format/json_text.h"
#include "tracer.h"

namespace dftracer {

// The `,"pid":P,"tid":T,"ts":` part of every line of a thread, formatted once per thread.
struct IdsPrefix {
  static constexpr size_t kBytes = 64;  // copied whole (fixed-size memcpy); used: len
  char text[kBytes];
  size_t len = 0;
  void set(int pid, int tid) noexcept {
    char* p = json::write_lit(text, ",\"pid\":");
    p = json::write_i64(p, pid);
    p = json::write_lit(p, ",\"tid\":");
    p = json::write_i64(p, tid);
    p = json::write_lit(p, ",\"ts\":");
    len = static_cast<size_t>(p - text);
  }
};

// The fields of one event line.
struct EventFields {
  uint64_t id;
  Phase phase;
  std::string_view name, cat;
  bool plain_name_cat;  // name and cat need no JSON escaping (json::is_plain)
  const IdsPrefix* ids;
  int64_t ts;           // µs
  int64_t dur;          // µs, Phase::Complete only; negative is written as 0
  const ArgList* args;  // may be null
};

// Bytes of fixed text in a line besides name, cat and args: braces, keys, the ids prefix (copied
// as IdsPrefix::kBytes) and up to four numbers (json::kMaxNumber each).
constexpr size_t kEventFixedBytes = 160;

// Upper bound of the bytes format_event writes for these name, cat and args.
inline size_t event_bound(std::string_view name, std::string_view cat, const ArgList* args) noexcept {
  size_t need = kEventFixedBytes + json::max_escaped(name.size() + cat.size());
  if (args && args->size()) need += 10 + args->need();
  return need;
}

// Writes the event line (with its '\n') at out, which has event_bound() bytes; returns the end.
__attribute__((always_inline)) inline char* format_event(char* p, const EventFields& e) noexcept {
  p = json::write_lit(p, "{\"id\":");
  p = json::write_u64(p, e.id);
  p = json::write_lit(p, ",\"name\":\"");
  if (e.plain_name_cat) p = json::copy_short(p, e.name.data(), e.name.size());
  else p = json::write_escaped(p, e.name.data(), e.name.size());
  p = json::write_lit(p, "\",\"cat\":\"");
  if (e.plain_name_cat) p = json::copy_short(p, e.cat.data(), e.cat.size());
  else p = json::write_escaped(p, e.cat.data(), e.cat.size());
  *p++ = '"';
  std::memcpy(p, e.ids->text, IdsPrefix::kBytes);  // fixed-size copy (the bound reserves it)
  p += e.ids->len;
  p = json::write_i64(p, e.ts);
  if (e.phase == Phase::Complete) {
    p = json::write_lit(p, ",\"dur\":");
    p = json::write_i64(p, e.dur < 0 ? 0 : e.dur);
    p = json::write_lit(p, ",\"ph\":\"X\"");
  } else {
    p = json::write_lit(p, ",\"ph\":\"i\",\"s\":\"t\"");
  }
  int n = e.args ? e.args->size() : 0;
  if (n) {
    const ArgList& args = *e.args;
    p = json::write_lit(p, ",\"args\":");
    char* open = p;  // every entry starts with ','; the first one becomes '{'
    for (int i = 0; i < n; ++i) {
      const ArgList::Entry& a = args[i];
      *p++ = ',';
      if (a.type == ArgList::RAW) {
        std::memcpy(p, a.s.sp, a.s.sl);
        p += a.s.sl;
        continue;
      }
      *p++ = '"';
      if (a.kplain) p = json::copy_short(p, a.kp, a.kl);
      else p = json::write_escaped(p, a.kp, a.kl);
      *p++ = '"';
      *p++ = ':';
      switch (a.type) {
        case ArgList::INT: p = json::write_i64(p, a.i); break;
        case ArgList::UINT: p = json::write_u64(p, a.u); break;
        case ArgList::DOUBLE: p = json::write_double(p, a.d); break;
        case ArgList::BOOL:
          if (a.b) p = json::write_lit(p, "true");
          else p = json::write_lit(p, "false");
          break;
        case ArgList::STR: p = json::write_quoted(p, a.str()); break;
        case ArgList::RAW: break;
      }
    }
    *open = '{';
    *p++ = '}';
  }
  *p++ = '}';
  *p++ = '\n';
  return p;
}

// Appends one metadata line ("ph":"M") to out. process_name: Chrome's "process_name" record,
// whose args.name is the value itself; otherwise args {"name":key,"value":value}.
inline void append_metadata(std::string& out, uint64_t id, std::string_view key, std::string_view value, int pid,
                            int tid, int64_t ts, bool process_name) {
  size_t need = kEventFixedBytes + json::max_escaped(key.size()) * 2 + json::max_escaped(value.size());
  size_t old = out.size();
  out.resize(old + need);
  char* p = &out[old];
  p = json::write_lit(p, "{\"id\":");
  p = json::write_u64(p, id);
  p = json::write_lit(p, ",\"name\":");
  p = json::write_quoted(p, key);
  p = json::write_lit(p, ",\"cat\":\"" DFT_TRACER_CATEGORY "\",\"pid\":");
  p = json::write_i64(p, pid);
  p = json::write_lit(p, ",\"tid\":");
  p = json::write_i64(p, tid);
  p = json::write_lit(p, ",\"ts\":");
  p = json::write_i64(p, ts);
  p = json::write_lit(p, ",\"ph\":\"M\",\"args\":{\"name\":");
  if (process_name) {
    p = json::write_quoted(p, value);
  } else {
    p = json::write_quoted(p, key);
    p = json::write_lit(p, ",\"value\":");
    p = json::write_quoted(p, value);
  }
  p = json::write_lit(p, "}}\n");
  out.resize(static_cast<size_t>(p - &out[0]));
}

}  // namespace dftracer
