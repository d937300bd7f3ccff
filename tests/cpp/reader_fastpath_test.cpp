// The parser's fast path (lines in the tracer's own layout, hand-scanned) must give exactly what
// the simdjson path gives: same lines parsed through both (Parser::set_fast_path) and every
// column, null, args dtype, metadata record and counter compared (columns_diff.h).
#include <gtest/gtest.h>
#include <simdjson.h>
#include <zlib.h>

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "columns_diff.h"
#include "reader.h"

using namespace dftracer::reader;

namespace {

struct Parsed {
  EventColumns cols;
  FileContext ctx;
  int64_t fast_lines = 0;
};

// `pad`: the padding's bytes; '\0' (as the text of a read has after its last byte) lets the fast
// path leave out its length checks (Parser::Impl::fast_line<true>), anything else keeps them.
Parsed parse(const std::string& text, bool fast, const ArgsProjection& projection = {}, char pad = ' ') {
  std::string buf = text;
  size_t n = buf.size();
  buf.append(simdjson::SIMDJSON_PADDING, pad);
  Parsed r;
  Parser p;
  p.set_fast_path(fast);
  p.set_args_projection(projection);
  p.parse(buf.data(), n, buf.size(), r.ctx, r.cols);
  Parser::finish(r.cols);
  r.fast_lines = p.fast_lines();
  return r;
}

// Parses `text` both ways, expects identical results; returns the fast path's line count. Also
// with args projections (both paths): the same rows, core columns, metadata and counters, and
// exactly the full parse's args columns that the projection keeps.
int64_t expect_same(const std::string& text) {
  Parsed f = parse(text, true);
  Parsed s = parse(text, false);
  EXPECT_EQ(s.fast_lines, 0);
  EXPECT_EQ(columns_diff(f.cols, s.cols), "") << text.substr(0, 400);
  Parsed z = parse(text, true, {}, '\0');  // the fast path without length checks
  EXPECT_EQ(z.fast_lines, f.fast_lines);
  EXPECT_EQ(columns_diff(z.cols, s.cols), "") << text.substr(0, 400);
  // cut anywhere, the last line ends at the '\0': same as simdjson on the same bytes
  for (size_t cut : {text.size() / 3, text.size() / 2, text.size() - std::min<size_t>(text.size(), 7)}) {
    std::string head = text.substr(0, cut);
    EXPECT_EQ(columns_diff(parse(head, true, {}, '\0').cols, parse(head, false).cols), "") << head.substr(0, 400);
  }
  for (const ArgsProjection& proj :
       {ArgsProjection::only({}), ArgsProjection::only({"count", "k", "arg_size", "epoch", "ret_min"})}) {
    EventColumns want = f.cols;
    want.args.erase(std::remove_if(want.args.begin(), want.args.end(),
                                   [&](const ArgColumn& a) { return !proj.wants(a.key); }),
                    want.args.end());
    for (bool fast : {true, false})
      EXPECT_EQ(columns_diff(parse(text, fast, proj).cols, want), "")
          << (fast ? "fast " : "simdjson ") << text.substr(0, 400);
  }
  EXPECT_EQ(f.ctx.fh, s.ctx.fh);
  EXPECT_EQ(f.ctx.hh, s.ctx.hh);
  EXPECT_EQ(f.ctx.sh, s.ctx.sh);
  EXPECT_EQ(f.ctx.hostname, s.ctx.hostname);
  return f.fast_lines;
}

const char* kPrefix =
    R"({"id":7,"name":"read","cat":"POSIX","pid":10,"tid":11,"ts":1700000000000123,"dur":45,"ph":"X","args":{)";

// Lines in the fast layout (each must take the fast path).
const std::vector<std::string> kFast = {
    std::string(kPrefix) +
        R"("hostname":"node00","fname":"/p/a.npz","fd":4,"count":65536,"ret":65536,"offset":0,"epoch":0}})",
    R"({"id":8,"name":"fread","cat":"STDIO","pid":10,"tid":11,"ts":1700000000000200,"dur":3,"ph":"X","args":{"hostname":"node00","fname":"/p/a.npz","size":4096,"count":16,"ret":16}})",
    R"({"name":"compute","cat":"compute","pid":-1,"tid":0,"ts":0,"dur":999999999999999999,"ph":"X","args":{"flops":5.25e8,"x":-0.0,"y":1E-3,"z":0.1,"w":123456789012.5}})",
    R"({"id":9,"name":"app","cat":"app","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":10,"name":"","cat":"","pid":1,"tid":2,"ts":3,"dur":4,"ph":"","args":{}})",
    R"({"id":11,"name":"t","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a":true,"b":false,"c":null,"d":"17","e":"-3","f":"12a","g":"","h":"x y"}})",
    R"({"id":12,"name":"t","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a_key_longer_than_16_bytes":1,"dup":1,"dup":2}})",
    R"({"id":13,"name":"FH","cat":"dftracer","pid":1,"tid":1,"ts":5,"dur":0,"ph":"M","args":{"name":"/p/b","value":77}})",
    R"({"id":14,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":6,"dur":1,"ph":"X","args":{"fhash":77,"ret":-1}})",
    R"({"id":15,"name":"start","cat":"dftracer","pid":1,"tid":1,"ts":1,"dur":2,"ph":"X","args":{"v":1}})",
    R"({"id":16,"name":"t","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a":1.5,"b":"s","c":123456789012345678,"d":"~)"
    "\x7f"
    R"("}})",
};

// Lines the fast path must hand to simdjson (escapes, unicode, other layouts, unusual numbers).
const std::vector<std::string> kSlow = {
    std::string(kPrefix) + R"("fname":"/p/caf\u00e9","ret":1}})",
    std::string(kPrefix) + "\"fname\":\"/p/caf\xc3\xa9\",\"ret\":1}}",
    std::string(kPrefix) + "\"fname\":\"/p/bad\xff\",\"ret\":1}}",
    std::string(kPrefix) + R"("fn\"ame":"x","ret":1}})",
    std::string(kPrefix) + R"("a":1234567890123456789,"b":18446744073709551615,"c":99999999999999999999}})",
    std::string(kPrefix) + R"("a":-0,"b":01,"c":1.,"d":.5,"e":1e400,"f":1e}})",
    std::string(kPrefix) + R"("a":{"x":1},"b":[1,2]}})",
    std::string(kPrefix) + R"("a":1 }})",
    std::string(kPrefix) + R"("a":1}}x)",
    std::string(kPrefix) + R"("a":1})",
    std::string(kPrefix) + R"("a":tru}})",
    std::string(kPrefix) + "\"a\":\"tab\there\"}}",
    R"({"id":1,"name":"n\u0041me","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":1,"cat":"c","name":"n","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"ph":"i","s":"t","args":{"a":1}})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a":1},"extra":2})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":1,"args":{"a":1}})",
    R"({"id":1,"name":"n","cat":"c","pid":"1","tid":"2","ts":"3","dur":"4","ph":"X","args":{"a":"1"}})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3.5,"dur":4,"ph":"X"})",
    R"({"id":"x","name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":1, "name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":5})",
    R"({"id":1,"name":"HH","cat":"dftracer","pid":1,"tid":1,"ph":"M","args":{"name":"h1","value":5}})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a":1)",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":)",
    R"(not json)",
    // invalid values (issue 15): beyond int64, an end time beyond int64, a second closing brace
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":9223372036854775808,"ph":"X"})",
    R"({"id":1,"name":"n","cat":"c","pid":18446744073709551615,"tid":2,"ts":3,"dur":4,"ph":"X"})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":9223372036854775000,"dur":900,"ph":"X"})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X"}})",
    R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"a":1}}})",
};

std::string join(const std::vector<std::string>& v) {
  std::string s = "[\n";
  for (auto& l : v) s += l + "\n";
  return s;
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  if (!f) return out;
  char b[1 << 16];
  int n;
  while ((n = gzread(f, b, sizeof b)) > 0) out.append(b, size_t(n));
  gzclose(f);
  return out;
}

}  // namespace

TEST(ReaderFastPath, OwnLayoutTakesFastPathAndAgrees) {
  for (auto& l : kFast) EXPECT_EQ(expect_same(l + "\n"), 1) << l;
  EXPECT_EQ(expect_same(join(kFast)), int64_t(kFast.size()));
}

// The text of a read ends with '\0' and the fast path then skips its length checks: a last line
// cut at every byte (in a literal, a key matched in place by its slot (keys of 14, 15, 16 bytes),
// a number, a string) must give what simdjson gives on the same bytes.
TEST(ReaderFastPath, CutAtEveryByteBeforeNul) {
  const std::string first =
      R"({"id":1,"name":"t","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{"k":1,"abcdefghijklmn":2,"abcdefghijklmno":3.5,"abcdefghijklmnop":"s","z":true}})"
      "\n";
  const std::string second =
      R"({"id":2,"name":"t","cat":"c","pid":1,"tid":2,"ts":30,"dur":4,"ph":"X","args":{"k":10,"abcdefghijklmn":20,"abcdefghijklmno":35.5,"abcdefghijklmnop":"ss","z":null}})";
  for (size_t cut = 0; cut <= second.size(); ++cut) {
    std::string text = first + second.substr(0, cut);
    Parsed z = parse(text, true, {}, '\0');
    EXPECT_EQ(columns_diff(z.cols, parse(text, false).cols), "") << cut;
    EXPECT_EQ(z.cols.rows, cut == second.size() ? 2 : 1) << cut;
    EXPECT_EQ(z.fast_lines, cut == second.size() ? 2 : 1) << cut;
  }
}

// The fast path takes a line's `name","cat":"S"`, `,"pid":N,"tid":N,"ts":` and
// `,"ph":"X","args":{"` by comparing them with the bytes of an earlier line (the same bytes give
// the same values). Each line here follows the line it was made from, with one byte replaced,
// inserted or deleted at every position: what the fast path takes must equal simdjson's result.
TEST(ReaderFastPath, EditsAfterTheSameLineAgree) {
  const std::vector<std::string> bases = {
      std::string(kPrefix) + R"("hostname":"node00","fname":"/p/a.npz","fd":4,"ret":0}})",
      R"({"id":8,"name":"fread","cat":"STDIO","pid":10000,"tid":10002,"ts":1700000000000200,"dur":3,"ph":"X","args":{"size":4096}})",
      R"({"name":"abcdefghijklmnop","cat":"abcdefghijklmnop","pid":1,"tid":-2,"ts":3,"dur":4,"ph":"X","args":{}})",
  };
  const std::string alphabet = "09-\\\",X}.:e ";  // (with a backslash and a quote)
  for (const std::string& base : bases) {
    std::vector<std::string> lines;
    for (size_t pos = 0; pos < base.size(); ++pos) {
      for (char c : alphabet) {
        for (int op = 0; op < 3; ++op) {
          std::string l = base;
          if (op == 0) l[pos] = c;
          else if (op == 1) l.insert(pos, 1, c);
          else if (c == '0') l.erase(pos, 1);  // (one deletion per position)
          else continue;
          lines.push_back(base);
          lines.push_back(l);
        }
      }
    }
    int64_t fast = expect_same(join(lines));
    EXPECT_GE(fast, int64_t(lines.size() / 2)) << base;  // every base line, at least
    if (HasFailure()) break;
  }
  // more names than the name cache has entries (256), each line twice, then again
  std::vector<std::string> lines;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 600; ++i)
      for (int k = 0; k < 2; ++k)
        lines.push_back(R"({"id":1,"name":"n)" + std::to_string(i) + R"(","cat":"c)" + std::to_string(i % 7) +
                        R"(","pid":1,"tid":)" + std::to_string(i % 3) + R"(,"ts":3,"dur":4,"ph":"X","args":{"a":)" +
                        std::to_string(i) + "}}");
  EXPECT_EQ(expect_same(join(lines)), int64_t(lines.size()));
}

TEST(ReaderFastPath, UnusualLinesFallBackAndAgree) {
  for (auto& l : kSlow) EXPECT_EQ(expect_same(l + "\n"), 0) << l;
  std::vector<std::string> mixed;
  for (size_t i = 0; i < kSlow.size(); ++i) {
    mixed.push_back(kSlow[i]);
    mixed.push_back(kFast[i % kFast.size()]);
  }
  EXPECT_EQ(expect_same(join(mixed)), int64_t(kSlow.size()));
}

TEST(ReaderFastPath, LineEndsAndIndentation) {
  // trailing ',' / '\r' / spaces and leading spaces are trimmed first; last line without '\n'
  std::string t = "[\n " + kFast[0] + ",\n" + kFast[1] + "\r\n\t" + kFast[2] + " \n" + kFast[3] + "\n\n" + kFast[4];
  EXPECT_EQ(expect_same(t), 5);
  EXPECT_EQ(expect_same(kFast[0] + "\n]\n"), 1);
  EXPECT_EQ(expect_same(kFast[0] + "x\n" + kFast[1]), 1);  // trailing garbage: simdjson decides
}

TEST(ReaderFastPath, IntegersOfEveryLength) {
  // 1-18 digits take the fast path (8 digits at a time), 19-20 digits go to simdjson
  std::vector<std::string> v;
  std::string digits = "98765432109876543210";
  for (size_t n = 1; n <= 20; ++n) {
    std::string d = digits.substr(0, n);
    v.push_back(R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":)" + d + R"(,"dur":)" + d +
                R"(,"ph":"X","args":{"a":)" + d + R"(,"b":-)" + d + R"(,"c":)" + d + ".5}}");
  }
  EXPECT_EQ(expect_same(join(v)), 18);
  for (auto& l : v) expect_same(l + "\n");  // each line alone: number near the end of the buffer
}

TEST(ReaderFastPath, LongFloatsExact) {
  // simdjson 3.0.1's get_number() gives 0 for these; both paths must give the nearest double
  std::string l = std::string(kPrefix) + R"("a":123456789.123456789123,"b":12345678901234567.25}})";
  for (bool fast : {true, false}) {
    Parsed p = parse(l + "\n", fast);
    ASSERT_EQ(p.cols.rows, 1);
    const ArgColumn* a = nullptr;
    const ArgColumn* b = nullptr;
    for (auto& c : p.cols.args) {
      if (c.key == "a") a = &c;
      if (c.key == "b") b = &c;
    }
    ASSERT_TRUE(a && b);
    ASSERT_EQ(a->type, ArgType::Float);
    EXPECT_EQ(a->floats[0], 123456789.123456789123);
    EXPECT_EQ(b->floats[0], 12345678901234567.25);
  }
}

TEST(ReaderFastPath, TypePromotionAcrossPaths) {
  // one args key seen as int (fast), float (fast), escaped string (slow), then int again (fast)
  std::vector<std::string> v = {std::string(kPrefix) + R"("k":1}})", std::string(kPrefix) + R"("k":2.5}})",
                                std::string(kPrefix) + R"("k":"a\"b"}})", std::string(kPrefix) + R"("k":3,"m":null}})",
                                std::string(kPrefix) + R"("m":"7"}})"};
  EXPECT_EQ(expect_same(join(v)), 4);
}

TEST(ReaderFastPath, MutatedLinesAgree) {
  // Deterministic byte mutations of fast-layout lines: whatever the fast path accepts must
  // match simdjson exactly, and whatever it refuses goes through simdjson.
  std::mt19937 rng(12345);
  const std::string alphabet = "\"\\,:{}[]0123456789-+.eEtfnul x\t\x80\xc3\xa9\x01";
  int64_t fast_total = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<std::string> lines;
    for (int k = 0; k < 8; ++k) {
      std::string l = kFast[rng() % kFast.size()];
      int edits = 1 + int(rng() % 2);
      for (int m = 0; m < edits && !l.empty(); ++m) {
        size_t pos = rng() % l.size();
        char c = alphabet[rng() % alphabet.size()];
        switch (rng() % 3) {
          case 0: l[pos] = c; break;
          case 1: l.erase(pos, 1); break;
          default: l.insert(pos, 1, c); break;
        }
      }
      lines.push_back(l);
    }
    fast_total += expect_same(join(lines));
    if (HasFailure()) break;
  }
  EXPECT_GT(fast_total, 0);
}

TEST(ReaderFastPath, FixturesAgree) {
  const std::string cm1 = std::string(DFTRACER_TEST_DATA) + "/dftracer-v1.0.5-cm1";
  DIR* d = opendir(cm1.c_str());
  ASSERT_NE(d, nullptr);
  int files = 0;
  int64_t fast = 0;
  while (dirent* ent = readdir(d)) {
    std::string n = ent->d_name;
    if (n.size() < 7 || n.compare(n.size() - 7, 7, ".pfw.gz") != 0) continue;
    if (++files > 6) break;
    fast += expect_same(gunzip(cm1 + "/" + n));
  }
  closedir(d);
  EXPECT_EQ(files, 7);
  EXPECT_GT(fast, 0);  // CM1 events use the tracer's key order
  EXPECT_EQ(expect_same(gunzip(std::string(DFTRACER_TEST_DATA) + "/dftracer-legacy/test.pfw.gz")), 0);
}

TEST(ReaderFastPath, OutOfRangeValuesAndTrailingContentAreSkipped) {
  // The last five kSlow lines are invalid: both paths skip (and count) them, no wrapped value.
  for (size_t i = kSlow.size() - 5; i < kSlow.size(); ++i) {
    for (bool fast : {true, false}) {
      std::string buf = kSlow[i] + "\n";
      size_t n = buf.size();
      buf.append(64, '\0');
      Parser p;
      p.set_fast_path(fast);
      FileContext ctx;
      EventColumns cols;
      p.parse(buf.data(), n, buf.size(), ctx, cols);
      EXPECT_EQ(cols.rows, 0) << kSlow[i];
      EXPECT_EQ(cols.skipped_lines, 1) << kSlow[i];
    }
  }
}

namespace {
// The dictionaries themselves (not only the decoded values): the same strings in the same order,
// so a line the fast path gave up added nothing, and codes reused from a span are the codes.
void expect_same_dictionaries(const std::string& text) {
  for (char pad : {' ', '\0'}) {
    Parsed f = parse(text, true, {}, pad);
    Parsed s = parse(text, false);
    EXPECT_EQ(std::vector<std::string>(f.cols.hostname.categories.begin(), f.cols.hostname.categories.end()),
              std::vector<std::string>(s.cols.hostname.categories.begin(), s.cols.hostname.categories.end()));
    EXPECT_EQ(std::vector<std::string>(f.cols.fname.categories.begin(), f.cols.fname.categories.end()),
              std::vector<std::string>(s.cols.fname.categories.begin(), s.cols.fname.categories.end()));
    EXPECT_EQ(std::vector<std::string>(f.cols.cat.categories.begin(), f.cols.cat.categories.end()),
              std::vector<std::string>(s.cols.cat.categories.begin(), s.cols.cat.categories.end()));
    EXPECT_EQ(std::vector<std::string>(f.cols.ph.categories.begin(), f.cols.ph.categories.end()),
              std::vector<std::string>(s.cols.ph.categories.begin(), s.cols.ph.categories.end()));
    EXPECT_EQ(f.cols.fname.codes, s.cols.fname.codes);
    EXPECT_EQ(f.cols.hostname.codes, s.cols.hostname.codes);
    EXPECT_EQ(f.cols.cat.codes, s.cols.cat.codes);
    EXPECT_EQ(f.cols.ph.codes, s.cols.ph.codes);
  }
}

std::string event(const std::string& name, const std::string& cat, const std::string& args, const char* ph = "X",
                  int64_t ts = 3) {
  return R"({"id":1,"name":")" + name + R"(","cat":")" + cat + R"(","pid":1,"tid":2,"ts":)" + std::to_string(ts) +
         R"(,"dur":4,"ph":")" + ph + R"(","args":{)" + args + "}}";
}
}  // namespace

// i26-scan: the last hostname and file name are kept as spans of their bytes with their codes
// (Impl::ValSpan), and a line whose name and category (or `,"ph":"X","args":{"`) match a span
// takes the category (phase) code from it. Runs of equal values, then every kind of change.
TEST(ReaderFastPath, HostAndFileSpansAgree) {
  std::vector<std::string> lines;
  const std::vector<std::string> names = {"read", "write", "open64", "close", "n16_____________"};
  const std::vector<std::string> files = {"/p/a.npz",
                                          "/p/a.npzz",
                                          "/p/a.np",
                                          "/p/b.npz",
                                          "",
                                          "x",
                                          std::string(62, 'f'),
                                          std::string(63, 'f'),
                                          std::string(64, 'f'),
                                          std::string(61, 'f') + "g",
                                          "/p/a.npz\\u0041"};
  const std::vector<std::string> hosts = {"node00", "node01", "node0", "node000", "", "\\\"q"};
  std::mt19937 rng(26);
  std::string f = files[0], h = hosts[0];
  for (int i = 0; i < 3000; ++i) {
    const std::string& n = names[rng() % names.size()];
    // runs: the file and host change now and then
    if (rng() % 6 == 0) f = files[rng() % files.size()];
    if (rng() % 20 == 0) h = hosts[rng() % hosts.size()];
    std::string args;
    switch (rng() % 9) {
      case 0: args = R"("fname":")" + f + R"(","hostname":")" + h + R"(","ret":1)"; break;           // other order
      case 1: args = R"("hostname":")" + h + R"(","hostname":"other","fname":")" + f + "\""; break;  // later wins
      case 2: args = R"("hostname":")" + h + R"(","fname":5,"fname":")" + f + "\""; break;
      case 3: args = R"("hostname":")" + h + R"(","fname":")" + f + R"(","ret":1,"x":{"a":1})"; break;  // not taken
      case 4: args = R"("hostname":")" + h + R"(","fname":")" + f + R"(")"; break;
      default: args = R"("hostname":")" + h + R"(","fname":")" + f + R"(","fd":3,"ret":)" + std::to_string(i); break;
    }
    const char* cat = rng() % 50 == 0 ? "dftracer" : (rng() % 10 == 0 ? "STDIO" : "POSIX");
    const char* ph = rng() % 30 == 0 ? "M" : (rng() % 30 == 0 ? "Y" : "X");
    int64_t ts = rng() % 100 == 0 ? -1 : 3 + i;
    lines.push_back(event(n, cat, args, ph, ts));
  }
  int64_t fast = expect_same(join(lines));
  EXPECT_GT(fast, int64_t(lines.size() / 2));
  expect_same_dictionaries(join(lines));
  // a file name, then the same line edited at every byte of the value (and its closing quote)
  const std::string base = event("read", "POSIX", R"("hostname":"node00","fname":"/p/lustre/img_00027.npz","ret":1)");
  size_t v = base.find("/p/lustre");
  std::vector<std::string> edits;
  for (size_t pos = v - 1; pos < v + 26; ++pos)
    for (char c : std::string("a\"\\,}0 ")) {
      std::string l = base;
      l[pos] = c;
      edits.push_back(base);
      edits.push_back(base);
      edits.push_back(l);
      l = base;
      l.insert(pos, 1, c);
      edits.push_back(l);
    }
  expect_same(join(edits));
  expect_same_dictionaries(join(edits));
}

// i26-scan: decimals of <= 15 digits without an exponent are read as double(W) / 10^F (exact
// fast path); they must be the correctly rounded doubles strtod gives, as from_chars does.
TEST(ReaderFastPath, ShortDecimalsExact) {
  std::mt19937_64 rng(2026);
  std::vector<std::string> texts = {"0.5",
                                    "-0.0",
                                    "0.0",
                                    "0.1",
                                    "0.2",
                                    "0.3",
                                    "1.5",
                                    "-1.5",
                                    "9.999999999999999",
                                    "999999999999999.9",
                                    "99999999999999.99",
                                    "0.000000000000001",
                                    "123456789.123456",
                                    "520983206.413",
                                    "1.7976931348623157",
                                    "4.9406564584124654",
                                    "2.2250738585072014",
                                    "0.30000000000000004",
                                    "1234567890123.45",
                                    "12345678901234.56"};
  for (int i = 0; i < 4000; ++i) {
    int nd = 1 + int(rng() % 15), nf = 1 + int(rng() % 16);  // some past 15 digits: from_chars
    std::string s = (rng() % 4 == 0) ? "-" : "";
    s += std::to_string(1 + rng() % 9);
    for (int k = 1; k < nd; ++k) s += char('0' + rng() % 10);
    if (rng() % 8 == 0) s = s[0] == '-' ? "-0" : "0";  // a zero integer part
    s += '.';
    for (int k = 0; k < nf; ++k) s += char('0' + rng() % 10);
    texts.push_back(s);
  }
  std::vector<std::string> lines;
  for (auto& t : texts) lines.push_back(std::string(kPrefix) + R"("a":)" + t + R"(,"b":1}})");
  for (char pad : {' ', '\0'}) {
    Parsed p = parse(join(lines), true, {}, pad);
    ASSERT_EQ(p.fast_lines, int64_t(lines.size()));
    const ArgColumn* a = nullptr;
    for (auto& c : p.cols.args)
      if (c.key == "a") a = &c;
    ASSERT_TRUE(a);
    ASSERT_EQ(a->type, ArgType::Float);
    ASSERT_EQ(a->floats.size(), texts.size());
    for (size_t k = 0; k < texts.size(); ++k) {
      double want = std::strtod(texts[k].c_str(), nullptr);
      // bit for bit (the sign of -0.0 too)
      EXPECT_EQ(std::memcmp(&a->floats[k], &want, sizeof want), 0) << texts[k] << " " << a->floats[k];
    }
  }
  expect_same(join(lines));
}

// i26-scan: category and phase codes come from the spans only for the same bytes: categories
// that change under a kept name, metadata lines and skipped lines between, phases other than X.
TEST(ReaderFastPath, CategoryAndPhaseCodesFromSpans) {
  std::vector<std::string> lines;
  std::mt19937 rng(7);
  const std::vector<std::string> cats = {"POSIX", "POSIX2", "POSI", "dftracer", "", "STDIO", "app"};
  const std::vector<const char*> phs = {"X", "X", "X", "Y", "M", "", "XX"};
  for (int i = 0; i < 4000; ++i) {
    std::string name = "n" + std::to_string(rng() % 300);  // past the 256 cache entries
    const std::string& cat = cats[rng() % (rng() % 3 == 0 ? cats.size() : 2)];
    lines.push_back(event(name, cat, R"("a":1)", phs[rng() % phs.size()], rng() % 40 == 0 ? -5 : i));
    if (rng() % 3 == 0) lines.push_back(lines.back());
  }
  EXPECT_GT(expect_same(join(lines)), int64_t(lines.size() / 2));
  expect_same_dictionaries(join(lines));
}

// i27-scan: a plain integer is no longer tested for a following '.', 'e' or 'E'; the separator
// test sees that byte and the value is then read again as a number. Every line here is valid and
// in the tracer's layout, so every one must take the fast path (a broken re-read would give it
// up, or keep the integer part), and each value must be strtod's double or the integer itself.
TEST(ReaderFastPath, IntegersFollowedByFractionOrExponent) {
  const std::vector<std::string> nums = {"5.5",
                                         "5e3",
                                         "5E3",
                                         "5e+3",
                                         "5E-3",
                                         "-5.25",
                                         "0.5",
                                         "0e1",
                                         "-0.5",
                                         "0.0",
                                         "-0.0",
                                         "7",
                                         "-7",
                                         "0",
                                         "12.0",
                                         "1e0",
                                         "123456789012345678",
                                         "-123456789012345678",
                                         "1234567890123456.5",
                                         "99999999999999999e-3",
                                         "3.14159265358979"};
  std::vector<std::string> lines;
  std::vector<std::string> want;  // the "v" value of each line as text (last in the object or not)
  std::mt19937 rng(27);
  for (int i = 0; i < 2000; ++i) {
    const std::string& v = nums[rng() % nums.size()];
    const std::string& w = nums[rng() % nums.size()];
    std::string args;
    switch (rng() % 3) {
      case 0: args = R"("v":)" + v; break;                   // last: '}' follows
      case 1: args = R"("v":)" + v + R"(,"w":)" + w; break;  // `,"` follows
      default: args = R"("hostname":"h","v":)" + v + R"(,"w":)" + w + R"(,"x":1)"; break;
    }
    lines.push_back(event(i % 2 ? "read" : "write", "POSIX", args));
    want.push_back(v);
  }
  std::string text = join(lines);
  EXPECT_EQ(expect_same(text), int64_t(lines.size()));
  Parsed f = parse(text, true, {}, '\0');
  ASSERT_EQ(f.fast_lines, int64_t(lines.size()));
  const ArgColumn* v = nullptr;
  for (auto& c : f.cols.args)
    if (c.key == "v") v = &c;
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->type, ArgType::Float);  // promoted: the column has decimals
  ASSERT_EQ(v->floats.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    double d = std::strtod(want[i].c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&v->floats[i], &d, sizeof d), 0) << want[i] << " row " << i;
    EXPECT_EQ(v->mask[i], 0);
  }
  // and the ones simdjson must decide (the fast path gives them up: same result)
  for (const char* bad : {"5.", "5e", "5e+", "01.5", "-", "-01", "1.5.5", "5ee3", "5.e3"}) {
    std::string l = event("read", "POSIX", std::string(R"("v":)") + bad + R"(,"w":1)");
    EXPECT_EQ(expect_same(lines[0] + "\n" + l + "\n" + lines[1]), 2) << bad;
  }
}

// i27-scan: the key of a value matched to a known slot is not staged; a metadata line (category
// "dftracer" or phase "M") of a name whose slots are known takes them from the slots. Known values:
// the FH/HH/SH maps, the file's hostname and each record's args text, written here by hand.
TEST(ReaderFastPath, MetadataKeysFromKnownSlots) {
  std::vector<std::string> lines;
  // the names' slots are made by normal lines first, then metadata lines of the same names
  for (const char* n : {"FH", "HH", "SH", "hostname", "read"}) {
    lines.push_back(event(n, "POSIX", R"("name":"x","value":1,"ret":2)"));
    lines.push_back(event(n, "POSIX", R"("name":"x","value":1,"ret":2)"));
  }
  // (each after a line of a new name whose keys differ: staged at the same positions, unknown)
  auto other = [&](int i) { return event("z" + std::to_string(i), "POSIX", R"("pp":1,"qqq":2,"r":3,"s":4)"); };
  lines.push_back(other(0));
  lines.push_back(event("FH", "dftracer", R"("name":"/p/file1","value":41)", "M"));
  lines.push_back(other(1));
  lines.push_back(event("HH", "dftracer", R"("name":"node9","value":"42")", "M"));
  lines.push_back(other(2));
  lines.push_back(event("SH", "dftracer", R"("name":"str","value":43,"ret":2)", "M"));
  lines.push_back(other(3));
  lines.push_back(event("hostname", "dftracer", R"("name":"x","value":"node7")", "M"));
  lines.push_back(other(4));
  lines.push_back(event("read", "dftracer", R"("name":"y","value":null,"ret":5.5,"z":true)", "X"));
  lines.push_back(event("read", "POSIX", R"("name":"x","value":1,"ret":2)"));
  std::string text = join(lines);
  EXPECT_EQ(expect_same(text), int64_t(lines.size()));
  Parsed f = parse(text, true, {}, '\0');
  ASSERT_EQ(f.fast_lines, int64_t(lines.size()));
  EXPECT_EQ(f.ctx.fh.at("41"), "/p/file1");
  EXPECT_EQ(f.ctx.hh.at("42"), "node9");
  EXPECT_EQ(f.ctx.sh.at("43"), "str");
  EXPECT_EQ(f.ctx.hostname, "node7");
  ASSERT_EQ(f.cols.metadata.size(), 5u);
  EXPECT_EQ(f.cols.metadata[0].args, R"({"name":"/p/file1","value":41})");
  EXPECT_EQ(f.cols.metadata[2].args, R"({"name":"str","value":43,"ret":2})");
  EXPECT_EQ(f.cols.metadata[4].args, R"({"name":"y","value":null,"ret":5.5,"z":1})");  // (booleans as 1/0)
  EXPECT_EQ(f.cols.rows, int64_t(lines.size() - 5));
}

// i27-scan: keys of up to 14 bytes are matched in place (with their quote and colon); longer
// ones are scanned and matched by commit. Every name's slots end with an end slot. Keys of 1-20
// bytes, in changing numbers and orders per name, values of every kind at the same slot (a
// staged integer is not reset: each kind must write its own), file names whose runs start with a
// new name (its span is set at commit), and string args columns met by numbers and nulls.
TEST(ReaderFastPath, SlotsKeysAndStagedValuesAgree) {
  std::vector<std::string> keys;
  for (int n = 1; n <= 20; ++n) keys.push_back(std::string(size_t(n), char('a' + n % 26)));
  const std::vector<std::string> vals = {"1",    "-2",    "3.5",   "\"17\"", "\"-3\"", "\"x\"", "null",
                                         "true", "false", "\"r\"", "\"w\"",  "0",      "12345"};
  const std::vector<std::string> files = {"/p/a",       "/p/b", "/p/c", std::string(62, 'f'), std::string(63, 'f'),
                                          "/p/a\\u0041"};
  std::mt19937 rng(2027);
  std::vector<std::string> lines;
  std::string f = files[0];
  for (int i = 0; i < 4000; ++i) {
    if (rng() % 5 == 0) f = files[rng() % files.size()];
    std::string args = R"("hostname":"h",)";
    size_t nk = rng() % 8;
    size_t first = rng() % 4 == 0 ? rng() % keys.size() : 10;  // mostly one order per name
    for (size_t k = 0; k < nk; ++k)
      args += "\"" + keys[(first + k) % keys.size()] + "\":" + vals[rng() % vals.size()] + ",";
    args += R"("mode":)" + vals[rng() % vals.size()] + R"(,"fname":")" + f + "\"";
    if (rng() % 10 == 0) args += R"(,"fname":")" + files[rng() % 3] + "\"";
    lines.push_back(event(i % 3 ? "read" : "open64", "POSIX", args));
  }
  std::string text = join(lines);
  int64_t fast = expect_same(text);
  EXPECT_GT(fast, int64_t(lines.size() * 3 / 4));  // all but the escaped file name's lines
  expect_same_dictionaries(text);
  // the file names against the lines themselves (the later key wins)
  Parsed p = parse(text, true, {}, '\0');
  ASSERT_EQ(p.cols.rows, int64_t(lines.size()));
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t at = lines[i].rfind(R"("fname":")") + 9;
    std::string name = lines[i].substr(at, lines[i].find('"', at) - at);
    if (name == "/p/a\\u0041") name = "/p/aA";
    ASSERT_GE(p.cols.fname.codes[i], 0);
    EXPECT_EQ(p.cols.fname.categories[size_t(p.cols.fname.codes[i])], name) << i;
  }
}
