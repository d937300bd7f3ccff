// Event formatting as a pure function (src/core/event_format.h): exact bytes of complete,
// instant and metadata lines, the explicit phase (no duration sentinel) and the size bound.
#include <gtest/gtest.h>

#include <string>

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
