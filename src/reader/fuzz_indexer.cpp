// libFuzzer target: arbitrary bytes as a trace file (.gz) -> index, read every checkpoint, parse.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dftracer::reader;
  static std::string dir = [] {
    char t[] = "/tmp/dft-fuzz-XXXXXX";
    return std::string(mkdtemp(t));
  }();
  std::string path = dir + "/in.pfw.gz";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    IndexInfo idx = build_index(path, "", true);
    int64_t n = int64_t(idx.checkpoints.size());
    for (int64_t i = 0; i < n; ++i) {
      RangeData r = read_checkpoints(idx, i, i);
      Parser p;
      FileContext ctx = idx.context;
      EventColumns cols;
      p.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
    }
    if (n) read_lines(idx, 0, 5);
  } catch (const ReaderError&) {
  }
  ::unlink((path + ".zindex").c_str());
  return 0;
}
