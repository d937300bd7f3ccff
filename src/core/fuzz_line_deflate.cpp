// libFuzzer target: line_deflate output must inflate (zlib, raw deflate) to exactly the input,
// fit line_deflate_bound, and count the input's '\n' bytes; the probing mode may give up (0) but
// never emit a wrong stream. Input: one control byte (probe on/off), then the text.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "line_deflate.h"

namespace {

void check_round_trip(const char* text, size_t n, const unsigned char* z, size_t zn) {
  std::vector<unsigned char> back(n + 1);
  z_stream s{};
  if (inflateInit2(&s, -15) != Z_OK) std::abort();
  s.next_in = const_cast<unsigned char*>(z);
  s.avail_in = unsigned(zn);
  s.next_out = back.data();
  s.avail_out = unsigned(back.size());
  int rc = inflate(&s, Z_FINISH);
  size_t got = back.size() - s.avail_out;
  inflateEnd(&s);
  if (rc != Z_STREAM_END || got != n || s.avail_in != 0 || std::memcmp(back.data(), text, n) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool probe = data[0] & 1;
  const char* text = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  std::vector<unsigned char> out(dftracer::line_deflate_bound(n));
  size_t literals = 0, lines = 0;
  size_t zn = dftracer::line_deflate(text, n, out.data(), out.size(), &literals, probe ? 256 : 0, probe ? 5 : 0,
                                     &lines);
  if (zn == 0) {
    if (!probe) std::abort();  // only the probing mode may give up
    return 0;
  }
  if (zn > out.size() || literals > n) std::abort();
  size_t newlines = 0;
  for (size_t i = 0; i < n; ++i) newlines += text[i] == '\n';
  if (lines != newlines) std::abort();
  check_round_trip(text, n, out.data(), zn);
  return 0;
}
