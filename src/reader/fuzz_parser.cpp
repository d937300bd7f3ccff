// libFuzzer target: arbitrary bytes as JSON lines through the column parser, with the fast path
// on (default) and off; both must give the same columns (columns_diff.h), else abort.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "columns_diff.h"
#include "reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dftracer::reader;
  std::string buf(reinterpret_cast<const char*>(data), size);
  buf.append(64, '\0');
  FileContext ctx[2];
  EventColumns cols[2];
  for (int fast = 0; fast < 2; ++fast) {
    Parser p;
    p.set_fast_path(fast == 1);
    p.parse(buf.data(), size, buf.size(), ctx[fast], cols[fast]);
    Parser::finish(cols[fast]);
  }
  std::string diff = columns_diff(cols[1], cols[0]);
  if (!diff.empty() || ctx[0].fh != ctx[1].fh || ctx[0].hh != ctx[1].hh || ctx[0].sh != ctx[1].sh) {
    std::fprintf(stderr, "fast path differs from simdjson: %s\n", diff.empty() ? "context" : diff.c_str());
    std::abort();
  }
  collect_context(buf.data(), size, ctx[0]);
  return 0;
}
