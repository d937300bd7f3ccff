// fd table of the preload library: the cached `"fname":"<escaped path>"` fragment follows
// set/dup/close/reuse of an fd number (src/preload/fd_table.h).
#include <gtest/gtest.h>

#include <string>

#include "../../src/format/json_text.h"
#include "fd_table.h"

using dftracer::preload::FdTable;
using dftracer::preload::PathRef;

static std::string frag_of(const FdTable& t, int fd) {
  PathRef* r = t.get(fd);
  return r ? std::string(r->fname_fragment()) : std::string("<none>");
}

static std::string expected(const std::string& path) {
  std::string out(dftracer::json::max_escaped(path.size()) + 16, '\0');
  char* p = dftracer::json::write_escaped_scalar(&out[0], path.data(), path.size());
  out.resize(static_cast<size_t>(p - out.data()));
  return "\"fname\":\"" + out + "\"";
}

TEST(PreloadFdTable, FragmentFollowsDupCloseReopen) {
  static FdTable t;  // large: not on the stack
  const std::string a = "/data/a.bin";
  const std::string b = "/data/q\"uote\\back\nnl\xc3\xa9\xff/b.bin";  // needs escaping
  const std::string c = "/data/0123456789abcdef/c.bin";
  t.set(5, a);
  EXPECT_EQ(frag_of(t, 5), "\"fname\":\"/data/a.bin\"");
  t.set(9, b);
  EXPECT_EQ(frag_of(t, 9), expected(b));
  EXPECT_EQ(frag_of(t, 9), "\"fname\":\"/data/q\\\"uote\\\\back\\nnl\xc3\xa9\xef\xbf\xbd/b.bin\"");
  t.dup(9, 5);  // dup2(9, 5): fd 5 now names b
  EXPECT_EQ(frag_of(t, 5), expected(b));
  EXPECT_EQ(t.get(5), t.get(9));
  t.clear(9);  // close(9): 5 keeps b
  EXPECT_EQ(frag_of(t, 9), "<none>");
  EXPECT_EQ(frag_of(t, 5), expected(b));
  t.clear(5);
  EXPECT_EQ(frag_of(t, 5), "<none>");
  t.set(5, c);  // fd number reused on another path
  EXPECT_EQ(frag_of(t, 5), "\"fname\":\"/data/0123456789abcdef/c.bin\"");
  EXPECT_EQ(std::string(t.get(5)->view()), c);
  t.dup(7, 5);  // dup2 from an untraced fd clears
  EXPECT_EQ(frag_of(t, 5), "<none>");
  t.set(6, std::string());
  EXPECT_EQ(frag_of(t, 6), "\"fname\":\"\"");
  t.clear_range(0, 100);
}

// Unknown (no entry), untraced (a marker, never dereferenced) and install (first answer wins), as the
// preload's /proc resolution of inherited fds uses them (issue 21).
TEST(PreloadFdTable, UntracedAndInstall) {
  static FdTable t;
  EXPECT_EQ(t.get(3), nullptr);
  t.set_untraced(3);
  EXPECT_EQ(t.get(3), FdTable::untraced());
  EXPECT_FALSE(FdTable::is_path(t.get(3)));
  t.dup(3, 4);  // a dup of an untraced fd is untraced, not unknown
  EXPECT_EQ(t.get(4), FdTable::untraced());
  t.clear(3);
  t.clear(4);
  EXPECT_EQ(t.get(3), nullptr);
  PathRef* first = t.install(8, FdTable::make("/data/in.bin"));
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(FdTable::is_path(first));
  EXPECT_EQ(t.install(8, FdTable::untraced()), first);  // a second answer loses
  EXPECT_EQ(t.install(8, FdTable::make("/data/other")), first);
  EXPECT_EQ(std::string(t.get(8)->view()), "/data/in.bin");
  t.clear_range(0, 100);
  EXPECT_EQ(t.get(8), nullptr);
}
