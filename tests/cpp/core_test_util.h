// Helpers for the core tests: run tracer code in a forked child (config() is read once per
// process), read traces back (gzip members walked header by header), validate every line.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dft_test {

std::string make_tmpdir();
std::vector<std::string> list_dir(const std::string& dir);  // file names, sorted
std::string read_file(const std::string& path);
std::string hostname();

// fork(); in the child: set env (after clearing every DFTRACER_* var), run fn, exit(0) through
// exit() so atexit handlers run. Returns the raw waitpid status.
int run_child(const std::map<std::string, std::string>& env, const std::function<void()>& fn);
// Like run_child but also captures the child's stderr.
int run_child_capture(const std::map<std::string, std::string>& env, const std::function<void()>& fn, std::string* err);

struct Member {
  uint64_t offset = 0;
  uint32_t csize = 0, usize = 0, lines = 0, version = 0;
  bool inflated_ok = false;  // raw deflate decoded, CRC and ISIZE match
  uint32_t real_lines = 0;   // '\n' in the inflated data
  std::string data;
};
// Walks the 'D''F' member headers. *tail_bytes = bytes after the last complete member.
std::vector<Member> walk_members(const std::string& file_bytes, uint64_t* tail_bytes);
// Whole uncompressed text of a .pfw or .pfw.gz (complete members only).
std::string trace_text(const std::string& path);

struct Event {
  int64_t id = -1;
  std::string name, cat, ph;
  int64_t pid = 0, tid = 0, ts = 0, dur = -1;
  std::map<std::string, std::string> args;  // raw JSON of each value
};
// Splits lines; line 0 must be "[". Each other line parsed with simdjson (DOM, full validation).
// *bad = number of lines that are not valid JSON objects.
std::vector<Event> parse_trace(const std::string& text, int* bad);

}  // namespace dft_test
