// Parser (docs/index.md, "Parsing rules"): exact column values, FH/HH resolution of hashed
// DFTracer v1 traces, legacy numbers written as strings, v2 integer phases, skipped lines.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "reader.h"

using namespace dftracer::reader;

namespace {

EventColumns parse(const std::string& text, FileContext& ctx) {
  std::string buf = text;
  size_t n = buf.size();
  buf.append(simdjson::SIMDJSON_PADDING, ' ');
  EventColumns out;
  Parser p;
  p.parse(buf.data(), n, buf.size(), ctx, out);
  Parser::finish(out);
  return out;
}

std::string cat_of(const DictColumn& d, size_t row) {
  int32_t c = d.codes.at(row);
  return c < 0 ? std::string("<null>") : d.categories.at(size_t(c));
}

const ArgColumn* arg(const EventColumns& e, const std::string& key) {
  for (auto& a : e.args)
    if (a.key == key) return &a;
  return nullptr;
}

}  // namespace

TEST(ReaderParse, HashedV1Trace) {
  FileContext ctx;
  EventColumns e = parse(
      "[\n"
      R"({"id":1,"name":"HH","cat":"dftracer","pid":7,"tid":7,"ph":"M","args":{"name":"corona173","value":5692}})"
      "\n"
      R"({"id":2,"name":"FH","cat":"dftracer","pid":7,"tid":7,"ph":"M","args":{"name":"/p/a.dat","value":33084}})"
      "\n"
      R"({"id":3,"name":"read","cat":"POSIX","pid":7,"tid":8,"ts":1000,"dur":25,"ph":"X","args":{"hhash":5692,"fhash":33084,"ret":4096,"offset":8192,"level":1}})"
      "\n"
      R"({"id":4,"name":"fread","cat":"STDIO","pid":7,"tid":8,"ts":1100,"dur":5,"ph":"X","args":{"hhash":5692,"fhash":999,"size":512,"ret":3}})"
      "\n"
      R"({"id":5,"name":"start","cat":"dftracer","pid":7,"tid":7,"ts":900,"ph":"i","args":{"name":"x","value":1}})"
      "\n",
      ctx);
  ASSERT_EQ(e.rows, 2);
  EXPECT_EQ(e.metadata.size(), 3u);
  EXPECT_EQ(e.skipped_lines, 0);
  EXPECT_EQ(ctx.hh.at("5692"), "corona173");
  EXPECT_EQ(ctx.fh.at("33084"), "/p/a.dat");
  EXPECT_EQ(cat_of(e.name, 0), "read");
  EXPECT_EQ(cat_of(e.cat, 1), "STDIO");
  EXPECT_EQ(cat_of(e.ph, 0), "X");
  EXPECT_EQ(cat_of(e.hostname, 0), "corona173");
  EXPECT_EQ(cat_of(e.hostname, 1), "corona173");
  EXPECT_EQ(cat_of(e.fname, 0), "/p/a.dat");
  EXPECT_EQ(cat_of(e.fname, 1), "<null>");  // 999 has no FH record
  EXPECT_EQ(e.unresolved_hashes, 1);
  EXPECT_EQ(e.pid[1], 7);
  EXPECT_EQ(e.tid[1], 8);
  EXPECT_EQ(e.ts[0], 1000);
  EXPECT_EQ(e.dur[0], 25);
  EXPECT_EQ(e.te[0], 1025);
  EXPECT_EQ(e.te[1], 1105);
  // size: ret for read, ret * args.size for fread; offset from args.
  EXPECT_EQ(e.size_mask[0], 0);
  EXPECT_EQ(e.size[0], 4096);
  EXPECT_EQ(e.size[1], 3 * 512);
  EXPECT_EQ(e.offset[0], 8192);
  EXPECT_EQ(e.offset_mask[1], 1);
  const ArgColumn* level = arg(e, "level");
  ASSERT_NE(level, nullptr);
  EXPECT_EQ(level->type, ArgType::Int);
  EXPECT_EQ(level->ints[0], 1);
  EXPECT_EQ(level->mask[1], 1);
  const ArgColumn* asize = arg(e, "arg_size");
  ASSERT_NE(asize, nullptr);
  EXPECT_EQ(asize->mask[0], 1);
  EXPECT_EQ(asize->ints[1], 512);
  EXPECT_EQ(arg(e, "fhash"), nullptr);
  EXPECT_EQ(arg(e, "hhash"), nullptr);
  EXPECT_EQ(e.metadata[2].name, "start");
  EXPECT_EQ(e.metadata[2].args, R"({"name":"x","value":1})");
}

TEST(ReaderParse, LegacyStringNumbersAndTypes) {
  FileContext ctx;
  EventColumns e = parse(
      "[\n"
      R"( {"name":"write","cat":"POSIX","pid":"12","tid":"13","ts":"500","dur":"7","ph":"X","args":{"hostname":"h1","fname":"/f\u0041","ret":"64","mode":"w","ratio":0.5}},)"
      "\n"
      R"( {"name":"write","cat":"POSIX","pid":"12","tid":"13","ts":"510","dur":"1","ph":"X","args":{"hostname":"h1","fname":"/f","ret":"-1","mode":3,"ratio":2,"ok":true}},)"
      "\n"
      R"( {"name":"bad","ts":"nope"})"
      "\n"
      "not json\n"
      R"({"name":"v2","cat":"app","pid":1,"tid":1,"ts":1,"dur":2,"ph":1})"
      "\n",
      ctx);
  ASSERT_EQ(e.rows, 3);
  EXPECT_EQ(e.skipped_lines, 2);
  EXPECT_EQ(e.pid[0], 12);
  EXPECT_EQ(e.tid[0], 13);
  EXPECT_EQ(e.ts[1], 510);
  EXPECT_EQ(e.dur[0], 7);
  EXPECT_EQ(cat_of(e.fname, 0), "/fA");  // escaped string is unescaped
  EXPECT_EQ(cat_of(e.fname, 1), "/f");
  EXPECT_EQ(cat_of(e.hostname, 1), "h1");
  EXPECT_EQ(e.size[0], 64);
  EXPECT_EQ(e.size_mask[1], 1);  // ret < 0
  const ArgColumn* ret = arg(e, "ret");
  ASSERT_NE(ret, nullptr);
  EXPECT_EQ(ret->type, ArgType::Int);
  EXPECT_EQ(ret->ints[1], -1);
  const ArgColumn* mode = arg(e, "mode");  // text and number mixed -> string column
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->type, ArgType::String);
  EXPECT_EQ(mode->strings.categories.at(size_t(mode->strings.codes[0])), "w");
  EXPECT_EQ(mode->strings.categories.at(size_t(mode->strings.codes[1])), "3");
  EXPECT_EQ(mode->strings.codes[2], -1);
  const ArgColumn* ratio = arg(e, "ratio");  // float then int -> Float64
  ASSERT_NE(ratio, nullptr);
  EXPECT_EQ(ratio->type, ArgType::Float);
  EXPECT_DOUBLE_EQ(ratio->floats[0], 0.5);
  EXPECT_DOUBLE_EQ(ratio->floats[1], 2.0);
  const ArgColumn* ok = arg(e, "ok");
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->ints[1], 1);
  EXPECT_EQ(ok->mask[0], 1);
  EXPECT_EQ(cat_of(e.ph, 2), "X");  // v2 integer phase 1
  EXPECT_EQ(cat_of(e.name, 2), "v2");
}

TEST(ReaderParse, InvalidUtf8Replaced) {
  FileContext ctx;
  EventColumns e = parse(std::string(R"({"name":"op)") + "\xff" + R"(","cat":"c","ts":1,"dur":1})" + "\n", ctx);
  ASSERT_EQ(e.rows, 1);
  EXPECT_EQ(e.replaced_utf8_lines, 1);
  EXPECT_EQ(cat_of(e.name, 0), "op\xef\xbf\xbd");
}

TEST(ReaderParse, LongAndEscapedArgKeys) {
  FileContext ctx;
  std::string line1 =
      R"({"name":"op","cat":"c","ts":1,"dur":1,"args":{"a_very_long_key_name_here":5,"k\u0065y":1,"sh":2}})";
  std::string line2 =
      R"({"name":"op","cat":"c","ts":2,"dur":1,"args":{"a_very_long_key_name_here":6,"k\u0065y":3,"sh":4}})";
  EventColumns e = parse(line1 + "\n" + line2 + "\n", ctx);
  ASSERT_EQ(e.rows, 2);
  const ArgColumn* lk = arg(e, "a_very_long_key_name_here");
  const ArgColumn* k = arg(e, "key");
  const ArgColumn* sh = arg(e, "sh");
  ASSERT_TRUE(lk && k && sh);
  EXPECT_EQ(lk->ints, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(k->ints, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(sh->ints, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(e.args.size(), 3u);
}

// A dictionary with more categories than the initial hash table (64 slots) must survive a move
// or copy (which rebuilds the table); found by the indexer fuzzer as an endless probe loop.
TEST(ReaderParse, DictColumnMoveWithManyCategories) {
  DictColumn d;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(d.intern("cat" + std::to_string(i)), i);
  DictColumn moved(std::move(d));
  DictColumn copied(moved);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(moved.find("cat" + std::to_string(i)), i);
    EXPECT_EQ(copied.intern("cat" + std::to_string(i)), i);
  }
  EXPECT_EQ(copied.intern("new"), 1000);
  EXPECT_EQ(moved.find("absent"), -1);
}

namespace {
EventColumns parse_with(const std::string& text, bool fast, ArgsProjection proj = {}) {
  std::string buf = text;
  size_t n = buf.size();
  buf.append(simdjson::SIMDJSON_PADDING, ' ');
  EventColumns out;
  FileContext ctx;
  Parser p;
  p.set_fast_path(fast);
  p.set_args_projection(std::move(proj));
  p.parse(buf.data(), n, buf.size(), ctx, out);
  Parser::finish(out);
  return out;
}
}  // namespace

// Issue 25: at most kMaxArgColumns args keys become columns; the others go, as their JSON text, to
// args_extra. The fast path (tracer layout) and simdjson give the same columns and text.
TEST(ReaderParse, ArgsBeyondTheColumnLimitGoToArgsExtra) {
  std::string line = R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":3,"dur":4,"ph":"X","args":{)";
  for (int k = 0; k < 300; ++k)
    line += (k ? "," : "") + std::string("\"k") + std::to_string(k) + "\":" + std::to_string(k);
  line += R"(,"s":"a\"b","f":1.50,"args_extra":true}})";
  std::string spaced = line;
  spaced.insert(1, " ");  // not the tracer's layout: simdjson only
  for (const std::string& l : {line, spaced}) {
    for (bool fast : {true, false}) {
      EventColumns e = parse_with("[\n" + l + "\n", fast);
      ASSERT_EQ(e.rows, 1);
      ASSERT_EQ(e.args.size(), kMaxArgColumns + 1);  // + args_extra
      const ArgColumn* x = arg(e, "args_extra");
      ASSERT_NE(x, nullptr);
      std::string want = "{";
      for (int k = 256; k < 300; ++k)
        want += (k > 256 ? "," : "") + std::string("\"k") + std::to_string(k) + "\":" + std::to_string(k);
      want += R"(,"s":"a\"b","f":1.50,"args_extra":true})";
      EXPECT_EQ(cat_of(x->strings, 0), want);
      EXPECT_EQ(e.extra_keys.at("k299"), 1);
      EXPECT_EQ(e.extra_keys.count("k0"), 0u);
    }
  }
  // a projection with extra: the keys left out go to args_extra, not dropped
  EventColumns p = parse_with("[\n" + line + "\n", true, ArgsProjection::only({"k1"}, true));
  ASSERT_EQ(p.args.size(), 2u);
  EXPECT_NE(cat_of(arg(p, "args_extra")->strings, 0).find(R"("k0":0,"k2":2)"), std::string::npos);
}

// Issue 25: event times outside [0, 2100-01-01) µs or a negative dur make the line invalid,
// counted by reason; both parse paths agree.
TEST(ReaderParse, InsaneTimestampsSkippedWithReason) {
  std::string text =
      "[\n"
      R"({"id":1,"name":"n","cat":"c","pid":1,"tid":2,"ts":-9223372036854775808,"dur":4,"ph":"X"})"
      "\n"
      R"({"id":2,"name":"n","cat":"c","pid":1,"tid":2,"ts":4102444800000000,"dur":0,"ph":"X"})"
      "\n"
      R"({"id":3,"name":"n","cat":"c","pid":1,"tid":2,"ts":1700000000000000,"dur":-1,"ph":"X"})"
      "\n"
      R"({"id":4,"name":"n","cat":"c","pid":1,"tid":2,"ts":5,"dur":1,"ph":"X"})"
      "\n";
  for (bool fast : {true, false}) {
    EventColumns e = parse_with(text, fast);
    EXPECT_EQ(e.rows, 1);
    EXPECT_EQ(e.skipped_lines, 3);
    EXPECT_EQ(e.ts_out_of_range_lines, 2);
    EXPECT_EQ(e.negative_dur_lines, 1);
  }
}

namespace {
// Resident KiB of the whole pages inside [p, p + bytes) (mincore); -1 where that cannot be told
// (not Linux, or transparent huge pages for every mapping, which fault 2 MiB at a time anyway).
long resident_kib(const void* p, size_t bytes) {
#if defined(__linux__)
  if (std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
    char mode[128] = {0};
    bool always = std::fgets(mode, sizeof mode, f) && std::strstr(mode, "[always]");
    std::fclose(f);
    if (always) return -1;
  }
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (hi <= lo) return 0;
  std::vector<unsigned char> in((hi - lo) / page);
  if (mincore(reinterpret_cast<void*>(lo), hi - lo, in.data()) != 0) return -1;
  long n = 0;
  for (unsigned char c : in) n += c & 1;
  return n * long(page / 1024);
#else
  (void)p;
  (void)bytes;
  return -1;
#endif
}

std::string numbered_events(int n) {
  std::string t = "[\n";
  for (int i = 0; i < n; ++i) {
    t += R"({"id":)" + std::to_string(i) + R"(,"name":"read","cat":"POSIX","pid":)" + std::to_string(i % 7) +
         R"(,"tid":)" + std::to_string(i % 13) + R"(,"ts":)" + std::to_string(1000 + 3 * i) + R"(,"dur":)" +
         std::to_string(i % 5) + R"(,"ph":"X","args":{"ret":)" + std::to_string(i % 4096) + R"(,"fd":)" +
         std::to_string(i % 3) + (i % 3 ? R"(,"x":)" + std::to_string(i) + ".5" : std::string()) +
         (i % 5 ? R"(,"s":"v)" + std::to_string(i % 9) + "\"" : std::string()) + "}}\n";
  }
  return t;
}

EventColumns parse_reserved(const std::string& text, int64_t reserve_rows) {
  std::string buf = text;
  size_t n = buf.size();
  buf.append(simdjson::SIMDJSON_PADDING, '\0');
  EventColumns out;
  out.reserve_rows = reserve_rows;
  FileContext ctx;
  Parser p;
  p.parse(buf.data(), n, buf.size(), ctx, out);
  Parser::finish(out);
  return out;
}
}  // namespace

// Column pages are faulted in ahead of the rows written (MADV_POPULATE_WRITE, parser.cpp
// populate_ahead): the values are those of columns grown without a reserve, and a reserve far
// above the rows written does not make its pages resident (memory held stays that of the rows).
TEST(ReaderParse, ColumnsFaultedInAheadKeepValuesAndBoundMemory) {
  const int n = 100000;  // crosses many 256 KiB populate strides of an int64 column
  std::string text = numbered_events(n);
  EventColumns plain = parse_reserved(text, 0);
  EventColumns reserved = parse_reserved(text, n + 1);
  ASSERT_EQ(plain.rows, n);
  ASSERT_EQ(reserved.rows, n);
  EXPECT_EQ(plain.pid, reserved.pid);
  EXPECT_EQ(plain.tid, reserved.tid);
  EXPECT_EQ(plain.ts, reserved.ts);
  EXPECT_EQ(plain.dur, reserved.dur);
  EXPECT_EQ(plain.te, reserved.te);
  EXPECT_EQ(plain.size, reserved.size);
  EXPECT_EQ(plain.size_mask, reserved.size_mask);
  EXPECT_EQ(plain.name.codes, reserved.name.codes);
  ASSERT_EQ(plain.args.size(), reserved.args.size());
  for (size_t k = 0; k < plain.args.size(); ++k) {
    EXPECT_EQ(plain.args[k].key, reserved.args[k].key);
    EXPECT_EQ(plain.args[k].ints, reserved.args[k].ints);
    EXPECT_EQ(plain.args[k].floats, reserved.args[k].floats);
    EXPECT_EQ(plain.args[k].mask, reserved.args[k].mask);
    EXPECT_EQ(plain.args[k].strings.codes, reserved.args[k].strings.codes);
    EXPECT_EQ(plain.args[k].strings.categories, reserved.args[k].strings.categories);
  }
  // truth from the text's own rule: te = ts + dur, ret is the byte count of a read
  for (int i = 0; i < n; i += 997) {
    EXPECT_EQ(reserved.te[size_t(i)], 1000 + 3 * i + i % 5);
    EXPECT_EQ(reserved.size[size_t(i)], i % 4096);
  }

  // 8M rows reserved (64 MiB per int64 column: a mapping of its own), 1,000 written
  EventColumns few = parse_reserved(numbered_events(1000), int64_t(8) << 20);
  ASSERT_EQ(few.rows, 1000);
  ASSERT_GE(few.pid.capacity(), size_t(8) << 20);
  long kib = resident_kib(few.pid.data(), few.pid.capacity() * sizeof(int64_t));
  if (kib < 0) GTEST_SKIP() << "page residency not known here (mincore, or THP always)";
  EXPECT_GE(kib, 4);    // the rows written (8,000 bytes: at least one whole page)
  EXPECT_LE(kib, 256);  // at most the one populate stride (256 KiB) that the rows are in
  for (auto* v : {&few.ts, &few.dur, &few.size}) EXPECT_LE(resident_kib(v->data(), v->capacity() * 8), 256);
}

// Core columns grow without a zero fill (reader.h ColumnVector: resize(n) leaves the new values
// unwritten), so commit() must write every core value of every row it keeps. The columns are
// handed over holding a garbage pattern in their whole capacity (as reused heap memory may):
// any value left unwritten shows as that pattern. Truth from the text's own rules.
TEST(ReaderParse, CoreColumnsWrittenInFullOverReusedStorage) {
  const int n = 3000;  // many growth steps of 128 rows
  std::string text = "[\n";
  for (int i = 0; i < n; ++i) {
    const bool io = i % 5 != 4;  // "read": size = args.ret; "compute": no byte rule (null)
    std::string args;
    auto add = [&args](const std::string& kv) { args += (args.empty() ? "" : ",") + kv; };
    if (i % 3 == 0) add(R"("hostname":"h)" + std::to_string(i % 2) + "\"");
    if (io) add(R"("ret":)" + std::to_string(i % 4096));
    if (i % 2 == 0) add(R"("offset":)" + std::to_string(10 * i));
    add(R"("fd":)" + std::to_string(i % 3));
    text += R"({"id":)" + std::to_string(i) + R"(,"name":")" + (io ? "read" : "compute") + "\"" +
            (i % 7 == 6 ? std::string() : std::string(R"(,"cat":"POSIX")")) + R"(,"pid":)" + std::to_string(i % 7) +
            R"(,"tid":)" + std::to_string(i % 13) + R"(,"ts":)" + std::to_string(1000 + 3 * i) + R"(,"dur":)" +
            std::to_string(i % 5) + R"(,"ph":"X","args":{)" + args + "}}\n";
  }
  for (char pad : {'\0', ' '}) {  // the unchecked and the checked fast path
    SCOPED_TRACE(pad == ' ' ? "space padding" : "nul padding");
    EventColumns out;
    const size_t cap = size_t(n) + 1;
    for (auto* v : {&out.pid, &out.tid, &out.ts, &out.dur, &out.size, &out.offset, &out.te}) {
      v->assign(cap, int64_t(0x5a5a5a5a5a5a5a5a));
      v->clear();  // (capacity and bytes kept)
    }
    for (auto* m : {&out.size_mask, &out.offset_mask}) {
      m->assign(cap, uint8_t(0x5a));
      m->clear();
    }
    for (auto* d : {&out.name, &out.cat, &out.ph, &out.hostname, &out.fname}) {
      d->codes.assign(cap, int32_t(0x5a5a5a5a));
      d->codes.clear();
    }
    const int64_t* pid_storage = out.pid.data();
    out.reserve_rows = int64_t(cap);
    std::string buf = text;
    size_t len = buf.size();
    buf.append(simdjson::SIMDJSON_PADDING, pad);
    FileContext ctx;
    Parser p;
    p.parse(buf.data(), len, buf.size(), ctx, out);
    Parser::finish(out);
    ASSERT_EQ(out.rows, n);
    ASSERT_EQ(out.pid.data(), pid_storage);  // the storage handed in was used, not reallocated
    for (int i = 0; i < n; ++i) {
      const size_t r = size_t(i);
      const bool io = i % 5 != 4;
      SCOPED_TRACE(i);
      EXPECT_EQ(out.pid[r], i % 7);
      EXPECT_EQ(out.tid[r], i % 13);
      EXPECT_EQ(out.ts[r], 1000 + 3 * i);
      EXPECT_EQ(out.dur[r], i % 5);
      EXPECT_EQ(out.te[r], 1000 + 3 * i + i % 5);
      EXPECT_EQ(out.size_mask[r], io ? 0 : 1);
      EXPECT_EQ(out.size[r], io ? i % 4096 : 0);
      EXPECT_EQ(out.offset_mask[r], i % 2 == 0 ? 0 : 1);
      EXPECT_EQ(out.offset[r], i % 2 == 0 ? 10 * i : 0);
      EXPECT_EQ(cat_of(out.name, r), io ? "read" : "compute");
      EXPECT_EQ(cat_of(out.cat, r), i % 7 == 6 ? "<null>" : "POSIX");
      EXPECT_EQ(cat_of(out.ph, r), "X");
      EXPECT_EQ(cat_of(out.hostname, r), i % 3 == 0 ? "h" + std::to_string(i % 2) : "<null>");
      EXPECT_EQ(cat_of(out.fname, r), "<null>");
      if (::testing::Test::HasFailure()) break;  // (one row's report is enough)
    }
  }
}
