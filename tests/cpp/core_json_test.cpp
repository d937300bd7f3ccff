// Byte-exact tests of the JSON writer and the gzip member encoder.
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "gzip_member.h"
#include "../../src/format/json_text.h"

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
  EXPECT_EQ(esc("a\xff" "b"), "a\xef\xbf\xbd" "b");            // stray byte
  EXPECT_EQ(esc("\xc3"), "\xef\xbf\xbd");                      // truncated sequence
  EXPECT_EQ(esc("\xc0\x80"), "\xef\xbf\xbd\xef\xbf\xbd");      // overlong NUL
  EXPECT_EQ(esc("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
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
  for (uint64_t v : {9ull, 10ull, 99999999ull, 100000000ull, 100000001ull, 1000000000000007ull,
                     9999999999999999ull, 10000000000000000ull, 10000000000000001ull, 12345678901234567890ull}) {
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

// Level 1 (line_deflate): exact round trip through zlib's inflater on inputs that exercise each
// path: empty, no newline, repeated lines of changing lengths, lines longer than the 32 KiB window
// and the 258-byte match limit, random bytes (all literals), and more than one deflate block.
TEST(CoreGzip, LineDeflateRoundTrip) {
  std::vector<std::string> inputs = {"", "x", "x\n", "\n\n\n\n\n", std::string(70000, 'a') + "\n" + std::string(70000, 'a')};
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

// The fast escaper (16-byte SSE2 blocks, 8-byte SWAR, short-string path) must give exactly the
// bytes of the byte-by-byte reference, wherever the special byte falls.
static std::string esc_ref(const std::string& in) {
  std::string out(json::max_escaped(in.size()) + 1, '\0');
  char* e = json::write_escaped_scalar(&out[0], in.data(), in.size());
  out.resize(static_cast<size_t>(e - out.data()));
  return out;
}

TEST(CoreJson, FastEscapeMatchesScalarOnTrickyInputs) {
  const std::vector<std::string> specials = {
      "\"", "\\", "\n", "\t", "\r", "\b", "\f", std::string("\0", 1), "\x01", "\x1f",
      "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",               // valid 2/3/4-byte UTF-8
      "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\x80", "\xbf", "\xff",   // truncated / stray
      "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80"};  // overlong, surrogate, > U+10FFFF
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
