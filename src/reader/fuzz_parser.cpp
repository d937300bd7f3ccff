// libFuzzer target: arbitrary bytes as JSON lines through the column parser.
#include <cstdint>
#include <string>

#include "reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dftracer::reader;
  std::string buf(reinterpret_cast<const char*>(data), size);
  buf.append(64, '\0');
  Parser p;
  FileContext ctx;
  EventColumns cols;
  p.parse(buf.data(), size, buf.size(), ctx, cols);
  Parser::finish(cols);
  collect_context(buf.data(), size, ctx);
  return 0;
}
