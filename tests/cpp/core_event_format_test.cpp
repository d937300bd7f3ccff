// Event formatting as a pure function (src/core/event_format.h): exact bytes of complete,
// instant and metadata lines, the explicit phase (no duration sentinel) and the size bound.
#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstring>
#include <string>
#include <vector>

#include "event_format.h"

using namespace dftracer;

namespace {
std::string line(const EventFields& e) {
  std::string out(event_bound(e.name, e.cat, e.args), '\0');
  char* end = format_event(&out[0], e);
  EXPECT_LE(static_cast<size_t>(end - &out[0]), out.size());
  out.resize(static_cast<size_t>(end - &out[0]));
  return out;
}
}  // namespace

TEST(EventFormat, CompleteAndInstantAreExplicitPhases) {
  IdsPrefix ids;
  ids.set(42, 43);
  EventFields e{7, Phase::Complete, "read", "POSIX", true, &ids, 1700000000000001, 25, nullptr};
  EXPECT_EQ(line(e),
            "{\"id\":7,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":42,\"tid\":43,\"ts\":1700000000000001,"
            "\"dur\":25,\"ph\":\"X\"}\n");
  // A negative duration (the wall clock stepped back) is a complete event of duration 0, never
  // an instant.
  e.dur = -3;
  EXPECT_EQ(line(e),
            "{\"id\":7,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":42,\"tid\":43,\"ts\":1700000000000001,"
            "\"dur\":0,\"ph\":\"X\"}\n");
  e.phase = Phase::Instant;
  e.dur = 99;  // ignored
  EXPECT_EQ(line(e),
            "{\"id\":7,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":42,\"tid\":43,\"ts\":1700000000000001,"
            "\"ph\":\"i\",\"s\":\"t\"}\n");
}

TEST(EventFormat, ArgsAndEscaping) {
  IdsPrefix ids;
  ids.set(1, 2);
  ArgList a;
  a.add_int("fd", -1);
  a.add_uint("size", 18446744073709551615ull);
  a.add_double("r", 2.5);
  a.add_bool("ok", true);
  a.add_str("fname", "/d/\"q\"\n");
  a.add_raw("\"raw\":[1]");
  std::string key = "k\x01";
  a.add_str(std::string_view(key), "v");
  EventFields e{0, Phase::Complete, "n\"m", "c\\t", false, &ids, 5, 6, &a};
  EXPECT_EQ(line(e),
            "{\"id\":0,\"name\":\"n\\\"m\",\"cat\":\"c\\\\t\",\"pid\":1,\"tid\":2,\"ts\":5,\"dur\":6,\"ph\":\"X\","
            "\"args\":{\"fd\":-1,\"size\":18446744073709551615,\"r\":2.5,\"ok\":true,\"fname\":\"/d/\\\"q\\\"\\n\","
            "\"raw\":[1],\"k\\u0001\":\"v\"}}\n");
}

TEST(EventFormat, MetadataLines) {
  std::string out;
  append_metadata(out, 3, "hostname", "h1", 10, 11, 12, false);
  append_metadata(out, 4, "process_name", "app", 10, 11, 12, true);
  EXPECT_EQ(out,
            "{\"id\":3,\"name\":\"hostname\",\"cat\":\"dftracer\",\"pid\":10,\"tid\":11,\"ts\":12,\"ph\":\"M\","
            "\"args\":{\"name\":\"hostname\",\"value\":\"h1\"}}\n"
            "{\"id\":4,\"name\":\"process_name\",\"cat\":\"dftracer\",\"pid\":10,\"tid\":11,\"ts\":12,\"ph\":\"M\","
            "\"args\":{\"name\":\"app\"}}\n");
}

TEST(EventFormat, BoundHoldsForWorstCaseInput) {
  IdsPrefix ids;
  ids.set(2147483647, 2147483647);
  std::string ctrl(300, '\x01');  // every byte becomes \u0001 (6 bytes)
  ArgList a;
  for (int i = 0; i < ArgList::kCapacity; ++i) a.add_str(std::string_view(ctrl), std::string_view(ctrl));
  EventFields e{UINT64_MAX, Phase::Complete, ctrl, ctrl, false, &ids, INT64_MIN, INT64_MAX, &a};
  std::string out = line(e);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_GT(out.size(), 300u * 6 * 2 * (ArgList::kCapacity + 1));
}

// ------------------------------------------------------------------------------ records
namespace {
// One compact event and the ArgList format_event gets for the same fields.
struct CompactCase {
  std::string_view name, cat;
  bool plain;
  int64_t ts, dur;
  std::string frag;
  CompactArgs ints;
};

std::string direct_line(uint64_t id, const CompactCase& c, const IdsPrefix& ids) {
  ArgList a;
  if (!c.frag.empty()) a.add_raw(c.frag);
  for (int i = 0; i < c.ints.size(); ++i) {
    std::string_view key(c.ints[i].key, c.ints[i].klen);
    if (c.ints[i].flags & CompactArgs::kUint) a.add_uint(key, static_cast<uint64_t>(c.ints[i].v));
    else a.add_int(key, c.ints[i].v);
  }
  EventFields e{id, Phase::Complete, c.name, c.cat, c.plain, &ids, c.ts, c.dur, &a};
  return line(e);
}

// Renders a buffer of records as the writer does (TracerImpl::render_chunk): record_size,
// record_text_bound, render_record with one renderer per piece.
std::string render_all(const std::string& buf, const IdsPrefix& ids, size_t* rendered_records) {
  CompactRenderer r;
  r.reset(&ids);
  std::string out;
  const char* p = buf.data();
  size_t left = buf.size();
  *rendered_records = 0;
  while (left) {
    size_t size = record_size(p, left);
    if (size == 0) break;
    size_t at = out.size();
    size_t bound = record_text_bound(p, size);
    out.resize(at + bound);
    char* end = render_record(&out[at], p, size, r);
    EXPECT_LE(static_cast<size_t>(end - &out[at]), bound);
    out.resize(static_cast<size_t>(end - &out[0]));
    p += size;
    left -= size;
    ++*rendered_records;
  }
  return out;
}
}  // namespace

// The writer's rendering of compact records is byte-identical to format_event for the same fields:
// shapes repeated and changing (the renderer's cache), escaping names/cats/keys, every integer
// edge, fragments of every copy path, no args, negative durations, timestamps of 1..19 digits and
// across the cached high digits; interleaved with text records (lines formatted on the thread).
TEST(EventFormat, CompactRecordsRenderAsFormatEvent) {
  IdsPrefix ids;
  ids.set(4242, 4243);
  std::vector<CompactCase> cases;
  auto add = [&](std::string_view name, std::string_view cat, bool plain, int64_t ts, int64_t dur, std::string frag,
                 auto fill) {
    CompactCase c{name, cat, plain, ts, dur, std::move(frag), CompactArgs()};
    fill(c.ints);
    cases.push_back(std::move(c));
  };
  const std::string f16 = "\"fname\":\"/a/b.x\"";                         // 16 bytes
  const std::string f30 = "\"fname\":\"/tmp/i14/bp/data.bin\"";           // 30
  const std::string f40 = "\"fname\":\"/tmp/some/longer/dir/data.bin\"";  // 40
  const std::string f5 = "\"a\":1";                                       // 5
  const std::string f100 = "\"fname\":\"" + std::string(89, 'p') + "\"";  // 100
  auto io = [](size_t count, ssize_t ret) {
    return [=](CompactArgs& a) {
      a.add_int("fd", 3);
      a.add_uint("count", count);
      a.add_int("ret", ret);
    };
  };
  for (int i = 0; i < 3; ++i) add("read", "POSIX", true, 1795297461386105 + i, 2, f30, io(4096, 4096));
  add("read", "POSIX", true, 1795297499999999, 0, f30, io(4096, -1));  // hi digits change next
  add("read", "POSIX", true, 1795297500000000, -5, f30, io(0, 0));     // negative dur -> 0
  add("write", "POSIX", true, 1795297500000001, 123456789, f16, io(1ull << 40, 99));
  add("pread", "POSIX", true, 1795297500000002, 7, f40, [](CompactArgs& a) {
    a.add_int("fd", 1048575);
    a.add_uint("count", UINT64_MAX);
    a.add_int("offset", INT64_MIN);
    a.add_int("ret", INT64_MAX);
  });
  add("lseek", "POSIX", true, 5, 1, f5, [](CompactArgs& a) {
    a.add_int("fd", -1);
    a.add_int("offset", -100000);
    a.add_int("whence", 2);
  });
  add("fsync", "POSIX", true, 999999999999999, 12345678, f100, [](CompactArgs& a) { a.add_int("ret", 0); });
  add("fsync", "POSIX", true, 10000000000000000, 1, f100, [](CompactArgs& a) { a.add_int("ret", 0); });  // 17 digits
  add("close", "POSIX", true, -7, 3, "", [](CompactArgs& a) { a.add_int("ret", 0); });                   // no fragment
  add("read", "POSIX", true, 1795297500000003, 1, "", [](CompactArgs&) {});   // no args at all
  add("read", "POSIX", true, 1795297500000004, 1, f30, [](CompactArgs&) {});  // fragment only
  add("n\"m", "c\\t", false, 1795297500000005, 1, f30, io(1, 1));             // escaped name, cat
  add("read", "POSIX", true, 1795297500000006, 1, f30, [](CompactArgs& a) {
    a.add_int("k\x01y", 5);              // a key that needs escaping
    a.add_uint("\xc3\xa9t\xc3\xa9", 6);  // UTF-8 key
  });
  add("fcntl", "POSIX", true, 1795297500000007, 1, f30, [](CompactArgs& a) {  // more than kCapacity: dropped
    for (int i = 0; i < 9; ++i) a.add_int("v", i);
  });
  for (int i = 0; i < 3; ++i) add("read", "POSIX", true, 1795297500000008 + i, 2, f30, io(4096, 4096));

  std::string buf, expected;
  uint64_t id = 100;
  int k = 0;
  for (const CompactCase& c : cases) {
    if (k++ % 4 == 2) {  // a text record between compact ones
      EventFields e{id++, Phase::Instant, "mark", "APP", true, &ids, 77, 0, nullptr};
      std::string text = line(e);
      size_t at = buf.size();
      buf.resize(at + text_record_bytes(text.size()));
      char* p = begin_text_record(&buf[at]);
      std::memcpy(p, text.data(), text.size());
      EXPECT_EQ(end_text_record(&buf[at], p + text.size()), &buf[0] + buf.size());
      expected += text;
    }
    size_t at = buf.size();
    buf.resize(at + compact_record_bytes(c.ints.size(), c.frag.size()));
    char* end = write_compact(&buf[at], id, c.name, c.cat, c.plain, c.ts, c.dur, c.frag, c.ints);
    EXPECT_EQ(end, &buf[0] + buf.size());
    expected += direct_line(id++, c, ids);
  }
  size_t n = 0;
  EXPECT_EQ(render_all(buf, ids, &n), expected);
  EXPECT_EQ(n, cases.size() + (cases.size() + 1) / 4);
  // Spot check of the bytes themselves (not only equality with format_event).
  EXPECT_EQ(expected.substr(0, expected.find('\n') + 1),
            "{\"id\":100,\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":4242,\"tid\":4243,\"ts\":1795297461386105,"
            "\"dur\":2,\"ph\":\"X\",\"args\":{\"fname\":\"/tmp/i14/bp/data.bin\",\"fd\":3,\"count\":4096,"
            "\"ret\":4096}}\n");
  EXPECT_NE(expected.find("data.bin\",\"k\\u0001y\":5,\"\xc3\xa9t\xc3\xa9\":6}}"), std::string::npos);
  EXPECT_NE(expected.find("data.bin\",\"v\":0,\"v\":1,\"v\":2,\"v\":3,\"v\":4,\"v\":5,\"v\":6}}"), std::string::npos);
}

// A damaged record (size beyond the buffer, below its header, unknown kind, inconsistent
// parts) ends the rendering of its buffer: nothing after it is trusted.
TEST(EventFormat, DamagedRecordsAreNotRendered) {
  IdsPrefix ids;
  ids.set(1, 2);
  CompactArgs a;
  a.add_int("fd", 3);
  std::string good(compact_record_bytes(1, 5), '\0');
  write_compact(&good[0], 1, "read", "POSIX", true, 10, 1, "\"a\":1", a);
  size_t n = 0;
  std::string once = render_all(good, ids, &n);
  EXPECT_EQ(n, 1u);
  auto damaged = [&](auto edit) {
    std::string b = good + good;
    edit(&b[good.size()]);
    size_t k = 0;
    EXPECT_EQ(render_all(b, ids, &k), once);
    EXPECT_EQ(k, 1u);
  };
  damaged([](char* r) {
    uint32_t s = 1u << 30;
    std::memcpy(r, &s, 4);
  });  // beyond the buffer
  damaged([](char* r) {
    uint32_t s = 4;
    std::memcpy(r, &s, 4);
  });                                                           // below a header
  damaged([](char* r) { r[4] = 9; });                           // unknown kind
  damaged([](char* r) { r[5] = CompactArgs::kCapacity + 1; });  // nints too large
  damaged([](char* r) { r[5] = 0; });                           // parts != size
  damaged([](char* r) {
    r[4] = kRecordText;
    r[5] = 7;
    uint32_t s = 12;
    std::memcpy(r, &s, 4);
  });                                    // size % 8
  std::string tail = good.substr(0, 6);  // a cut record
  size_t k = 0;
  EXPECT_EQ(render_all(good + tail, ids, &k), once);
}
