// JSON-lines parser into typed columns (simdjson on-demand, one document per line so that a bad
// line is skipped and counted without losing the others).
#include <simdjson.h>

#if defined(DFTRACER_READER_REQUIRE_SIMD) && !(SIMDJSON_CAN_ALWAYS_RUN_HASWELL || SIMDJSON_CAN_ALWAYS_RUN_ICELAKE)
#error "simdjson would inline its generic kernel: compile parser.cpp with AVX2, BMI, LZCNT and PCLMUL"
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <unordered_set>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__SSSE3__)
#include <tmmintrin.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../format/event.h"
#include "../format/json_text.h"
#include "reader.h"

namespace dftracer::reader {

namespace od = simdjson::ondemand;

const char* phase_letter(int64_t code) {
  // DFTracer 2.x integer phases (upstream enumeration.h TracePhaseType, docs/index.md):
  // 1 complete "X", 2 counter "C", 3 aggregated "A", 4 metadata "M"; 0 (unknown) and others "?".
  static const char* kLetters[] = {"?", "X", "C", "A", "M"};
  if (code >= 0 && code < 5) return kLetters[code];
  return "?";
}

int64_t ArgColumn::length() const {
  return type == ArgType::Int     ? int64_t(ints.size())
         : type == ArgType::Float ? int64_t(floats.size())
                                  : int64_t(strings.codes.size());
}

// Byte rule (docs/index.md): the bytes an event moved, from the call table src/format/calls.def
// (RET: args.ret; RET_TIMES_SIZE: args.ret * args.size; RET_COPY: args.ret, moved from the in
// file, fname, to the out file, args.out_fname; ARG_SIZE: args.size, H5Dread/H5Dwrite), so no
// call the preload intercepts can lose its bytes. Names compare without leading '_' and a "_chk"
// suffix (fortify entry points, other tracers' spellings).
namespace {
constexpr std::string_view bare_call_name(std::string_view n) {
  while (!n.empty() && n.front() == '_') n.remove_prefix(1);
  if (n.size() > 4 && n.substr(n.size() - 4) == "_chk") n.remove_suffix(4);
  return n;
}
constexpr SizeKind kBytes_RET = kRet;
constexpr SizeKind kBytes_RET_TIMES_SIZE = kRetTimesSize;
constexpr SizeKind kBytes_RET_COPY = kRet;
constexpr SizeKind kBytes_ARG_SIZE = kSize;
constexpr SizeKind kBytes_NONE = kNoSize;
constexpr SizeKind kBytes_NO_EVENT = kNoSize;
}  // namespace

SizeKind size_kind_of(std::string_view n) {
  n = bare_call_name(n);
#define DFT_CALL(interface, name, ret, params, bytes) \
  if (kBytes_##bytes != kNoSize && n == bare_call_name(#name)) return kBytes_##bytes;
#include "../format/calls.def"
#undef DFT_CALL
  // Names other tracers (DFTracer 1.x/2.x) record for calls the preload does not intercept.
  if (n == "read64" || n == "write64") return kRet;
  if (n == "fread_unlocked" || n == "fwrite_unlocked") return kRetTimesSize;
  return kNoSize;
}

namespace {

bool parse_int_text(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  auto r = std::from_chars(b, e, out);
  return r.ec == std::errc() && r.ptr == e;
}

std::string double_text(double d) {
  char b[32];
  auto r = std::to_chars(b, b + sizeof b, d);
  return std::string(b, r.ptr);
}

struct Staged {
  std::string_view key;
  int64_t i;
  double d;
  std::string_view s;
  std::string_view raw;  // the value's JSON text as in the line (args_extra)
  // (the small fields side by side: the scanner's constant ones are stored as one word)
  ArgType type;
  bool from_input;  // key points into the padded input (not simdjson's unescape buffer)
  bool is_null;
  bool slot_known;  // the fast path matched the key to the name's j-th slot (Impl::Slot)
  int32_t code;     // String values: the string's code in its hostname/fname column when known, else -1
};
// `type`, `from_input`, `is_null` and `slot_known` lie side by side in 8 bytes: the fast path
// sets them with one store (StagedFlags).
static_assert(offsetof(Staged, from_input) == offsetof(Staged, type) + 4 &&
                  offsetof(Staged, is_null) == offsetof(Staged, type) + 5 &&
                  offsetof(Staged, slot_known) == offsetof(Staged, type) + 6 && sizeof(ArgType) == 4 &&
                  offsetof(Staged, type) + 8 <= sizeof(Staged),
              "Staged's flags: one 8-byte word");
// The flags word of a value of type Int, from the input, not null, `known` its slot_known
// (the eighth byte, padding, is 0).
__attribute__((always_inline)) constexpr uint64_t int_flags(bool known) {
  return uint64_t(ArgType::Int) | (uint64_t(1) << 32) | (uint64_t(known) << 48);
}
constexpr uint64_t kKnownIntFlags = int_flags(true);
__attribute__((always_inline)) inline void set_int_flags(Staged& s, bool known) {
  uint64_t w = int_flags(known);
  std::memcpy(reinterpret_cast<char*>(&s) + offsetof(Staged, type), &w, 8);
}

// `tok` without trailing JSON whitespace (simdjson's raw tokens may end with some).
inline std::string_view trim_ws(std::string_view tok) {
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t' || tok.back() == '\n' || tok.back() == '\r'))
    tok.remove_suffix(1);
  return tok;
}

// The double of a JSON number token, read with from_chars (correctly rounded): simdjson 3.0.1's
// on-demand get_number() gives 0 for some floats of 19+ significant digits (e.g.
// 123456789.123456789123). `simdjson_value` is used when from_chars cannot represent it.
inline double token_double(std::string_view tok, double simdjson_value) {
  double d;
  auto r = std::from_chars(tok.data(), tok.data() + tok.size(), d);
  return r.ec == std::errc() ? d : simdjson_value;
}

// Reads an integer from a number (ints, floats truncated) or a decimal string (legacy traces).
// A value outside int64 (e.g. 2^63, 2^64-1) is invalid: false, never a wrapped value.
__attribute__((always_inline)) inline bool read_i64(od::value& v, int64_t& out) {
  if (!v.get_int64().get(out)) return true;  // common case; on error nothing is consumed
  od::json_type t;
  if (v.type().get(t)) return false;
  if (t == od::json_type::number) {
    std::string_view tok = v.raw_json_token();
    od::number n;
    if (v.get_number().get(n)) return false;
    if (n.is_int64()) out = n.get_int64();
    else if (n.is_uint64()) return false;  // >= 2^63
    else {
      double d = token_double(tok, n.get_double());
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return false;  // NaN or beyond int64
      out = int64_t(d);
    }
    return true;
  }
  if (t == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return false;
    return parse_int_text(s, out);
  }
  return false;
}

// Length of a JSON string body at `b` (after its opening quote) when it has no escape, else -1.
// Stage 1 has validated the document, so a closing quote exists before the padding ends.
inline ptrdiff_t plain_string_len(const char* b) {
  const char* q = b;
  while (*q != '"' && *q != '\\') ++q;
  return *q == '"' ? q - b : -1;
}

// String value without unescaping when it has no backslash (a view into the padded input);
// otherwise simdjson unescapes it. Fails if the value is not a string.
__attribute__((always_inline)) inline bool fast_string(od::value& v, std::string_view& out) {
  std::string_view tok = v.raw_json_token();
  if (tok.empty() || tok[0] != '"') return false;
  ptrdiff_t n = plain_string_len(tok.data() + 1);
  if (n >= 0) {
    out = std::string_view(tok.data() + 1, size_t(n));
    return true;
  }
  return !v.get_string().get(out);
}

// Key of a field, without unescaping when it has no backslash.
inline bool fast_key(od::field& f, std::string_view& out, bool* from_input = nullptr) {
  const char* b = f.key().raw();
  ptrdiff_t n = plain_string_len(b);
  if (from_input) *from_input = n >= 0;
  if (n >= 0) {
    out = std::string_view(b, size_t(n));
    return true;
  }
  return !f.unescaped_key().get(out);
}

inline bool same(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// Up to 16 key bytes, zero padded, for a branch-free comparison with a key in the padded input.
struct Key16 {
  uint64_t w[2] = {0, 0};
  uint64_t m[2] = {0, 0};  // masks of the key's bytes (computed once, not per compare)
  uint32_t len = UINT32_MAX;
  uint32_t bits = 0;  // bit i: byte i is part of the key
  void set(std::string_view k) {
    w[0] = w[1] = m[0] = m[1] = 0;
    bits = 0;
    len = k.size() <= 16 ? uint32_t(k.size()) : UINT32_MAX;
    if (len == UINT32_MAX) return;
    std::memcpy(w, k.data(), k.size());
    m[0] = len >= 8 ? ~0ull : (len ? (~0ull >> (64 - 8 * len)) : 0);
    m[1] = len >= 16 ? ~0ull : (len > 8 ? (~0ull >> (64 - 8 * (len - 8))) : 0);
    bits = len >= 16 ? 0xffffu : (1u << len) - 1;
  }
  // `k` must point into a buffer with >= 16 readable bytes from its start (the simdjson padding).
  bool matches(std::string_view k) const { return k.size() == len && starts(k.data()); }
  // The `len` bytes at `p` are the key (16 bytes are read).
  bool starts(const char* p) const {
#if defined(__SSE2__)
    // (bytes past the key are left out by `bits`)
    unsigned eq = unsigned(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w)))));
    return (~eq & bits) == 0;
#else
    uint64_t a[2];
    std::memcpy(a, p, 16);
    return (((a[0] & m[0]) ^ w[0]) | ((a[1] & m[1]) ^ w[1])) == 0;
#endif
  }
};

// Values staged for one line, reused from line to line: emplace_back neither value-initialises
// nor checks capacity on the common path (std::vector's zeroes 80+ bytes per key).
class StagedList {
 public:
  Staged& emplace_back() {
    if (cur_ == cap_end_) grow(0);
    return *cur_++;
  }
  // Without the capacity check: only after reserve() made room for this value.
  Staged& push_unchecked() { return *cur_++; }
  // Room for `n` values in all (from an empty list: the fast path's known slots of a line).
  void reserve(size_t n) {
    if (size_t(cap_end_ - v_.data()) < n) grow(n);
  }
  void pop_back() { --cur_; }
  void clear() { cur_ = v_.data(); }
  size_t size() const { return size_t(cur_ - v_.data()); }
  Staged& operator[](size_t i) { return v_[i]; }
  const Staged& operator[](size_t i) const { return v_[i]; }
  const Staged* begin() const { return v_.data(); }
  const Staged* end() const { return cur_; }

 private:
  __attribute__((noinline)) void grow(size_t n) {
    size_t k = size();
    v_.resize(std::max(n, v_.empty() ? size_t(64) : 2 * v_.size()));
    cur_ = v_.data() + k;
    cap_end_ = v_.data() + v_.size();
  }
  std::vector<Staged> v_;
  Staged* cur_ = nullptr;      // end of the values (a cursor: no index scaled per value)
  Staged* cap_end_ = nullptr;  // end of v_'s storage
};


// ---- Fast path helpers (the tracer's own line layout, see Impl::fast_line) --------------------

#if defined(__SSE2__)
// Byte constants of the vector scans, read from memory by an opaque load: GCC 12 otherwise
// rebuilds every _mm*_set1_epi8 constant at each use with mov + vmovd + vpbroadcastb (three
// instructions instead of one load; the fast path scans ~8 numbers and a few strings a line).
alignas(32) constexpr uint8_t kFill0[32] = {'0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0',
                                            '0', '0', '0', '0', '0', '0', '0', '0', '0', '0', '0',
                                            '0', '0', '0', '0', '0', '0', '0', '0', '0', '0'};
alignas(32) constexpr uint8_t kFill10[32] = {10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
                                             10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10};
alignas(32) constexpr uint8_t kFillQuote[32] = {'"', '"', '"', '"', '"', '"', '"', '"', '"', '"', '"',
                                                '"', '"', '"', '"', '"', '"', '"', '"', '"', '"', '"',
                                                '"', '"', '"', '"', '"', '"', '"', '"', '"', '"'};
alignas(32) constexpr uint8_t kFillBslash[32] = {'\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\',
                                                 '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\',
                                                 '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\', '\\'};
alignas(32) constexpr uint8_t kFill20[32] = {0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
                                             0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20,
                                             0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20, 0x20};
__attribute__((always_inline)) inline __m128i const16(const uint8_t (&c)[32]) {
  __m128i v;
#if defined(__AVX__)
  __asm__("vmovdqa %1, %0" : "=x"(v) : "m"(*reinterpret_cast<const uint8_t(*)[16]>(c)));
#else
  __asm__("movdqa %1, %0" : "=x"(v) : "m"(*reinterpret_cast<const uint8_t(*)[16]>(c)));
#endif
  return v;
}
#if defined(__AVX2__)
__attribute__((always_inline)) inline __m256i const32(const uint8_t (&c)[32]) {
  __m256i v;
  __asm__("vmovdqa %1, %0" : "=x"(v) : "m"(c));
  return v;
}
#endif
#endif

#if defined(__AVX2__) || defined(__SSE2__)
#if defined(__AVX2__)
constexpr size_t kPlainBlock = 32;
// Bit i set where byte i of the 32 at `q` is a quote, a backslash, a control or a non-ASCII byte.
__attribute__((always_inline)) inline unsigned plain_stops(const char* q) {
  const __m256i quote = const32(kFillQuote), bslash = const32(kFillBslash), space = const32(kFill20);
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  // signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches non-ASCII
  return unsigned(
      _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, bslash)),
                                           _mm256_cmpgt_epi8(space, x))));
}
#else
constexpr size_t kPlainBlock = 16;
// As above, for the 16 bytes at `q` (SSE2).
__attribute__((always_inline)) inline unsigned plain_stops(const char* q) {
  const __m128i quote = const16(kFillQuote), bslash = const16(kFillBslash), space = const16(kFill20);
  __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  return unsigned(_mm_movemask_epi8(
      _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)), _mm_cmplt_epi8(x, space))));
}
#endif
#endif

// End (closing quote) of a string body starting at `b`, or nullptr when the body has an escape, a
// control byte or a non-ASCII byte, or is not closed before `e`. Reads up to 31 bytes past `e`
// (inside the simdjson padding). `kNulEnd`: the byte at `e` is '\0', a control byte, so the
// scan stops there by itself and the checks against `e` are left out.
template <bool kNulEnd = false>
__attribute__((always_inline)) inline const char* scan_plain(const char* b, const char* e) {
#if defined(__AVX2__) || defined(__SSE2__)
  for (const char* q = b; kNulEnd || q < e; q += kPlainBlock) {
    if (unsigned bits = plain_stops(q)) {
      const char* h = q + __builtin_ctz(bits);
      return (kNulEnd || h < e) && *h == '"' ? h : nullptr;
    }
  }
  return nullptr;
#else
  for (const char* q = b; kNulEnd || q < e; ++q) {
    unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') return q;
    if (c == '\\' || c < 0x20 || c >= 0x80) return nullptr;
  }
  return nullptr;
#endif
}

#if !defined(__SSSE3__)  // (the scalar digit readers; SSSE3 reads 16 digits at once)
// SWAR value of 8 ASCII digits (little endian: the first digit in the lowest byte).
inline uint32_t eight_digits_value(uint64_t w) {
  w -= 0x3030303030303030ull;
  w = w * 10 + (w >> 8);  // pairs of digits in bytes 0, 2, 4, 6
  w = (((w & 0x000000ff000000ffull) * 0x000f424000000064ull) +
       (((w >> 16) & 0x000000ff000000ffull) * 0x0000271000000001ull)) >>
      32;
  return uint32_t(w);
}
#endif

#if !defined(__SSE2__)
// Number of leading ASCII digits in the 8 bytes of `w` (little endian), 0-8. A byte is a digit
// iff its high nibble is 3 both before and after adding 6 (carries only leave non-digit bytes).
inline unsigned leading_digits(uint64_t w) {
  uint64_t bad = ((w & 0xf0f0f0f0f0f0f0f0ull) ^ 0x3030303030303030ull) |
                 (((w + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) ^ 0x3030303030303030ull);
  return bad ? unsigned(__builtin_ctzll(bad)) / 8 : 8;
}
#endif

// Number of leading ASCII digits in the 16 bytes at `q` (0-16); reads 16 bytes. (Unused with AVX2 and BMI:
// leading_digits32.)
[[maybe_unused]] __attribute__((always_inline)) inline unsigned leading_digits16(const char* q) {
#if defined(__SSE2__)
  __m128i t = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), const16(kFill0));
  // a digit byte is 0-9 after the subtraction, any other byte 10-255: max(t, 10) == t as unsigned bytes
  __m128i other = _mm_cmpeq_epi8(_mm_max_epu8(t, const16(kFill10)), t);
  return unsigned(__builtin_ctz(unsigned(_mm_movemask_epi8(other)) | 0x10000u));
#else
  uint64_t w;
  std::memcpy(&w, q, 8);
  unsigned n = leading_digits(w);
  if (n < 8) return n;
  std::memcpy(&w, q + 8, 8);
  return 8 + leading_digits(w);
#endif
}

#if defined(__AVX2__) && defined(__BMI__)
#define DFTRACER_DIGITS32 1
// Number of leading ASCII digits in the 32 bytes at `q` (0-32); reads 32 bytes. (A 16-digit
// timestamp is then known to end at 16 without a look at the bytes after it.)
__attribute__((always_inline)) inline unsigned leading_digits32(const char* q) {
  __m256i t = _mm256_sub_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)), const32(kFill0));
  __m256i other = _mm256_cmpeq_epi8(_mm256_max_epu8(t, const32(kFill10)), t);
  return unsigned(_tzcnt_u32(unsigned(_mm256_movemask_epi8(other))));  // (32 when all are digits)
}
#else
#define DFTRACER_DIGITS32 0
#endif

#if !defined(__SSSE3__)
// Value of the n (1-8) ASCII digits in the low bytes of `w` (little endian).
__attribute__((always_inline)) inline uint64_t digits_value(uint64_t w, unsigned n) {
  if (n == 8) return eight_digits_value(w);
  // right-align the n digits, '0'-filled on the left: the value is unchanged
  return eight_digits_value((w << (8 * (8 - n))) | (0x3030303030303030ull >> (8 * n)));
}
#endif

#if defined(__SSSE3__)
// Value of the n (1-16) ASCII digits at q (16 bytes are read): the digits are moved to the end of
// a vector (zeros before them) and summed pairwise, 2, 4, then 8 digits at a time.
__attribute__((always_inline)) inline uint64_t sixteen_digits_value(const char* q, unsigned n) {
  // shuffle control for a right shift by 16 - n bytes, zero-filling (bytes 0x80 select zero)
  alignas(32) static constexpr int8_t kAlign[32] = {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128,
                                                    -128, -128, -128, -128, -128, 0,    1,    2,    3,    4,    5,
                                                    6,    7,    8,    9,    10,   11,   12,   13,   14,   15};
  __m128i t = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), const16(kFill0));
  __m128i d = _mm_shuffle_epi8(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kAlign + n)));
  __m128i p2 = _mm_maddubs_epi16(d, _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1));
  __m128i p4 = _mm_madd_epi16(p2, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
  __m128i p8 = _mm_madd_epi16(_mm_packs_epi32(p4, p4), _mm_setr_epi16(10000, 1, 10000, 1, 0, 0, 0, 0));
  uint64_t both = uint64_t(_mm_cvtsi128_si64(p8));  // low 32 bits: the first 8 digits
  return (both & 0xffffffffu) * 100000000ull + (both >> 32);
}
#endif

// The digits of a JSON integer at q (after its '-' when kNeg): 1-18 digits, no leading zero, and
// not "-0"; returns their end or nullptr. Digits are found 16 at a time and read 8 at a time
// without a branch per digit (the input is padded: 16 bytes can be read at any q <= e).
// `kNulEnd`: the byte at `e` is '\0' (not a digit, not '-'), so the digits stop before `e` by
// themselves and the clamps to `e` are left out.
template <bool kNulEnd, bool kNeg>
__attribute__((always_inline)) inline const char* scan_digits(const char* q, const char* e, int64_t& out) {
  size_t avail = size_t(e - q);
#if DFTRACER_DIGITS32
  unsigned n = leading_digits32(q);  // (the input is padded by 64: 32 bytes are readable)
#else
  unsigned n = leading_digits16(q);
#endif
  if (!kNulEnd && n > avail) n = unsigned(avail);
  // no leading zero, and no "-0" (the only zero without one is "0"). At a '\0' end, n == 0 only
  // when q[0] is not a digit, so not '0': one test of q[0] first on the common path.
  if (kNulEnd ? (*q == '0' ? (kNeg || n > 1) : n == 0) : (n == 0 || ((n > 1 || kNeg) && *q == '0'))) return nullptr;
  uint64_t v;
#if DFTRACER_DIGITS32
  if (n > 16) {  // 17 or 18 digits are valid, 19+ are not
    if (n > 18) return nullptr;
    v = sixteen_digits_value(q, 16);
    for (unsigned k = 16; k < n; ++k) v = v * 10 + unsigned(q[k] - '0');
  } else {
    v = sixteen_digits_value(q, n);
  }
#else
#if defined(__SSSE3__)
  v = sixteen_digits_value(q, n);
#else
  static constexpr uint64_t kPow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  uint64_t w0;
  std::memcpy(&w0, q, 8);
  if (n <= 8) {
    v = digits_value(w0, n);
  } else {
    uint64_t w1;
    std::memcpy(&w1, q + 8, 8);
    v = uint64_t(eight_digits_value(w0)) * kPow10[n - 8] + digits_value(w1, n - 8);
  }
#endif
  if (n == 16) {  // 17 or 18 digits are valid, 19+ are not
    unsigned m = 0;
    while (m < 3 && (kNulEnd || 16 + m < avail) && unsigned(q[16 + m] - '0') < 10) ++m;
    if (m == 3) return nullptr;
    for (unsigned k = 0; k < m; ++k) v = v * 10 + unsigned(q[16 + k] - '0');
    n += m;
  }
#endif
  out = kNeg ? -int64_t(v) : int64_t(v);
  return q + n;
}

// JSON integer of 1-18 digits (no leading zero, no "-0") at q; returns its end or nullptr. The
// sign is a branch to one of two copies (no sign arithmetic on the common, unsigned path).
template <bool kNulEnd = false>
__attribute__((always_inline)) inline const char* scan_int(const char* q, const char* e, int64_t& out) {
  if ((kNulEnd || q < e) && *q == '-') return scan_digits<kNulEnd, true>(q + 1, e, out);
  return scan_digits<kNulEnd, false>(q, e, out);
}

// End of the JSON integer at q that scan_int would accept, without its value (the "id" field).
template <bool kNulEnd = false>
__attribute__((always_inline)) inline const char* skip_int(const char* q, const char* e) {
  bool neg = (kNulEnd || q < e) && *q == '-';
  if (neg) ++q;
  size_t avail = size_t(e - q);
#if DFTRACER_DIGITS32
  unsigned n = leading_digits32(q);
#else
  unsigned n = leading_digits16(q);
#endif
  if (!kNulEnd && n > avail) n = unsigned(avail);
  // no leading zero, and no "-0" (the only zero without one is "0")
  if (kNulEnd ? (*q == '0' ? (neg || n > 1) : n == 0) : (n == 0 || ((n > 1 || neg) && *q == '0')))
    return nullptr;  // (as scan_digits)
#if DFTRACER_DIGITS32
  if (n > 18) return nullptr;  // 17 or 18 digits are valid, 19+ are not
#else
  if (n == 16) {
    unsigned m = 0;
    while (m < 3 && (kNulEnd || 16 + m < avail) && unsigned(q[16 + m] - '0') < 10) ++m;
    if (m == 3) return nullptr;
    n += m;
  }
#endif
  return q + n;
}

// A literal of 1-16 bytes as two little-endian words and masks, built at compile time (building
// it on the stack at run time costs a store-forwarding stall per compare).
struct Lit {
  uint64_t w0 = 0, w1 = 0, m0 = 0, m1 = 0;
  size_t n = 0;
  template <size_t K>
  constexpr Lit(const char (&s)[K]) : n(K - 1) {
    static_assert(K >= 2 && K <= 17, "literal of 1-16 bytes");
    for (size_t i = 0; i < n; ++i) {
      uint64_t b = uint64_t(static_cast<unsigned char>(s[i])) << (8 * (i % 8));
      (i < 8 ? w0 : w1) |= b;
      (i < 8 ? m0 : m1) |= uint64_t(0xff) << (8 * (i % 8));
    }
  }
};
constexpr Lit kId("{\"id\":"), kNameFirst("{\"name\":\""), kName(",\"name\":\""), kCat(",\"cat\":\""),
    kPid(",\"pid\":"), kTid(",\"tid\":"), kTs(",\"ts\":"), kDur(",\"dur\":"), kPh(",\"ph\":\""), kArgs(",\"args\":{"),
    kTrue("true"), kFalse("false"), kNull("null");

// Consumes literal `l` at q: one 16-byte load and masked compares (the input is padded, so 16
// bytes can be read at any q <= e). `kNulEnd`: the byte at `e` is '\0', which no literal has, so
// a literal running past `e` cannot match and the length check is left out.
template <bool kNulEnd = false>
__attribute__((always_inline)) inline bool lit(const char*& q, const char* e, const Lit& l) {
  if (!kNulEnd && size_t(e - q) < l.n) return false;
  uint64_t a[2];
  std::memcpy(a, q, 16);
  if (((a[0] & l.m0) ^ l.w0) | ((a[1] & l.m1) ^ l.w1)) return false;
  q += l.n;
  return true;
}

#if defined(__SSE2__)
// Bit i set: byte i of the 32 bytes at p equals byte i of the 32-byte aligned b.
__attribute__((always_inline)) inline uint32_t equal_bytes32(const char* p, const char* b) {
#if defined(__AVX2__)
  return uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                                         _mm256_load_si256(reinterpret_cast<const __m256i*>(b)))));
#else
  return uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                                   _mm_load_si128(reinterpret_cast<const __m128i*>(b))))) |
         uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)),
                                                   _mm_load_si128(reinterpret_cast<const __m128i*>(b + 16)))))
             << 16;
#endif
}
#endif

// Up to N (32 or 64) bytes of a line seen before, compared in place, 32 bytes per compare (the
// fast path's "same bytes as last time": same bytes, same tokens, same values). Reads N bytes at
// the compared position (the input is padded by 64). Span<32>: the line's head and category
// stretches; Span<64>: string values (a path is longer than 32 bytes).
template <size_t N>
struct Span {
  static_assert(N == 32 || N == 64, "one or two 32-byte compares");
  using Mask = std::conditional_t<N == 64, uint64_t, uint32_t>;
  alignas(32) char b[N] = {};
  Mask mask = 0;     // bit i: byte i is part of the span
  uint32_t len = 0;  // 0: empty (never matches)
  // `n` in 1-N; N bytes are read at `p`.
  void set(const char* p, size_t n) {
    std::memcpy(b, p, N);
    len = uint32_t(n);
    mask = n >= N ? Mask(~Mask(0)) : Mask((Mask(1) << n) - 1);
  }
  bool at(const char* p) const {
#if defined(__SSE2__)
    Mask eq = equal_bytes32(p, b);
    if constexpr (N == 64) eq |= Mask(equal_bytes32(p + 32, b + 32)) << 32;
#else
    if (len == 0 || std::memcmp(p, b, len) != 0) return false;
    Mask eq = Mask(~Mask(0));
#endif
    return len != 0 && (~eq & mask) == 0;
  }
};
using Span32 = Span<32>;
using Span64 = Span<64>;

// The bytes `,"ph":"X","args":{"` (the tracer's complete events with args: up to the first key's
// quote), compared in one piece.
alignas(32) constexpr char kPhXArgs[32] = {',', '"', 'p', 'h', '"', ':', '"', 'X', '"', ',',
                                           '"', 'a', 'r', 'g', 's', '"', ':', '{', '"'};  // zero-filled to 32
constexpr size_t kPhXArgsLen = 19;
__attribute__((always_inline)) inline bool ph_x_args(const char* q) {
#if defined(__AVX2__)
  unsigned eq = unsigned(
      _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                                             _mm256_load_si256(reinterpret_cast<const __m256i*>(kPhXArgs)))));
  return (~eq & ((1u << kPhXArgsLen) - 1)) == 0;
#else
  return std::memcmp(q, kPhXArgs, kPhXArgsLen) == 0;
#endif
}

// Value of the n (1-15) ASCII digits at q (16 bytes are readable).
__attribute__((always_inline)) inline uint64_t digits_value15(const char* q, size_t n) {
#if defined(__SSSE3__)
  return sixteen_digits_value(q, unsigned(n));
#else
  uint64_t v = 0;
  for (size_t k = 0; k < n; ++k) v = v * 10 + unsigned(q[k] - '0');
  return v;
#endif
}

// The JSON number `[-]I.F` (nd digits of I at `ip`, then '.', then nf digits of F; nd + nf <= 15,
// no exponent) as from_chars reads it: W = IF as an integer is below 10^15 < 2^53 and 10^nf is
// exact in a double, so double(W) / 10^nf is the one correctly rounded operation (Clinger's fast
// path), the same double as the correctly rounded decimal.
__attribute__((always_inline)) inline double small_decimal(const char* ip, size_t nd, size_t nf, bool neg) {
  static constexpr double kPow10d[16] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                         1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  static constexpr uint64_t kPow10u[16] = {1,
                                           10,
                                           100,
                                           1000,
                                           10000,
                                           100000,
                                           1000000,
                                           10000000,
                                           100000000,
                                           1000000000,
                                           10000000000ull,
                                           100000000000ull,
                                           1000000000000ull,
                                           10000000000000ull,
                                           100000000000000ull,
                                           1000000000000000ull};
  uint64_t w = digits_value15(ip, nd) * kPow10u[nf] + digits_value15(ip + nd + 1, nf);
  double v = double(w) / kPow10d[nf];
  return neg ? -v : v;
}

// Skips JSON digits; returns how many.
inline size_t skip_digits(const char*& q, const char* e) {
  const char* d = q;
  while (q < e && unsigned(*q - '0') < 10) ++q;
  return size_t(q - d);
}

}  // namespace

// Column storage is fresh memory (a batch's columns are held by its frame, so they cannot come
// from reused blocks): every 4 KiB page of it is a page fault when first written. The pages a
// column is about to fill are faulted in ahead, kPopulateBytes at a time, by one
// madvise(MADV_POPULATE_WRITE) (Linux >= 5.14): the same pages, zero-filled by the kernel as a
// fault would, without a trap per page (docs/perf/i22-sys.md). Only pages inside the vector's
// reserved capacity that its next rows will write are touched, so the memory held is the same
// (at most one stride past the rows, within the capacity the index's line count reserved). The
// values are not changed. No-op elsewhere, and after the first EINVAL (an older kernel).
namespace {
std::atomic<bool> g_populate_ok{true};

template <typename T, typename A>
void populate_ahead(const std::vector<T, A>& v, size_t new_n) {
#if defined(__linux__)
  size_t old_b = v.size() * sizeof(T), new_b = new_n * sizeof(T), cap_b = v.capacity() * sizeof(T);
  if (new_b > cap_b || new_b == 0 || (old_b != 0 && (old_b - 1) / kPopulateBytes == (new_b - 1) / kPopulateBytes))
    return;  // a reallocation (no stable storage), or still inside the stride populated before
  if (!g_populate_ok.load(std::memory_order_relaxed)) return;
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t base = reinterpret_cast<uintptr_t>(v.data());
  size_t from_b = std::max(old_b, (new_b - 1) / kPopulateBytes * kPopulateBytes);
  size_t to_b = std::min(cap_b, ((new_b - 1) / kPopulateBytes + 1) * kPopulateBytes);
  // A block reused from the column cache (or a thread's pooled code vector) is resident already
  // up to what its earlier column wrote: no madvise for that part (a syscall per stride that
  // walks the page table under mmap_lock; docs/perf/i28-mm.md).
  if (cap_b >= kColumnBlockMin) from_b = std::max(from_b, column_block_resident(v.data()));
  if (from_b >= to_b) return;
  uintptr_t from = base + from_b;
  uintptr_t to = base + to_b;
  from = (from + page - 1) & ~(page - 1);  // whole pages of this buffer only
  to &= ~(page - 1);
#if !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23
#endif
  if (to > from && madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
    g_populate_ok.store(false, std::memory_order_relaxed);
#else
  (void)v;
  (void)new_n;
#endif
}
}  // namespace

struct Parser::Impl {
  static constexpr size_t kGrowRows = 128;  // 1 KiB of int64: memset's vector loop, not `rep stosb`
  // Args columns: 240 rows (1,920 bytes of int64, still under glibc's `rep stosb` threshold of 2 KiB);
  // a grow costs ~300 instructions besides its memset, paid once per column per kArgGrowRows rows.
  static constexpr size_t kArgGrowRows = 240;
  od::parser parser;
  std::string scratch;
  StagedList staged;
  std::deque<std::string> keys;  // storage for arg column names
  std::unordered_map<std::string_view, int> arg_index;
  // By name code: its byte rule (-1: not looked up yet) and the category and phase codes last
  // seen with it (hints). One record per name: one bounds check per event, not three.
  struct NameInfo {
    int32_t cat = -1;
    int32_t ph = -1;
    int8_t size_kind = -1;
  };
  std::vector<NameInfo> name_info;
  // Codes of event names of <= 16 bytes met by fast_line, by their bytes (direct-mapped): most
  // lines then find their name's code with two word compares instead of a hash-table lookup.
  struct NameSlot {
    uint64_t w0 = 0, w1 = 0;
    uint32_t len = UINT32_MAX;  // UINT32_MAX: empty
    int32_t code = -1;
    Span32 cat;  // `,"cat":"S"` of the name's last line (a name keeps its category)
    // Indexed by the 8 bytes at a line's name (head_slot()), not by the name: the text from the
    // name to its category's closing quote, `N","cat":"S"`, of a line whose name had code
    // `head_code` and was `head_name_len` bytes long (same text, same name, category and code).
    Span32 head;
    uint32_t head_name_len = 0;
    int32_t head_code = -1;
    int32_t head_cat = -1;  // code of the category of `head` in out.cat (-1: not committed yet)
  };
  __attribute__((always_inline)) NameSlot& head_slot(const char* q) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    return name_cache[(w * 0x9e3779b97f4a7c15ull) >> (64 - kNameCacheBits)];
  }
  static constexpr size_t kNameCacheBits = 8;
  NameSlot name_cache[size_t(1) << kNameCacheBits];
  // The last line's `,"pid":N,"tid":N,"ts":` (threads write runs of lines) and its two values.
  Span32 mid_span;
  int64_t mid_pid = 0, mid_tid = 0;
  int32_t ph_x_code = -1;  // code of "X" in out.ph (-1: not committed yet in this parse())
  // Code of `name` in out.name (-1 when not interned yet); `name` points into the padded input.
  // `slot`: its cache entry, or nullptr (not cached).
  __attribute__((always_inline)) int32_t find_name(std::string_view name, EventColumns& out, NameSlot*& slot) {
    size_t n = name.size();
    slot = nullptr;
    if (n > 16) return out.name.find(name);
    uint64_t w[2];
    std::memcpy(w, name.data(), 16);  // (16 bytes are readable: the input is padded)
    uint64_t m0 = n >= 8 ? ~0ull : n ? ~0ull >> (64 - 8 * n) : 0;
    uint64_t m1 = n >= 16 ? ~0ull : n > 8 ? ~0ull >> (64 - 8 * (n - 8)) : 0;
    w[0] &= m0;
    w[1] &= m1;
    NameSlot& e =
        name_cache[((w[0] ^ (w[1] * 0x9e3779b97f4a7c15ull) ^ n) * 0xbf58476d1ce4e5b9ull) >> (64 - kNameCacheBits)];
    if (e.len == n && e.w0 == w[0] && e.w1 == w[1]) {
      slot = &e;
      return e.code;
    }
    int32_t code = out.name.find(name);
    if (code >= 0) {
      e.w0 = w[0];
      e.w1 = w[1];
      e.len = uint32_t(n);
      e.code = code;
      e.cat.len = 0;
      slot = &e;
    }
    return code;
  }
  std::string tmp;
  // Per event name: role of the j-th args key last seen (keys repeat per name, so this skips
  // the column lookup). `key` views stable storage (`keys` or a literal).
  enum Role : int8_t { kCol = 0, kHost, kHhash, kFname, kFhash, kOffset };
  // Args columns that commit() also reads (index into its `special` array; 0 = none).
  enum Special : int8_t {
    kPlain = 0,
    kRetArg,
    kSizeArg,
    kDurSum,
    kArgDur,
    kRetSum,
    kRetMin,
    kSizeMin,
    kSizeMax,
    kNumSpecial
  };
  struct Slot {
    std::string_view key;
    int32_t col = -1;  // args column (kCol); -1: a column the projection does not build
    Role role = kCol;
    Special special = kPlain;
    bool plain = false;    // key of <= 14 printable ASCII bytes without '"' or '\\' (fast path matches it in place)
    Key16 k16;             // fast match of short keys
    Key16 k16_colon = {};  // the key with its closing quote and colon (keys of <= 14 bytes)
    bool extra = false;    // col -1 and the value goes to args_extra (bounded args columns)
    bool simple = false;   // role kCol, special kPlain, col >= 0: commit() only puts the value
    // Bytes to the next slot: sizeof(Slot), or 0 in the end slot every shape ends with (plain
    // false: matches nothing), so the fast path's cursor stops there without a bounds test.
    uint32_t step = sizeof(Slot);
  };
  // The end slot of a name without slots yet.
  const Slot no_slots = [] {
    Slot s;
    s.step = 0;
    return s;
  }();
  // Per role kHost and kFname: `"S"`, the last string value met at a known slot of that role whose
  // S was already interned, and the code of S in out.hostname / out.fname (emptied at every
  // parse(): codes of one `out`). Runs of events share their host and file.
  struct ValSpan {
    Span64 text;
    int32_t code = -1;
  };
  ValSpan host_val, fname_val;
  ValSpan* val_span[6] = {nullptr, &host_val, nullptr, &fname_val, nullptr, nullptr};  // by Role
  // By name code: the slots of its args keys by position, then one end slot (step 0); empty
  // before its first key.
  std::vector<std::vector<Slot>> shapes;
  ArgsProjection projection;                     // args columns to build
  std::unordered_set<std::string> dropped_keys;  // storage for keys of args columns not built
  int32_t extra_col = -1;                        // the args_extra column, once made
  std::string extra_json;                        // args_extra of the event being committed
  bool fast_path = true;
  int64_t fast_lines = 0;

  int column_for(EventColumns& out, std::string_view key, ArgType t) {
    auto it = arg_index.find(key);
    if (it != arg_index.end()) return it->second;
    keys.emplace_back(key);
    int idx = int(out.args.size());
    out.args.emplace_back();
    ArgColumn& c = out.args.back();
    c.key = keys.back();
    c.type = t;
    size_t want = size_t(std::max<int64_t>(out.reserve_rows, out.rows + 1));
    if (t == ArgType::String) {
      c.strings.codes.reserve(want);
    } else {
      (t == ArgType::Int) ? c.ints.reserve(want) : c.floats.reserve(want);
      c.mask.reserve(want);
    }
    arg_index.emplace(std::string_view(keys.back()), idx);
    return idx;
  }

  // Role of args key `k` (the j-th key of an event named code `nc`), cached per name.
  const Slot& slot_for(EventColumns& out, int32_t nc, size_t j, const Staged& s) {
    if (size_t(nc) >= shapes.size()) shapes.resize(size_t(nc) + 1);
    auto& shape = shapes[size_t(nc)];
    size_t n = shape.empty() ? 0 : shape.size() - 1;  // (the last one is the end slot)
    if (j < n && (s.from_input ? shape[j].k16.matches(s.key) : same(shape[j].key, s.key))) return shape[j];
    if (j >= n) {
      if (n) shape[n] = Slot{};  // the old end slot becomes slot n (set below when n == j)
      shape.resize(j + 2);
      shape[j + 1] = no_slots;
    }
    Slot& sl = shape[j];
    std::string_view k = s.key;
    sl = Slot{};
    if (k == "hostname") sl = Slot{"hostname", -1, kHost, kPlain, false, {}};
    else if (k == "hhash") sl = Slot{"hhash", -1, kHhash, kPlain, false, {}};
    else if (k == "fname") sl = Slot{"fname", -1, kFname, kPlain, false, {}};
    else if (k == "fhash") sl = Slot{"fhash", -1, kFhash, kPlain, false, {}};
    else if (k == "offset") sl = Slot{"offset", -1, kOffset, kPlain, false, {}};
    else {
      // An args key named like a core column (or `size`) goes to column "arg_<key>": a core
      // column is never overwritten (docs/index.md).
      std::string_view core = core_name(k);
      std::string column = core.empty() ? std::string(k) : "arg_" + std::string(core);
      bool to_extra = k == kArgsExtraColumn && (projection.all || projection.extra || projection.wants(k));
      if (!to_extra && !projection.wants(column)) to_extra = projection.extra;
      else if (!to_extra && projection.all && arg_index.find(column) == arg_index.end())
        to_extra = out.args.size() - (extra_col >= 0) >= kMaxArgColumns;  // the column budget is spent
      if (to_extra || !projection.wants(column)) {  // not built: col -1, only its special role is kept
        sl.key = std::string_view(*dropped_keys.emplace(k).first);
        sl.extra = to_extra;
      } else if (core.empty()) {
        sl.col = column_for(out, k, s.type);
        sl.key = keys[size_t(sl.col)];
      } else {
        sl.col = column_for(out, column, s.type);
        sl.key = core;
      }
      sl.special = special_of(k);
      sl.role = kCol;
    }
    sl.k16.set(k);
    if (k.size() <= 14) sl.k16_colon.set(std::string(k) + "\":");
    sl.plain = k.size() <= 14 && std::all_of(k.begin(), k.end(), [](char c) {
                 return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x80 && c != '"' &&
                        c != '\\';
               });
    if (sl.k16.len == UINT32_MAX) sl.k16.len = UINT32_MAX - 1;  // long keys: never match fast
    sl.simple = sl.role == kCol && sl.special == kPlain && sl.col >= 0;
    return sl;
  }

  // `k` as a static literal when it names a core column (or is `size`), else empty.
  static std::string_view core_name(std::string_view k) {
    static const std::string_view kCore[] = {"name", "cat", "ph", "pid", "tid", "ts", "dur", "te", "size"};
    if (k.size() > 4) return {};
    for (auto c : kCore)
      if (k == c) return c;
    return {};
  }
  static Special special_of(std::string_view k) {
    if (k == "ret") return kRetArg;
    if (k == "size") return kSizeArg;
    if (k == "dur") return kArgDur;
    if (k.size() != 7 && k.size() != 8) return kPlain;
    if (k == "dur_sum") return kDurSum;
    if (k == "ret_sum") return kRetSum;
    if (k == "ret_min") return kRetMin;
    if (k == "size_min") return kSizeMin;
    if (k == "size_max") return kSizeMax;
    return kPlain;
  }
  // Args columns are written by row too: while parse() runs a column is grown null-filled
  // (0 and mask 1, or code -1) kGrowRows rows at a time, so the rows of events without its key
  // are null already (no padding per value), and a second value of one column in one record
  // overwrites the first (the later wins). parse() cuts every column back to out.rows.
  // Makes `row` a row of `c`.
  __attribute__((noinline)) static void grow_arg(ArgColumn& c, int64_t row) {
    size_t len = size_t(c.length());
    size_t cap = c.type == ArgType::Int     ? c.ints.capacity()
                 : c.type == ArgType::Float ? c.floats.capacity()
                                            : c.strings.codes.capacity();
    size_t n = std::max(size_t(row) + 1, len + kArgGrowRows);
    if (cap > size_t(row)) n = std::min(n, cap);  // no reallocation past the reserve
    if (c.type == ArgType::Int) {
      populate_ahead(c.ints, n);
      populate_ahead(c.mask, n);
    } else if (c.type == ArgType::Float) {
      populate_ahead(c.floats, n);
      populate_ahead(c.mask, n);
    } else {
      populate_ahead(c.strings.codes, n);
    }
    resize_arg(c, n);
  }
  static void resize_arg(ArgColumn& c, size_t n) {
    if (c.type == ArgType::Int) {
      c.ints.resize(n);  // (value-initialised: 0, as null values are)
      c.mask.resize(n, 1);
    } else if (c.type == ArgType::Float) {
      c.floats.resize(n);  // (+0.0)
      c.mask.resize(n, 1);
    } else {
      c.strings.codes.resize(n, -1);
    }
  }
  // Pads `c` with nulls to at least `row` rows.
  static void pad(ArgColumn& c, int64_t row) {
    if (c.length() < row) resize_arg(c, size_t(row));
  }
  static void promote(ArgColumn& c, ArgType t) {
    if (t <= c.type) return;
    if (c.type == ArgType::Int && t == ArgType::Float) {
      c.floats.resize(c.ints.size());
      for (size_t k = 0; k < c.ints.size(); ++k) c.floats[k] = double(c.ints[k]);
      c.ints.clear();
      c.type = ArgType::Float;
      return;
    }
    // To strings: existing numbers become their text.
    c.strings.codes.resize(size_t(c.length()));
    for (size_t k = 0; k < c.strings.codes.size(); ++k) {
      if (c.mask[k]) {
        c.strings.codes[k] = -1;
        continue;
      }
      std::string txt = c.type == ArgType::Int ? std::to_string(c.ints[k]) : double_text(c.floats[k]);
      c.strings.codes[k] = c.strings.intern(txt);
    }
    c.ints.clear();
    c.floats.clear();
    c.mask.clear();
    c.type = ArgType::String;
  }
  __attribute__((always_inline)) static void put(ArgColumn& c, const Staged& v, int64_t row) {
    if (v.is_null) return;
    if (v.type == c.type && c.type != ArgType::String) {   // fast path: same type
      if (size_t(row) >= c.mask.size()) grow_arg(c, row);  // (a number column's mask has its length)
      if (c.type == ArgType::Int) c.ints[size_t(row)] = v.i;
      else c.floats[size_t(row)] = v.d;
      c.mask[size_t(row)] = 0;
      return;
    }
    put_other(c, v, row);
  }
  __attribute__((noinline)) static void put_other(ArgColumn& c, const Staged& v, int64_t row) {
    if (v.type == ArgType::String && c.type == ArgType::String) {  // (as below, without the steps that do nothing)
      if (size_t(row) >= c.strings.codes.size()) grow_arg(c, row);
      c.strings.codes[size_t(row)] = c.strings.intern(v.s);
      return;
    }
    if (row < c.length()) {  // a value of this record: gone before the column is converted (the later wins)
      if (c.type == ArgType::String) {
        c.strings.codes[size_t(row)] = -1;
      } else {
        (c.type == ArgType::Int) ? void(c.ints[size_t(row)] = 0) : void(c.floats[size_t(row)] = 0);
        c.mask[size_t(row)] = 1;
      }
    }
    promote(c, v.type);
    if (row >= c.length()) grow_arg(c, row);
    if (c.type == ArgType::Int) {
      c.ints[size_t(row)] = v.i;
      c.mask[size_t(row)] = 0;
    } else if (c.type == ArgType::Float) {
      c.floats[size_t(row)] = v.type == ArgType::Int ? double(v.i) : v.d;
      c.mask[size_t(row)] = 0;
    } else {
      int32_t code;
      if (v.type == ArgType::String) code = c.strings.intern(v.s);
      else if (v.type == ArgType::Int) code = c.strings.intern(std::to_string(v.i));
      else code = c.strings.intern(double_text(v.d));
      c.strings.codes[size_t(row)] = code;
    }
  }

  // Stages one args value; returns false on a JSON error.
  bool stage(std::string_view key, bool from_input, od::value& v) {
    // Filled in place (building a Staged on the stack and copying it stalls store forwarding).
    Staged& s = staged.emplace_back();
    s.key = key;
    s.from_input = from_input;
    s.type = ArgType::Int;
    s.i = 0;
    s.d = 0.0;
    s.s = {};
    s.raw = {};
    s.is_null = false;
    s.slot_known = false;
    s.code = -1;
    if (!stage_value(s, v)) {
      staged.pop_back();
      return false;
    }
    return true;
  }

  static bool stage_value(Staged& s, od::value& v) {
    std::string_view tok = v.raw_json_token();
    s.raw = trim_ws(tok);
    char c0 = tok.empty() ? '\0' : tok[0];
    switch (c0) {
      case '"': {
        std::string_view sv;
        if (!fast_string(v, sv)) return false;
        if (!parse_int_text(sv, s.i)) {  // legacy traces write numbers as strings
          s.type = ArgType::String;
          s.s = sv;
        }
        break;
      }
      case 't':
      case 'f': {
        bool b;
        if (v.get_bool().get(b)) return false;
        s.i = b ? 1 : 0;
        break;
      }
      case 'n':
        if (v.is_null().error()) return false;
        s.is_null = true;
        break;
      case '{': {  // nested object/array: keep its JSON text
        std::string_view raw;
        od::object o;
        if (v.get_object().get(o) || o.raw_json().get(raw)) return false;
        s.type = ArgType::String;
        s.s = raw;
        s.raw = trim_ws(raw);
        break;
      }
      case '[': {
        std::string_view raw;
        od::array a;
        if (v.get_array().get(a) || a.raw_json().get(raw)) return false;
        s.type = ArgType::String;
        s.s = raw;
        s.raw = trim_ws(raw);
        break;
      }
      default: {
        if (!v.get_int64().get(s.i)) break;  // common case; on error nothing is consumed
        od::number n;
        if (v.get_number().get(n)) return false;
        if (n.is_int64()) {
          s.i = n.get_int64();
        } else if (n.is_uint64()) {
          s.type = ArgType::Float;
          s.d = double(n.get_uint64());
        } else {
          s.type = ArgType::Float;
          s.d = token_double(tok, n.get_double());
        }
      }
    }
    return true;
  }

  static const Staged* find(const StagedList& st, std::string_view k) {
    for (auto& s : st)
      if (s.key == k) return &s;
    return nullptr;
  }
  static std::string text_of(const Staged& s) {
    if (s.is_null) return "";
    if (s.type == ArgType::String) return std::string(s.s);
    if (s.type == ArgType::Int) return std::to_string(s.i);
    return double_text(s.d);
  }

  // Parses one line (trimmed, non-empty). Returns false if it must be skipped.
  bool line(const char* p, size_t n, size_t cap, FileContext& ctx, EventColumns& out, bool retried) {
    staged.clear();
    od::document doc;
    auto err = parser.iterate(p, n, cap).get(doc);
    od::object obj;
    if (!err) err = doc.get_object().get(obj);
    if (err == simdjson::UTF8_ERROR && !retried) return repaired(p, n, ctx, out);
    if (err) return false;
    std::string_view name, cat, ph;
    bool has_name = false, has_ts = false, has_dur = false, has_cat = false;
    int64_t pid = 0, tid = 0, ts = 0, dur = 0;
    for (auto fr : obj) {
      std::string_view key;
      if (fr.error() != simdjson::SUCCESS || !fast_key(fr.value_unsafe(), key)) {
        if (fr.error() == simdjson::UTF8_ERROR && !retried) return repaired(p, n, ctx, out);
        return false;
      }
      od::value& v = fr.value_unsafe().value();
      switch (key.size()) {
        case 2:
          if (key[0] == 't' && key[1] == 's') {
            if (!read_i64(v, ts)) return false;
            has_ts = true;
          } else if (key[0] == 'p' && key[1] == 'h') {
            std::string_view tok = v.raw_json_token();
            if (!tok.empty() && tok[0] != '"') {
              int64_t code;
              if (v.get_int64().get(code)) return false;
              ph = phase_letter(code);
            } else if (!fast_string(v, ph)) {
              return false;
            }
          }
          break;
        case 3:
          if (same(key, "cat")) {
            if (!fast_string(v, cat)) return false;
            has_cat = true;
          } else if (same(key, "dur")) {
            if (!read_i64(v, dur)) return false;
            has_dur = true;
          } else if (same(key, "pid")) {
            if (!read_i64(v, pid)) return false;
          } else if (same(key, "tid")) {
            if (!read_i64(v, tid)) return false;
          }
          break;
        case 4:
          if (same(key, "name")) {
            if (!fast_string(v, name)) return false;
            has_name = true;
          } else if (same(key, "args")) {
            od::object args;
            if (v.get_object().get(args)) return false;
            for (auto ar : args) {
              std::string_view ak;
              bool in_input = false;
              if (ar.error() != simdjson::SUCCESS || !fast_key(ar.value_unsafe(), ak, &in_input)) return false;
              if (!stage(ak, in_input, ar.value_unsafe().value())) return false;
            }
          }
          break;
        default: break;  // other top-level keys (id, ...) are not columns: on-demand skips unread values
      }
    }
    // One object per line: anything after its closing brace (e.g. a second '}') is invalid.
    if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return false;
    if (!has_name) return false;
    bool is_meta = ph == "M" || (has_cat && cat == format::kTracerCategory);
    if (is_meta) {
      meta_record(name, cat, ph, pid, tid, ts, has_ts, dur, has_dur, ctx, out);
      return true;
    }
    if (!has_ts) return false;
    if (insane_time(ts, dur, out)) return false;  // (also catches an end time beyond int64 µs)
    commit(name, has_cat ? cat : std::string_view(), has_cat, ph, pid, tid, ts, dur, ctx, out);
    return true;
  }

  // Fast path for the layout the tracer writes (keys in this order, "id" and "args" optional):
  //   {"id":N,"name":"S","cat":"S","pid":N,"tid":N,"ts":N,"dur":N,"ph":"S","args":{"k":V,...}}
  // It accepts only a strict subset of JSON: no whitespace, strings of printable ASCII without
  // escapes, integers of 1-18 digits, JSON floats, true/false/null as args values. On anything
  // else it returns false before touching the columns, and the line goes through simdjson
  // (line()), which then decides. Accepted lines give exactly what line() gives (same staging and
  // commit; tests/cpp/reader_fastpath_test.cpp compares both on the same lines).
  // `p` is a line start, `e` the end of the buffer; returns the line's end (its '\n' or `e`) when
  // the line was taken, else nullptr. A line ends right after the closing brace, so strings
  // (no control bytes) and numbers never run into the next line.
  // `kNulEnd`: the byte at `e` is '\0' (the text of a read, as std::string and TextBuffer keep it):
  // no literal, key or structural character can match across `e`, so their length checks are
  // left out (q never passes `e`: every step that moves it matched bytes before `e`).
  template <bool kNulEnd>
  const char* fast_line(const char* p, const char* e, FileContext& ctx, EventColumns& out) {
    const char* q = p;
    auto lit1 = [&](char c) __attribute__((always_inline)) { return (kNulEnd || q < e) && *q == c && (++q, true); };
    auto str = [&](std::string_view & v) __attribute__((always_inline)) {
      const char* z = scan_plain<kNulEnd>(q, e);
      if (!z) return false;
      v = std::string_view(q, size_t(z - q));
      q = z + 1;
      return true;
    };
    auto num = [&](int64_t & v) __attribute__((always_inline)) { return (q = scan_int<kNulEnd>(q, e, v)) != nullptr; };
    int64_t pid, tid, ts, dur;
    std::string_view name, cat, ph;
    if (lit<kNulEnd>(q, e, kId)) {
      if (!(q = skip_int<kNulEnd>(q, e)) || !lit<kNulEnd>(q, e, kName)) return nullptr;
    } else if (!lit<kNulEnd>(q, e, kNameFirst)) {
      return nullptr;
    }
    int32_t nc;
    NameSlot& hs = head_slot(q);
    // `hs` when its head span is this line's name and category (matched or just set): its
    // category code is then this line's (same bytes, same code; the cache lives one parse())
    NameSlot* head = nullptr;
    if ((kNulEnd || size_t(e - q) >= hs.head.len) && hs.head.at(q)) {
      name = std::string_view(q, hs.head_name_len);
      cat = std::string_view(q + hs.head_name_len + 9, hs.head.len - hs.head_name_len - 10);
      nc = hs.head_code;
      q += hs.head.len;
      head = &hs;
    } else {
      const char* qn = q;
      if (!str(name)) return nullptr;
      NameSlot* ns;
      nc = find_name(name, out, ns);
      // `,"cat":"S"` as on the name's last line: the same category (the span ends with its quote)
      if (ns && (kNulEnd || size_t(e - q) >= ns->cat.len) && ns->cat.at(q)) {
        cat = std::string_view(q + 8, ns->cat.len - 9);
        q += ns->cat.len;
      } else {
        const char* m = q;
        if (!lit<kNulEnd>(q, e, kCat) || !str(cat)) return nullptr;
        if (ns && q - m <= 32) ns->cat.set(m, size_t(q - m));
      }
      if (nc >= 0 && q - qn <= 32) {
        hs.head.set(qn, size_t(q - qn));
        hs.head_name_len = uint32_t(name.size());
        hs.head_code = nc;
        hs.head_cat = -1;
        head = &hs;
      }
    }
    // `,"pid":N,"tid":N,"ts":` as the last line's: the same two integers (the span ends in a
    // literal, so its numbers end where they ended then; every byte of it lies before `e`)
    if ((kNulEnd || size_t(e - q) >= mid_span.len) && mid_span.at(q)) {
      pid = mid_pid;
      tid = mid_tid;
      q += mid_span.len;
    } else {
      const char* m = q;
      if (!lit<kNulEnd>(q, e, kPid) || !num(pid) || !lit<kNulEnd>(q, e, kTid) || !num(tid) || !lit<kNulEnd>(q, e, kTs))
        return nullptr;
      if (q - m <= 32) {
        mid_span.set(m, size_t(q - m));
        mid_pid = pid;
        mid_tid = tid;
      }
    }
    if (!num(ts) || !lit<kNulEnd>(q, e, kDur) || !num(dur)) return nullptr;
    bool has_args;  // (and the first key's quote consumed)
    bool ph_x = false;
    if ((kNulEnd || size_t(e - q) >= kPhXArgsLen) && ph_x_args(q)) {
      ph = std::string_view(q + 7, 1);
      q += kPhXArgsLen;
      has_args = true;
      ph_x = true;
    } else {
      if (!lit<kNulEnd>(q, e, kPh) || !str(ph)) return nullptr;
      has_args = lit<kNulEnd>(q, e, kArgs) && !lit1('}');
      if (has_args && !lit1('"')) return nullptr;
    }
    staged.clear();
    // (the name's slots as a pointer and a count, loaded once: the staging stores may alias the vector)
    const Slot* shape = &no_slots;
    size_t shape_n = 0;
    if (size_t(nc) < shapes.size() && !shapes[size_t(nc)].empty()) {
      shape = shapes[size_t(nc)].data();
      shape_n = shapes[size_t(nc)].size() - 1;
    }
    if (has_args) {
      staged.reserve(shape_n);
      // A JSON number at q (first byte c: '-' or a digit) that is not a plain integer of <= 18
      // digits: a decimal, an exponent, 19+ digits, "-0"; false when the fast path leaves it.
      auto number = [&](Staged & s, char c) __attribute__((always_inline)) {
        const char* b = q;
        if (c == '-') ++q;
        size_t nd = skip_digits(q, e);
        if (nd == 0 || (nd > 1 && q[-ptrdiff_t(nd)] == '0')) return false;
        bool is_float = false, has_exp = false;
        const char* ip = q - nd;  // the integer part's digits
        size_t nf = 0;            // digits of the fraction
        if (q < e && *q == '.') {
          ++q;
          if (!(nf = skip_digits(q, e))) return false;
          is_float = true;
        }
        if (q < e && (*q == 'e' || *q == 'E')) {
          ++q;
          if (q < e && (*q == '+' || *q == '-')) ++q;
          if (!skip_digits(q, e)) return false;
          is_float = has_exp = true;
        }
        if (!is_float) {
          if (!scan_int(b, q, s.i)) return false;  // 19+ digits or "-0": simdjson decides
        } else if (!has_exp && nd + nf <= 15) {
          s.d = small_decimal(ip, nd, nf, c == '-');
          s.type = ArgType::Float;
          s.i = 0;
        } else {
          auto r = std::from_chars(b, q, s.d);  // correctly rounded, as token_double
          if (r.ec != std::errc() || r.ptr != q) return false;
          s.type = ArgType::Float;
          s.i = 0;
        }
        return true;
      };
      // (sl: the slot of the key's position, shape[j], while j < shape_n, then the end slot: one value
      // staged per key)
      for (const Slot* sl = shape;; sl = reinterpret_cast<const Slot*>(reinterpret_cast<const char*>(sl) + sl->step)) {
        std::string_view key;
        bool known = false;
        if (sl->plain) {
          size_t kl = sl->k16.len;
          if ((kNulEnd || size_t(e - q) > kl + 1) && sl->k16_colon.starts(q)) {
            q += kl + 2;
            known = true;
          }
        }
        if (!known && (!str(key) || !lit1(':'))) return nullptr;
        if (!kNulEnd && q >= e) return nullptr;  // (at a '\0' end no value matches)
        // (a known slot is one of the name's first shape_n: staged.reserve(shape_n) made its room)
        // (the key of a known slot is not stored: only meta_record reads it, filled in from the
        // slots below; commit() reads the key of an unknown one)
        Staged* sp;
        if (known) {
          sp = &staged.push_unchecked();
        } else {
          sp = &staged.emplace_back();
          sp->key = key;
        }
        Staged& s = *sp;
        // Int, from the input, not null (i, d and s are read only for their type, and every way
        // out of the value's scan that leaves the type Int wrote i: not reset)
        set_int_flags(s, known);
        const char* vb = q;
        char c = *q;
        const char* z;
        bool plain_int = false;
        if (c == '"') {
          ValSpan* vs = known ? val_span[sl->role] : nullptr;
          if (vs && (kNulEnd || size_t(e - q) >= vs->text.len) && vs->text.at(q)) {
            // the same string as the role's last one (the span ends with its closing quote): its code
            s.type = ArgType::String;
            s.s = std::string_view(q + 1, vs->text.len - 2);
            s.code = vs->code;
            q += vs->text.len;
          } else {
            ++q;
            std::string_view sv;
            if (!str(sv)) return nullptr;
            // as stage_value: legacy numbers written as strings (from_chars takes only '-' or a digit first)
            if (sv.empty() || (sv[0] != '-' && unsigned(sv[0] - '0') >= 10) || !parse_int_text(sv, s.i)) {
              s.type = ArgType::String;
              s.s = sv;
              s.code = -1;
              if (vs && sv.size() <= 62) {
                // (only a string already interned, and the column's last one: a line not taken adds
                // nothing to the columns, and a new string is hashed once, by commit)
                int32_t code = (vs == &host_val ? out.hostname : out.fname).find_last(sv);
                if (code >= 0) {
                  vs->text.set(sv.data() - 1, sv.size() + 2);
                  vs->code = code;
                }
              }
            }
          }
        } else if (unsigned(c - '0') < 10 ? (z = scan_digits<kNulEnd, false>(q, e, s.i)) != nullptr
                   : c == '-'             ? (z = scan_digits<kNulEnd, true>(q + 1, e, s.i)) != nullptr
                                          : false) {
          // a plain integer (the common case); one followed by '.', 'e' or 'E' is read again as a
          // number below, after the separator test (neither byte can start `,"` or '}')
          q = z;
          plain_int = true;
        } else if (c == '-' || unsigned(c - '0') < 10) {
          if (!number(s, c)) return nullptr;
        } else if (lit<kNulEnd>(q, e, kTrue)) {
          s.i = 1;
        } else if (lit<kNulEnd>(q, e, kFalse)) {
          s.i = 0;
        } else if (lit<kNulEnd>(q, e, kNull)) {
          s.is_null = true;
        } else {
          return nullptr;  // nested object/array or invalid
        }
      value_end:
        s.raw = std::string_view(vb, size_t(q - vb));
        uint16_t sep;  // `,"`: the next key's quote too (a ',' before anything else is not the fast path's)
        std::memcpy(&sep, q, 2);
        if ((kNulEnd || size_t(e - q) >= 2) && sep == uint16_t(',' | '"' << 8)) {
          q += 2;
          continue;
        }
        if (lit1('}')) break;
        if (plain_int && (kNulEnd || q < e) && (*q == '.' || (*q | 0x20) == 'e')) {  // ('E' | 0x20 == 'e')
          q = vb;
          plain_int = false;
          s.i = 0;
          if (!number(s, c)) return nullptr;
          goto value_end;
        }
        return nullptr;
      }
    }
    if (!lit1('}') || (q != e && *q != '\n')) return nullptr;
    ++fast_lines;
    if ((ph.size() == 1 && ph[0] == 'M') || cat == format::kTracerCategory) {
      // keys of known slots: the slot's key has the same text (its k16_colon matched the bytes)
      for (size_t j = 0; j < staged.size(); ++j)
        if (staged[j].slot_known) staged[j].key = shape[j].key;
      meta_record(name, cat, ph, pid, tid, ts, true, dur, true, ctx, out);
    } else if (insane_time(ts, dur, out)) skip(p, q, out);  // the line is taken: invalid, counted
    else {
      commit_impl(name, cat, true, ph, pid, tid, ts, dur, ctx, out, nc, head ? head->head_cat : -1,
                  ph_x ? ph_x_code : -1);
      size_t row = size_t(out.rows - 1);
      if (head) head->head_cat = out.cat.codes[row];
      if (ph_x) ph_x_code = out.ph.codes[row];
    }
    return q;
  }

  // Timestamp sanity (reader.h, kMaxTs): true when the event's times make its line invalid; the
  // reason is counted (the caller counts the skipped line).
  static bool insane_time(int64_t ts, int64_t dur, EventColumns& out) {
    if (dur < 0) {
      ++out.negative_dur_lines;
      return true;
    }
    if (ts < 0 || ts >= kMaxTs || dur >= kMaxTs - ts) {
      ++out.ts_out_of_range_lines;
      return true;
    }
    return false;
  }
  static void skip(const char* b, const char* e, EventColumns& out) {
    ++out.skipped_lines;
    if (out.skipped_examples.size() < 5) out.skipped_examples.emplace_back(b, std::min<size_t>(size_t(e - b), 200));
  }

  bool repaired(const char* p, size_t n, FileContext& ctx, EventColumns& out) {
    std::string fixed;
    json::repair_utf8(p, n, fixed);
    ++out.replaced_utf8_lines;
    scratch.assign(fixed);
    scratch.append(simdjson::SIMDJSON_PADDING, ' ');
    return line(scratch.data(), fixed.size(), scratch.size(), ctx, out, true);
  }

  void meta_record(std::string_view name, std::string_view cat, std::string_view ph, int64_t pid, int64_t tid,
                   int64_t ts, bool has_ts, int64_t dur, bool has_dur, FileContext& ctx, EventColumns& out) {
    MetaRecord m;
    m.name = std::string(name);
    m.cat = std::string(cat);
    m.ph = std::string(ph);
    m.pid = pid;
    m.tid = tid;
    m.ts = ts;
    m.has_ts = has_ts;
    m.dur = dur;
    m.has_dur = has_dur;
    const Staged* k = find(staged, "name");
    const Staged* v = find(staged, "value");
    if (k) m.key = text_of(*k);
    if (v) m.value = text_of(*v);
    std::string& a = m.args;
    a = "{";
    for (size_t i = 0; i < staged.size(); ++i) {
      if (i) a += ',';
      json::append_quoted(a, staged[i].key);
      a += ':';
      const Staged& s = staged[i];
      if (s.is_null) a += "null";
      else if (s.type == ArgType::Int) a += std::to_string(s.i);
      else if (s.type == ArgType::Float) a += double_text(s.d);
      else if (!s.s.empty() && (s.s.front() == '{' || s.s.front() == '[')) a += s.s;
      else json::append_quoted(a, s.s);
    }
    a += '}';
    if (ph == "M" && k && v) {
      if (name == "FH") ctx.fh[m.value] = m.key;
      else if (name == "HH") ctx.hh[m.value] = m.key;
      else if (name == "SH") ctx.sh[m.value] = m.key;
      else if (name == "hostname" && ctx.hostname.empty()) ctx.hostname = m.value;
    }
    out.metadata.push_back(std::move(m));
  }

  // Interns the string a hash maps to (FH/HH); -1 (and counted) when the map lacks it.
  int32_t resolve(const std::unordered_map<std::string, std::string>& map, const Staged& h, DictColumn& col,
                  EventColumns& out) {
    if (h.type == ArgType::String) {
      tmp.assign(h.s);
    } else if (h.type == ArgType::Int) {
      char b[24];
      auto r = std::to_chars(b, b + sizeof b, h.i);
      tmp.assign(b, r.ptr);
    } else {
      tmp = double_text(h.d);
    }
    auto it = map.find(tmp);
    if (it == map.end()) {
      ++out.unresolved_hashes;
      return -1;
    }
    return col.intern(it->second);
  }
  // Interns a value as text (strings as is, numbers formatted).
  __attribute__((always_inline)) int32_t intern_text(DictColumn& col, const Staged& v) {
    if (v.type == ArgType::String) return v.code >= 0 ? v.code : col.intern(v.s);
    return intern_number_text(col, v);
  }
  __attribute__((noinline)) int32_t intern_number_text(DictColumn& col, const Staged& v) {
    return col.intern(text_of(v));
  }

  static bool is_int(const Staged* s) { return s && s->type == ArgType::Int; }
  // Bytes moved by the calls of an aggregated record: ret_sum (kRet) or ret_sum × size (fread/
  // fwrite with one element size, size_min == size_max), when no call failed (ret_min >= 0).
  static bool aggregated_size(int8_t sk, const Staged* const* sp, int64_t& size) {
    const Staged *sum = sp[kRetSum], *lo = sp[kRetMin];
    if (!is_int(sum) || !is_int(lo) || lo->i < 0 || sum->i < 0) return false;
    if (sk == kRet) {
      size = sum->i;
      return true;
    }
    if (sk == kSize) return false;  // the records of args.size calls carry no summed size
    const Staged *smin = sp[kSizeMin], *smax = sp[kSizeMax];
    if (!is_int(smin) || !is_int(smax) || smin->i != smax->i) return false;
    return !__builtin_mul_overflow(sum->i, smin->i, &size);
  }

  // Adds `key: value` (the value's JSON text as in the line) to the event's args_extra object.
  void add_extra(std::string_view key, const Staged& s, EventColumns& out) {
    extra_json += extra_json.empty() ? '{' : ',';
    json::append_quoted(extra_json, key);
    extra_json += ':';
    extra_json += s.raw;
    auto it = out.extra_keys.find(std::string(key));
    if (it == out.extra_keys.end()) out.extra_keys.emplace(std::string(key), 1);
    else ++it->second;
  }

  __attribute__((noinline)) void commit(std::string_view name, std::string_view cat, bool has_cat, std::string_view ph,
                                        int64_t pid, int64_t tid, int64_t ts, int64_t dur, FileContext& ctx,
                                        EventColumns& out) {
    commit_impl(name, cat, has_cat, ph, pid, tid, ts, dur, ctx, out, -1, -1, -1);
  }
  // `nc`: the name's code when already known (fast path), else -1; `cc`, `pc`: the codes of
  // `cat` and `ph` when known (the fast path's spans: the same bytes as a committed line's), else
  // -1. Inlined into fast_line (its call, with 13 arguments, cost ~45 Ir an event).
  __attribute__((always_inline)) void commit_impl(std::string_view name, std::string_view cat, bool has_cat,
                                                  std::string_view ph, int64_t pid, int64_t tid, int64_t ts,
                                                  int64_t dur, FileContext& ctx, EventColumns& out, int32_t nc,
                                                  int32_t cc, int32_t pc) {
    int64_t row = out.rows;
    if (size_t(row) >= out.pid.size()) grow_core(out);
    if (nc < 0) nc = out.name.intern(name);
    out.name.codes[size_t(row)] = nc;
    if (size_t(nc) >= name_info.size()) name_info.resize(size_t(nc) + 1);
    NameInfo& ni = name_info[size_t(nc)];
    if (ni.size_kind < 0) ni.size_kind = size_kind_of(name);
    if (cc >= 0) ni.cat = cc;
    else if (has_cat) cc = ni.cat = out.cat.intern(cat, ni.cat);
    out.cat.codes[size_t(row)] = cc;
    if (pc >= 0) ni.ph = pc;
    else if (!ph.empty()) pc = ni.ph = out.ph.intern(ph, ni.ph);
    out.ph.codes[size_t(row)] = pc;
    const int8_t sk = ni.size_kind;  // (read before slot_for and the args stores)
    out.pid[size_t(row)] = pid;
    out.tid[size_t(row)] = tid;
    out.ts[size_t(row)] = ts;
    const Staged *host = nullptr, *hhash = nullptr, *fname = nullptr, *fhash = nullptr, *offset = nullptr;
    const Staged* special[kNumSpecial] = {};  // by Slot::special; [kPlain] is unused
    extra_json.clear();
    // The name's slots are walked with the staged values (slot j belongs to value j): two
    // cursors instead of an index scaled twice per value. Both are fetched again after slot_for,
    // which may grow the slots and add a column. (Reserved to the values' count, so the slot
    // cursor always points into the slots' storage, never past it from a null pointer.)
    if (size_t(nc) >= shapes.size()) shapes.resize(size_t(nc) + 1);
    if (shapes[size_t(nc)].capacity() < staged.size() + 1) shapes[size_t(nc)].reserve(staged.size() + 1);
    const Slot* slp = shapes[size_t(nc)].data();
    ArgColumn* args = out.args.data();
    const Staged* const s0 = staged.begin();
    const Staged* const s_end = staged.end();
    for (const Staged* sp = s0; sp != s_end; ++sp, ++slp) {
      const Staged& s = *sp;
      // The common value, an integer the fast path matched to a known slot of a plain Int column:
      // one compare of the flags word (set_int_flags' word with `known`) and one of the column type.
      uint64_t flags;
      std::memcpy(&flags, reinterpret_cast<const char*>(&s) + offsetof(Staged, type), 8);
      if (flags == kKnownIntFlags && slp->simple) {
        ArgColumn& c = args[size_t(slp->col)];
        if (c.type == ArgType::Int) {
          if (size_t(row) >= c.mask.size()) grow_arg(c, row);  // (a number column's mask has its length)
          c.ints[size_t(row)] = s.i;
          c.mask[size_t(row)] = 0;
          continue;
        }
      }
      if (s.is_null) continue;  // null is the same as absent
      if (!s.slot_known) {
        size_t j = size_t(sp - s0);
        slp = &slot_for(out, nc, j, s);
        args = out.args.data();
      }
      const Slot& sl = *slp;
      if (sl.simple) {
        put(args[size_t(sl.col)], s, row);
        continue;
      }
      switch (sl.role) {
        case kHost: host = &s; break;
        case kHhash: hhash = &s; break;
        case kFname: fname = &s; break;
        case kFhash: fhash = &s; break;
        case kOffset: offset = &s; break;
        case kCol:
          special[sl.special] = &s;
          if (sl.col >= 0) put(args[size_t(sl.col)], s, row);
          else if (sl.extra) add_extra(sl.key, s, out);
          break;
      }
    }
    if (!extra_json.empty()) {
      extra_json += '}';
      if (extra_col < 0) extra_col = column_for(out, kArgsExtraColumn, ArgType::String);
      ArgColumn& c = out.args[size_t(extra_col)];
      int32_t code = c.strings.intern(extra_json);
      if (row >= c.length()) grow_arg(c, row);
      c.strings.codes[size_t(row)] = code;
    }
    // hostname: args.hostname, HH resolution of args.hhash, else the file's host.
    int32_t hc = -1;
    if (host) hc = intern_text(out.hostname, *host);
    else if (hhash) hc = resolve(ctx.hh, *hhash, out.hostname, out);
    if (hc < 0 && !ctx.hostname.empty()) hc = out.hostname.intern(ctx.hostname);
    out.hostname.codes[size_t(row)] = hc;
    int32_t fc = -1;
    if (fname) {
      fc = intern_text(out.fname, *fname);
      // A file name the fast path met at a known slot and had no code for (a new run of lines on
      // one file): its span now, so the run's next line takes the code without find_last (slow
      // path values are never slot_known; their text may not be the input's).
      if (fname->code < 0 && fname->slot_known && fname->type == ArgType::String && fname->s.size() <= 62) {
        fname_val.text.set(fname->s.data() - 1, fname->s.size() + 2);
        fname_val.code = fc;
      }
    } else if (fhash) fc = resolve(ctx.fh, *fhash, out.fname, out);
    out.fname.codes[size_t(row)] = fc;
    bool off_ok = offset && offset->type == ArgType::Int;
    out.offset[size_t(row)] = off_ok ? offset->i : 0;
    out.offset_mask[size_t(row)] = off_ok ? 0 : 1;
    int64_t size = 0;
    bool size_ok = false;
    const Staged *ret = special[kRetArg], *asize = special[kSizeArg];
    bool aggregated = ph.size() == 1 && ph[0] == 'A';
    if (sk != kNoSize && ret && ret->type == ArgType::Int && ret->i >= 0) {
      if (sk == kRet) {
        size = ret->i;
        size_ok = true;
      } else if (sk == kSize) {
        size_ok = asize && asize->type == ArgType::Int && asize->i >= 0;
        if (size_ok) size = asize->i;
      } else if (asize && asize->type == ArgType::Int) {
        size = ret->i * asize->i;
        size_ok = true;
      }
    } else if (sk != kNoSize && aggregated) {
      size_ok = aggregated_size(sk, special, size);
    }
    // Aggregated record (upstream ph 3): dur = args.dur_sum, the summed µs of its dft_cnt calls
    // (a record of one call has args.dur instead).
    if (aggregated) {
      if (is_int(special[kDurSum])) dur = special[kDurSum]->i;
      else if (is_int(special[kArgDur])) dur = special[kArgDur]->i;
    }
    out.dur[size_t(row)] = dur;
    out.size[size_t(row)] = size;
    out.size_mask[size_t(row)] = size_ok ? 0 : 1;
    out.rows = row + 1;
  }

  // Core columns are written by row, not pushed (one size check per row instead of a capacity
  // check per column): while parse() runs they are longer than out.rows, grown kGrowRows rows at
  // a time (a small value-initialisation, inside the capacity parse() reserved), and parse()
  // cuts them back to out.rows before it returns. All core columns have one length.
  __attribute__((noinline)) static void grow_core(EventColumns& out) {
    size_t n = out.pid.size() + kGrowRows;
    if (out.pid.capacity() > out.pid.size()) n = std::min(n, out.pid.capacity());  // no reallocation past the reserve
    for (auto* d : {&out.name, &out.cat, &out.ph, &out.hostname, &out.fname}) {
      populate_ahead(d->codes, n);
      d->codes.resize(n);
    }
    for (auto* v : {&out.pid, &out.tid, &out.ts, &out.dur, &out.size, &out.offset}) {
      populate_ahead(*v, n);
      v->resize(n);
    }
    for (auto* m : {&out.size_mask, &out.offset_mask}) {
      populate_ahead(*m, n);
      m->resize(n);
    }
  }
  static void trim_core(EventColumns& out) {
    size_t n = size_t(out.rows);
    for (ArgColumn& c : out.args)
      if (c.length() > out.rows) resize_arg(c, n);
    for (auto* d : {&out.name, &out.cat, &out.ph, &out.hostname, &out.fname}) d->codes.resize(n);
    for (auto* v : {&out.pid, &out.tid, &out.ts, &out.dur, &out.size, &out.offset}) v->resize(n);
    out.size_mask.resize(n);
    out.offset_mask.resize(n);
  }
};

Parser::Parser() : impl_(new Impl) {}
Parser::~Parser() = default;
void Parser::set_fast_path(bool on) { impl_->fast_path = on; }
void Parser::set_args_projection(ArgsProjection projection) {
  impl_->projection = std::move(projection);
  impl_->shapes.clear();  // slots cache the old decision
}
int64_t Parser::fast_lines() const { return impl_->fast_lines; }

void Parser::parse(const char* buf, size_t len, size_t capacity, FileContext& ctx, EventColumns& out) {
  Impl& im = *impl_;
  im.arg_index.clear();
  im.keys.clear();
  for (size_t i = 0; i < out.args.size(); ++i) {
    im.keys.emplace_back(out.args[i].key);
    im.arg_index.emplace(std::string_view(im.keys.back()), int(i));
  }
  im.extra_col = -1;
  if (auto it = im.arg_index.find(kArgsExtraColumn); it != im.arg_index.end()) im.extra_col = it->second;
  im.name_info.assign(out.name.categories.size(), Impl::NameInfo{});
  for (auto& e : im.name_cache) e = Impl::NameSlot{};  // codes of another `out` perhaps
  im.ph_x_code = -1;
  im.host_val = Impl::ValSpan{};
  im.fname_val = Impl::ValSpan{};
  im.shapes.clear();
  // core columns: out.rows long on entry and on every exit (Impl::grow_core)
  Impl::trim_core(out);
  struct Trim {
    EventColumns& out;
    ~Trim() { Impl::trim_core(out); }
  } trim{out};
  if (out.reserve_rows > out.rows) {
    size_t n = size_t(out.reserve_rows);
    for (auto* d : {&out.name, &out.cat, &out.ph, &out.hostname, &out.fname}) d->codes.reserve(n);
    for (auto* v : {&out.pid, &out.tid, &out.ts, &out.dur, &out.size, &out.offset}) v->reserve(n);
    out.size_mask.reserve(n);
    out.offset_mask.reserve(n);
  }
  const char* end = buf + len;
  const char* cap_end = buf + capacity;
  // (the caller's padding is readable; a read's text has a '\0' there: Impl::fast_line<true>)
  const bool nul_end = *end == '\0';
  const char* p = buf;
  size_t max_line = 0;
  const bool fast = im.fast_path;
  while (p < end) {
    if (fast && *p == '{') {
      if (nul_end) {
        // The common case, line after line of the tracer's layout taken by the fast path, in a
        // loop of its own; each line is tried once, a line it gives up goes on below.
        const char* le;
        while ((le = im.fast_line<true>(p, end, ctx, out))) {
          p = le + (le < end);
          if (p >= end || *p != '{') break;
        }
        if (le) continue;
      } else if (const char* le = im.fast_line<false>(p, end, ctx, out)) {
        p = le + (le < end);
        continue;
      }
    }
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
    const char* le = nl ? nl : end;
    const char* b = p;
    const char* e = le;
    const char* line_start = p;
    p = nl ? nl + 1 : end;
    while (b < e && (*b == ' ' || *b == '\t')) ++b;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == ',')) --e;
    size_t n = size_t(e - b);
    if (n == 0 || (n == 1 && (*b == '[' || *b == ']'))) continue;
    if (n > max_line) {
      max_line = n;
      if (im.parser.capacity() < n && im.parser.allocate(std::max<size_t>(n, 1 << 16)) != simdjson::SUCCESS) {
        ++out.skipped_lines;
        continue;
      }
    }
    // the fast path saw this line untrimmed above; try again when trimming changed it
    if (fast && (b != line_start || e != le) && *b == '{' && im.fast_line<false>(b, e, ctx, out)) continue;
    if (!im.line(b, n, size_t(cap_end - b), ctx, out, false)) {
      ++out.skipped_lines;
      if (out.skipped_examples.size() < 5) out.skipped_examples.emplace_back(b, std::min<size_t>(n, 200));
    }
  }
}

void Parser::finish(EventColumns& out) {
  out.te.reserve(out.ts.size());
  for (size_t k = 0; k < out.ts.size(); k += kPopulateBytes / sizeof(int64_t))
    populate_ahead(out.te, std::min(out.ts.size(), k + kPopulateBytes / sizeof(int64_t)));
  out.te.resize(out.ts.size());  // (not zero-filled first: ColumnVector) te = ts + dur (µs), in one vectorised pass
  for (size_t i = 0; i < out.te.size(); ++i) out.te[i] = out.ts[i] + out.dur[i];
  for (auto& c : out.args) {
    Impl::pad(c, out.rows);
    c.strings.drop_lookup();
  }
  for (auto* d : {&out.name, &out.cat, &out.ph, &out.hostname, &out.fname}) d->drop_lookup();
  std::sort(out.args.begin(), out.args.end(), [](const ArgColumn& a, const ArgColumn& b) { return a.key < b.key; });
}

namespace {
// Finds metadata record markers: `"ph":"M"` (letters) or `"ph":4` not followed by a digit
// (DFTracer 2.x integer phase). Each needle's next hit is cached, so the buffer is scanned
// once per needle.
class MetaFinder {
 public:
  explicit MetaFinder(const char* end) : end_(end) {}
  // First marker at or after `p`, or nullptr.
  const char* find(const char* p) {
    for (int k = 0; k < 2; ++k)
      if (!valid_[k] || hit_[k] < p) {
        hit_[k] = scan(k, p);
        valid_[k] = true;
      }
    const char* h = std::min(hit_[0], hit_[1]);
    return h < end_ ? h : nullptr;
  }

 private:
  const char* scan(int k, const char* from) const {
    static const std::string_view kNeedles[2] = {"\"ph\":\"M\"", "\"ph\":4"};
    const std::string_view n = kNeedles[k];
    while (from < end_) {
      const char* h = static_cast<const char*>(memmem(from, size_t(end_ - from), n.data(), n.size()));
      if (!h) break;
      const char* after = h + n.size();
      if (k == 0 || after >= end_ || unsigned(*after - '0') >= 10) return h;
      from = h + 1;
    }
    return end_;
  }
  const char* end_;
  const char* hit_[2] = {nullptr, nullptr};
  bool valid_[2] = {false, false};
};
}  // namespace

void collect_context(const char* buf, size_t len, FileContext& ctx) {
  const char* p = buf;
  const char* end = buf + len;
  od::parser parser;
  std::string line;
  MetaFinder finder(end);
  while (p < end) {
    const char* hit = finder.find(p);
    if (!hit) break;
    const char* b = hit;
    while (b > buf && b[-1] != '\n') --b;
    const char* e = static_cast<const char*>(std::memchr(hit, '\n', size_t(end - hit)));
    if (!e) e = end;
    line.assign(b, size_t(e - b));
    size_t n = line.size();
    line.append(simdjson::SIMDJSON_PADDING, ' ');
    od::document doc;
    od::object obj;
    std::string_view name, k;
    std::string vtxt;
    bool ok = !parser.iterate(line.data(), n, line.size()).get(doc) && !doc.get_object().get(obj);
    if (ok) {
      for (auto field : obj) {
        std::string_view key;
        if (field.unescaped_key().get(key)) break;
        od::value val;
        if (field.value().get(val)) break;
        if (key == "name") {
          if (val.get_string().get(name)) break;
        } else if (key == "args") {
          od::object args;
          if (val.get_object().get(args)) break;
          for (auto af : args) {
            std::string_view ak;
            if (af.unescaped_key().get(ak)) break;
            od::value av;
            if (af.value().get(av)) break;
            if (ak == "name") {
              std::string_view s;
              if (!av.get_string().get(s)) k = s;
            } else if (ak == "value") {
              int64_t iv;
              std::string_view s;
              od::json_type t;
              if (av.type().get(t)) break;
              if (t == od::json_type::number && !av.get_int64().get(iv)) {
                vtxt = std::to_string(iv);
              } else if (t == od::json_type::string && !av.get_string().get(s)) {
                vtxt.assign(s);
              }
            }
          }
        }
      }
    }
    p = e + 1;
    if (!ok || k.empty() || vtxt.empty()) continue;
    if (name == "FH") ctx.fh[vtxt] = std::string(k);
    else if (name == "HH") ctx.hh[vtxt] = std::string(k);
    else if (name == "SH") ctx.sh[vtxt] = std::string(k);
    else if (name == "hostname" && ctx.hostname.empty()) ctx.hostname = vtxt;  // as Impl::metadata
  }
}

}  // namespace dftracer::reader
