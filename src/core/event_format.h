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

// ------------------------------------------------------------------------------ records
// A thread buffer holds a sequence of records; the writer turns them into the trace's lines
// (render_records). Each record starts with its size (uint32, header included, a multiple of 8)
// and its kind (uint8). Host byte order; records never leave the process.
//  - kRecordText: an 8-byte header, then finished JSON lines (events formatted on the calling
//    thread by format_event, metadata lines), copied verbatim.
//  - kRecordCompact: CompactHead, nints CompactArgs::Entry, the fragment bytes, padding
//    (Tracer::log_compact: name, cat and keys are the caller's literals, kept by pointer).
enum RecordKind : uint8_t { kRecordText = 1, kRecordCompact = 2 };
constexpr size_t kTextRecordHead = 8;
constexpr size_t kRecordAlign = 8;
constexpr size_t record_padded(size_t n) { return (n + kRecordAlign - 1) & ~(kRecordAlign - 1); }

// Text record: [0,4) size, [4] kind, [5] padding bytes at the end (0..7), then the text.
inline char* begin_text_record(char* out) noexcept { return out + kTextRecordHead; }
// Closes the text record that begin_text_record opened at rec, whose text ends at end; returns
// the record's end (padded).
inline char* end_text_record(char* rec, char* end) noexcept {
  size_t len = static_cast<size_t>(end - rec) - kTextRecordHead;
  uint32_t size = static_cast<uint32_t>(record_padded(kTextRecordHead + len));
  std::memcpy(rec, &size, 4);
  rec[4] = static_cast<char>(kRecordText);
  rec[5] = static_cast<char>(size - kTextRecordHead - len);
  rec[6] = rec[7] = 0;
  return rec + size;
}
inline size_t text_record_len(const char* rec, size_t size) noexcept {
  return size - kTextRecordHead - static_cast<uint8_t>(rec[5]);
}
// Record bytes of a text record of len bytes.
constexpr size_t text_record_bytes(size_t len) { return record_padded(kTextRecordHead + len); }

struct CompactHead {
  uint32_t size;  // bytes of the whole record (padded)
  uint8_t kind;   // kRecordCompact
  uint8_t nints;
  uint8_t name_len, cat_len;
  uint8_t plain;  // name and cat need no escaping
  uint8_t unused[3];
  uint32_t frag_len;
  const char* name;
  const char* cat;
  uint64_t id;
  int64_t ts, dur;  // µs
};
static_assert(sizeof(CompactHead) == 56, "CompactHead layout");
static_assert(sizeof(CompactArgs::Entry) == 24, "CompactArgs::Entry layout");

// Record bytes of a compact event.
inline size_t compact_record_bytes(int nints, size_t frag_len) noexcept {
  return record_padded(sizeof(CompactHead) + sizeof(CompactArgs::Entry) * static_cast<size_t>(nints) + frag_len);
}

// Copies a fragment of a few tens of bytes with overlapping 16/32-byte moves (within [in, in+n)),
// memcpy beyond 64 bytes.
__attribute__((always_inline)) inline char* copy_fragment(char* out, const char* in, size_t n) noexcept {
  if (n >= 16 && n <= 32) {
    std::memcpy(out, in, 16);
    std::memcpy(out + n - 16, in + n - 16, 16);
  } else if (n > 32 && n <= 64) {
    std::memcpy(out, in, 32);
    std::memcpy(out + n - 32, in + n - 32, 32);
  } else {
    std::memcpy(out, in, n);
  }
  return out + n;
}

// Stores the compact record at out (compact_record_bytes() free); returns the end.
__attribute__((always_inline)) inline char* write_compact(char* out, uint64_t id, std::string_view name,
                                                          std::string_view cat, bool plain, int64_t ts, int64_t dur,
                                                          std::string_view frag, const CompactArgs& ints) noexcept {
  int n = ints.size();
  size_t size = compact_record_bytes(n, frag.size());
  CompactHead h;
  h.size = static_cast<uint32_t>(size);
  h.kind = kRecordCompact;
  h.nints = static_cast<uint8_t>(n);
  h.name_len = static_cast<uint8_t>(name.size());
  h.cat_len = static_cast<uint8_t>(cat.size());
  h.plain = plain;
  h.unused[0] = h.unused[1] = h.unused[2] = 0;
  h.frag_len = static_cast<uint32_t>(frag.size());
  h.name = name.data();
  h.cat = cat.data();
  h.id = id;
  h.ts = ts;
  h.dur = dur;
  std::memcpy(out, &h, sizeof h);
  char* p = out + sizeof h;
  for (int i = 0; i < n; ++i, p += sizeof(CompactArgs::Entry))  // a few entries: inline moves
    std::memcpy(p, &ints.entries()[i], sizeof(CompactArgs::Entry));
  copy_fragment(p, frag.data(), frag.size());
  return out + size;
}

// The line of a compact record: the bytes format_event writes for the same fields with an ArgList
// of add_raw(fragment) (when not empty) and the integers.
__attribute__((always_inline)) inline char* render_compact(char* p, const CompactHead& h,
                                                           const CompactArgs::Entry* ents, const char* frag,
                                                           const IdsPrefix& ids) noexcept {
  p = json::write_lit(p, "{\"id\":");
  p = json::write_u64(p, h.id);
  p = json::write_lit(p, ",\"name\":\"");
  if (h.plain) p = json::copy_short(p, h.name, h.name_len);
  else p = json::write_escaped(p, h.name, h.name_len);
  p = json::write_lit(p, "\",\"cat\":\"");
  if (h.plain) p = json::copy_short(p, h.cat, h.cat_len);
  else p = json::write_escaped(p, h.cat, h.cat_len);
  *p++ = '"';
  std::memcpy(p, ids.text, IdsPrefix::kBytes);
  p += ids.len;
  p = json::write_i64(p, h.ts);
  p = json::write_lit(p, ",\"dur\":");
  p = json::write_i64(p, h.dur < 0 ? 0 : h.dur);
  p = json::write_lit(p, ",\"ph\":\"X\"");
  if (h.frag_len || h.nints) {
    p = json::write_lit(p, ",\"args\":");
    char* open = p;
    if (h.frag_len) {
      *p++ = ',';
      std::memcpy(p, frag, h.frag_len);
      p += h.frag_len;
    }
    for (int i = 0; i < h.nints; ++i) {
      const CompactArgs::Entry& a = ents[i];
      *p++ = ',';
      *p++ = '"';
      if (a.flags & CompactArgs::kPlain) p = json::copy_short(p, a.key, a.klen);
      else p = json::write_escaped(p, a.key, a.klen);
      *p++ = '"';
      *p++ = ':';
      if (a.flags & CompactArgs::kUint) p = json::write_u64(p, static_cast<uint64_t>(a.v));
      else p = json::write_i64(p, a.v);
    }
    *open = '{';
    *p++ = '}';
  }
  *p++ = '}';
  *p++ = '\n';
  return p;
}

// The writer's renderer of compact records: the constant text of a record's shape (name, cat,
// the thread's ids, the keys: `,"name":"read","cat":"POSIX","pid":P,"tid":T,"ts":` and
// `,"fd":`, ...) is built once and copied with fixed-size moves while consecutive records share
// the shape; the high 8 digits of the 16-digit timestamp are kept likewise. The bytes are those of
// render_compact (which it falls back to for shapes whose text does not fit the slots).
class CompactRenderer {
 public:
  static constexpr size_t kHeadCap = 128, kKeyCap = 32;
  // Extra bytes past the line the fixed-size moves may write (the caller's bound adds them).
  static constexpr size_t kSlack = kHeadCap;
  // A new piece (other ids): forget the shape.
  void reset(const IdsPrefix* ids) noexcept {
    ids_ = ids;
    name_ = nullptr;
  }
  __attribute__((always_inline)) char* render(char* p, const CompactHead& h, const CompactArgs::Entry* ents,
                                              const char* frag) noexcept {
    if (__builtin_expect(!same_shape(h, ents), 0)) {
      if (!learn(h, ents)) return render_compact(p, h, ents, frag, *ids_);
    }
    p = json::write_lit(p, "{\"id\":");
    p = json::write_u64(p, h.id);
    std::memcpy(p, head_, kHeadCap);
    p += head_len_;
    p = write_ts(p, h.ts);
    p = json::write_lit(p, ",\"dur\":");
    p = small_u64(p, h.dur < 0 ? 0 : static_cast<uint64_t>(h.dur));
    p = json::write_lit(p, ",\"ph\":\"X\"");
    if (h.frag_len || h.nints) {
      p = json::write_lit(p, ",\"args\":");
      char* open = p;
      if (h.frag_len) {
        *p++ = ',';
        p = copy_fragment(p, frag, h.frag_len);
      }
      for (int i = 0; i < h.nints; ++i) {
        std::memcpy(p, keys_[i], kKeyCap);
        p += klen_[i];
        int64_t v = ents[i].v;
        if (ents[i].flags & CompactArgs::kUint || v >= 0) {
          p = small_u64(p, static_cast<uint64_t>(v));
        } else {
          *p++ = '-';
          p = json::write_u64(p, ~static_cast<uint64_t>(v) + 1);
        }
      }
      *open = '{';
      *p++ = '}';
    }
    *p++ = '}';
    *p++ = '\n';
    return p;
  }

 private:
  bool same_shape(const CompactHead& h, const CompactArgs::Entry* ents) const noexcept {
    if (h.name != name_ || h.cat != cat_ || h.nints != nints_ || h.name_len != name_len_ || h.cat_len != cat_len_ ||
        h.plain != plain_)
      return false;
    for (int i = 0; i < h.nints; ++i)
      if (ents[i].key != key_ptr_[i] || ents[i].klen != key_len_[i] ||
          ((ents[i].flags ^ key_flags_[i]) & CompactArgs::kPlain))
        return false;
    return true;
  }
  // Builds the texts of this shape; false (and no shape kept) if they do not fit the slots.
  bool learn(const CompactHead& h, const CompactArgs::Entry* ents) noexcept {
    name_ = nullptr;
    char tmp[kEventFixedBytes + 6 * 2 * 255 + 32];
    char* p = json::write_lit(tmp, ",\"name\":\"");
    p = h.plain ? json::copy_short(p, h.name, h.name_len) : json::write_escaped(p, h.name, h.name_len);
    p = json::write_lit(p, "\",\"cat\":\"");
    p = h.plain ? json::copy_short(p, h.cat, h.cat_len) : json::write_escaped(p, h.cat, h.cat_len);
    *p++ = '"';
    std::memcpy(p, ids_->text, ids_->len);
    p += ids_->len;
    size_t n = static_cast<size_t>(p - tmp);
    if (n > kHeadCap) return false;
    std::memcpy(head_, tmp, n);
    head_len_ = n;
    for (int i = 0; i < h.nints; ++i) {
      const CompactArgs::Entry& a = ents[i];
      char* k = tmp;
      *k++ = ',';
      *k++ = '"';
      k = (a.flags & CompactArgs::kPlain) ? json::copy_short(k, a.key, a.klen) : json::write_escaped(k, a.key, a.klen);
      *k++ = '"';
      *k++ = ':';
      size_t kl = static_cast<size_t>(k - tmp);
      if (kl > kKeyCap) return false;
      std::memcpy(keys_[i], tmp, kl);
      klen_[i] = static_cast<uint8_t>(kl);
      key_ptr_[i] = a.key;
      key_len_[i] = a.klen;
      key_flags_[i] = a.flags;
    }
    name_ = h.name;
    cat_ = h.cat;
    nints_ = h.nints;
    name_len_ = h.name_len;
    cat_len_ = h.cat_len;
    plain_ = h.plain;
    return true;
  }
  // Numbers of I/O calls are mostly small: inline paths below 100 and for 4 digits, the general
  // writer otherwise.
  static __attribute__((always_inline)) char* small_u64(char* out, uint64_t v) noexcept {
    if (v < 10) {
      *out = static_cast<char>('0' + v);
      return out + 1;
    }
    if (v < 100) {
      std::memcpy(out, json::detail::kDigits + v * 2, 2);
      return out + 2;
    }
    if (v >= 1000 && v < 10000) {  // byte counts of 4 KiB-class I/O
      uint32_t hi = static_cast<uint32_t>(v) / 100, lo = static_cast<uint32_t>(v) % 100;
      std::memcpy(out, json::detail::kDigits + hi * 2, 2);
      std::memcpy(out + 2, json::detail::kDigits + lo * 2, 2);
      return out + 4;
    }
    return json::write_u64(out, v);
  }
  // µs timestamps have 16 digits, the high 8 change every 100 s.
  __attribute__((always_inline)) char* write_ts(char* out, int64_t ts) noexcept {
    uint64_t v = static_cast<uint64_t>(ts);
    if (ts < 1000000000000000ll || v >= 10000000000000000ull) return json::write_i64(out, ts);
    uint64_t hi = v / 100000000u;
    if (hi != ts_hi_) {
      ts_hi_ = hi;
      json::detail::write_8digits(ts_hi_text_, static_cast<uint32_t>(hi));
    }
    std::memcpy(out, ts_hi_text_, 8);
    json::detail::write_8digits(out + 8, static_cast<uint32_t>(v - hi * 100000000u));
    return out + 16;
  }
  const IdsPrefix* ids_ = nullptr;
  const char* name_ = nullptr;  // null: no shape
  const char* cat_ = nullptr;
  uint8_t nints_ = 0, name_len_ = 0, cat_len_ = 0, plain_ = 0;
  size_t head_len_ = 0;
  char head_[kHeadCap];
  char keys_[CompactArgs::kCapacity][kKeyCap];
  uint8_t klen_[CompactArgs::kCapacity];
  const char* key_ptr_[CompactArgs::kCapacity];
  uint8_t key_len_[CompactArgs::kCapacity];
  uint8_t key_flags_[CompactArgs::kCapacity];
  uint64_t ts_hi_ = ~0ull;
  char ts_hi_text_[8];
};

// Size of the record at p (avail bytes left), or 0 if it is damaged (shorter than its header,
// longer than what is left, or its parts do not fit), which the writer treats as the end of the
// buffer.
inline size_t record_size(const char* p, size_t avail) noexcept {
  if (avail < kTextRecordHead) return 0;
  uint32_t size;
  std::memcpy(&size, p, 4);
  if (size > avail || size < kTextRecordHead) return 0;
  uint8_t kind = static_cast<uint8_t>(p[4]);
  if (kind == kRecordText) {
    uint8_t pad = static_cast<uint8_t>(p[5]);
    return pad < kRecordAlign && size % kRecordAlign == 0 && size - kTextRecordHead >= pad ? size : 0;
  }
  if (kind != kRecordCompact || size < sizeof(CompactHead)) return 0;
  CompactHead h;
  std::memcpy(&h, p, sizeof h);
  if (h.nints > CompactArgs::kCapacity || compact_record_bytes(h.nints, h.frag_len) != size) return 0;
  return size;
}

// Upper bound of the JSON bytes of the record at p (record_size() bytes) plus the renderer's
// slack (without a loop: a key is at most 255 bytes).
inline size_t record_text_bound(const char* p, size_t size) noexcept {
  if (static_cast<uint8_t>(p[4]) == kRecordText) return text_record_len(p, size);
  CompactHead h;
  std::memcpy(&h, p, sizeof h);
  return kEventFixedBytes + CompactRenderer::kSlack + json::max_escaped(h.name_len + static_cast<size_t>(h.cat_len)) +
         12 + h.frag_len + h.nints * (4 + json::max_escaped(255) + json::kMaxNumber);
}

// The JSON text of one record (record_size() bytes at rec) at out (record_text_bound() bytes
// free); r: the renderer, reset() with the `,"pid":P,"tid":T,"ts":` text of the thread that
// stored the record. Returns the end.
inline char* render_record(char* out, const char* rec, size_t size, CompactRenderer& r) noexcept {
  if (static_cast<uint8_t>(rec[4]) == kRecordText) {
    size_t len = text_record_len(rec, size);
    std::memcpy(out, rec + kTextRecordHead, len);
    return out + len;
  }
  CompactHead h;
  std::memcpy(&h, rec, sizeof h);
  const char* ents = rec + sizeof h;
  const char* frag = ents + sizeof(CompactArgs::Entry) * h.nints;
  return r.render(out, h, reinterpret_cast<const CompactArgs::Entry*>(ents), frag);
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
