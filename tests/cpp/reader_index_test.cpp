// Indexer and batch reader (docs/index.md): the three index kinds with exact checkpoint and line
// counts, read_lines content, a cut-short final member and a corrupt member.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io_util.h"
#include "reader.h"

using namespace dftracer::reader;

namespace {

// A fresh directory under /tmp, removed (with its traces and indexes) at process exit.
std::string tmpdir() {
  static std::vector<std::string> made;
  static struct Cleanup {
    ~Cleanup() {
      for (auto& d : made) std::filesystem::remove_all(d);
    }
  } cleanup;
  char t[] = "/tmp/dft-reader-test-XXXXXX";
  const char* d = ::mkdtemp(t);
  EXPECT_NE(d, nullptr);
  if (!d) return "/tmp";
  made.push_back(d);
  return d;
}

void write_file(const std::string& p, const std::string& data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(data.data(), std::streamsize(data.size()));
}

void put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += char((v >> (8 * i)) & 0xff);
}

// One gzip member of our format (docs/design.md): FEXTRA 'DF' subfield with sizes and line count.
// level 0 gives stored blocks, so compressed offsets map 1:1 onto content bytes.
std::string df_member(const std::string& data, int level = 6) {
  z_stream zs{};
  deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string body(deflateBound(&zs, uLong(data.size())) + 16, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = uInt(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(body.data());
  zs.avail_out = uInt(body.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  body.resize(zs.total_out);
  deflateEnd(&zs);
  uint32_t lines = 0;
  for (char c : data) lines += c == '\n';
  std::string m = std::string("\x1f\x8b\x08\x04\0\0\0\0\0\x03", 10);
  m += char(20);
  m += char(0);
  m += "DF";
  m += char(16);
  m += char(0);
  put32(m, uint32_t(10 + 2 + 20 + body.size() + 8));
  put32(m, uint32_t(data.size()));
  put32(m, lines);
  put32(m, 1);
  m += body;
  put32(m, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(data.data()), uInt(data.size()))));
  put32(m, uint32_t(data.size()));
  return m;
}

// Plain gzip stream (no DF subfield), as `gzip` writes it.
std::string gzip_stream(const std::string& data) {
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, uLong(data.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = uInt(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// Lines "line <i> ..." padded with 'x' to exactly `width` bytes including the newline.
std::string fixed_lines(int first, int n, size_t width) {
  std::string s;
  for (int i = first; i < first + n; ++i) {
    std::string l = "line " + std::to_string(i) + " ";
    l.append(width - 1 - l.size(), 'x');
    s += l + '\n';
  }
  return s;
}

int64_t sum_lines(const IndexInfo& idx) {
  int64_t n = 0;
  for (auto& c : idx.checkpoints) n += c.num_lines;
  return n;
}

}  // namespace

TEST(ReaderIndex, MemberHop) {
  std::string d = tmpdir();
  std::string p = d + "/t.pfw.gz";
  std::string m0 = df_member("[\n" + fixed_lines(0, 99, 40));
  std::string m1 = df_member(fixed_lines(99, 50, 40));
  std::string m2 = df_member(fixed_lines(149, 25, 40));
  write_file(p, m0 + m1 + m2);
  IndexInfo idx = build_index(p, d, true);
  EXPECT_EQ(idx.kind, IndexKind::Member);
  ASSERT_EQ(idx.checkpoints.size(), 3u);
  EXPECT_EQ(idx.lines, 175);
  EXPECT_EQ(idx.uncompressed_bytes, 2 + 174 * 40);
  EXPECT_EQ(idx.compressed_bytes, int64_t(m0.size() + m1.size() + m2.size()));
  EXPECT_EQ(idx.checkpoints[1].compressed_offset, int64_t(m0.size()));
  EXPECT_EQ(idx.checkpoints[2].compressed_offset, int64_t(m0.size() + m1.size()));
  EXPECT_EQ(idx.checkpoints[1].first_line, 100);
  EXPECT_EQ(idx.checkpoints[1].num_lines, 50);
  EXPECT_EQ(idx.checkpoints[2].first_line, 150);
  EXPECT_EQ(idx.checkpoints[2].num_lines, 25);
  EXPECT_EQ(idx.truncated_bytes, 0);
  EXPECT_EQ(idx.lost_bytes, 0);
  // Reopened from the index file (not rebuilt), through the cache as well.
  IndexInfo again = build_index(p, d, false);
  EXPECT_FALSE(again.rebuilt);
  EXPECT_EQ(again.checkpoints.size(), 3u);
  auto cached = open_index(p, d);
  EXPECT_EQ(cached->checkpoints[2].first_line, 150);
  EXPECT_EQ(open_index(p, d).get(), cached.get());
  // read_lines across the member boundary.
  auto lines = read_lines(idx, 98, 4);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], fixed_lines(97, 1, 40).substr(0, 39));
  EXPECT_EQ(lines[2], fixed_lines(99, 1, 40).substr(0, 39));
  EXPECT_EQ(lines[3], fixed_lines(100, 1, 40).substr(0, 39));
  EXPECT_EQ(read_lines(idx, 0, 1), std::vector<std::string>{"["});
  RangeData r = read_checkpoints(idx, 1, 1);
  EXPECT_EQ(r.data, fixed_lines(99, 50, 40));
  EXPECT_EQ(r.first_line, 100);
  EXPECT_THROW(read_checkpoints(idx, 2, 3), std::out_of_range);
}

TEST(ReaderIndex, PlainFile) {
  std::string d = tmpdir();
  std::string p = d + "/t.pfw";
  // 64-byte lines: the 1 MiB checkpoint span falls exactly on line 16384.
  write_file(p, fixed_lines(0, 20000, 64));
  IndexInfo idx = build_index(p, d, true);
  EXPECT_EQ(idx.kind, IndexKind::Plain);
  ASSERT_EQ(idx.checkpoints.size(), 2u);
  EXPECT_EQ(idx.lines, 20000);
  EXPECT_EQ(idx.checkpoints[0].num_lines, 16384);
  EXPECT_EQ(idx.checkpoints[1].first_line, 16384);
  EXPECT_EQ(idx.checkpoints[1].uncompressed_offset, 16384 * 64);
  EXPECT_EQ(idx.checkpoints[1].num_lines, 3616);
  auto lines = read_lines(idx, 16383, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], fixed_lines(16383, 1, 64).substr(0, 63));
  EXPECT_EQ(lines[1], fixed_lines(16384, 1, 64).substr(0, 63));
}

TEST(ReaderIndex, GzipStreamAndMembersWithoutSubfield) {
  std::string d = tmpdir();
  // Three plain gzip members: one checkpoint per member start.
  std::string p = d + "/multi.pfw.gz";
  write_file(p, gzip_stream(fixed_lines(0, 100, 50)) + gzip_stream(fixed_lines(100, 30, 50)) +
                    gzip_stream(fixed_lines(130, 7, 50)));
  IndexInfo idx = build_index(p, d, true);
  EXPECT_EQ(idx.kind, IndexKind::Inflate);
  ASSERT_EQ(idx.checkpoints.size(), 3u);
  EXPECT_EQ(idx.lines, 137);
  for (auto& c : idx.checkpoints) EXPECT_TRUE(c.flags & kMemberStart);
  EXPECT_EQ(idx.checkpoints[1].first_line, 100);
  EXPECT_EQ(idx.checkpoints[2].num_lines, 7);
  EXPECT_EQ(read_lines(idx, 129, 2)[1], fixed_lines(130, 1, 50).substr(0, 49));

  // One 3.2 MB stream: mid-stream checkpoints with windows, each starting at a line.
  std::string q = d + "/single.pfw.gz";
  std::string content = fixed_lines(0, 50000, 64);
  write_file(q, gzip_stream(content));
  IndexInfo s = build_index(q, d, true);
  EXPECT_EQ(s.kind, IndexKind::Inflate);
  EXPECT_EQ(s.lines, 50000);
  EXPECT_EQ(sum_lines(s), 50000);
  ASSERT_GE(s.checkpoints.size(), 2u);
  EXPECT_LE(s.checkpoints.size(), 4u);
  for (size_t i = 1; i < s.checkpoints.size(); ++i) {
    const Checkpoint& c = s.checkpoints[i];
    EXPECT_EQ(c.first_line, s.checkpoints[i - 1].first_line + s.checkpoints[i - 1].num_lines);
    EXPECT_EQ(c.uncompressed_offset, c.first_line * 64);
    EXPECT_TRUE(c.has_window);
  }
  // Through the cached index (windows loaded from the index file on demand).
  auto cached = open_index(q, d);
  EXPECT_TRUE(cached->checkpoints[1].window.empty());
  int64_t l = cached->checkpoints[1].first_line;
  RangeData r = read_checkpoints(*cached, 1, 1);
  EXPECT_EQ(r.data, content.substr(size_t(l * 64), size_t(cached->checkpoints[1].num_lines * 64)));
  auto lines = read_lines(*cached, l - 1, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], fixed_lines(int(l), 1, 64).substr(0, 63));
}

TEST(ReaderIndex, TruncatedFinalMember) {
  std::string d = tmpdir();
  std::string p = d + "/cut.pfw.gz";
  std::string m0 = df_member(fixed_lines(0, 10, 32));
  std::string body = fixed_lines(10, 20, 32);  // 640 bytes
  std::string m1 = df_member(body, 0);         // stored: 32 header + 5 block header + data + 8
  // Cut after 32 + 5 + 100 bytes: 3 whole lines (96 bytes) of the second member survive.
  write_file(p, m0 + m1.substr(0, 32 + 5 + 100));
  IndexInfo idx = build_index(p, d, true);
  EXPECT_EQ(idx.kind, IndexKind::Member);
  EXPECT_EQ(idx.lines, 13);
  EXPECT_EQ(idx.truncated_bytes, 640 - 96);
  ASSERT_EQ(idx.checkpoints.size(), 2u);
  EXPECT_TRUE(idx.checkpoints[1].flags & kTruncated);
  EXPECT_EQ(idx.checkpoints[1].num_lines, 3);
  RangeData r = read_checkpoints(idx, 0, 1);
  EXPECT_EQ(r.data, fixed_lines(0, 13, 32));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("544 bytes dropped"), std::string::npos) << r.warnings[0];
}

TEST(ReaderIndex, CorruptMemberLost) {
  std::string d = tmpdir();
  std::string p = d + "/bad.pfw.gz";
  std::string m0 = df_member(fixed_lines(0, 10, 32));
  std::string m1 = df_member(fixed_lines(10, 20, 32), 0);
  std::string m2 = df_member(fixed_lines(30, 5, 32));
  m1[32 + 5 + 50] ^= 0x55;  // content byte: the CRC check fails
  write_file(p, m0 + m1 + m2);
  IndexInfo idx = build_index(p, d, true);
  ASSERT_EQ(idx.checkpoints.size(), 3u);
  EXPECT_EQ(idx.lines, 35);
  RangeData r = read_checkpoints(idx, 0, 2);
  EXPECT_EQ(r.data, fixed_lines(0, 10, 32) + fixed_lines(30, 5, 32));
  EXPECT_EQ(r.lost_lines, 20);
  EXPECT_EQ(r.lost_bytes, 640);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("20 lines (640 bytes) lost"), std::string::npos) << r.warnings[0];
}

TEST(ReaderIndex, StaleIndexRebuilt) {
  std::string d = tmpdir();
  std::string p = d + "/s.pfw.gz";
  write_file(p, df_member(fixed_lines(0, 5, 32)));
  EXPECT_EQ(open_index(p, d)->lines, 5);
  ::usleep(20000);
  write_file(p, df_member(fixed_lines(0, 5, 32)) + df_member(fixed_lines(5, 2, 32)));
  auto idx = open_index(p, d);
  EXPECT_TRUE(idx->rebuilt);
  EXPECT_EQ(idx->lines, 7);
  EXPECT_EQ(idx->checkpoints.size(), 2u);
}

// count_newlines (the line-count check of every inflated member) against std::count: lengths
// around its 32- and 128-byte blocks and its 252-block lane sums, every density (all '\n' fills
// a byte lane to its limit), unaligned starts.
TEST(ReaderIndex, CountNewlines) {
  uint64_t x = 88172645463325252ull;  // xorshift64: deterministic
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int t = 0; t < 3000; ++t) {
    size_t n = t < 600 ? size_t(t) : size_t(next() % 70000);
    unsigned dens = unsigned(next() % 5);  // 0: every byte '\n'; else about dens in 8
    std::string s(n + 1, 'x');
    for (char& c : s) c = (dens == 0 || next() % 8 < dens) ? '\n' : char(next());
    size_t off = next() % 2;
    size_t len = n - std::min(n, off);
    ASSERT_EQ(count_newlines(s.data() + off, len), std::count(s.data() + off, s.data() + off + len, '\n'))
        << "n=" << len << " density " << dens;
  }
}

// TextBuffer (the text of a read): std::string's observable behaviour where the readers rely on
// it: a '\0' after the last byte, contents kept when it grows, copies and moves.
TEST(ReaderIndex, TextBuffer) {
  TextBuffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data()[0], '\0');
  b.append("abc", 3);
  EXPECT_EQ(b, "abc");
  EXPECT_EQ(b.data()[3], '\0');
  b.resize(2);
  EXPECT_EQ(b, "ab");
  EXPECT_EQ(b.data()[2], '\0');
  std::string big(100000, 'y');
  b.append(big.data(), big.size());
  EXPECT_EQ(b.size(), 100002u);
  EXPECT_EQ(b.view().substr(0, 3), "aby");
  EXPECT_GE(b.capacity(), b.size());
  EXPECT_EQ(b.data()[b.size()], '\0');
  size_t n = b.size();
  b.resize(n + 10);  // new bytes are the caller's to write
  std::memcpy(b.data() + n, "0123456789", 10);
  EXPECT_EQ(b.view().substr(n), "0123456789");
  TextBuffer c = b;
  EXPECT_EQ(c, b.view());
  TextBuffer d = std::move(c);
  EXPECT_EQ(d, b.view());
  EXPECT_TRUE(c.empty());
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_GE(b.capacity(), n + 10);  // storage kept for the next read
  EXPECT_EQ(b.data()[0], '\0');
  b.reserve(10);
  d = b;
  EXPECT_TRUE(d.empty());
}
