// Byte-exact tests of the JSON writer and the gzip member encoder.
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../src/format/json_text.h"
#include "../../src/format/member.h"
#include "core_test_util.h"
#include "gzip_member.h"
#include "line_deflate.h"

using namespace dftracer;

static std::string esc(const std::string& in) {
  std::string out(json::max_escaped(in.size()) + 1, '\0');
  char* e = json::write_escaped(&out[0], in.data(), in.size());
  out.resize(static_cast<size_t>(e - out.data()));
  return out;
}

TEST(CoreJson, EscapesQuotesBackslashAndControls) {
  EXPECT_EQ(esc("a\"b"), "a\\\"b");
  EXPECT_EQ(esc("a\\b"), "a\\\\b");
  EXPECT_EQ(esc("l1\nl2\tx\r"), "l1\\nl2\\tx\\r");
  EXPECT_EQ(esc(std::string("n\0z", 3)), "n\\u0000z");
  EXPECT_EQ(esc("\x01\x1f\b\f"), "\\u0001\\u001f\\b\\f");
  EXPECT_EQ(esc("plain ascii /~\x7f"), "plain ascii /~\x7f");
}

TEST(CoreJson, KeepsValidUtf8AndReplacesInvalid) {
  EXPECT_EQ(esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(esc("a\xff"
                "b"),
            "a\xef\xbf\xbd"
            "b");                                                                          // stray byte
  EXPECT_EQ(esc("\xc3"), "\xef\xbf\xbd");                                                  // truncated sequence
  EXPECT_EQ(esc("\xc0\x80"), "\xef\xbf\xbd\xef\xbf\xbd");                                  // overlong NUL
  EXPECT_EQ(esc("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");                  // surrogate
  EXPECT_EQ(esc("\xf4\x90\x80\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // > U+10FFFF
}

TEST(CoreJson, Numbers) {
  char buf[64];
  auto s = [&](char* end) { return std::string(buf, static_cast<size_t>(end - buf)); };
  EXPECT_EQ(s(json::write_i64(buf, 0)), "0");
  EXPECT_EQ(s(json::write_i64(buf, -7)), "-7");
  EXPECT_EQ(s(json::write_i64(buf, INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(s(json::write_u64(buf, UINT64_MAX)), "18446744073709551615");
  EXPECT_EQ(s(json::write_u64(buf, 1732221123456789ull)), "1732221123456789");
  // Block boundaries of the 8-digit writer.
  for (uint64_t v : {9ull, 10ull, 99999999ull, 100000000ull, 100000001ull, 1000000000000007ull, 9999999999999999ull,
                     10000000000000000ull, 10000000000000001ull, 12345678901234567890ull}) {
    EXPECT_EQ(s(json::write_u64(buf, v)), std::to_string(v));
  }
  EXPECT_EQ(s(json::write_double(buf, 2.5)), "2.5");
  EXPECT_EQ(s(json::write_double(buf, 0.1)), "0.1");
  EXPECT_EQ(s(json::write_double(buf, 1.0 / 0.0)), "null");
}

TEST(CoreGzip, MemberHeaderAndRoundTrip) {
  std::string text = "[\n";
  for (int i = 0; i < 1000; ++i) text += "{\"id\":" + std::to_string(i) + ",\"name\":\"read\"}\n";
  MemberEncoder enc(6);
  ASSERT_TRUE(enc.ok());
  std::string m1, m2;
  ASSERT_TRUE(enc.encode(text.data(), text.size(), &m1));
  ASSERT_TRUE(enc.encode("x\n", 2, &m2));
  std::string file = m1 + m2;
  uint64_t tail = 99;
  auto members = dft_test::walk_members(file, &tail);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(tail, 0u);
  EXPECT_EQ(members[0].offset, 0u);
  EXPECT_EQ(members[0].csize, m1.size());
  EXPECT_EQ(members[0].usize, text.size());
  EXPECT_EQ(members[0].lines, 1001u);
  EXPECT_EQ(members[0].version, 1u);
  EXPECT_TRUE(members[0].inflated_ok);
  EXPECT_EQ(members[0].data, text);
  EXPECT_EQ(members[1].offset, m1.size());
  EXPECT_EQ(members[1].usize, 2u);
  EXPECT_EQ(members[1].lines, 1u);
  EXPECT_EQ(members[1].data, "x\n");
  // Fixed header bytes: FLG = FEXTRA, MTIME 0, XFL 0, OS 3, XLEN 20, SI 'D''F', SLEN 16.
  const unsigned char* h = reinterpret_cast<const unsigned char*>(m1.data());
  const unsigned char expect[16] = {0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 3, 20, 0, 'D', 'F', 16, 0};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h[i], expect[i]) << "byte " << i;
  EXPECT_EQ(count_lines("a\nb\n\nc", 6), 3u);
}

// A POSIX I/O mix like bench_core's: a cycle of 7 event names (open64, read, pread64, read,
// pread64, lseek64, close) on random files, with random durations and gaps (numbers of changing
// width). Deterministic.
static std::string io_mix_text(int events) {
  std::string s;
  uint32_t x = 7;
  auto rnd = [&x](uint32_t m) {
    x = x * 1103515245u + 12345u;
    return static_cast<long long>((x >> 8) % m);
  };
  const char* names[7] = {"open64", "read", "pread64", "read", "pread64", "lseek64", "close"};
  long long ts = 1732221123000000LL, off = 0;
  char fname[64] = "";
  for (int i = 0; i < events; ++i) {
    int ph = i % 7;
    if (ph == 0) {
      std::snprintf(fname, sizeof(fname), "/lustre/data/train/img_%06lld.npz", rnd(1024));
      off = 0;
    }
    long long dur = ph >= 1 && ph <= 4 ? 20 + rnd(400) : 1 + rnd(40);
    s += "{\"id\":" + std::to_string(i) + ",\"name\":\"" + names[ph] +
         "\",\"cat\":\"POSIX\",\"pid\":4242,\"tid\":4242,\"ts\":" + std::to_string(ts) +
         ",\"dur\":" + std::to_string(dur) + ",\"ph\":\"X\",\"args\":{\"fname\":\"" + fname + "\",\"fd\":3";
    if (ph >= 1 && ph <= 4) {
      s += ",\"count\":262144,\"ret\":262144,\"offset\":" + std::to_string(off);
      off += 262144;
    } else {
      s += ph == 0 ? ",\"flags\":0,\"ret\":3" : ph == 5 ? ",\"offset\":0,\"ret\":0" : ",\"ret\":0";
    }
    s += "}}\n";
    ts += dur + 1 + rnd(15);
  }
  return s;
}

// Level 1 (line_deflate): exact round trip through zlib's inflater on inputs that exercise each
// path: empty, no newline, repeated lines of changing lengths, lines longer than the 32 KiB window
// and the 258-byte match limit, random bytes (all literals), and more than one deflate block.
TEST(CoreGzip, LineDeflateRoundTrip) {
  std::vector<std::string> inputs = {"", "x", "x\n", "\n\n\n\n\n",
                                     std::string(70000, 'a') + "\n" + std::string(70000, 'a')};
  std::string lines;
  for (int i = 0; i < 200000; ++i)  // ~ 9 MB: several 64 Ki-token blocks
    lines += "{\"id\":" + std::to_string(i * 7) + ",\"name\":\"" + (i % 3 ? "read" : "pwrite64") +
             "\",\"ts\":" + std::to_string(1700000000000000LL + i * 13) + ",\"dur\":" + std::to_string(i % 17) + "}\n";
  inputs.push_back(lines);
  std::string rnd;
  uint32_t x = 12345;
  for (int i = 0; i < 300000; ++i) {
    x = x * 1103515245u + 12345u;
    rnd += static_cast<char>(x >> 23);
  }
  inputs.push_back(rnd);
  inputs.push_back(std::string(40000, 'q') + "\n" + std::string(40000, 'q') + "\n" + rnd.substr(0, 1000));
  inputs.push_back(io_mix_text(3000));  // same-name sources 7 lines back, shifted fields (resync)
  for (const std::string& text : inputs) {
    MemberEncoder enc(1);
    ASSERT_TRUE(enc.ok());
    std::string m;
    ASSERT_TRUE(enc.encode(text.data(), text.size(), &m)) << text.size();
    auto members = dft_test::walk_members(m, nullptr);
    ASSERT_EQ(members.size(), 1u);
    EXPECT_TRUE(members[0].inflated_ok) << text.size();
    EXPECT_EQ(members[0].data, text) << text.size();
    EXPECT_EQ(members[0].usize, text.size());
    EXPECT_EQ(members[0].lines, count_lines(text.data(), text.size()));
  }
  // Trace-like text: within 5 % of the general-purpose deflater at level 6 (here +0.9 %).
  MemberEncoder enc(1), enc6(6);
  std::string m, m6;
  ASSERT_TRUE(enc.encode(lines.data(), lines.size(), &m));
  ASSERT_TRUE(enc6.encode(lines.data(), lines.size(), &m6));
  EXPECT_LE(m.size() * 100, m6.size() * 105) << m.size() << " vs level 6: " << m6.size();
}

// Interleaved event names: line_deflate also copies from the last line with the same name (7
// lines back here) and realigns after numbers of another width, so it stays near the general
// deflater (here 1.17x libdeflate 6; 4.8x when it only tried the last 3 lines).
TEST(CoreGzip, LineDeflateInterleavedNames) {
  std::string text = io_mix_text(20000);
  std::vector<unsigned char> out(line_deflate_bound(text.size()));
  size_t literals = 0, lines = 0;
  size_t n = line_deflate(text.data(), text.size(), out.data(), out.size(), &literals, 0, 0, &lines);
  ASSERT_GT(n, 0u);
  EXPECT_EQ(lines, 20000u);
  MemberEncoder enc6(6);
  std::string m6;
  ASSERT_TRUE(enc6.encode(text.data(), text.size(), &m6));
  EXPECT_LE(n * 100, m6.size() * 125) << n << " vs level 6: " << m6.size();
}

// Level 1 on such a mix: the probe estimates line_deflate's output above 1/20 of the input and
// hands the chunk to the general deflater, so the member is exactly level 6's.
TEST(CoreGzip, LineDeflateProbeHandsMixToGeneral) {
  std::string text = io_mix_text(2000);  // ~ 390 KB > the 128 KiB probe
  MemberEncoder enc1(1), enc6(6);
  std::string m1, m6;
  ASSERT_TRUE(enc1.encode(text.data(), text.size(), &m1));
  ASSERT_TRUE(enc6.encode(text.data(), text.size(), &m6));
  EXPECT_EQ(m1, m6);
  // The probe itself: gives up (0) with min_ratio 20, codes the whole text without it.
  std::vector<unsigned char> out(line_deflate_bound(text.size()));
  EXPECT_EQ(line_deflate(text.data(), text.size(), out.data(), out.size(), nullptr, 128u << 10, 5, nullptr, 20), 0u);
  EXPECT_GT(line_deflate(text.data(), text.size(), out.data(), out.size(), nullptr, 128u << 10, 5, nullptr, 0), 0u);
}

// The 64-bit bit writer stores 8 bytes at a time: with an output buffer of exactly the stream's
// size it still succeeds (byte stores near the end), one byte less gives 0, and nothing past
// out_cap is ever written.
TEST(CoreGzip, LineDeflateExactOutputBuffer) {
  std::string trace;
  for (int i = 0; i < 3000; ++i)
    trace += "{\"id\":" + std::to_string(i) +
             ",\"name\":\"read\",\"ts\":" + std::to_string(1700000000000000LL + i * 13) +
             ",\"dur\":" + std::to_string(i % 17) + "}\n";
  for (const std::string& text : {trace, io_mix_text(500), std::string("x\n")}) {
    std::vector<unsigned char> ref(line_deflate_bound(text.size()));
    size_t n = line_deflate(text.data(), text.size(), ref.data(), ref.size());
    ASSERT_GT(n, 0u);
    for (size_t cap : {n, n - 1}) {
      std::vector<unsigned char> out(cap + 64, 0xA5);  // canary after cap
      size_t got = line_deflate(text.data(), text.size(), out.data(), cap);
      if (cap == n) {
        ASSERT_EQ(got, n);
        EXPECT_EQ(std::memcmp(out.data(), ref.data(), n), 0);
      } else {
        EXPECT_EQ(got, 0u);
      }
      for (size_t i = cap; i < out.size(); ++i) ASSERT_EQ(out[i], 0xA5) << "written past out_cap at " << i;
    }
  }
}

// Small members (a short-lived process's one member): line_deflate takes a fixed-Huffman block
// when it is smaller than a dynamic one. Round trip of tiny inputs through every fixed code range
// (literals 0-143: 8 bits, 144-255: 9 bits; lengths 257-279: 7 bits, 280-285: 8 bits; distances);
// the block type (bits 1-2 of the first deflate byte) follows the smaller size.
TEST(CoreGzip, LineDeflateTinyInputsFixedBlocks) {
  auto block_type = [](const std::string& member) {
    return (static_cast<unsigned char>(member[kMemberHeaderSize]) >> 1) & 3;
  };
  std::vector<std::string> inputs;
  uint32_t x = 777;
  for (size_t n : {1, 2, 3, 4, 5, 17, 100, 143, 144, 255, 256, 300, 1000, 2000}) {
    std::string r;
    for (size_t i = 0; i < n; ++i) {
      x = x * 1103515245u + 12345u;
      r += static_cast<char>(x >> 23);  // every byte value: 8- and 9-bit literal codes
    }
    inputs.push_back(r);
  }
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  inputs.push_back(all);
  std::string line200(199, 'z');
  inputs.push_back(line200 + "\n" + line200 + "\n" + line200 + "\n");  // 199-byte matches: 8-bit lengths
  std::string trace =
      "[\n{\"id\":0,\"name\":\"open\",\"cat\":\"POSIX\",\"pid\":41,\"tid\":41,\"ts\":1700000000000001,\"dur\":5}\n"
      "{\"id\":1,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":41,\"tid\":41,\"ts\":1700000000000009,\"dur\":3}\n"
      "{\"id\":2,\"name\":\"close\",\"cat\":\"POSIX\",\"pid\":41,\"tid\":41,\"ts\":1700000000000013,\"dur\":1}\n";
  inputs.push_back(trace);
  std::vector<int> types;
  for (const std::string& text : inputs) {
    MemberEncoder enc(1);
    std::string m;
    ASSERT_TRUE(enc.encode(text.data(), text.size(), &m)) << text.size();
    auto members = dft_test::walk_members(m, nullptr);
    ASSERT_EQ(members.size(), 1u);
    EXPECT_TRUE(members[0].inflated_ok) << text.size();
    EXPECT_EQ(members[0].data, text) << text.size();
    EXPECT_EQ(members[0].lines, count_lines(text.data(), text.size()));
    types.push_back(block_type(m));
  }
  // Random bytes up to 300 and the 256 byte values: fixed (a dynamic header costs more than its
  // code saves); 1000 and 2000 random bytes, the long repeated lines and the trace lines: dynamic.
  const std::vector<int> expect = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 1, 2, 2};
  EXPECT_EQ(types, expect);
  std::string many;
  for (int i = 0; i < 2000; ++i) many += trace.substr(2);
  MemberEncoder enc(1);
  std::string m;
  ASSERT_TRUE(enc.encode(many.data(), many.size(), &m));
  EXPECT_EQ(block_type(m), 2);
}

// The fast escaper (16-byte SSE2 blocks, 8-byte SWAR, short-string path) must give exactly the
// bytes of the byte-by-byte reference, wherever the special byte falls.
static std::string esc_ref(const std::string& in) {
  std::string out(json::max_escaped(in.size()) + 1, '\0');
  char* e = json::write_escaped_scalar(&out[0], in.data(), in.size());
  out.resize(static_cast<size_t>(e - out.data()));
  return out;
}

TEST(CoreJson, FastEscapeMatchesScalarOnTrickyInputs) {
  const std::vector<std::string> specials = {"\"",
                                             "\\",
                                             "\n",
                                             "\t",
                                             "\r",
                                             "\b",
                                             "\f",
                                             std::string("\0", 1),
                                             "\x01",
                                             "\x1f",
                                             "\xc3\xa9",
                                             "\xe2\x82\xac",
                                             "\xf0\x9f\x98\x80",  // valid 2/3/4-byte UTF-8
                                             "\xc3",
                                             "\xe2\x82",
                                             "\xf0\x9f\x98",
                                             "\x80",
                                             "\xbf",
                                             "\xff",  // truncated / stray
                                             "\xc0\xaf",
                                             "\xe0\x80\xaf",
                                             "\xed\xa0\x80",
                                             "\xf4\x90\x80\x80",
                                             "\xf5\x80\x80\x80"};  // overlong, surrogate, > U+10FFFF
  int checked = 0;
  for (size_t len = 0; len <= 40; ++len) {
    std::string base(len, 'a');
    for (size_t i = 0; i < len; ++i) base[i] = static_cast<char>('a' + (i % 26));
    EXPECT_EQ(esc(base), base) << len;
    EXPECT_TRUE(json::is_plain(base.data(), base.size()));
    for (const std::string& sp : specials) {
      for (size_t pos = 0; pos <= len; ++pos) {  // special at every position, incl. 15/16/17
        std::string in = base.substr(0, pos) + sp + base.substr(pos);
        ASSERT_EQ(esc(in), esc_ref(in)) << "len " << len << " pos " << pos;
        EXPECT_FALSE(json::is_plain(in.data(), in.size()));
        ++checked;
      }
    }
  }
  // Two specials in one 16-byte block, and one straddling the block edge.
  std::string two = "abcdefghijklmn\"\\opq\xe2\x82\xac\xff" + std::string(20, 'z');
  EXPECT_EQ(esc(two), esc_ref(two));
  std::string edge = std::string(15, 'x') + "\xf0\x9f\x98\x80" + std::string(13, 'y');
  EXPECT_EQ(esc(edge), edge);
  EXPECT_EQ(esc_ref("a\xff\"b"), "a\xef\xbf\xbd\\\"b");
  EXPECT_EQ(checked, 24 * 41 * 42 / 2);
  EXPECT_TRUE(json::is_plain("/~\x7f", 3));
}

TEST(CoreJson, FastEscapeMatchesScalarOnAllBytePairs) {
  // Every byte value (and pair) at offsets 14..17 of a 32-byte string.
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += 17) {
      for (size_t pos = 14; pos <= 17; ++pos) {
        std::string in(32, 'q');
        in[pos] = static_cast<char>(a);
        in[pos + 1] = static_cast<char>(b);
        ASSERT_EQ(esc(in), esc_ref(in)) << a << " " << b << " " << pos;
        std::string shortin = in.substr(pos - 2, 6);  // short-string path (4..15 bytes)
        ASSERT_EQ(esc(shortin), esc_ref(shortin)) << a << " " << b;
      }
    }
  }
}

// The tracer's string bytes did not change when json.h moved to src/format/json_text.h: every
// output below was recorded from the pre-move src/core/json.h (commit 8e61ef2) with write_quoted.
TEST(FormatJson, TracerBytesUnchangedOnTrickyInputs) {
  const std::vector<std::pair<std::string, std::string>> golden = {
      {std::string("quote\" back\\slash /solidus", 26), std::string("\"quote\\\" back\\\\slash /solidus\"", 30)},
      {std::string("nul\x00mid", 7), std::string("\"nul\\u0000mid\"", 14)},
      {std::string("ctl \x01\x02\x1f\x7f nl\x0a tab\x09 cr\x0d bs\x08 ff\x0c end", 33),
       std::string("\"ctl \\u0001\\u0002\\u001f\x7f nl\\n tab\\t cr\\r bs\\b ff\\f end\"", 55)},
      {std::string("utf8 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 ok", 22),
       std::string("\"utf8 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 ok\"", 24)},
      {std::string("stray \x80\xbf\xff\xfe cont", 15),
       std::string("\"stray \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd cont\"", 25)},
      {std::string("trunc \xc3", 7), std::string("\"trunc \xef\xbf\xbd\"", 11)},
      {std::string("trunc3 \xe2\x82", 9), std::string("\"trunc3 \xef\xbf\xbd\xef\xbf\xbd\"", 15)},
      {std::string("trunc4 \xf0\x9f\x98", 10), std::string("\"trunc4 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", 18)},
      {std::string("overlong \xc0\xaf \xc1\xbf \xe0\x80\xaf \xf0\x80\x80\xaf", 23),
       std::string(
           "\"overlong \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
           47)},
      {std::string("lone surrogates \xed\xa0\x80 \xed\xbf\xbf and pair \xed\xa0\xbd\xed\xb8\x80", 39),
       std::string(
           "\"lone surrogates \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd and pair \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
           65)},
      {std::string("above max \xf4\x90\x80\x80 \xf5\x80\x80\x80 \xf8\x88\x80\x80\x80", 25),
       std::string(
           "\"above max \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
           53)},
      {std::string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"bbbbbbbbbbbbb\xe2\x82\xac"
                   "ccccccccccccccccc\xff\x0a",
                   76),
       std::string("\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\\"bbbbbbbbbbbbb\xe2\x82\xac"
                   "ccccccccccccccccc\xef\xbf\xbd\\n\"",
                   82)},
      {std::string("/path/to/\"weird\\file\"\x01.npz", 26),
       std::string("\"/path/to/\\\"weird\\\\file\\\"\\u0001.npz\"", 36)},
  };
  for (const auto& [in, want] : golden) {
    std::string out(json::max_escaped(in.size()) + 2, '\0');
    out.resize(static_cast<size_t>(json::write_quoted(&out[0], in) - out.data()));
    EXPECT_EQ(out, want);
    EXPECT_EQ("\"" + esc_ref(in) + "\"", want);  // the scalar reference agrees
    std::string appended = "x";
    json::append_quoted(appended, in);  // the reader's path
    EXPECT_EQ(appended, "x" + want);
  }
}

// repair_utf8 keeps every valid sequence and control byte and replaces each byte of an invalid
// sequence with U+FFFD, the rule of the escaper: repairing first changes no escaped output, and
// a repaired string is its own repair.
TEST(FormatJson, RepairUtf8FollowsTheEscaperRule) {
  std::string r;
  json::repair_utf8("a\xff\"\n\xed\xa0\x80\xc3\xa9", 9, r);
  EXPECT_EQ(r, "a\xef\xbf\xbd\"\n\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9");
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; b += 5) {
      std::string in = "q";
      in += static_cast<char>(a);
      in += static_cast<char>(b);
      in += "\x80\xa0z";
      json::repair_utf8(in.data(), in.size(), r);
      ASSERT_EQ(esc(r), esc(in)) << a << " " << b;
      std::string again;
      json::repair_utf8(r.data(), r.size(), again);
      ASSERT_EQ(again, r) << a << " " << b;
    }
  }
}

// The member header layout of docs/format.md, byte by byte, and its parser's bounds.
TEST(FormatMember, EncodeIsTheDocumentedLayout) {
  using namespace dftracer::format;
  unsigned char h[kMemberHeaderSize];
  encode_member_header(h, 0x01020304u, 0x0a0b0c0du, 7);
  const unsigned char want[kMemberHeaderSize] = {0x1f, 0x8b, 8,   4,  0, 0, 0, 0, 0, 3,    20,
                                                 0,    'D',  'F', 16, 0, 4, 3, 2, 1, 0x0d, 0x0c,
                                                 0x0b, 0x0a, 7,   0,  0, 0, 1, 0, 0, 0};
  EXPECT_EQ(std::string(reinterpret_cast<char*>(h), sizeof h),
            std::string(reinterpret_cast<const char*>(want), sizeof want));
  MemberHeader p = parse_member_header(h, sizeof h);
  ASSERT_TRUE(p.ok);
  EXPECT_TRUE(p.df);
  EXPECT_EQ(p.header_size, kMemberHeaderSize);
  EXPECT_EQ(p.fields.member_size, 0x01020304u);
  EXPECT_EQ(p.fields.text_size, 0x0a0b0c0du);
  EXPECT_EQ(p.fields.lines, 7u);
  EXPECT_EQ(p.fields.version, 1u);
  unsigned char t[kMemberTrailerSize];
  encode_member_trailer(t, 0xdeadbeefu, 5);
  EXPECT_EQ(load_u32(t), 0xdeadbeefu);
  EXPECT_EQ(load_u32(t + 4), 5u);
  // The encoder's members carry exactly this header.
  MemberEncoder enc(6);
  std::string m;
  ASSERT_TRUE(enc.encode("a\nbb\n", 5, &m));
  encode_member_header(h, static_cast<uint32_t>(m.size()), 5, 2);
  EXPECT_EQ(m.substr(0, kMemberHeaderSize), std::string(reinterpret_cast<char*>(h), sizeof h));
}

TEST(FormatMember, ParseChecksBoundsAndFlags) {
  using namespace dftracer::format;
  unsigned char h[64];
  encode_member_header(h, 100, 50, 3);
  for (size_t n = 0; n < kMemberHeaderSize; ++n) {  // cut anywhere: never ok, never reads past n
    MemberHeader p = parse_member_header(h, n);
    EXPECT_FALSE(p.ok) << n;
    EXPECT_FALSE(p.df) << n;
    EXPECT_NE(p.why, nullptr) << n;
  }
  unsigned char bad[kMemberHeaderSize];
  std::memcpy(bad, h, sizeof bad);
  bad[1] = 0x8c;
  EXPECT_STREQ(parse_member_header(bad, sizeof bad).why, "no gzip magic (1f 8b)");
  std::memcpy(bad, h, sizeof bad);
  bad[3] |= 0x20;
  EXPECT_STREQ(parse_member_header(bad, sizeof bad).why, "reserved FLG bits set");
  std::memcpy(bad, h, sizeof bad);
  bad[kVersionOffset] = 2;  // a future version: a gzip member, but not one to hop over
  MemberHeader v2 = parse_member_header(bad, sizeof bad);
  EXPECT_TRUE(v2.ok);
  EXPECT_FALSE(v2.df);
  std::memcpy(bad, h, sizeof bad);
  store_u32(bad + kMemberSizeOffset, kMinMemberSize - 1);
  EXPECT_FALSE(parse_member_header(bad, sizeof bad).df);
  // A foreign header: FNAME "f" and FHCRC after our subfield.
  unsigned char foreign[64];
  std::memcpy(foreign, h, kMemberHeaderSize);
  foreign[3] = kFlagExtra | kFlagName | kFlagHeaderCrc;
  foreign[kMemberHeaderSize] = 'f';
  foreign[kMemberHeaderSize + 1] = 0;
  MemberHeader f = parse_member_header(foreign, kMemberHeaderSize + 4);
  EXPECT_TRUE(f.ok);
  EXPECT_TRUE(f.df);
  EXPECT_EQ(f.header_size, kMemberHeaderSize + 4);
  EXPECT_FALSE(parse_member_header(foreign, kMemberHeaderSize + 1).ok);  // FNAME unterminated
  EXPECT_FALSE(parse_member_header(foreign, kMemberHeaderSize + 3).ok);  // FHCRC cut
  // Plain gzip (no FEXTRA): ok, no 'DF'.
  const unsigned char plain[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  MemberHeader g = parse_member_header(plain, sizeof plain);
  EXPECT_TRUE(g.ok);
  EXPECT_FALSE(g.df);
  EXPECT_EQ(g.header_size, 10u);
}
