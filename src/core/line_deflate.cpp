#include "line_deflate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace dftracer {
namespace {

// Measured on the preload microbenchmark's trace (docs/perf/preload.md): 1 line of history gives
// 6.0 B/event, 2: 5.4, 3: 5.2, 4: 5.2 (+13 % instructions over 3), 8: 5.6 (the extra distances
// cost more bits).
constexpr int kHistory = 3;                    // earlier lines tried as match sources
constexpr size_t kKeySlots = 64;               // last line per name (hashed), the extra match source
constexpr size_t kResync = 16;                 // bytes either side searched to realign on a shifted field
constexpr int kCandidates = 2 * kHistory + 2;  // distances tried per line
constexpr size_t kGoodMatch = 16;              // a match this long ends the search
constexpr size_t kMinMatch = 4;                // shorter matches cost more bits than the digits they replace (the
                                               // 4-byte reject below assumes 4)
constexpr size_t kMaxMatch = 258;
constexpr size_t kWindow = 32768;
constexpr size_t kBlockTokens = 1u << 16;  // tokens per deflate block (one Huffman table each)

constexpr uint16_t kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                   31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                   2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
const uint8_t kClOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// Built at compile time: filling dist_code at run time walks all 32768 distances, 440 k
// instructions per process that writes one small member (callgrind, docs/performance.md).
struct Tables {
  uint8_t len_code[kMaxMatch + 1] = {};  // length 3..258 -> 0..28 (symbol 257 + code)
  uint8_t dist_code[512] = {};           // zlib's layout: d-1 < 256 ? [d-1] : [256 + ((d-1) >> 7)]
  constexpr Tables() {
    for (int c = 0; c < 29; ++c)
      for (int l = kLenBase[c]; l < kLenBase[c] + (1 << kLenExtra[c]) && l <= 258; ++l)
        len_code[l] = static_cast<uint8_t>(c);
    len_code[258] = 28;
    for (int c = 0; c < 30; ++c)  // each slot once: the first 256 distances, then steps of 128
      for (int d = kDistBase[c]; d < kDistBase[c] + (1 << kDistExtra[c]) && d <= 32768; d += d - 1 < 256 ? 1 : 128)
        dist_code[d - 1 < 256 ? d - 1 : 256 + ((d - 1) >> 7)] = static_cast<uint8_t>(c);
  }
  int dcode(uint32_t d) const { return d - 1 < 256 ? dist_code[d - 1] : dist_code[256 + ((d - 1) >> 7)]; }
};
constexpr Tables kTables;
const Tables& tables() { return kTables; }

// Token: a literal byte (< 256), or a match packed as the write pass needs it:
// 1<<31 | dist_extra<<15 | len_extra<<10 | dist_code<<5 | len_code (13 + 5 + 5 + 5 bits).
// The symbol frequencies are counted when the token is made (no separate counting pass).
struct TokenSink {
  uint32_t* tok;
  size_t nt = 0;
  uint32_t lfreq[286];
  uint32_t dfreq[30];
  size_t nmatch = 0;
  void reset() {
    nt = 0;
    nmatch = 0;
    std::memset(lfreq, 0, sizeof(lfreq));
    std::memset(dfreq, 0, sizeof(dfreq));
  }
  void literal(unsigned char c) {
    tok[nt++] = c;
    ++lfreq[c];
  }
  void match(size_t len, size_t dist) {
    const Tables& t = tables();
    uint32_t lc = t.len_code[len];
    uint32_t dc = static_cast<uint32_t>(t.dcode(static_cast<uint32_t>(dist)));
    tok[nt++] = (1u << 31) | (static_cast<uint32_t>(dist - kDistBase[dc]) << 15) |
                (static_cast<uint32_t>(len - kLenBase[lc]) << 10) | (dc << 5) | lc;
    ++lfreq[257 + lc];
    ++dfreq[dc];
    ++nmatch;
  }
};

inline size_t match_len(const char* a, const char* b, size_t max) {
  size_t l = 0;
#ifdef __SSE2__
  while (l + 32 <= max) {  // 32 bytes per test: lines are mostly copied
    __m128i e0 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + l)),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + l)));
    __m128i e1 = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + l + 16)),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + l + 16)));
    if (_mm_movemask_epi8(_mm_and_si128(e0, e1)) != 0xffff) {
      unsigned m = static_cast<unsigned>(_mm_movemask_epi8(e0)) | static_cast<unsigned>(_mm_movemask_epi8(e1)) << 16;
      return l + static_cast<size_t>(__builtin_ctz(~m));
    }
    l += 32;
  }
  while (l + 16 <= max) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + l));
    __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + l));
    unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, y))) ^ 0xffffu;
    if (m) return l + static_cast<size_t>(__builtin_ctz(m));
    l += 16;
  }
#endif
  while (l + 8 <= max) {
    uint64_t x, y;
    std::memcpy(&x, a + l, 8);
    std::memcpy(&y, b + l, 8);
    if (uint64_t d = x ^ y) return l + (static_cast<size_t>(__builtin_ctzll(d)) >> 3);
    l += 8;
  }
  while (l < max && a[l] == b[l]) ++l;
  return l;
}

// Offset of the first ',' in s[0..24) (24 if none; s[0..32) must be readable).
inline size_t first_comma(const char* s) {
#ifdef __SSE2__
  __m128i c = _mm_set1_epi8(',');
  unsigned m = static_cast<unsigned>(
                   _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), c))) |
               static_cast<unsigned>(
                   _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)), c)))
                   << 16;
  m &= 0xffffffu;
  return m ? static_cast<size_t>(__builtin_ctz(m)) : 24;
#else
  for (size_t q = 0; q < 24; ++q)
    if (s[q] == ',') return q;
  return 24;
#endif
}

// Resynchronisation after a field of another width: the longest match for in[p..) whose source
// starts within kResync bytes of p - d (the line being copied), at a distance in [1, kWindow].
// Returns its length (0 if < kMinMatch) and sets *dist.
size_t resync(const char* in, size_t p, size_t max, size_t d, size_t* dist) {
  size_t s = p - d;
  size_t lo = s > kResync ? s - kResync : 0;
  if (p > kWindow && lo < p - kWindow) lo = p - kWindow;
  size_t hi = std::min(s + kResync, p);  // sources before p only
  uint32_t head;
  std::memcpy(&head, in + p, 4);
  size_t best = 0;
  auto try_at = [&](size_t q) {
    uint32_t h;
    std::memcpy(&h, in + q, 4);
    if (h != head || q == s) return;
    size_t l = 4 + match_len(in + p + 4, in + q + 4, max - 4);
    if (l > best) best = l, *dist = p - q;
  };
#ifdef __SSE2__
  if (hi > lo && lo + 32 <= p) {  // the window's first bytes equal to in[p], 32 at a time
    __m128i c = _mm_set1_epi8(static_cast<char>(head & 0xff));
    uint32_t m = static_cast<uint32_t>(
                     _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + lo)), c))) |
                 static_cast<uint32_t>(_mm_movemask_epi8(
                     _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + lo + 16)), c)))
                     << 16;
    if (hi - lo < 32) m &= (1u << (hi - lo)) - 1;
    for (; m; m &= m - 1) try_at(lo + static_cast<size_t>(__builtin_ctz(m)));
    return best >= kMinMatch ? best : 0;
  }
#endif
  for (size_t q = lo; q < hi; ++q)
    if (static_cast<unsigned char>(in[q]) == (head & 0xff)) try_at(q);
  return best >= kMinMatch ? best : 0;
}

// Length-limited Huffman code lengths (lens[i] = 0 for unused symbols). At least two symbols
// get a length (a complete code), so freq may be changed for a dummy symbol.
void huffman_lengths(uint32_t* freq, int n, int limit, uint8_t* lens) {
  std::memset(lens, 0, static_cast<size_t>(n));
  int used = 0;
  for (int i = 0; i < n; ++i) used += freq[i] != 0;
  for (int i = 0; used < 2 && i < n; ++i)
    if (!freq[i]) {
      freq[i] = 1;
      ++used;
    }
  struct Leaf {
    uint32_t f;
    int sym;
  };
  Leaf leaves[320];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (freq[i]) leaves[m++] = Leaf{freq[i], i};
  std::sort(leaves, leaves + m, [](const Leaf& a, const Leaf& b) { return a.f != b.f ? a.f < b.f : a.sym < b.sym; });
  // Two-queue Huffman: nodes 0..m-1 leaves, m.. internal nodes in creation order.
  uint64_t w[640];
  int parent[640];
  for (int i = 0; i < m; ++i) w[i] = leaves[i].f;
  int li = 0, ii = m, next = m;
  auto take = [&]() {
    if (li < m && (ii >= next || w[li] <= w[ii])) return li++;
    return ii++;
  };
  while (next < 2 * m - 1) {
    int a = take(), b = take();
    w[next] = w[a] + w[b];
    parent[a] = parent[b] = next;
    ++next;
  }
  int depth[640];
  depth[2 * m - 2] = 0;
  for (int k = 2 * m - 3; k >= 0; --k) depth[k] = depth[parent[k]] + 1;
  int count[64] = {0};
  for (int i = 0; i < m; ++i) ++count[std::min(depth[i], 63)];
  // Clamp to limit and repair the Kraft sum (miniz's method).
  for (int d = limit + 1; d < 64; ++d) {
    count[limit] += count[d];
    count[d] = 0;
  }
  uint32_t total = 0;
  for (int d = 1; d <= limit; ++d) total += static_cast<uint32_t>(count[d]) << (limit - d);
  while (total != (1u << limit)) {
    --count[limit];
    for (int d = limit - 1; d > 0; --d)
      if (count[d]) {
        --count[d];
        count[d + 1] += 2;
        break;
      }
    --total;
  }
  // Most frequent symbols (end of leaves) get the shortest codes.
  int k = m - 1;
  for (int d = 1; d <= limit; ++d)
    for (int c = 0; c < count[d]; ++c) lens[leaves[k--].sym] = static_cast<uint8_t>(d);
}

void canonical_codes(const uint8_t* lens, int n, uint16_t* codes) {
  int count[16] = {0};
  for (int i = 0; i < n; ++i) ++count[lens[i]];
  count[0] = 0;
  int next[16];
  int code = 0;
  for (int b = 1; b < 16; ++b) {
    code = (code + count[b - 1]) << 1;
    next[b] = code;
  }
  for (int i = 0; i < n; ++i) {
    if (!lens[i]) continue;
    uint32_t c = static_cast<uint32_t>(next[lens[i]]++), r = 0;
    for (int b = 0; b < lens[i]; ++b) r |= ((c >> b) & 1u) << (lens[i] - 1 - b);  // deflate: MSB first
    codes[i] = static_cast<uint16_t>(r);
  }
}

inline void store_le64(unsigned char* p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);  // deflate's byte order is little-endian
#endif
  std::memcpy(p, &v, 8);
}

// 64-bit bit buffer: each put() adds up to 57 - 7 bits and stores 8 bytes at once (advancing by
// the whole bytes), so a match token (<= 48 bits) costs one store. Near the end of the output
// buffer it falls back to byte stores, and marks overflow instead of writing past `end`.
struct BitOut {
  uint64_t acc = 0;
  unsigned n = 0;  // bits in acc (< 8 between puts)
  unsigned char* p;
  unsigned char* end;
  bool overflow = false;
  // Caller guarantees end - p >= 8.
  void put_unchecked(uint64_t v, unsigned bits) {
    acc |= v << n;
    n += bits;
    store_le64(p, acc);
    p += n >> 3;
    acc >>= n & ~7u;  // n < 64: a defined shift
    n &= 7;
  }
  void put(uint64_t v, unsigned bits) {
    if (end - p >= 8) {
      put_unchecked(v, bits);
      return;
    }
    acc |= v << n;
    n += bits;
    while (n >= 8) {
      if (p >= end) {
        overflow = true;  // the result is discarded
        acc = 0;
        n = 0;
        return;
      }
      *p++ = static_cast<unsigned char>(acc);
      acc >>= 8;
      n -= 8;
    }
  }
  void flush() {
    if (n > 0) {
      if (p >= end) {
        overflow = true;
        return;
      }
      *p++ = static_cast<unsigned char>(acc);
    }
    acc = 0;
    n = 0;
  }
};

// The fixed Huffman code of RFC 1951 3.2.6 (block type 1), bit-reversed as BitOut writes them
// (i16-proc5's block-type choice, 62ff977, on the packed tokens).
struct FixedCode {
  uint8_t llen[288] = {};
  uint16_t lcode[288] = {};
  uint8_t dlen[30] = {};
  uint16_t dcode[30] = {};
  static constexpr uint16_t reversed(uint32_t c, int bits) {
    uint32_t r = 0;
    for (int b = 0; b < bits; ++b) r |= ((c >> b) & 1u) << (bits - 1 - b);
    return static_cast<uint16_t>(r);
  }
  constexpr FixedCode() {
    for (int i = 0; i < 288; ++i) {
      // 0-143: 8 bits from 00110000; 144-255: 9 bits from 110010000; 256-279: 7 bits from 0;
      // 280-287: 8 bits from 11000000.
      int bits = i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8;
      uint32_t code = i < 144 ? 0x30 + i : i < 256 ? 0x190 + (i - 144) : i < 280 ? i - 256 : 0xc0 + (i - 280);
      llen[i] = static_cast<uint8_t>(bits);
      lcode[i] = reversed(code, bits);
    }
    for (int i = 0; i < 30; ++i) dlen[i] = 5, dcode[i] = reversed(static_cast<uint32_t>(i), 5);
  }
};
constexpr FixedCode kFixed;

// The block's tokens and its end-of-block symbol, with the given code.
void write_tokens(const TokenSink& ts, const uint16_t* lcode, const uint8_t* llen, const uint16_t* dcode,
                  const uint8_t* dlen, BitOut& out) {
  const uint32_t* tok = ts.tok;
  size_t nt = ts.nt;
  if (nt < 256) {  // a small block (short-lived process): no packed tables to build
    for (size_t i = 0; i < nt; ++i) {
      uint32_t x = tok[i];
      if (x < 256) {
        out.put(lcode[x], llen[x]);
        continue;
      }
      uint32_t lc = x & 31, dc = (x >> 5) & 31;
      out.put(lcode[257 + lc], llen[257 + lc]);
      out.put((x >> 10) & 31, kLenExtra[lc]);
      out.put(dcode[dc], dlen[dc]);
      out.put(x >> 15 & 0x1fff, kDistExtra[dc]);
    }
    out.put(lcode[256], llen[256]);
    return;
  }
  // Packed per-symbol codes: literal = code | bits << 16; length/distance symbol = code with
  // its bit count and its extra-bit count.
  uint32_t lit[256];
  for (int i = 0; i < 256; ++i) lit[i] = lcode[i] | static_cast<uint32_t>(llen[i]) << 16;
  struct Sym {
    uint16_t code;
    uint8_t bits, extra;
  };
  Sym lsym[29], dsym[30];
  for (int i = 0; i < 29; ++i) lsym[i] = Sym{lcode[257 + i], llen[257 + i], kLenExtra[i]};
  for (int i = 0; i < 30; ++i) dsym[i] = Sym{dcode[i], dlen[i], kDistExtra[i]};
  // Room for every token at its longest code (15-bit literal, 48-bit match) and the 8-byte
  // stores: the loop below writes without bounds checks, in local registers (the byte stores
  // through an unsigned char* would otherwise force the writer's state back to memory).
  size_t worst = ((nt - ts.nmatch) * 15 + ts.nmatch * 48) / 8 + 16;
  size_t i = 0;
  if (static_cast<size_t>(out.end - out.p) >= worst) {
    uint64_t acc = out.acc;
    unsigned nb = out.n;
    unsigned char* q = out.p;
    for (; i < nt; ++i) {
      uint32_t x = tok[i];
      uint64_t v;
      unsigned bits;
      if (x < 256) {
        v = lit[x] & 0xffff;
        bits = lit[x] >> 16;
      } else {
        const Sym& l = lsym[x & 31];
        const Sym& d = dsym[(x >> 5) & 31];
        v = l.code | static_cast<uint64_t>((x >> 10) & 31) << l.bits;  // length code, extra bits
        bits = l.bits + l.extra;
        v |= static_cast<uint64_t>(d.code | static_cast<uint64_t>(x >> 15 & 0x1fff) << d.bits) << bits;
        bits += d.bits + d.extra;  // <= 15 + 5 + 15 + 13 = 48 bits
      }
      acc |= v << nb;
      nb += bits;
      store_le64(q, acc);
      q += nb >> 3;
      acc >>= nb & ~7u;  // nb < 64: a defined shift
      nb &= 7;
    }
    out.acc = acc;
    out.n = nb;
    out.p = q;
  }
  for (; i < nt; ++i) {  // near the end of the buffer: checked writes
    uint32_t x = tok[i];
    if (x < 256) {
      out.put(lit[x] & 0xffff, lit[x] >> 16);
      continue;
    }
    const Sym& l = lsym[x & 31];
    const Sym& d = dsym[(x >> 5) & 31];
    uint64_t v = l.code | static_cast<uint64_t>((x >> 10) & 31) << l.bits;
    unsigned bits = l.bits + l.extra;
    v |= static_cast<uint64_t>(d.code | static_cast<uint64_t>(x >> 15 & 0x1fff) << d.bits) << bits;
    out.put(v, bits + d.bits + d.extra);
  }
  out.put(lcode[256], llen[256]);
}

// One block: dynamic Huffman (block type 2), or the fixed code (type 1) when that takes fewer
// bits, e.g. for the small members of short-lived processes, where a dynamic block's code-length
// header (~60 bytes) outweighs what its code saves. Sizes compared exactly (extra bits are the
// same for both and left out).
void write_block(TokenSink& ts, bool final, BitOut& out) {
  uint32_t* lfreq = ts.lfreq;
  uint32_t* dfreq = ts.dfreq;
  lfreq[256] = 1;
  uint64_t fixed_bits = 3;  // before huffman_lengths() adds dummy symbols to the frequencies
  for (int i = 0; i < 286; ++i) fixed_bits += static_cast<uint64_t>(lfreq[i]) * kFixed.llen[i];
  for (int i = 0; i < 30; ++i) fixed_bits += static_cast<uint64_t>(dfreq[i]) * 5;
  uint8_t llen[286], dlen[30];
  {
    uint32_t f[286];  // huffman_lengths() may add dummy symbols: lfreq/dfreq stay as coded
    std::memcpy(f, lfreq, sizeof(ts.lfreq));
    huffman_lengths(f, 286, 15, llen);
    std::memcpy(f, dfreq, sizeof(ts.dfreq));
    huffman_lengths(f, 30, 15, dlen);
  }
  int hlit = 286;
  while (hlit > 257 && !llen[hlit - 1]) --hlit;
  int hdist = 30;
  while (hdist > 1 && !dlen[hdist - 1]) --hdist;
  // Code lengths, run-length coded (16: repeat previous 3-6, 17: zeros 3-10, 18: zeros 11-138).
  uint8_t all[316];
  std::memcpy(all, llen, static_cast<size_t>(hlit));
  std::memcpy(all + hlit, dlen, static_cast<size_t>(hdist));
  int na = hlit + hdist;
  uint8_t rle_sym[316], rle_extra[316];
  int nr = 0;
  uint32_t cfreq[19] = {0};
  for (int i = 0; i < na;) {
    int v = all[i], r = 1;
    while (i + r < na && all[i + r] == v) ++r;
    i += r;
    if (v == 0) {
      while (r >= 11) {
        int k = std::min(r, 138);
        rle_sym[nr] = 18, rle_extra[nr++] = static_cast<uint8_t>(k - 11);
        r -= k;
      }
      if (r >= 3) {
        rle_sym[nr] = 17, rle_extra[nr++] = static_cast<uint8_t>(r - 3);
        r = 0;
      }
    } else {
      rle_sym[nr] = static_cast<uint8_t>(v), rle_extra[nr++] = 0;
      --r;
      while (r >= 3) {
        int k = std::min(r, 6);
        rle_sym[nr] = 16, rle_extra[nr++] = static_cast<uint8_t>(k - 3);
        r -= k;
      }
    }
    for (; r > 0; --r) rle_sym[nr] = static_cast<uint8_t>(v), rle_extra[nr++] = 0;
  }
  for (int i = 0; i < nr; ++i) ++cfreq[rle_sym[i]];
  uint8_t clen[19];
  huffman_lengths(cfreq, 19, 7, clen);
  int hclen = 19;
  while (hclen > 4 && !clen[kClOrder[hclen - 1]]) --hclen;

  uint64_t dynamic_bits = 3 + 5 + 5 + 4 + 3 * static_cast<uint64_t>(hclen);
  for (int i = 0; i < nr; ++i)
    dynamic_bits += clen[rle_sym[i]] + (rle_sym[i] == 16 ? 2 : rle_sym[i] == 17 ? 3 : rle_sym[i] == 18 ? 7 : 0);
  for (int i = 0; i < hlit; ++i) dynamic_bits += static_cast<uint64_t>(lfreq[i]) * llen[i];
  for (int i = 0; i < hdist; ++i) dynamic_bits += static_cast<uint64_t>(dfreq[i]) * dlen[i];
  if (fixed_bits <= dynamic_bits) {
    out.put(final ? 1 : 0, 1);
    out.put(1, 2);  // fixed Huffman
    write_tokens(ts, kFixed.lcode, kFixed.llen, kFixed.dcode, kFixed.dlen, out);
    return;
  }

  uint16_t ccode[19] = {0}, lcode[286] = {0}, dcode[30] = {0};
  canonical_codes(clen, 19, ccode);
  canonical_codes(llen, 286, lcode);
  canonical_codes(dlen, 30, dcode);
  out.put(final ? 1 : 0, 1);
  out.put(2, 2);  // dynamic Huffman
  out.put(static_cast<uint32_t>(hlit - 257), 5);
  out.put(static_cast<uint32_t>(hdist - 1), 5);
  out.put(static_cast<uint32_t>(hclen - 4), 4);
  for (int i = 0; i < hclen; ++i) out.put(clen[kClOrder[i]], 3);
  for (int i = 0; i < nr; ++i) {
    out.put(ccode[rle_sym[i]], clen[rle_sym[i]]);
    if (rle_sym[i] == 16) out.put(rle_extra[i], 2);
    else if (rle_sym[i] == 17) out.put(rle_extra[i], 3);
    else if (rle_sym[i] == 18) out.put(rle_extra[i], 7);
  }
  write_tokens(ts, lcode, llen, dcode, dlen, out);
}

// Size of the tokens so far under their own Huffman codes (entropy) plus the extra bits, in
// bytes: the probe's estimate of the block (the header, ~100 bytes, is left out).
size_t estimated_bytes(const TokenSink& ts) {
  size_t total = ts.nt;
  if (!total) return 0;
  double bits = 0;
  auto add = [&bits](uint32_t f, double t) {
    if (f) bits += f * std::log2(t / f);
  };
  for (int i = 0; i < 286; ++i) add(ts.lfreq[i], static_cast<double>(total));
  for (int i = 0; i < 29; ++i) bits += static_cast<double>(ts.lfreq[257 + i]) * kLenExtra[i];
  for (int i = 0; i < 30; ++i) {
    add(ts.dfreq[i], static_cast<double>(ts.nmatch));
    bits += static_cast<double>(ts.dfreq[i]) * kDistExtra[i];
  }
  return static_cast<size_t>(bits / 8);
}

}  // namespace

size_t line_deflate_bound(size_t n) { return 2 * n + (n / kBlockTokens + 1) * 512 + 64; }

size_t line_deflate(const char* in, size_t n, unsigned char* out, size_t out_cap, size_t* literals, size_t probe_bytes,
                    size_t max_literal_share, size_t* lines, size_t min_ratio) {
  size_t nlit = 0, nlines = 0;
  BitOut bo;
  bo.p = out;
  bo.end = out + out_cap;
  size_t tok_cap = std::min(n, kBlockTokens) + 1;
  std::unique_ptr<uint32_t[]> tok_buf(new uint32_t[tok_cap]);  // not zero-filled
  TokenSink ts;
  ts.tok = tok_buf.get();
  ts.reset();
  // Starts and lengths of the last kHistory lines (most recent first); the current line.
  size_t hs[kHistory] = {0}, hl[kHistory] = {0};
  int nh = 0;
  // The last line with the same key (its name: the 16 bytes after the first ',', e.g.
  // `"name":"read","c`), as start + 1 (0: none) and length.
  size_t ks[kKeySlots] = {0}, kl[kKeySlots] = {0};
  size_t cs = 0, ce = 0;         // current line [cs, ce), ce past its '\n' (or n)
  size_t dist[kCandidates + 1];  // + 1: a realigned distance (resync)
  int nd = 0;
  size_t last_d = 0;  // distance of the last match
  size_t p = 0;
  bool any_block = false;
  while (p < n) {
    while (p >= ce) {                         // entering a new line (a match may have run over several)
      if (probe_bytes && p >= probe_bytes) {  // checked once: give up on text that does not repeat
        if (nlit * max_literal_share > p ||
            (min_ratio && (static_cast<size_t>(bo.p - out) + estimated_bytes(ts)) * min_ratio > p)) {
          if (literals) *literals = nlit;
          return 0;
        }
        probe_bytes = 0;
      }
      if (ce > cs) {
        for (int k = kHistory - 1; k > 0; --k) hs[k] = hs[k - 1], hl[k] = hl[k - 1];
        hs[0] = cs, hl[0] = ce - cs;
        nh = std::min(nh + 1, kHistory);
      }
      cs = ce;
      const void* nl = std::memchr(in + cs, '\n', n - cs);
      ce = nl ? static_cast<size_t>(static_cast<const char*>(nl) - in) + 1 : n;
      nlines += nl != nullptr;
      size_t cl = ce - cs;
      nd = 0;
      auto add = [&](size_t d) {
        if (d == 0 || d > kWindow || d > cs) return;  // d <= cs: the source is inside the input
        for (int j = 0; j < nd; ++j)
          if (dist[j] == d) return;
        dist[nd++] = d;
      };
      for (int k = 0; k < nh; ++k) {
        size_t back = cs - hs[k];
        add(back);                                                     // start aligned with start
        if (hl[k] != cl && back + cl > hl[k]) add(back + cl - hl[k]);  // end aligned with end
      }
      // The last line with the same name, when it is not one of the last kHistory lines.
      size_t comma = cl >= 41 ? first_comma(in + cs + 1) + 1 : cl;  // `{"id":N,` is short
      if (comma + 17 < cl) {
        uint64_t a, b;
        std::memcpy(&a, in + cs + comma + 1, 8);
        std::memcpy(&b, in + cs + comma + 9, 8);
        size_t slot = static_cast<size_t>(((a ^ (b * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull) >> 56) &
                      (kKeySlots - 1);
        if (ks[slot]) {
          size_t s0 = ks[slot] - 1;
          if (nh == 0 || s0 < hs[nh - 1]) {
            size_t back = cs - s0;
            add(back);
            if (kl[slot] != cl && back + cl > kl[slot]) add(back + cl - kl[slot]);
          }
        }
        ks[slot] = cs + 1;
        kl[slot] = cl;
      }
    }
    size_t best = 0, bd = 0;
    size_t max = std::min(kMaxMatch, n - p);
    if (max >= kMinMatch) {
      uint32_t head, h;
      std::memcpy(&head, in + p, 4);
      for (int j = 0; j < nd; ++j) {
        size_t d = dist[j];
        std::memcpy(&h, in + p - d, 4);
        if (h != head) continue;  // kMinMatch == 4: a cheap reject
        size_t l = 4 + match_len(in + p + 4, in + p - d + 4, max - 4);
        if (l > best) {
          best = l, bd = d;
          if (l >= kGoodMatch || p + l >= ce) break;
        }
      }
      // No source matches here, and this is not a digit of a changed number: the line being
      // copied may continue a few bytes further on or back (a number of another width before).
      if (best == 0 && last_d && static_cast<unsigned char>(in[p] - '0') > 9 && last_d <= p) {
        best = resync(in, p, max, last_d, &bd);
        if (best) {  // the realigned distance is tried first for the rest of the line
          int k = std::min(nd, kCandidates);
          for (; k > 0; --k) dist[k] = dist[k - 1];
          dist[0] = bd;
          nd = std::min(nd + 1, kCandidates + 1);
        }
      }
    }
    if (best >= kMinMatch) {
      ts.match(best, bd);
      last_d = bd;
      p += best;
    } else {
      ts.literal(static_cast<unsigned char>(in[p]));
      ++nlit;
      ++p;
    }
    if (ts.nt >= kBlockTokens) {
      write_block(ts, p >= n, bo);
      any_block = true;
      ts.reset();
    }
  }
  for (size_t q = ce; q < n;) {  // lines inside the last match were not walked
    const void* nl = std::memchr(in + q, '\n', n - q);
    if (!nl) break;
    ++nlines;
    q = static_cast<size_t>(static_cast<const char*>(nl) - in) + 1;
  }
  if (ts.nt || !any_block) write_block(ts, true, bo);
  bo.flush();
  if (bo.overflow) return 0;
  if (literals) *literals = nlit;
  if (lines) *lines = nlines;
  return static_cast<size_t>(bo.p - out);
}

}  // namespace dftracer
