// Index building (member hop, inflate pass, plain scan) and SQLite persistence.
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef DFTRACER_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {
namespace {

constexpr int64_t kWindow = 32768;

uint32_t rd32(const unsigned char* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}
uint16_t rd16(const unsigned char* p) { return uint16_t(p[0] | (p[1] << 8)); }

std::string abs_path(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf)) return buf;
  throw ReaderError(p + ": no such file");
}

bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

// ---- gzip header parsing ----------------------------------------------------------------------

struct GzHeader {
  bool ok = false;       // a syntactically valid gzip header
  bool df = false;       // carries our 'DF' subfield
  int64_t header_len = 0;
  uint32_t csize = 0, usize = 0, nlines = 0, version = 0;
};

// Parses a gzip member header from p[0..n). Needs the whole header in the buffer.
GzHeader parse_header(const unsigned char* p, size_t n) {
  GzHeader h;
  if (n < 10 || p[0] != 0x1f || p[1] != 0x8b || p[2] != 8) return h;
  int flg = p[3];
  if (flg & 0xe0) return h;
  size_t pos = 10;
  if (flg & 4) {
    if (pos + 2 > n) return h;
    size_t xlen = rd16(p + pos);
    pos += 2;
    if (pos + xlen > n) return h;
    size_t e = pos, end = pos + xlen;
    while (e + 4 <= end) {
      size_t slen = rd16(p + e + 2);
      if (e + 4 + slen > end) break;
      if (p[e] == 'D' && p[e + 1] == 'F' && slen == 16) {
        h.csize = rd32(p + e + 4);
        h.usize = rd32(p + e + 8);
        h.nlines = rd32(p + e + 12);
        h.version = rd32(p + e + 16);
        h.df = h.version == 1 && h.csize >= 20;
      }
      e += 4 + slen;
    }
    pos = end;
  }
  for (int bit : {8, 16}) {
    if (flg & bit) {
      const void* z = pos < n ? std::memchr(p + pos, 0, n - pos) : nullptr;
      if (!z) return h;
      pos = size_t(static_cast<const unsigned char*>(z) - p) + 1;
    }
  }
  if (flg & 2) pos += 2;
  if (pos > n) return h;
  h.ok = true;
  h.header_len = int64_t(pos);
  return h;
}

void merge_context(const FileContext& from, FileContext& to) {
  for (auto& [k, v] : from.fh) to.fh[k] = v;  // later records win, as in collect_context
  for (auto& [k, v] : from.hh) to.hh[k] = v;
  for (auto& [k, v] : from.sh) to.sh[k] = v;
  if (to.hostname.empty()) to.hostname = from.hostname;
}

// ---- line tracking over a linear output stream -------------------------------------------------

// Receives decoded bytes in order; counts lines, places line-aligned checkpoints and collects
// per-file context from metadata lines.
class Tracker {
 public:
  explicit Tracker(IndexInfo& info) : info_(info) { buf_.resize(kCap + 64); }

  // Space for at least `want` more bytes; returns write pointer.
  char* space(size_t want, size_t* avail) {
    if (len_ + want > kCap) compact(want);
    *avail = buf_.size() - 64 - len_;
    return buf_.data() + len_;
  }
  void commit(size_t n) {
    const char* p = buf_.data() + len_;
    process(p, n);
    len_ += n;
    total_ += int64_t(n);
  }
  int64_t total() const { return total_; }
  bool at_line_start() const { return total_ == 0 || last_nl_ == total_; }
  // Last `n` bytes of output (n <= kWindow, n <= bytes kept).
  std::string tail(int64_t n) const { return std::string(buf_.data() + len_ - n, size_t(n)); }

  // Starts a checkpoint at the next line start at or after the current output position.
  void mark(Checkpoint cp) {
    if (pending_) return;
    cp.block_offset = total_;
    if (at_line_start()) {
      place(cp, total_);
    } else {
      pend_ = std::move(cp);
      pending_ = true;
    }
  }
  bool pending() const { return pending_; }
  int64_t since_last_checkpoint() const { return total_ - last_cp_u_; }

  // Closes the index: `clean` = stream ended normally (an unterminated last line counts).
  void finish(bool clean) {
    pending_ = false;
    flush_context(true, clean);
    merge_context(member_ctx_, info_.context);
    member_ctx_ = FileContext{};
    int64_t end = last_nl_;
    int64_t lines = lines_;
    if (clean && total_ > last_nl_) {
      end = total_;
      lines += 1;
    } else if (!clean) {
      info_.truncated_bytes += total_ - last_nl_;
    }
    auto& cps = info_.checkpoints;
    while (!cps.empty() && !(cps.back().flags & kLost) && cps.back().uncompressed_offset >= end) cps.pop_back();
    close_last(end, lines);
    info_.lines = lines;
    info_.uncompressed_bytes = end;
  }
  // Marks the start of a gzip member: context collected so far is kept (its members passed
  // their CRC), what the new member adds is held until end_member() or drop_member().
  void begin_member() {
    end_member();
    m_total_ = total_;
    m_last_nl_ = last_nl_;
    m_lines_ = lines_;
  }
  // The member passed its CRC32/ISIZE check: adopt the context its lines defined.
  void end_member() {
    flush_context(true, false);
    merge_context(member_ctx_, info_.context);
    member_ctx_ = FileContext{};
  }
  // The member failed (bad data, CRC32 or ISIZE): none of its lines is kept, nor the line it
  // finishes. Closes the running checkpoint at the last line end before the member and adds a
  // lost region [lost_compressed_offset, +lost_size). Returns the lines lost (as decoded).
  int64_t drop_member(int64_t lost_compressed_offset, int64_t lost_size) {
    pending_ = false;
    int64_t keep = m_last_nl_;
    int64_t lost_lines = (lines_ - m_lines_) + (total_ > last_nl_ ? 1 : 0);
    auto& cps = info_.checkpoints;
    while (!cps.empty() && !(cps.back().flags & kLost) && cps.back().uncompressed_offset >= keep) cps.pop_back();
    lines_ = m_lines_;
    last_nl_ = keep;
    close_last(keep, lines_);
    int64_t drop = total_ - keep;
    total_ = keep;
    len_ -= size_t(std::min<int64_t>(drop, int64_t(len_)));
    ctx_done_ = std::min(ctx_done_, keep);
    member_ctx_ = FileContext{};
    m_total_ = total_;
    Checkpoint lost;
    lost.compressed_offset = lost_compressed_offset;
    lost.compressed_size = lost_size;
    lost.uncompressed_offset = total_;
    lost.first_line = lines_;
    lost.block_offset = total_;
    lost.flags = kLost;
    lost.lost_lines = lost_lines;
    cps.push_back(lost);
    info_.lost_bytes += lost_size;
    info_.lost_lines += lost_lines;
    last_cp_u_ = total_;
    return lost_lines;
  }

 private:
  static constexpr size_t kCap = 4 << 20;

  void close_last(int64_t end, int64_t lines) {
    auto& cps = info_.checkpoints;
    if (cps.empty() || (cps.back().flags & kLost)) return;
    auto& c = cps.back();
    c.uncompressed_size = end - c.uncompressed_offset;
    c.num_lines = lines - c.first_line;
    if (c.uncompressed_size <= 0) cps.pop_back();
  }
  void place(Checkpoint& cp, int64_t u) {
    close_last(u, lines_);
    cp.uncompressed_offset = u;
    cp.first_line = lines_;
    info_.checkpoints.push_back(std::move(cp));
    last_cp_u_ = u;
  }
  void process(const char* p, size_t n) {
    const char* end = p + n;
    const char* q = p;
    while (q < end) {
      const char* nl = static_cast<const char*>(std::memchr(q, '\n', size_t(end - q)));
      if (!nl) break;
      ++lines_;
      last_nl_ = total_ + (nl + 1 - p);
      if (pending_) {
        pending_ = false;
        place(pend_, last_nl_);
      }
      q = nl + 1;
    }
    if (!pending_) ctx_dirty_ = true;
    flush_context(false, false);
  }
  // Runs collect_context over complete lines not yet examined.
  void flush_context(bool force, bool clean) {
    int64_t upto = (clean && force) ? total_ : last_nl_;
    int64_t from = ctx_done_;
    if (upto <= from) return;
    if (!force && upto - from < (256 << 10)) return;
    int64_t base = total_ - int64_t(len_);  // absolute offset of buf_[0]
    if (from < base) from = base;
    collect_context(buf_.data() + (from - base), size_t(upto - from), member_ctx_);
    ctx_done_ = upto;
  }
  void compact(size_t want) {
    flush_context(true, false);
    int64_t base = total_ - int64_t(len_);
    int64_t keep_from = std::min<int64_t>(total_ - std::min<int64_t>(kWindow, total_ - base), ctx_done_);
    keep_from = std::max(keep_from, base);
    size_t drop = size_t(keep_from - base);
    std::memmove(buf_.data(), buf_.data() + drop, len_ - drop);
    len_ -= drop;
    if (len_ + want > buf_.size() - 64) buf_.resize(len_ + want + 64);
  }

  IndexInfo& info_;
  std::vector<char> buf_;
  size_t len_ = 0;
  int64_t total_ = 0, last_nl_ = 0, lines_ = 0, last_cp_u_ = 0, ctx_done_ = 0;
  int64_t m_total_ = 0, m_last_nl_ = 0, m_lines_ = 0;  // state at the current member's start
  bool pending_ = false, ctx_dirty_ = false;
  Checkpoint pend_;
  FileContext member_ctx_;  // context from the current member's lines (not yet CRC-checked)
};

// ---- kind (c): plain ---------------------------------------------------------------------------

void index_plain(const File& f, IndexInfo& info) {
  Tracker t(info);
  int64_t off = 0;
  Checkpoint first;
  t.mark(first);
  while (off < f.size()) {
    size_t avail;
    char* p = t.space(1 << 20, &avail);
    size_t want = std::min<size_t>(avail, 1 << 20);
    size_t got = f.pread_full(p, want, off);
    if (got == 0) break;
    if (t.since_last_checkpoint() >= kInflateSpan && !t.pending()) {
      Checkpoint cp;
      t.mark(cp);
    }
    t.commit(got);
    off += int64_t(got);
  }
  t.finish(true);
  for (auto& c : info.checkpoints) {
    c.compressed_offset = c.uncompressed_offset;
    c.compressed_size = c.uncompressed_size;
    c.block_offset = c.uncompressed_offset;
  }
}

// ---- kind (b): inflate pass --------------------------------------------------------------------

// Finds the next plausible gzip member start at or after `from`; returns -1 if none.
int64_t resync(const File& f, int64_t from) {
  std::vector<unsigned char> buf(1 << 20);
  while (from < f.size()) {
    size_t got = f.pread_full(buf.data(), buf.size(), from);
    if (got < 10) return -1;
    for (size_t i = 0; i + 10 <= got; ++i) {
      const unsigned char* q = static_cast<const unsigned char*>(std::memchr(buf.data() + i, 0x1f, got - 10 - i + 1));
      if (!q) break;
      i = size_t(q - buf.data());
      if (q[1] == 0x8b && q[2] == 8 && !(q[3] & 0xe0)) {
        GzHeader h = parse_header(q, got - i);
        if (h.ok) return from + int64_t(i);
      }
    }
    if (got < buf.size()) return -1;
    from += int64_t(got) - 9;
  }
  return -1;
}

void index_inflate(const File& f, IndexInfo& info) {
  Tracker t(info);
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  std::vector<unsigned char> in(1 << 18);
  int64_t in_off = 0;         // file offset of in[0]
  int64_t member_start = 0;   // compressed offset of the current member
  int64_t member_u = 0;       // uncompressed offset of the current member
  bool clean = false;
  bool new_member = true;
  zs.avail_in = 0;
  auto consumed = [&]() { return in_off + int64_t(zs.next_in - in.data()); };
  for (;;) {
    if (zs.avail_in == 0) {
      in_off = zs.next_in ? consumed() : in_off;
      size_t got = f.pread_full(in.data(), in.size(), in_off);
      zs.next_in = in.data();
      zs.avail_in = uInt(got);
      if (got == 0) {
        clean = new_member;  // input ended exactly at a member end
        break;
      }
    }
    if (new_member) {
      Checkpoint cp;
      cp.compressed_offset = consumed();
      cp.flags = kMemberStart;
      member_start = cp.compressed_offset;
      member_u = t.total();
      t.begin_member();
      t.mark(cp);
      new_member = false;
    }
    size_t avail;
    char* out = t.space(1 << 16, &avail);
    zs.next_out = reinterpret_cast<Bytef*>(out);
    zs.avail_out = uInt(std::min<size_t>(avail, 1 << 20));
    uInt before = zs.avail_out;
    int rc = inflate(&zs, Z_BLOCK);
    t.commit(before - zs.avail_out);
    if (rc == Z_STREAM_END) {
      // Trailing zero padding after the last member is tolerated.
      int64_t pos = consumed();
      if (pos >= f.size()) {
        clean = true;
        break;
      }
      unsigned char peek[2] = {0, 0};
      f.pread_full(peek, 2, pos);
      if (peek[0] != 0x1f || peek[1] != 0x8b) {
        info.lost_bytes += f.size() - pos;
        clean = true;
        break;
      }
      inflateReset(&zs);
      new_member = true;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;  // need input
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      // Corrupt data, CRC32 or ISIZE mismatch: the whole member is a lost region (its lines
      // decoded so far are dropped, never delivered), up to the next gzip header.
      int64_t err_at = consumed();
      int64_t next = resync(f, std::max(err_at, member_start + 1));
      int64_t lost_to = next < 0 ? f.size() : next;
      t.drop_member(member_start, lost_to - member_start);
      if (next < 0) {
        clean = true;
        break;
      }
      inflateReset(&zs);
      zs.avail_in = 0;
      zs.next_in = nullptr;
      in_off = next;
      new_member = true;
      continue;
    }
    // At a deflate block boundary (not the last block): maybe add a zran-style checkpoint.
    if ((zs.data_type & 0xc0) == 0x80 && t.total() > member_u && t.since_last_checkpoint() >= kInflateSpan &&
        !t.pending()) {
      Checkpoint cp;
      int bits = zs.data_type & 7;
      int64_t pos = consumed();
      cp.compressed_offset = pos - (bits ? 1 : 0);
      cp.bit_offset = bits;
      int64_t wlen = std::min<int64_t>(kWindow, t.total() - member_u);
      cp.window = t.tail(wlen);
      t.mark(cp);
    }
  }
  inflateEnd(&zs);
  t.finish(clean);
  auto& cps = info.checkpoints;
  for (size_t i = 0; i < cps.size(); ++i) {
    if (cps[i].flags & kLost) continue;
    int64_t next = i + 1 < cps.size() ? cps[i + 1].compressed_offset : f.size();
    cps[i].compressed_size = std::max<int64_t>(0, next - cps[i].compressed_offset);
  }
}

// ---- kind (a): member hop ----------------------------------------------------------------------

// Plain inflation of one member starting at `off` (any gzip header), with zlib's CRC32/ISIZE
// check. Memory is bounded (chunks of output; context lines are collected as they complete).
struct MemberScan {
  int64_t csize = -1;                   // compressed length with trailer; -1 if cut short
  int64_t u_total = 0, u_whole = 0, lines = 0;  // bytes, bytes of whole lines, '\n' count
  bool corrupt = false;                 // bad data, CRC32 or ISIZE
};
MemberScan scan_member(const File& f, int64_t off, FileContext& ctx) {
  MemberScan r;
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  std::vector<unsigned char> in(1 << 18);
  std::vector<char> out(1 << 18);
  std::string carry;  // bytes of the current unfinished line (capped: context lines are short)
  FileContext local;
  int64_t pos = off;
  for (;;) {
    if (zs.avail_in == 0) {
      size_t got = f.pread_full(in.data(), in.size(), pos);
      pos += int64_t(got);
      zs.next_in = in.data();
      zs.avail_in = uInt(got);
      if (got == 0) break;  // cut short
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = uInt(out.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    size_t n = out.size() - zs.avail_out;
    const char* last = nullptr;
    for (const char* q = out.data(); (q = static_cast<const char*>(std::memchr(q, '\n', size_t(out.data() + n - q))));
         ++q) {
      ++r.lines;
      last = q;
    }
    if (last) {
      size_t head = size_t(last + 1 - out.data());
      if (!carry.empty()) {
        carry.append(out.data(), head);
        collect_context(carry.data(), carry.size(), local);
        carry.clear();
      } else {
        collect_context(out.data(), head, local);
      }
      r.u_whole = r.u_total + int64_t(head);
      carry.assign(out.data() + head, n - head);
    } else if (carry.size() < (1u << 20)) {
      carry.append(out.data(), n);
    }
    r.u_total += int64_t(n);
    if (rc == Z_STREAM_END) {
      r.csize = pos - int64_t(zs.avail_in) - off;
      if (!carry.empty()) collect_context(carry.data(), carry.size(), local);  // unterminated last line
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;
    if (rc != Z_OK) {
      r.corrupt = true;
      break;
    }
  }
  inflateEnd(&zs);
  if (!r.corrupt) merge_context(local, ctx);
  return r;
}

// Checks a 'DF' header against what the hop can see without inflating: the member fits the file,
// its uncompressed size is possible for deflate and equals the trailer's ISIZE, it has no more
// lines than bytes, and a gzip header (or the end of the file, or zero padding to it) follows.
// Returns the first disagreement, or nullptr. CRC32 and the line count need the data: they are
// checked when the member is read (batch.cpp).
const char* df_header_disagreement(const File& f, int64_t off, const GzHeader& h) {
  int64_t cs = h.csize;
  if (cs < h.header_len + 2 + 8) return "compressed size smaller than header + deflate + trailer";
  if (off + cs > f.size()) return "compressed size runs past the end of the file";
  if (int64_t(h.usize) > kMaxInflateRatio * cs) return "uncompressed size beyond what deflate can produce";
  if (h.nlines > h.usize) return "more lines than bytes";
  unsigned char t[8 + 512];
  size_t got = f.pread_full(t, sizeof t, off + cs - 8);
  if (got < 8) return "trailer missing";
  if (rd32(t + 4) != h.usize) return "uncompressed size differs from the trailer's ISIZE";
  if (got > 8) {
    GzHeader next = parse_header(t + 8, got - 8);
    bool zeros = off + cs + int64_t(got - 8) == f.size();
    for (size_t i = 8; i < got && zeros; ++i) zeros = t[i] == 0;
    if (!next.ok && !zeros) return "no gzip header where the next member should start";
  }
  return nullptr;
}

// Inflates a member whose header passed df_header_disagreement and compares the data with every
// header field: compressed bytes consumed, uncompressed size, line count. kBadData: the deflate
// data or its CRC32 is bad; the member stays as its (trailer-consistent) header describes it and
// the reader reports its lines lost, as an unverified index would.
enum class MemberCheck { kMatch, kMismatch, kBadData };
MemberCheck df_member_check(const File& f, int64_t off, const GzHeader& h, std::vector<unsigned char>& in,
                       std::string& out) {
  in.resize(h.csize);
  if (f.pread_full(in.data(), h.csize, off) != h.csize) return MemberCheck::kMismatch;
  out.resize(size_t(h.usize) + 1);
#ifdef DFTRACER_HAVE_LIBDEFLATE
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> ld(libdeflate_alloc_decompressor(),
                                                                                 libdeflate_free_decompressor);
  if (!ld) throw ReaderError("libdeflate: out of memory");
  size_t in_n = 0, out_n = 0;
  libdeflate_result rc = libdeflate_gzip_decompress_ex(ld.get(), in.data(), in.size(), out.data(), out.size(), &in_n, &out_n);
  if (rc == LIBDEFLATE_BAD_DATA) return MemberCheck::kBadData;
  if (rc != LIBDEFLATE_SUCCESS || in_n != h.csize || out_n != h.usize) return MemberCheck::kMismatch;
#else
  z_stream zs{};
  if (inflateInit2(&zs, 31) != Z_OK) throw ReaderError("zlib init failed");
  zs.next_in = in.data();
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  int rc = inflate(&zs, Z_FINISH);
  bool ok = rc == Z_STREAM_END && zs.avail_in == 0 && zs.total_out == h.usize;
  inflateEnd(&zs);
  if (rc == Z_DATA_ERROR) return MemberCheck::kBadData;
  if (!ok) return MemberCheck::kMismatch;
#endif
  return count_newlines(out.data(), h.usize) == int64_t(h.nlines) ? MemberCheck::kMatch : MemberCheck::kMismatch;
}

int64_t find_df_header(const File& f, int64_t from) {
  while (from >= 0 && from < f.size()) {
    int64_t at = resync(f, from);
    if (at < 0) return -1;
    unsigned char hb[64];
    size_t got = f.pread_full(hb, sizeof hb, at);
    GzHeader h = parse_header(hb, got);
    if (h.ok && h.df && at + int64_t(h.csize) <= f.size()) return at;
    from = at + 1;
  }
  return -1;
}

void index_members(const File& f, IndexInfo& info, bool verify) {
  int64_t off = 0, u = 0, line = 0;
  unsigned char hb[512];
  auto& cps = info.checkpoints;
  std::vector<unsigned char> vin;  // verify mode buffers
  std::string vout;
  while (off < f.size()) {
    size_t got = f.pread_full(hb, sizeof hb, off);
    GzHeader h = parse_header(hb, got);
    Checkpoint cp;
    cp.compressed_offset = off;
    cp.block_offset = u;
    cp.uncompressed_offset = u;
    cp.first_line = line;
    cp.flags = kMemberStart;
    bool zero_tail = true;
    for (size_t i = 0; i < got && zero_tail; ++i) zero_tail = hb[i] == 0;
    if (h.ok && h.df && !df_header_disagreement(f, off, h) &&
        (!verify || df_member_check(f, off, h, vin, vout) != MemberCheck::kMismatch)) {
      if (verify) cp.flags |= kVerified;
      cp.compressed_size = h.csize;
      cp.uncompressed_size = h.usize;
      cp.num_lines = h.nlines;
      cps.push_back(cp);
      off += h.csize;
      u += h.usize;
      line += h.nlines;
      continue;
    }
    int64_t lost_lines = 0;
    if (h.ok) {
      // No 'DF' subfield, or one the member disagrees with: plain inflation of this member.
      MemberScan m = scan_member(f, off, info.context);
      if (!m.corrupt) {
        bool cut = m.csize < 0;
        int64_t keep = cut ? m.u_whole : m.u_total;
        cp.compressed_size = cut ? f.size() - off : m.csize;
        cp.uncompressed_size = keep;
        cp.num_lines = m.lines + ((!cut && m.u_total > m.u_whole) ? 1 : 0);
        cp.flags |= kVerified;  // all values come from the data
        if (h.df && !cut && (int64_t(h.csize) != m.csize || int64_t(h.usize) != m.u_total || int64_t(h.nlines) != m.lines)) {
          cp.flags |= kHeaderMismatch;
          info.header_mismatches += 1;
        }
        if (cut) {
          cp.flags |= kTruncated;
          bool claim_ok = h.df && int64_t(h.usize) >= m.u_total && int64_t(h.usize) <= kMaxInflateRatio * (f.size() - off);
          info.truncated_bytes += (claim_ok ? int64_t(h.usize) : m.u_total) - keep;
        }
        if (keep > 0) cps.push_back(cp);
        off += cp.compressed_size;
        u += keep;
        line += cp.num_lines;
        continue;
      }
      lost_lines = m.lines + (m.u_total > m.u_whole ? 1 : 0);  // decoded before the failure
    }
    if (zero_tail && got < sizeof hb) {  // zero padding at the end
      info.lost_bytes += f.size() - off;
      break;
    }
    // Corrupt header or data: lost region up to the next valid member header.
    int64_t next = find_df_header(f, off + 1);
    int64_t end = next < 0 ? f.size() : next;
    if (next < 0 && !h.ok && got < 32) {
      info.truncated_bytes += end - off;  // a header cut short at the end of the file
      break;
    }
    cp.flags = kLost;
    cp.compressed_size = end - off;
    cp.uncompressed_size = 0;
    cp.num_lines = 0;
    cp.lost_lines = lost_lines;
    cps.push_back(cp);
    info.lost_bytes += end - off;
    info.lost_lines += lost_lines;
    off = end;
  }
  info.lines = line;
  info.uncompressed_bytes = u;
}

// ---- SQLite ------------------------------------------------------------------------------------
// Every SQLite return code is checked: a failed prepare, bind, step or exec throws ReaderError.

void exec_sql(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw ReaderError("index: " + m);
  }
}

struct Db {
  sqlite3* db = nullptr;
  Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    if (db) sqlite3_close(db);
  }
  void exec(const char* sql) { exec_sql(db, sql); }
};

struct Stmt {
  sqlite3_stmt* st = nullptr;
  Stmt(sqlite3* db, const char* sql) {
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK)
      throw ReaderError(std::string("index: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(st); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  void check(int rc) const {
    if (rc != SQLITE_OK) throw ReaderError(std::string("index: bind: ") + sqlite3_errmsg(sqlite3_db_handle(st)));
  }
  void bind(int i, int64_t v) { check(sqlite3_bind_int64(st, i, v)); }
  void bind(int i, const std::string& v) {
    check(sqlite3_bind_text(st, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
  }
  void bind_blob(int i, const void* p, size_t n) { check(sqlite3_bind_blob(st, i, p, int(n), SQLITE_TRANSIENT)); }
  void bind_null(int i) { check(sqlite3_bind_null(st, i)); }
  bool step() {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw ReaderError(std::string("index: ") + sqlite3_errmsg(sqlite3_db_handle(st)));
  }
  void reset() {
    sqlite3_reset(st);  // returns the last step's error, already thrown by step()
    check(sqlite3_clear_bindings(st));
  }
  // Text of column i ("" for NULL); `ok` is cleared when the column is not TEXT.
  std::string text(int i, bool* ok = nullptr) const {
    if (ok && sqlite3_column_type(st, i) != SQLITE_TEXT) *ok = false;
    const unsigned char* p = sqlite3_column_text(st, i);
    return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(st, i))) : std::string();
  }
  // Integer column i; `ok` is cleared when it is not INTEGER.
  int64_t integer(int i, bool* ok) const {
    if (sqlite3_column_type(st, i) != SQLITE_INTEGER) *ok = false;
    return sqlite3_column_int64(st, i);
  }
};

// Tables are created with IF NOT EXISTS and read by name: a later version may add tables or
// metadata keys that this reader ignores; a change old readers would misread bumps
// kIndexFormatVersion (docs/index.md, "Schema").
const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS metadata(key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS checkpoints(
  number INTEGER PRIMARY KEY, compressed_offset INTEGER, compressed_size INTEGER,
  uncompressed_offset INTEGER, uncompressed_size INTEGER, first_line INTEGER, num_lines INTEGER,
  bit_offset INTEGER, block_offset INTEGER, flags INTEGER, window BLOB, lost_lines INTEGER);
CREATE TABLE IF NOT EXISTS context(kind TEXT, hash TEXT, value TEXT, PRIMARY KEY(kind, hash));
CREATE TABLE IF NOT EXISTS arg_columns(key TEXT PRIMARY KEY, dtype TEXT);
)SQL";

void put_meta(sqlite3* db, const char* key, int64_t v) {
  Stmt s(db, "INSERT OR REPLACE INTO metadata(key, value) VALUES(?, ?)");
  s.bind(1, std::string(key));
  s.bind(2, v);
  s.step();
}
void put_meta(sqlite3* db, const char* key, const std::string& v) {
  Stmt s(db, "INSERT OR REPLACE INTO metadata(key, value) VALUES(?, ?)");
  s.bind(1, std::string(key));
  s.bind(2, v);
  s.step();
}

void write_context(sqlite3* db, const FileContext& ctx) {
  Stmt s(db, "INSERT OR REPLACE INTO context(kind, hash, value) VALUES(?, ?, ?)");
  auto put = [&](const char* kind, const std::unordered_map<std::string, std::string>& m) {
    for (auto& [k, v] : m) {
      s.reset();
      s.bind(1, std::string(kind));
      s.bind(2, k);
      s.bind(3, v);
      s.step();
    }
  };
  put("FH", ctx.fh);
  put("HH", ctx.hh);
  put("SH", ctx.sh);
  put_meta(db, "context_scanned", int64_t(ctx.scanned));
  put_meta(db, "hostname", ctx.hostname);
}

void write_stats(sqlite3* db, const IndexInfo& info) {
  put_meta(db, "stats_scanned", int64_t(info.stats_scanned));
  put_meta(db, "events", info.events);
  put_meta(db, "metadata_records", info.metadata_records);
  put_meta(db, "skipped_lines", info.skipped_lines);
  put_meta(db, "scan_lost_lines", info.scan_lost_lines);
  put_meta(db, "scan_lost_bytes", info.scan_lost_bytes);
  put_meta(db, "scan_header_mismatches", info.scan_header_mismatches);
  exec_sql(db, "DELETE FROM arg_columns");
  Stmt s(db, "INSERT INTO arg_columns(key, dtype) VALUES(?, ?)");
  for (auto& [k, d] : info.arg_columns) {
    s.reset();
    s.bind(1, k);
    s.bind(2, d);
    s.step();
  }
}

void open_db(Db& d, const std::string& path, bool write) {
  // Readers open read-write where they may: the last connection of a WAL database deletes its
  // -wal/-shm files on close only if it can write; a read-only one leaves them beside the trace.
  // O_NOFOLLOW: an index path that is a symbolic link is never opened.
  int flags = write ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
                    : (::access(path.c_str(), W_OK) == 0 ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY);
  int rc = sqlite3_open_v2(path.c_str(), &d.db, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
  if (rc != SQLITE_OK)
    throw ReaderError(path + ": cannot open index: " + (d.db ? sqlite3_errmsg(d.db) : sqlite3_errstr(rc)));
  if (sqlite3_busy_timeout(d.db, 30000) != SQLITE_OK) throw ReaderError(path + ": " + sqlite3_errmsg(d.db));
}

std::atomic<int> g_tmp_counter{0};

// A cheap content fingerprint: CRC-32 of the first and of the last 4 KiB of the trace. With
// (st_dev, st_ino), size and mtime it ties an index to one file's bytes.
struct Fingerprint {
  int64_t head_crc = 0, tail_crc = 0;
};
Fingerprint fingerprint(const File& f) {
  constexpr int64_t kSpan = 4096;
  unsigned char buf[kSpan];
  Fingerprint fp;
  int64_t n = std::min(kSpan, f.size());
  size_t got = f.pread_full(buf, size_t(n), 0);
  fp.head_crc = int64_t(crc32(0, buf, uInt(got)));
  got = f.pread_full(buf, size_t(n), f.size() - n);
  fp.tail_crc = int64_t(crc32(0, buf, uInt(got)));
  return fp;
}

void remove_db_files(const std::string& p) {
  for (const char* suf : {"", "-wal", "-shm", "-journal"}) ::unlink((p + suf).c_str());
}

// Writes the index to a private temp file (O_EXCL|O_NOFOLLOW) in WAL mode, then renames it over
// `info.index_path`. On any failure nothing is left behind and ReaderError is thrown.
void save_index(const IndexInfo& info, const File& f, const Fingerprint& fp) {
  std::string tmp = info.index_path + "-tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++);
  remove_db_files(tmp);
  try {
    // Create the file ourselves: a name planted as a symbolic link or a file is never written through.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw ReaderError(tmp + ": cannot create index: " + std::strerror(errno));
    ::close(fd);
    Db d;
    open_db(d, tmp, true);
    // A private temp file renamed into place: no fsync and no rollback journal while building
    // (one transaction); the file is switched to WAL mode before the rename (docs/index.md).
    d.exec("PRAGMA synchronous=OFF; PRAGMA journal_mode=OFF; PRAGMA locking_mode=EXCLUSIVE;");
    d.exec("BEGIN");
    d.exec(kSchema);
    put_meta(d.db, "format_version", int64_t(kIndexFormatVersion));
    put_meta(d.db, "trace_path", info.path);
    put_meta(d.db, "size", info.size);
    put_meta(d.db, "mtime_ns", info.mtime_ns);
    put_meta(d.db, "dev", int64_t(f.dev()));
    put_meta(d.db, "ino", int64_t(f.ino()));
    put_meta(d.db, "head_crc", fp.head_crc);
    put_meta(d.db, "tail_crc", fp.tail_crc);
    put_meta(d.db, "kind", info.kind);
    put_meta(d.db, "lines", info.lines);
    put_meta(d.db, "uncompressed_bytes", info.uncompressed_bytes);
    put_meta(d.db, "truncated_bytes", info.truncated_bytes);
    put_meta(d.db, "lost_bytes", info.lost_bytes);
    Stmt s(d.db, "INSERT INTO checkpoints VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    std::vector<unsigned char> zbuf;
    for (auto& c : info.checkpoints) {
      s.reset();
      s.bind(1, c.number);
      s.bind(2, c.compressed_offset);
      s.bind(3, c.compressed_size);
      s.bind(4, c.uncompressed_offset);
      s.bind(5, c.uncompressed_size);
      s.bind(6, c.first_line);
      s.bind(7, c.num_lines);
      s.bind(8, int64_t(c.bit_offset));
      s.bind(9, c.block_offset);
      s.bind(10, int64_t(c.flags));
      if (!c.window.empty()) {
        uLongf zl = compressBound(uLong(c.window.size()));
        zbuf.resize(zl);
        if (compress2(zbuf.data(), &zl, reinterpret_cast<const Bytef*>(c.window.data()), uLong(c.window.size()), 6) !=
            Z_OK)
          throw ReaderError("index: cannot compress a checkpoint window");
        s.bind_blob(11, zbuf.data(), zl);
      } else {
        s.bind_null(11);
      }
      s.bind(12, c.lost_lines);
      s.step();
    }
    write_context(d.db, info.context);
    write_stats(d.db, info);
    d.exec("COMMIT");
    d.exec("PRAGMA journal_mode=WAL;");
    d.exec("PRAGMA locking_mode=NORMAL;");
  } catch (...) {
    remove_db_files(tmp);
    throw;
  }
  ::unlink((tmp + "-wal").c_str());
  ::unlink((tmp + "-shm").c_str());
  if (::rename(tmp.c_str(), info.index_path.c_str()) != 0) {
    int e = errno;
    remove_db_files(tmp);
    throw ReaderError(info.index_path + ": cannot write index: " + std::strerror(e));
  }
}

// Strict decimal integer (the whole text).
bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno || end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}

// Kind build_index would choose for the file's first bytes.
std::string expected_kind(const File& f, const std::string& path) {
  unsigned char hb[512];
  size_t got = f.pread_full(hb, sizeof hb, 0);
  if (got == 0) return ends_with(path, ".gz") ? "member" : "plain";
  if (got >= 2 && hb[0] == 0x1f && hb[1] == 0x8b) {
    GzHeader h = parse_header(hb, got);
    return h.ok && h.df ? "member" : "inflate";
  }
  return "plain";
}

std::string str(int64_t v) { return std::to_string(v); }

// Checks a gzip member at the checkpoint's compressed offset against the checkpoint: a valid
// header, its DF sizes, and the trailer's ISIZE (uncompressed size mod 2^32).
std::string check_member(const File& f, const Checkpoint& c, bool whole) {
  unsigned char hb[512];
  size_t got = f.pread_full(hb, sizeof hb, c.compressed_offset);
  GzHeader h = parse_header(hb, got);
  std::string at = "checkpoint " + str(c.number) + ": ";
  if (!h.ok) return at + "no gzip member header at byte " + str(c.compressed_offset);
  if (!whole) return "";
  // (a member whose DF header lied was indexed from its data: only the trailer is compared)
  if (h.df && !(c.flags & kHeaderMismatch) &&
      (int64_t(h.csize) != c.compressed_size || int64_t(h.usize) != c.uncompressed_size))
    return at + "sizes differ from the member header";
  if (c.compressed_size < 18) return at + "member of " + str(c.compressed_size) + " bytes";
  unsigned char tr[4];
  if (f.pread_full(tr, 4, c.compressed_offset + c.compressed_size - 4) != 4 ||
      rd32(tr) != uint32_t(uint64_t(c.uncompressed_size)))
    return at + "uncompressed size differs from the member trailer";
  return "";
}

// Why the loaded index does not describe file `f` ("" when it does). Cheap: no inflation; reads
// a few hundred bytes at the first and last checkpoints.
std::string validate_index(const IndexInfo& info, const File& f) {
  const int64_t size = f.size();
  const auto& cps = info.checkpoints;
  std::string want = expected_kind(f, info.path);
  if (info.kind != want) return "kind '" + info.kind + "' but the file's bytes are kind '" + want + "'";
  // Deflate expands at most ~1032:1; anything larger is not from this file.
  const int64_t max_u = size * 1032 + 64;
  if (info.lines < 0 || info.uncompressed_bytes < 0 || info.uncompressed_bytes > max_u || info.truncated_bytes < 0 ||
      info.truncated_bytes > max_u ||
      info.lost_bytes < 0 || info.lost_bytes > size || info.events < 0 || info.metadata_records < 0 ||
      info.skipped_lines < 0)
    return "file totals out of range";
  if (info.lines > info.uncompressed_bytes) return "more lines than bytes";
  if (info.events > info.lines || info.metadata_records > info.lines || info.skipped_lines > info.lines)
    return "more events than lines";
  if (info.stats_scanned && info.events + info.metadata_records + info.skipped_lines > info.lines)
    return "more events than lines";
  int64_t u = 0, line = 0, c_end = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const Checkpoint& c = cps[i];
    std::string at = "checkpoint " + str(int64_t(i)) + ": ";
    if (c.compressed_offset < 0 || c.compressed_size < 0 || c.compressed_offset > size ||
        c.compressed_size > size - c.compressed_offset)
      return at + "compressed bytes [" + str(c.compressed_offset) + ", +" + str(c.compressed_size) +
             ") outside the file's " + str(size) + " bytes";
    if (c.uncompressed_size < 0 || c.uncompressed_size > max_u || c.num_lines < 0 ||
        c.num_lines > c.uncompressed_size || c.bit_offset < 0 || c.bit_offset > 7 || c.flags < 0 || c.flags > kAllCheckpointFlags ||
        c.block_offset < 0 || c.block_offset > c.uncompressed_offset)
      return at + "field out of range";
    if (c.uncompressed_offset != u || c.first_line != line)
      return at + "does not start where checkpoint " + str(int64_t(i) - 1) + " ends (checkpoints deleted or moved)";
    if ((c.flags & kLost) && (c.uncompressed_size != 0 || c.num_lines != 0)) return at + "lost region with lines";
    if (c.compressed_offset < c_end - (c.bit_offset ? 1 : 0)) return at + "compressed offsets go backwards";
    if (info.kind == "member" || info.kind == "plain") {
      if (c.compressed_offset != c_end) return at + "compressed bytes are not contiguous";
      if (c.bit_offset != 0 || c.block_offset != c.uncompressed_offset || c.has_window)
        return at + "restart fields set for kind " + info.kind;
    }
    if (info.kind == "member" && !(c.flags & (kMemberStart | kLost))) return at + "not a member start";
    if (info.kind == "plain" &&
        (c.compressed_offset != c.uncompressed_offset || c.compressed_size != c.uncompressed_size || c.flags & kLost))
      return at + "plain checkpoint with compressed offsets";
    if (info.kind == "inflate" && !(c.flags & (kMemberStart | kLost)) && !c.has_window)
      return at + "mid-stream checkpoint without a window";
    if (i == 0 && c.compressed_offset != 0) return at + "does not start at byte 0";
    u += c.uncompressed_size;
    line += c.num_lines;
    c_end = c.compressed_offset + c.compressed_size;
  }
  if (u != info.uncompressed_bytes || line != info.lines)
    return "checkpoints hold " + str(line) + " lines / " + str(u) + " bytes, the index says " + str(info.lines) +
           " / " + str(info.uncompressed_bytes);
  // The checkpoints cover the file: up to its end, or up to a tail counted as lost / cut short.
  if (info.kind == "plain" && c_end != size) return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  if (info.kind == "inflate" && (cps.empty() ? size > 1024 : c_end != size))
    return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  if (info.kind == "member" && c_end < size) {
    unsigned char hb[512];
    size_t got = f.pread_full(hb, sizeof hb, c_end);
    if (parse_header(hb, got).ok) return "the gzip member at byte " + str(c_end) + " is not indexed";
    if (size - c_end > info.lost_bytes + info.truncated_bytes)
      return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  }
  // Cross-check the first and the last checkpoint with the file's bytes.
  for (size_t i : {size_t(0), cps.size() - 1}) {
    if (cps.empty()) break;
    const Checkpoint& c = cps[i];
    if (c.flags & kLost) continue;
    if (info.kind == "member") {
      std::string why = check_member(f, c, !(c.flags & kTruncated));
      if (!why.empty()) return why;
    } else if (info.kind == "inflate" && (c.flags & kMemberStart)) {
      std::string why = check_member(f, c, false);
      if (!why.empty()) return why;
    } else if (info.kind == "plain") {
      char b = 0;
      if (c.compressed_offset > 0 && (f.pread_full(&b, 1, c.compressed_offset - 1) != 1 || b != '\n'))
        return "checkpoint " + str(c.number) + ": does not start at a line start";
      int64_t e = c.compressed_offset + c.uncompressed_size;
      if (c.uncompressed_size > 0 && e < size && (f.pread_full(&b, 1, e - 1) != 1 || b != '\n'))
        return "checkpoint " + str(c.number) + ": does not end at a line end";
    }
  }
  return "";
}

// Loads the index at info.index_path into `info`. Returns "" on success, else why it is not
// used: "absent" when there is no index file, otherwise the reason the index is rejected.
std::string load_index(IndexInfo& info, const File& f, const Fingerprint& fp) {
  struct stat st;
  if (::lstat(info.index_path.c_str(), &st) != 0) return "absent";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid()) return "owned by uid " + str(int64_t(st.st_uid)) + ", not by this user";
  try {
    Db d;
    open_db(d, info.index_path, false);
    std::map<std::string, std::string> meta;
    {
      Stmt s(d.db, "SELECT key, value FROM metadata");
      while (s.step()) meta[s.text(0)] = s.text(1);
    }
    std::string bad;
    auto geti = [&](const char* k) -> int64_t {
      int64_t v = 0;
      auto it = meta.find(k);
      if (it == meta.end() || !parse_int(it->second, &v)) {
        if (bad.empty()) bad = std::string("metadata '") + k + "' missing or not an integer";
      }
      return v;
    };
    // Stale (rebuilt without a warning): another format version, or the trace was moved,
    // replaced, copied or changed since it was indexed.
    if (geti("format_version") != kIndexFormatVersion) return "stale (format version differs)";
    if (meta["trace_path"] != info.path) return "stale (written for another path)";
    if (geti("size") != f.size() || geti("mtime_ns") != f.mtime_ns()) return "stale (size or mtime changed)";
    if (uint64_t(geti("dev")) != f.dev() || uint64_t(geti("ino")) != f.ino())
      return "stale (the trace was replaced or copied: device/inode differ)";
    if (geti("head_crc") != fp.head_crc || geti("tail_crc") != fp.tail_crc)
      return "written for other content (first/last 4 KiB checksums differ)";
    info.kind = meta["kind"];
    info.size = f.size();
    info.mtime_ns = f.mtime_ns();
    info.lines = geti("lines");
    info.uncompressed_bytes = geti("uncompressed_bytes");
    info.truncated_bytes = geti("truncated_bytes");
    info.lost_bytes = geti("lost_bytes");
    info.compressed_bytes = f.size();
    info.context.scanned = geti("context_scanned") != 0;
    info.context.hostname = meta["hostname"];
    info.stats_scanned = geti("stats_scanned") != 0;
    info.events = geti("events");
    info.metadata_records = geti("metadata_records");
    info.skipped_lines = geti("skipped_lines");
    info.scan_lost_lines = geti("scan_lost_lines");
    info.scan_lost_bytes = geti("scan_lost_bytes");
    info.scan_header_mismatches = geti("scan_header_mismatches");
    if (!bad.empty()) return bad;
    {
      Stmt n(d.db, "SELECT count(*) FROM checkpoints");
      if (!n.step()) return "no checkpoint count";
      if (sqlite3_column_int64(n.st, 0) > f.size() + 1) return "more checkpoints than file bytes";
    }
    Stmt s(d.db,
           "SELECT number, compressed_offset, compressed_size, uncompressed_offset, uncompressed_size, "
           "first_line, num_lines, bit_offset, block_offset, flags, window IS NOT NULL, lost_lines "
           "FROM checkpoints ORDER BY number");
    bool ok = true;
    while (s.step()) {
      Checkpoint c;
      c.number = s.integer(0, &ok);
      c.compressed_offset = s.integer(1, &ok);
      c.compressed_size = s.integer(2, &ok);
      c.uncompressed_offset = s.integer(3, &ok);
      c.uncompressed_size = s.integer(4, &ok);
      c.first_line = s.integer(5, &ok);
      c.num_lines = s.integer(6, &ok);
      int64_t bit = s.integer(7, &ok);
      c.block_offset = s.integer(8, &ok);
      int64_t flags = s.integer(9, &ok);
      c.has_window = sqlite3_column_int(s.st, 10) != 0;  // loaded on demand by load_window
      c.lost_lines = s.integer(11, &ok);
      if (!ok) return "checkpoint " + str(int64_t(info.checkpoints.size())) + ": a field is not an integer";
      if (bit < 0 || bit > 7 || flags < 0 || flags > kAllCheckpointFlags || c.lost_lines < 0)
        return "checkpoint " + str(c.number) + ": field out of range";
      c.bit_offset = int(bit);
      c.flags = int(flags);
      if (c.number != int64_t(info.checkpoints.size()))
        return "checkpoint numbers are not 0, 1, 2, ... (checkpoint " + str(int64_t(info.checkpoints.size())) +
               " missing)";
      if (c.flags & kLost) info.lost_lines += c.lost_lines;
      if (c.flags & kHeaderMismatch) info.header_mismatches += 1;
      info.checkpoints.push_back(std::move(c));
    }
    Stmt cs(d.db, "SELECT kind, hash, value FROM context");
    while (cs.step()) {
      std::string kind = cs.text(0, &ok);
      if (kind != "FH" && kind != "HH" && kind != "SH") return "context row of unknown kind";
      auto& m = kind == "FH" ? info.context.fh : kind == "HH" ? info.context.hh : info.context.sh;
      m[cs.text(1, &ok)] = cs.text(2, &ok);
    }
    Stmt as(d.db, "SELECT key, dtype FROM arg_columns ORDER BY key");
    while (as.step()) {
      std::string dt = as.text(1, &ok);
      if (dt != "Int64" && dt != "Float64" && dt != "string") return "args column of unknown dtype";
      info.arg_columns.emplace_back(as.text(0, &ok), dt);
    }
    if (!ok) return "a text field is not text";
    return validate_index(info, f);
  } catch (const std::exception& e) {
    return std::string("unreadable (") + e.what() + ")";
  }
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Creates missing directories of `dir` (mode 0700: a cache of trace indexes is private).
void mkdirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0700);
    }
    if (i < dir.size()) cur += dir[i];
  }
}

std::string octal(mode_t m) {
  char t[16];
  std::snprintf(t, sizeof t, "%03o", unsigned(m & 07777));
  return t;
}

// Why `dir` may not hold indexes ("" when it may): it must be a directory, not a symbolic link,
// owned by this user and not writable by group or others; every directory above it must be
// owned by root or this user and, unless sticky (like /tmp), not writable by group or others.
std::string unsafe_cache_dir(const std::string& dir) {
  struct stat st;
  uid_t me = ::geteuid();
  if (::lstat(dir.c_str(), &st) != 0) return dir + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return dir + " is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (st.st_uid != me)
    return dir + " is owned by uid " + str(int64_t(st.st_uid)) + ", not by this user (uid " + str(int64_t(me)) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return dir + " is writable by group or others (mode " + octal(st.st_mode) + ")";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return dir + " is not writable";
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return dir + ": " + std::strerror(errno);
  std::string a = real;
  while (a.size() > 1) {
    size_t slash = a.rfind('/');
    a = slash == 0 ? "/" : a.substr(0, slash);
    if (::lstat(a.c_str(), &st) != 0) return a + ": " + std::strerror(errno);
    if (st.st_uid != 0 && st.st_uid != me) return a + " (above " + dir + ") is owned by another user";
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return a + " (above " + dir + ") is writable by group or others without the sticky bit";
  }
  return "";
}

// The user's cache root: $XDG_CACHE_HOME, $HOME/.cache, or the passwd entry's home; "" if none.
std::string user_cache_root() {
  const char* xdg = ::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return xdg;
  const char* home = ::getenv("HOME");
  if (home && *home == '/') return std::string(home) + "/.cache";
  struct passwd pw, *res = nullptr;
  char buf[4096];
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir && res->pw_dir[0] == '/')
    return std::string(res->pw_dir) + "/.cache";
  return "";
}

struct IndexLocation {
  std::string path;     // "" = keep the index in memory
  std::string warning;  // why it is kept in memory
};

IndexLocation locate_index(const std::string& abs, const std::string& index_dir) {
  std::string dir = abs.substr(0, abs.rfind('/'));
  if (dir.empty()) dir = "/";
  std::string idir = index_dir;
  if (idir.empty()) {
    if (::access(dir.c_str(), W_OK) == 0) return {abs + ".zindex", ""};
    const char* env = ::getenv("DFTRACER_INDEX_DIR");
    if (env && *env) {
      idir = env;
    } else {
      std::string root = user_cache_root();
      if (root.empty()) return {"", "no writable index location (trace folder read-only, no home directory)"};
      idir = root + "/dftracer/zindex";
    }
  }
  mkdirs(idir);
  std::string why = unsafe_cache_dir(idir);
  if (!why.empty()) return {"", "index directory refused: " + why};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(abs)));
  return {idir + "/" + abs.substr(abs.rfind('/') + 1) + "-" + hex + ".zindex", ""};
}

IndexInfo build_fresh(const std::string& path, const File& f, bool verify) {
  IndexInfo info;
  info.path = path;
  info.size = f.size();
  info.mtime_ns = f.mtime_ns();
  info.dev = f.dev();
  info.ino = f.ino();
  info.compressed_bytes = f.size();
  info.rebuilt = true;
  unsigned char hb[512];
  size_t got = f.pread_full(hb, sizeof hb, 0);
  bool gz = got >= 2 && hb[0] == 0x1f && hb[1] == 0x8b;
  if (gz) {
    GzHeader h = parse_header(hb, got);
    if (h.ok && h.df) {
      info.kind = "member";
      index_members(f, info, verify);
    } else {
      info.kind = "inflate";
      index_inflate(f, info);
      info.context.scanned = true;
    }
  } else if (got > 0 && (ends_with(info.path, ".gz") || ends_with(info.path, ".gzip"))) {
    throw ReaderError(info.path + ": not a gzip file (bad magic bytes)");
  } else {
    info.kind = f.size() == 0 && ends_with(info.path, ".gz") ? "member" : "plain";
    if (f.size() > 0) index_plain(f, info);
    info.context.scanned = true;
  }
  for (size_t i = 0; i < info.checkpoints.size(); ++i) {
    info.checkpoints[i].number = int64_t(i);
    info.checkpoints[i].has_window = !info.checkpoints[i].window.empty();
  }
  if (info.context.hostname.empty() && info.context.hh.size() == 1) info.context.hostname = info.context.hh.begin()->second;
  return info;
}

}  // namespace

std::string index_path_for(const std::string& trace, const std::string& index_dir) {
  return locate_index(abs_path(trace), index_dir).path;
}

IndexInfo build_index(const std::string& trace, const std::string& index_dir, bool force, bool verify) {
  std::string path = abs_path(trace);
  IndexLocation loc = locate_index(path, index_dir);
  File f(path);
  Fingerprint fp = fingerprint(f);
  std::string rejected;
  if (!loc.path.empty() && !force && !verify) {
    IndexInfo info;
    info.path = path;
    info.index_path = loc.path;
    rejected = load_index(info, f, fp);
    if (rejected.empty()) {
      info.dev = f.dev();
      info.ino = f.ino();
      return info;
    }
  }
  IndexInfo info = build_fresh(path, f, verify);
  info.index_path = loc.path;
  // A stale index (the trace changed) or a missing one is rebuilt silently; any other mismatch
  // means the index was damaged or forged: say so.
  if (!rejected.empty() && rejected != "absent" && rejected.rfind("stale", 0) != 0)
    info.warnings.push_back(path + ": index " + loc.path + " rejected (" + rejected + "); rebuilt");
  if (loc.path.empty()) {
    info.warnings.push_back(path + ": index kept in memory: " + loc.warning);
    return info;
  }
  try {
    save_index(info, f, fp);
  } catch (const ReaderError& e) {
    info.warnings.push_back(path + ": index kept in memory: " + e.what());
    info.index_path.clear();
  }
  return info;
}

IndexInfo build_index_in_memory(const std::string& trace) {
  std::string path = abs_path(trace);
  File f(path);
  return build_fresh(path, f, false);
}

std::string load_window(const IndexInfo& idx, int64_t number) {
  const Checkpoint& c = idx.checkpoints.at(size_t(number));
  if (!c.window.empty() || !c.has_window) return c.window;
  if (idx.index_path.empty()) throw ReaderError(idx.path + ": window of checkpoint " + std::to_string(number) + " missing");
  Db d;
  open_db(d, idx.index_path, false);
  Stmt s(d.db, "SELECT window FROM checkpoints WHERE number = ?");
  s.bind(1, number);
  if (!s.step() || sqlite3_column_type(s.st, 0) != SQLITE_BLOB)
    throw ReaderError(idx.index_path + ": window of checkpoint " + std::to_string(number) + " missing");
  const void* b = sqlite3_column_blob(s.st, 0);
  int bl = sqlite3_column_bytes(s.st, 0);
  std::string w(size_t(kWindow), '\0');
  uLongf wl = kWindow;
  if (uncompress(reinterpret_cast<Bytef*>(w.data()), &wl, static_cast<const Bytef*>(b), uLong(bl)) != Z_OK)
    throw ReaderError(idx.index_path + ": corrupt window of checkpoint " + std::to_string(number));
  w.resize(wl);
  return w;
}

namespace {
struct CacheEntry {
  std::shared_ptr<const IndexInfo> info;
  int64_t size = 0, mtime_ns = 0;               // trace
  uint64_t dev = 0, ino = 0;
  uint64_t idx_ino = 0;
  int64_t idx_size = 0, idx_mtime_ns = 0;       // index file (unused for an in-memory index)
};
std::mutex g_cache_mu;
std::map<std::string, CacheEntry> g_cache;  // key: index_dir + '\0' + absolute trace path

bool stat_ns(const std::string& p, struct stat& st) { return ::stat(p.c_str(), &st) == 0; }
int64_t mtime_of(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }
}  // namespace

std::shared_ptr<const IndexInfo> open_index(const std::string& trace, const std::string& index_dir) {
  char real[PATH_MAX];
  bool resolved = ::realpath(trace.c_str(), real) != nullptr;
  std::string key = index_dir + '\0' + (resolved ? std::string(real) : trace);
  struct stat ts, is;
  if (resolved && stat_ns(real, ts)) {
    std::lock_guard<std::mutex> lk(g_cache_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) {
      const CacheEntry& e = it->second;
      bool same_trace = e.size == ts.st_size && e.mtime_ns == mtime_of(ts) && e.dev == uint64_t(ts.st_dev) &&
                        e.ino == uint64_t(ts.st_ino);
      bool same_index = e.info->index_path.empty() ||
                        (stat_ns(e.info->index_path, is) && uint64_t(is.st_ino) == e.idx_ino &&
                         int64_t(is.st_size) == e.idx_size && mtime_of(is) == e.idx_mtime_ns);
      if (same_trace && same_index) return e.info;
      g_cache.erase(it);
    }
  }
  auto info = std::make_shared<IndexInfo>(build_index(trace, index_dir, false));
  CacheEntry e;
  e.size = info->size;
  e.mtime_ns = info->mtime_ns;
  e.dev = info->dev;
  e.ino = info->ino;
  if (!info->index_path.empty()) {
    for (auto& c : info->checkpoints) std::string().swap(c.window);  // loaded on demand
    if (!stat_ns(info->index_path, is)) return info;
    e.idx_ino = uint64_t(is.st_ino);
    e.idx_size = int64_t(is.st_size);
    e.idx_mtime_ns = mtime_of(is);
  }
  e.info = info;
  std::lock_guard<std::mutex> lk(g_cache_mu);
  if (g_cache.size() >= 256) g_cache.clear();
  g_cache[key] = e;
  return info;
}

// Stores stats/context computed by scan (see batch.cpp) into an existing index. Best effort: an
// in-memory index, or an index file that cannot be written, keeps them in memory only.
void store_scan(const IndexInfo& info) {
  if (info.index_path.empty()) return;
  try {
    Db d;
    open_db(d, info.index_path, true);
    d.exec("PRAGMA journal_mode=WAL;");
    d.exec("BEGIN IMMEDIATE");
    try {
      write_context(d.db, info.context);
      write_stats(d.db, info);
      d.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(d.db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } catch (const ReaderError&) {
  }
}

}  // namespace dftracer::reader

// ---- per-checkpoint event statistics (filter push-down) ----------------------------------------
// Table checkpoint_stats (created on demand; an index without it simply has no stats yet):
// per checkpoint the number of events, min/max of ts and te (µs) and the distinct categories and
// names ('\x1f'-joined; NULL when more than kMaxStatNames distinct or a value holds '\x1f').
// The index file is replaced when its trace changes, so the stats are never stale.

namespace dftracer::reader {
namespace {
constexpr size_t kMaxStatNames = 256;
const char* kStatsSchema = R"SQL(
CREATE TABLE IF NOT EXISTS checkpoint_stats(
  number INTEGER PRIMARY KEY, events INTEGER, min_ts INTEGER, max_ts INTEGER, min_te INTEGER,
  max_te INTEGER, cats TEXT, names TEXT);
)SQL";

// Distinct values of the rows' codes; false when there are too many or one holds the separator.
bool distinct_values(const DictColumn& col, std::vector<std::string>& out) {
  std::vector<char> seen(col.categories.size(), 0);
  for (int32_t c : col.codes)
    if (c >= 0 && size_t(c) < seen.size()) seen[size_t(c)] = 1;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) continue;
    if (out.size() >= kMaxStatNames || col.categories[i].find('\x1f') != std::string::npos) return false;
    out.push_back(col.categories[i]);
  }
  return true;
}

std::string join_values(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += '\x1f';
    s += v[i];
  }
  return s;
}

bool read_stats(const IndexInfo& idx, std::vector<CheckpointStats>& out) {
  Db d;
  open_db(d, idx.index_path, false);
  sqlite3_stmt* probe = nullptr;
  if (sqlite3_prepare_v2(d.db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='checkpoint_stats'", -1,
                         &probe, nullptr) != SQLITE_OK)
    return false;
  bool has = sqlite3_step(probe) == SQLITE_ROW;
  sqlite3_finalize(probe);
  if (!has) return false;
  Stmt s(d.db, "SELECT number, events, min_ts, max_ts, min_te, max_te, cats, names FROM checkpoint_stats ORDER BY number");
  out.clear();
  while (s.step()) {
    CheckpointStats c;
    c.number = sqlite3_column_int64(s.st, 0);
    c.events = sqlite3_column_int64(s.st, 1);
    c.min_ts = sqlite3_column_int64(s.st, 2);
    c.max_ts = sqlite3_column_int64(s.st, 3);
    c.min_te = sqlite3_column_int64(s.st, 4);
    c.max_te = sqlite3_column_int64(s.st, 5);
    for (int k = 0; k < 2; ++k) {
      bool& known = k == 0 ? c.cats_known : c.names_known;
      auto& vals = k == 0 ? c.cats : c.names;
      if (sqlite3_column_type(s.st, 6 + k) == SQLITE_NULL) {
        known = false;
        continue;
      }
      known = true;
      std::string t(reinterpret_cast<const char*>(sqlite3_column_text(s.st, 6 + k)), size_t(sqlite3_column_bytes(s.st, 6 + k)));
      size_t p = 0;
      while (!t.empty() && p <= t.size()) {
        size_t q = t.find('\x1f', p);
        if (q == std::string::npos) q = t.size();
        vals.push_back(t.substr(p, q - p));
        p = q + 1;
      }
    }
    if (c.number != int64_t(out.size())) return false;
    out.push_back(std::move(c));
  }
  return out.size() == idx.checkpoints.size();
}
}  // namespace

std::vector<CheckpointStats> checkpoint_stats(const IndexInfo& idx) {
  std::vector<CheckpointStats> out;
  try {
    if (!idx.index_path.empty() && read_stats(idx, out)) return out;
  } catch (const std::exception&) {
  }
  out.clear();
  IndexInfo full = idx;
  ensure_context(full);  // hashes defined anywhere in the file resolve the same in every checkpoint
  Parser parser;
  for (size_t i = 0; i < idx.checkpoints.size(); ++i) {
    CheckpointStats c;
    c.number = int64_t(i);
    RangeData r;
    if (!(idx.checkpoints[i].flags & kLost)) r = read_checkpoints(idx, int64_t(i), int64_t(i));
    if ((idx.checkpoints[i].flags & kLost) || r.lost_bytes > 0) {
      // Damaged data: unknown content, never skipped (its loss is reported when it is loaded).
      c.events = -1;
      c.min_ts = c.min_te = INT64_MIN;
      c.max_ts = c.max_te = INT64_MAX;
    } else {
      EventColumns cols;
      FileContext ctx = full.context;
      parser.parse(r.data.data(), r.data.size(), r.data.capacity(), ctx, cols);
      Parser::finish(cols);
      c.events = cols.rows;
      if (cols.rows > 0) {
        c.min_ts = *std::min_element(cols.ts.begin(), cols.ts.end());
        c.max_ts = *std::max_element(cols.ts.begin(), cols.ts.end());
        c.min_te = *std::min_element(cols.te.begin(), cols.te.end());
        c.max_te = *std::max_element(cols.te.begin(), cols.te.end());
      }
      c.cats_known = distinct_values(cols.cat, c.cats);
      c.names_known = distinct_values(cols.name, c.names);
      if (!c.cats_known) c.cats.clear();
      if (!c.names_known) c.names.clear();
    }
    out.push_back(std::move(c));
  }
  if (idx.index_path.empty()) return out;  // an in-memory index keeps nothing
  try {  // best effort, like store_scan: stats that cannot be stored are recomputed next time
    Db d;
    open_db(d, idx.index_path, true);
    d.exec("PRAGMA journal_mode=WAL;");
    d.exec("BEGIN IMMEDIATE");
    d.exec(kStatsSchema);
    d.exec("DELETE FROM checkpoint_stats");
    Stmt s(d.db, "INSERT INTO checkpoint_stats VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    for (auto& c : out) {
      s.reset();
      s.bind(1, c.number);
      s.bind(2, c.events);
      s.bind(3, c.min_ts);
      s.bind(4, c.max_ts);
      s.bind(5, c.min_te);
      s.bind(6, c.max_te);
      if (c.cats_known)
        s.bind(7, join_values(c.cats));
      else
        s.bind_null(7);
      if (c.names_known)
        s.bind(8, join_values(c.names));
      else
        s.bind_null(8);
      s.step();
    }
    d.exec("COMMIT");
  } catch (const ReaderError&) {
  }
  return out;
}

}  // namespace dftracer::reader
