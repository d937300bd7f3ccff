#include "core_test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <simdjson.h>

#include "../../src/format/member.h"

extern char** environ;

namespace dft_test {

namespace {
std::vector<std::string>* g_tmpdirs = nullptr;
pid_t g_owner = 0;
void remove_tmpdirs() {
  if (getpid() != g_owner || !g_tmpdirs) return;  // forked children inherit this handler
  std::error_code ec;
  for (auto& d : *g_tmpdirs) std::filesystem::remove_all(d, ec);
}
}  // namespace

std::string make_tmpdir() {
  char tmpl[] = "/tmp/dft_core_test_XXXXXX";
  char* d = mkdtemp(tmpl);
  if (!d) return std::string("/tmp");
  if (!g_tmpdirs) {
    g_tmpdirs = new std::vector<std::string>();
    g_owner = getpid();
    std::atexit(remove_tmpdirs);
  }
  g_tmpdirs->push_back(d);
  return std::string(d);
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string hostname() {
  char h[256] = {0};
  gethostname(h, sizeof(h) - 1);
  return h;
}

static void clear_dftracer_env() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("DFTRACER_", 0) == 0) names.push_back(kv.substr(0, kv.find('=')));
  }
  for (auto& n : names) unsetenv(n.c_str());
}

int run_child_capture(const std::map<std::string, std::string>& env, const std::function<void()>& fn,
                      std::string* err) {
  int pipefd[2] = {-1, -1};
  if (err && pipe(pipefd) != 0) return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (err) {
      dup2(pipefd[1], 2);
      close(pipefd[0]);
      close(pipefd[1]);
    }
    clear_dftracer_env();
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    fn();
    exit(0);
  }
  if (err) {
    close(pipefd[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) err->append(buf, static_cast<size_t>(n));
    close(pipefd[0]);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

int run_child(const std::map<std::string, std::string>& env, const std::function<void()>& fn) {
  return run_child_capture(env, fn, nullptr);
}

using namespace dftracer::format;

std::vector<Member> walk_members(const std::string& bytes, uint64_t* tail_bytes) {
  std::vector<Member> out;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data());
  uint64_t off = 0, n = bytes.size();
  while (off + kMemberHeaderSize <= n) {
    const unsigned char* h = b + off;
    // The writer's header must be exactly the layout's encoding of the fields it claims.
    MemberHeader parsed = parse_member_header(h, kMemberHeaderSize);
    if (!parsed.ok || !parsed.df || parsed.header_size != kMemberHeaderSize) break;
    unsigned char want[kMemberHeaderSize];
    encode_member_header(want, parsed.fields.member_size, parsed.fields.text_size, parsed.fields.lines);
    if (std::memcmp(h, want, kMemberHeaderSize) != 0) break;
    Member m;
    m.offset = off;
    m.csize = parsed.fields.member_size;
    m.usize = parsed.fields.text_size;
    m.lines = parsed.fields.lines;
    m.version = parsed.fields.version;
    if (m.csize < kMemberHeaderSize + kMemberTrailerSize || off + m.csize > n) break;  // cut (killed mid-write)
    z_stream zs{};
    inflateInit2(&zs, -15);
    m.data.resize(m.usize);
    zs.next_in = const_cast<Bytef*>(h + kMemberHeaderSize);
    zs.avail_in = m.csize - kMemberHeaderSize - kMemberTrailerSize;
    zs.next_out = reinterpret_cast<Bytef*>(m.data.data());
    zs.avail_out = m.usize;
    int rc = inflate(&zs, Z_FINISH);
    bool ok = rc == Z_STREAM_END && zs.total_out == m.usize && zs.avail_in == 0;
    inflateEnd(&zs);
    uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(m.data.data()), m.usize));
    const unsigned char* tr = h + m.csize - kMemberTrailerSize;
    m.inflated_ok = ok && load_u32(tr) == crc && load_u32(tr + 4) == m.usize;
    m.real_lines = static_cast<uint32_t>(std::count(m.data.begin(), m.data.end(), '\n'));
    out.push_back(std::move(m));
    off += out.back().csize;
  }
  if (tail_bytes) *tail_bytes = n - off;
  return out;
}

std::string trace_text(const std::string& path) {
  std::string bytes = read_file(path);
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    std::string text;
    for (auto& m : walk_members(bytes, nullptr)) text += m.data;
    return text;
  }
  return bytes;
}

std::vector<Event> parse_trace(const std::string& text, int* bad) {
  std::vector<Event> out;
  *bad = 0;
  simdjson::dom::parser parser;
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (first) {
      first = false;
      if (line != "[") ++*bad;
      continue;
    }
    simdjson::dom::element doc;
    simdjson::dom::object obj;
    if (parser.parse(line).get(doc) != simdjson::SUCCESS || doc.get_object().get(obj) != simdjson::SUCCESS) {
      ++*bad;
      continue;
    }
    Event e;
    for (auto field : obj) {
      std::string_view k = field.key;
      simdjson::dom::element v = field.value;
      std::string_view s;
      int64_t i;
      if (k == "id" && v.get_int64().get(i) == simdjson::SUCCESS) e.id = i;
      else if (k == "name" && v.get_string().get(s) == simdjson::SUCCESS) e.name = std::string(s);
      else if (k == "cat" && v.get_string().get(s) == simdjson::SUCCESS) e.cat = std::string(s);
      else if (k == "ph" && v.get_string().get(s) == simdjson::SUCCESS) e.ph = std::string(s);
      else if (k == "pid" && v.get_int64().get(i) == simdjson::SUCCESS) e.pid = i;
      else if (k == "tid" && v.get_int64().get(i) == simdjson::SUCCESS) e.tid = i;
      else if (k == "ts" && v.get_int64().get(i) == simdjson::SUCCESS) e.ts = i;
      else if (k == "dur" && v.get_int64().get(i) == simdjson::SUCCESS) e.dur = i;
      else if (k == "args") {
        simdjson::dom::object a;
        if (v.get_object().get(a) == simdjson::SUCCESS) {
          for (auto af : a) {
            std::string_view as;
            if (af.value.get_string().get(as) == simdjson::SUCCESS) e.args[std::string(af.key)] = std::string(as);
            else e.args[std::string(af.key)] = simdjson::minify(af.value);
          }
        }
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace dft_test
