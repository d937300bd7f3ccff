// libFuzzer target: the 'DF' header fields (compressed size, uncompressed size, line count,
// version) of a 3-member trace written by the tracer's MemberEncoder are overwritten from the
// fuzz input, the deflate data and trailers are left intact. Whatever the headers claim, the
// reader must deliver exactly the original text (every member passes its CRC) and a verified
// index must number the lines exactly; a lie may only cost a counted warning. Aborts otherwise.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gzip_member.h"
#include "reader.h"

namespace {
std::string member_text(int m) {
  std::string s = m == 0 ? "[\n" : "";
  for (int i = 0; i < 40 + 13 * m; ++i)
    s += "{\"id\":" + std::to_string(m * 100 + i) +
         ",\"name\":\"read\",\"cat\":\"POSIX\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(1000 + i) +
         ",\"dur\":" + std::to_string(i % 9) + ",\"ph\":\"X\"}\n";
  return s;
}
void put32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + size_t(i)] = char(v >> (8 * i));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dftracer::reader;
  static std::string dir = [] {
    char t[] = "/tmp/dft-fuzzh-XXXXXX";
    return std::string(mkdtemp(t));
  }();
  static std::string text[3], mem[3];
  static bool init = [] {
    dftracer::MemberEncoder enc(6);
    for (int m = 0; m < 3; ++m) {
      text[m] = member_text(m);
      enc.encode(text[m].data(), text[m].size(), &mem[m]);
    }
    return true;
  }();
  (void)init;
  std::string file = mem[0] + mem[1] + mem[2];
  size_t base[3] = {0, mem[0].size(), mem[0].size() + mem[1].size()};
  // Each 5-byte record: member (byte % 3), field (byte / 3 % 4), then a u32. Values < 8 pick a
  // plausible forgery (sizes of neighbouring members, sums, off-by-one) instead of the raw u32.
  for (size_t i = 0; i + 5 <= size; i += 5) {
    int m = data[i] % 3, field = data[i] / 3 % 4;
    uint32_t v;
    std::memcpy(&v, data + i + 1, 4);
    int n = (m + 1) % 3;
    uint32_t choices[8] = {uint32_t(mem[m].size() + mem[n].size()),
                           uint32_t(mem[n].size()),
                           uint32_t(text[n].size()),
                           uint32_t(text[m].size() + 1),
                           uint32_t(text[m].size() - 1),
                           0u,
                           1u,
                           0xFFFFFFF0u};
    if (v >> 29 == 0) v = choices[v & 7];
    put32(file, base[m] + 16 + size_t(field) * 4, v);
  }
  std::string path = dir + "/h.pfw.gz";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(file.data(), 1, file.size(), f);
  std::fclose(f);
  const std::string want = text[0] + text[1] + text[2];
  for (bool verify : {false, true}) {
    IndexInfo idx = build_index(path, dir, true, verify);
    RangeData r = read_checkpoints(idx, 0, int64_t(idx.checkpoints.size()) - 1);
    if (r.data != want || r.lost_lines || r.lost_bytes) {
      std::fprintf(stderr, "verify=%d: delivered %zu bytes (want %zu), lost %lld lines\n", int(verify), r.data.size(),
                   want.size(), static_cast<long long>(r.lost_lines));
      std::abort();
    }
    if (verify) {
      LinesResult l = read_lines_checked(idx, 0, 1 << 20);
      std::string joined;
      for (auto& s : l.lines) joined += s + "\n";
      if (joined != want || l.needs_verified_index || l.line_count_mismatch ||
          idx.lines != int64_t(std::count(want.begin(), want.end(), '\n'))) {
        std::fprintf(stderr, "verified index: lines differ (%lld indexed)\n", static_cast<long long>(idx.lines));
        std::abort();
      }
    }
  }
  return 0;
}
