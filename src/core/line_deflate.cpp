#include "line_deflate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dftracer {
namespace {

// Measured on the preload microbenchmark's trace (docs/perf/preload.md): 1 line of history gives
// 6.0 B/event, 2: 5.4, 3: 5.2, 4: 5.2 (+13 % instructions over 3), 8: 5.6 (the extra distances
// cost more bits).
constexpr int kHistory = 3;        // earlier lines tried as match sources
constexpr size_t kGoodMatch = 16;  // a match this long ends the search
constexpr size_t kMinMatch = 4;    // shorter matches cost more bits than the digits they replace (the
                                   // 4-byte reject below assumes 4)
constexpr size_t kMaxMatch = 258;
constexpr size_t kWindow = 32768;
constexpr size_t kBlockTokens = 1u << 16;  // tokens per deflate block (one Huffman table each)

constexpr uint16_t kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                               31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
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

// Token: literal byte (< 256), or 1<<31 | (len-3)<<15 | (dist-1).
inline uint32_t match_token(size_t len, size_t dist) {
  return (1u << 31) | static_cast<uint32_t>((len - 3) << 15) | static_cast<uint32_t>(dist - 1);
}

inline size_t match_len(const char* a, const char* b, size_t max) {
  size_t l = 0;
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

struct BitOut {
  uint64_t acc = 0;
  int n = 0;
  unsigned char* p;
  unsigned char* end;
  bool overflow = false;
  void put(uint32_t v, int bits) {
    acc |= static_cast<uint64_t>(v) << n;
    n += bits;
    if (n >= 32) {
      if (end - p >= 4) {
        for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(acc >> (8 * i));
        p += 4;
      } else {
        overflow = true;  // the result is discarded
      }
      acc >>= 32;
      n -= 32;
    }
  }
  void flush() {
    while (n > 0) {
      if (p >= end) {
        overflow = true;
        return;
      }
      *p++ = static_cast<unsigned char>(acc);
      acc >>= 8;
      n -= 8;
    }
    n = 0;
  }
};

void write_block(const uint32_t* tok, size_t nt, bool final, BitOut& out) {
  const Tables& t = tables();
  uint32_t lfreq[286] = {0}, dfreq[30] = {0};
  for (size_t i = 0; i < nt; ++i) {
    uint32_t x = tok[i];
    if (x < 256) {
      ++lfreq[x];
    } else {
      ++lfreq[257 + t.len_code[((x >> 15) & 0xff) + 3]];
      ++dfreq[t.dcode((x & 0x7fff) + 1)];
    }
  }
  lfreq[256] = 1;
  uint8_t llen[286], dlen[30];
  huffman_lengths(lfreq, 286, 15, llen);
  huffman_lengths(dfreq, 30, 15, dlen);
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
  uint16_t ccode[19] = {0}, lcode[286] = {0}, dcode[30] = {0};
  canonical_codes(clen, 19, ccode);
  canonical_codes(llen, 286, lcode);
  canonical_codes(dlen, 30, dcode);
  int hclen = 19;
  while (hclen > 4 && !clen[kClOrder[hclen - 1]]) --hclen;

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
  for (size_t i = 0; i < nt; ++i) {
    uint32_t x = tok[i];
    if (x < 256) {
      out.put(lcode[x], llen[x]);
      continue;
    }
    uint32_t len = ((x >> 15) & 0xff) + 3, dist = (x & 0x7fff) + 1;
    int lc = t.len_code[len];
    out.put(lcode[257 + lc], llen[257 + lc]);
    if (kLenExtra[lc]) out.put(len - kLenBase[lc], kLenExtra[lc]);
    int dc = t.dcode(dist);
    out.put(dcode[dc], dlen[dc]);
    if (kDistExtra[dc]) out.put(dist - kDistBase[dc], kDistExtra[dc]);
  }
  out.put(lcode[256], llen[256]);
}

}  // namespace

size_t line_deflate_bound(size_t n) { return 2 * n + (n / kBlockTokens + 1) * 512 + 64; }

size_t line_deflate(const char* in, size_t n, unsigned char* out, size_t out_cap, size_t* literals, size_t probe_bytes,
                    size_t max_literal_share, size_t* lines) {
  size_t nlit = 0, nlines = 0;
  BitOut bo;
  bo.p = out;
  bo.end = out + out_cap;
  if (out_cap < 8) return 0;
  std::vector<uint32_t> tok;
  tok.reserve(std::min(n, kBlockTokens) + 1);
  // Starts and lengths of the last kHistory lines (most recent first); the current line.
  size_t hs[kHistory] = {0}, hl[kHistory] = {0};
  int nh = 0;
  size_t cs = 0, ce = 0;  // current line [cs, ce), ce past its '\n' (or n)
  size_t dist[2 * kHistory];
  int nd = 0;
  size_t p = 0;
  bool any_block = false;
  while (p < n) {
    while (p >= ce) {  // entering a new line (a match may have run over several)
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
      for (int k = 0; k < nh; ++k) {
        size_t back = cs - hs[k];                                             // start aligned with start
        size_t cand[2] = {back, back + cl >= hl[k] ? back + cl - hl[k] : 0};  // end aligned with end
        for (size_t d : cand) {
          if (d == 0 || d > kWindow) continue;
          bool dup = false;
          for (int j = 0; j < nd; ++j) dup |= dist[j] == d;
          if (!dup) dist[nd++] = d;
        }
      }
    }
    size_t best = 0, bd = 0;
    size_t max = std::min(kMaxMatch, n - p);
    uint32_t head = 0;
    if (max >= kMinMatch) std::memcpy(&head, in + p, 4);
    for (int j = 0; j < nd && max >= kMinMatch; ++j) {
      size_t d = dist[j];
      if (d > p) continue;
      uint32_t h;
      std::memcpy(&h, in + p - d, 4);
      if (h != head) continue;  // kMinMatch == 4: a cheap reject
      size_t l = 4 + match_len(in + p + 4, in + p - d + 4, max - 4);
      if (l > best) {
        best = l, bd = d;
        if (l >= kGoodMatch || p + l >= ce) break;
      }
    }
    if (best >= kMinMatch) {
      tok.push_back(match_token(best, bd));
      p += best;
    } else {
      tok.push_back(static_cast<unsigned char>(in[p]));
      ++nlit;
      ++p;
    }
    if (probe_bytes && p >= probe_bytes) {  // checked once: give up on text that does not repeat
      if (nlit * max_literal_share > p) {
        if (literals) *literals = nlit;
        return 0;
      }
      probe_bytes = 0;
    }
    if (tok.size() >= kBlockTokens) {
      write_block(tok.data(), tok.size(), p >= n, bo);
      any_block = true;
      tok.clear();
    }
  }
  for (size_t q = ce; q < n;) {  // lines inside the last match were not walked
    const void* nl = std::memchr(in + q, '\n', n - q);
    if (!nl) break;
    ++nlines;
    q = static_cast<size_t>(static_cast<const char*>(nl) - in) + 1;
  }
  if (!tok.empty() || !any_block) write_block(tok.data(), tok.size(), true, bo);
  bo.flush();
  if (bo.overflow) return 0;
  if (literals) *literals = nlit;
  if (lines) *lines = nlines;
  return static_cast<size_t>(bo.p - out);
}

}  // namespace dftracer
