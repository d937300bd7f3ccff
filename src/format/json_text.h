// JSON text of the trace format (docs/format.md, "Lines"): string escaping (RFC 8259) with UTF-8
// validation and repair (RFC 3629; every byte of an invalid sequence becomes U+FFFD), and compact
// numbers. The only implementation: the tracer core formats events with it, the preload builds
// its fname fragments with it, the reader repairs and re-escapes strings with it.
//
// The write_* functions write straight into a byte buffer (no allocation, no bounds checks:
// callers reserve max_escaped() / kMaxNumber bytes first); append_quoted() and repair_utf8()
// append to a std::string (the reader's cold paths). Header-only, C++17.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace dftracer::json {

// Longest output of write_u64/i64/double.
constexpr size_t kMaxNumber = 32;
// Worst case for an escaped string of n input bytes: every byte a control character (\u00XX).
constexpr size_t max_escaped(size_t n) { return 6 * n; }

// Byte classes: 0 copy as is, 1 needs an escape (control, '"', '\\'), 2 non-ASCII (UTF-8 check).
struct ClassTable {
  uint8_t c[256];
  constexpr ClassTable() : c() {
    for (int i = 0; i < 256; ++i) c[i] = i < 0x20 ? 1 : (i >= 0x80 ? 2 : 0);
    c[static_cast<int>('"')] = 1;
    c[static_cast<int>('\\')] = 1;
  }
};
inline constexpr ClassTable kClass{};

// Length of the valid UTF-8 sequence starting at s (RFC 3629: no overlongs, no surrogates,
// max U+10FFFF), or 0 if invalid.
inline size_t utf8_seq_len(const unsigned char* s, const unsigned char* end) {
  unsigned char c = s[0];
  size_t avail = static_cast<size_t>(end - s);
  if (c >= 0xC2 && c <= 0xDF) {
    return (avail >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (avail < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  // overlong
    if (c == 0xED && s[1] > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (avail < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;  // overlong
    if (c == 0xF4 && s[1] > 0x8F) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

// True if s[0..n) can be written as a JSON string body verbatim: printable ASCII without '"'
// and '\\'. constexpr so that checks of string literals fold at compile time.
constexpr bool is_plain(const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return false;
  }
  return true;
}

namespace detail {
// Escapes the one byte (or UTF-8 sequence) at *ps, which is not plain; advances *ps.
inline char* write_special(char* out, const unsigned char** ps, const unsigned char* end) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned char* s = *ps;
  unsigned char c = *s;
  if (kClass.c[c] == 1) {
    *out++ = '\\';
    switch (c) {
      case '"': *out++ = '"'; break;
      case '\\': *out++ = '\\'; break;
      case '\n': *out++ = 'n'; break;
      case '\t': *out++ = 't'; break;
      case '\r': *out++ = 'r'; break;
      case '\b': *out++ = 'b'; break;
      case '\f': *out++ = 'f'; break;
      default:
        *out++ = 'u';
        *out++ = '0';
        *out++ = '0';
        *out++ = kHex[c >> 4];
        *out++ = kHex[c & 15];
    }
    *ps = s + 1;
    return out;
  }
  size_t len = utf8_seq_len(s, end);
  if (len) {
    std::memcpy(out, s, len);
    *ps = s + len;
    return out + len;
  }
  *out++ = '\xEF';
  *out++ = '\xBF';
  *out++ = '\xBD';  // U+FFFD
  *ps = s + 1;
  return out;
}
}  // namespace detail

// Reference escaper, byte by byte (same output as write_escaped; kept for tests and as the
// definition of the rules): '"' '\\' and control bytes escaped (\n \t \r \b \f, else \u00XX),
// valid UTF-8 (RFC 3629) copied, every byte of an invalid sequence becomes U+FFFD.
inline char* write_escaped_scalar(char* out, const char* in, size_t n) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(in);
  const unsigned char* end = s + n;
  while (s < end) {
    if (kClass.c[*s] == 0) *out++ = static_cast<char>(*s++);
    else out = detail::write_special(out, &s, end);
  }
  return out;
}

namespace detail {
// Nonzero if any of the 8 (or 4) bytes is a control byte, '"', '\\' or non-ASCII (SWAR test).
inline uint64_t special8(uint64_t v) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint64_t q = v ^ (kOnes * '"'), b = v ^ (kOnes * '\\');
  return (((v - kOnes * 0x20) & ~v) | ((q - kOnes) & ~q) | ((b - kOnes) & ~b) | v) & kHigh;
}
inline uint32_t special4(uint32_t v) {
  constexpr uint32_t kOnes = 0x01010101u, kHigh = 0x80808080u;
  uint32_t q = v ^ (kOnes * '"'), b = v ^ (kOnes * '\\');
  return (((v - kOnes * 0x20) & ~v) | ((q - kOnes) & ~q) | ((b - kOnes) & ~b) | v) & kHigh;
}
}  // namespace detail

// Writes the JSON string body (no surrounding quotes). Invalid UTF-8 bytes become U+FFFD.
// Plain bytes are copied 16 at a time (SSE2) or 8 at a time (SWAR); any other byte goes
// through detail::write_special.
__attribute__((noinline)) inline char* write_escaped_long(char* out, const char* in, size_t n) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(in);
  const unsigned char* end = s + n;
  while (s < end) {
#if defined(__SSE2__)
    while (end - s >= 16) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches non-ASCII.
      __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                              _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
      unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(bad));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);  // out has room (max_escaped)
      if (mask == 0) {
        out += 16;
        s += 16;
        continue;
      }
      unsigned k = static_cast<unsigned>(__builtin_ctz(mask));
      out += k;
      s += k;
      out = detail::write_special(out, &s, end);
    }
#endif
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
    // 8 bytes at a time while none is a control byte, '"', '\\' or non-ASCII (SWAR test).
    while (end - s >= 8) {
      uint64_t v;
      std::memcpy(&v, s, 8);
      uint64_t q = v ^ (kOnes * '"'), b = v ^ (kOnes * '\\');
      uint64_t special = ((v - kOnes * 0x20) & ~v) | ((q - kOnes) & ~q) | ((b - kOnes) & ~b) | v;
      if (special & kHigh) break;
      std::memcpy(out, s, 8);
      out += 8;
      s += 8;
    }
    while (s < end && kClass.c[*s] == 0) *out++ = static_cast<char>(*s++);  // < 8 bytes left
    if (s >= end) break;
    out = detail::write_special(out, &s, end);
  }
  return out;
}

// write_escaped with an inline fast path for short plain strings (4..15 bytes: names,
// categories, keys): two overlapping loads checked at once, two overlapping stores.
__attribute__((always_inline)) inline char* write_escaped(char* out, const char* in, size_t n) {
  if (n >= 8 && n < 16) {
    uint64_t a, b;
    std::memcpy(&a, in, 8);
    std::memcpy(&b, in + n - 8, 8);
    if (!(detail::special8(a) | detail::special8(b))) {
      std::memcpy(out, &a, 8);
      std::memcpy(out + n - 8, &b, 8);
      return out + n;
    }
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    std::memcpy(&a, in, 4);
    std::memcpy(&b, in + n - 4, 4);
    if (!(detail::special4(a) | detail::special4(b))) {
      std::memcpy(out, &a, 4);
      std::memcpy(out + n - 4, &b, 4);
      return out + n;
    }
  }
  return write_escaped_long(out, in, n);
}

inline char* write_quoted(char* out, std::string_view s) {
  *out++ = '"';
  out = write_escaped(out, s.data(), s.size());
  *out++ = '"';
  return out;
}

// Appends s as a quoted JSON string (same bytes as write_quoted) to o.
inline void append_quoted(std::string& o, std::string_view s) {
  size_t at = o.size();
  o.resize(at + max_escaped(s.size()) + 2);
  char* end = write_quoted(&o[at], s);
  o.resize(static_cast<size_t>(end - o.data()));
}

// out = p[0..n) with every byte of an invalid UTF-8 sequence replaced by U+FFFD (the rule of
// write_escaped, without escaping: control bytes, '"' and '\\' are kept).
inline void repair_utf8(const char* p, size_t n, std::string& out) {
  out.clear();
  const unsigned char* s = reinterpret_cast<const unsigned char*>(p);
  const unsigned char* end = s + n;
  while (s < end) {
    const unsigned char* run = s;
    while (s < end && *s < 0x80) ++s;  // ASCII copies as is
    out.append(reinterpret_cast<const char*>(run), static_cast<size_t>(s - run));
    if (s >= end) break;
    size_t len = utf8_seq_len(s, end);
    if (len) {
      out.append(reinterpret_cast<const char*>(s), len);
      s += len;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++s;
    }
  }
}

inline int decimal_digits(uint64_t v) {
  int n = 1;
  while (v >= 10000) {
    v /= 10000;
    n += 4;
  }
  if (v >= 1000) return n + 3;
  if (v >= 100) return n + 2;
  if (v >= 10) return n + 1;
  return n;
}

namespace detail {
inline constexpr char kDigits[201] =
    "0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849"
    "5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

// v < 10^8: digits written backwards (32-bit arithmetic), returns the end.
inline char* write_u32_small(char* out, uint32_t v) {
  char* end = out + decimal_digits(v);
  char* p = end;
  while (v >= 100) {
    uint32_t i = (v % 100) * 2;
    v /= 100;
    p -= 2;
    std::memcpy(p, kDigits + i, 2);
  }
  if (v >= 10) {
    p -= 2;
    std::memcpy(p, kDigits + v * 2, 2);
  } else {
    *--p = static_cast<char>('0' + v);
  }
  return end;
}

// Exactly 8 digits (leading zeros kept) of v < 10^8; two independent 4-digit halves.
inline void write_8digits(char* out, uint32_t v) {
  uint32_t hi = v / 10000, lo = v % 10000;
  std::memcpy(out, kDigits + (hi / 100) * 2, 2);
  std::memcpy(out + 2, kDigits + (hi % 100) * 2, 2);
  std::memcpy(out + 4, kDigits + (lo / 100) * 2, 2);
  std::memcpy(out + 6, kDigits + (lo % 100) * 2, 2);
}
}  // namespace detail

// Decimal digits straight into the output (no temporary): numbers below 10^8 with 32-bit
// arithmetic, larger ones (µs timestamps have 16 digits) in 8-digit blocks.
inline char* write_u64(char* out, uint64_t v) {
  if (v < 100) {  // small ids, fds, durations
    if (v < 10) {
      *out = static_cast<char>('0' + v);
      return out + 1;
    }
    std::memcpy(out, detail::kDigits + v * 2, 2);
    return out + 2;
  }
  if (v < 10000) {  // byte counts of typical I/O calls
    uint32_t hi = static_cast<uint32_t>(v) / 100, lo = static_cast<uint32_t>(v) % 100;
    if (hi < 10) {
      *out = static_cast<char>('0' + hi);
      std::memcpy(out + 1, detail::kDigits + lo * 2, 2);
      return out + 3;
    }
    std::memcpy(out, detail::kDigits + hi * 2, 2);
    std::memcpy(out + 2, detail::kDigits + lo * 2, 2);
    return out + 4;
  }
  if (v < 100000000u) return detail::write_u32_small(out, static_cast<uint32_t>(v));
  if (v >= 1000000000000000ull && v < 10000000000000000ull) {  // 16 digits: µs timestamps
    detail::write_8digits(out, static_cast<uint32_t>(v / 100000000u));
    detail::write_8digits(out + 8, static_cast<uint32_t>(v % 100000000u));
    return out + 16;
  }
  if (v < 10000000000000000ull) {
    out = detail::write_u32_small(out, static_cast<uint32_t>(v / 100000000u));
    detail::write_8digits(out, static_cast<uint32_t>(v % 100000000u));
    return out + 8;
  }
  uint64_t top = v / 10000000000000000ull;  // 1..1844
  uint64_t rest = v % 10000000000000000ull;
  out = detail::write_u32_small(out, static_cast<uint32_t>(top));
  detail::write_8digits(out, static_cast<uint32_t>(rest / 100000000u));
  detail::write_8digits(out + 8, static_cast<uint32_t>(rest % 100000000u));
  return out + 16;
}

inline char* write_i64(char* out, int64_t v) {
  if (v < 0) {
    *out++ = '-';
    return write_u64(out, ~static_cast<uint64_t>(v) + 1);
  }
  return write_u64(out, static_cast<uint64_t>(v));
}

// Shortest round-trip form; NaN and infinities (not JSON) are written as null.
inline char* write_double(char* out, double v) {
  if (!std::isfinite(v)) {
    std::memcpy(out, "null", 4);
    return out + 4;
  }
  auto r = std::to_chars(out, out + kMaxNumber, v);
  return r.ptr;
}

// Copies n bytes (short keys: inline, two overlapping moves instead of a memcpy call).
inline char* copy_short(char* out, const char* in, size_t n) {
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    std::memcpy(&a, in, 8);
    std::memcpy(&b, in + n - 8, 8);
    std::memcpy(out, &a, 8);
    std::memcpy(out + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    std::memcpy(&a, in, 4);
    std::memcpy(&b, in + n - 4, 4);
    std::memcpy(out, &a, 4);
    std::memcpy(out + n - 4, &b, 4);
  } else if (n < 4) {
    if (n & 2) std::memcpy(out, in, 2);
    if (n & 1) out[n - 1] = in[n - 1];
  } else {
    std::memcpy(out, in, n);
  }
  return out + n;
}

template <size_t N>
inline char* write_lit(char* out, const char (&lit)[N]) {
  std::memcpy(out, lit, N - 1);
  return out + N - 1;
}

}  // namespace dftracer::json
