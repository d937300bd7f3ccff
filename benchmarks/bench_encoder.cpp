// Trace encoder benchmark (docs/perf/preload.md, "Encoder, round 5"): compresses a plain trace
// (JSON lines, e.g. a decompressed preload trace) in chunks cut at line ends, as the writer does,
// checks each chunk by inflating it with zlib, and prints bytes per line.
//
// Usage: bench_encoder FILE [mode=line] [chunk_bytes=4194304]
//   mode line   : line_deflate alone (no probe; the encoder's own cost and size)
//   mode member1: MemberEncoder level 1 (adaptive: line_deflate, libdeflate 6 when it gives up)
//   mode memberN: MemberEncoder level N (2..9: libdeflate or zlib)
// For instructions of the compressor only:
//   valgrind --tool=callgrind --toggle-collect='dftracer::line_deflate*' bench_encoder FILE line
// (divide by the printed line count).
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gzip_member.h"
#include "line_deflate.h"

namespace {

bool inflates_to(const unsigned char* z, size_t zn, const char* text, size_t n) {
  z_stream zs{};
  if (inflateInit2(&zs, -15) != Z_OK) return false;
  std::string back(n + 16, '\0');
  zs.next_in = const_cast<unsigned char*>(z);
  zs.avail_in = static_cast<uInt>(zn);
  zs.next_out = reinterpret_cast<Bytef*>(&back[0]);
  zs.avail_out = static_cast<uInt>(back.size());
  int rc = inflate(&zs, Z_FINISH);
  inflateEnd(&zs);
  return rc == Z_STREAM_END && zs.total_out == n && std::memcmp(back.data(), text, n) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [line|member1..member9] [chunk_bytes]\n", argv[0]);
    return 2;
  }
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  std::string text;
  char buf[1 << 16];
  size_t k;
  while ((k = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, k);
  std::fclose(f);
  std::string mode = argc > 2 ? argv[2] : "line";
  size_t chunk = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (4u << 20);
  bool line_mode = mode == "line";
  int level = line_mode ? 1 : std::atoi(mode.c_str() + 6);
  if (!line_mode && (mode.compare(0, 6, "member") != 0 || level < 1 || level > 9 || chunk == 0)) {
    std::fprintf(stderr, "bad mode %s\n", mode.c_str());
    return 2;
  }
  dftracer::MemberEncoder enc(level);
  std::vector<unsigned char> out;
  size_t total = 0, lines = dftracer::count_lines(text.data(), text.size());
  bool ok = true;
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.size(), at + chunk);
    if (end < text.size()) {
      size_t nl = text.rfind('\n', end - 1);
      if (nl != std::string::npos && nl >= at) end = nl + 1;
    }
    size_t n = end - at;
    const char* in = text.data() + at;
    if (line_mode) {
      out.resize(dftracer::line_deflate_bound(n));
      size_t c = dftracer::line_deflate(in, n, out.data(), out.size());
      ok = ok && c > 0 && inflates_to(out.data(), c, in, n);
      total += c;
    } else {
      dftracer::MemberEncoder::Span s{in, n};
      ok = ok && enc.encode(&s, 1);
      const unsigned char* m = reinterpret_cast<const unsigned char*>(enc.member_data());
      ok = ok && inflates_to(m + dftracer::kMemberHeaderSize,
                             enc.member_size() - dftracer::kMemberHeaderSize - dftracer::kMemberTrailerSize, in, n);
      total += enc.member_size();
    }
    at = end;
  }
  std::printf("%s: %s, %zu bytes in, %zu lines, %zu bytes out, %.3f B/line\n", mode.c_str(),
              ok ? "ok" : "ROUND TRIP FAILED", text.size(), lines, total,
              lines ? static_cast<double>(total) / lines : 0.0);
  return ok ? 0 : 1;
}
