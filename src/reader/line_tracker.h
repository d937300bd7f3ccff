// Line tracking over a linear decoded stream, for the inflate and plain index strategies:
// counts lines, places line-aligned checkpoints and collects the file's FH/HH/SH context from
// metadata lines, member by member (a member's context is kept only once it passed its CRC).
// Internal to src/reader; header-only (the strategies' inner loop calls it per chunk).
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "reader.h"

namespace dftracer::reader {

// Receives decoded bytes in order; counts lines, places line-aligned checkpoints and collects
// per-file context from metadata lines.
class LineTracker {
 public:
  explicit LineTracker(IndexInfo& info) : info_(info) { buf_.resize(kCap + 64); }

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
  // Last `n` bytes of output (n <= kWindowBytes, n <= bytes kept).
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
    info_.context.merge(member_ctx_);
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
    member_last_nl_ = last_nl_;
    member_lines_ = lines_;
  }
  // The member passed its CRC32/ISIZE check: adopt the context its lines defined.
  void end_member() {
    flush_context(true, false);
    info_.context.merge(member_ctx_);
    member_ctx_ = FileContext{};
  }
  // The member failed (bad data, CRC32 or ISIZE): none of its lines is kept, nor the line it
  // finishes. Closes the running checkpoint at the last line end before the member and adds a
  // lost region [lost_compressed_offset, +lost_size). Returns the lines lost (as decoded).
  int64_t drop_member(int64_t lost_compressed_offset, int64_t lost_size) {
    pending_ = false;
    int64_t keep = member_last_nl_;
    int64_t lost_lines = (lines_ - member_lines_) + (total_ > last_nl_ ? 1 : 0);
    auto& cps = info_.checkpoints;
    while (!cps.empty() && !(cps.back().flags & kLost) && cps.back().uncompressed_offset >= keep) cps.pop_back();
    lines_ = member_lines_;
    last_nl_ = keep;
    close_last(keep, lines_);
    int64_t drop = total_ - keep;
    total_ = keep;
    len_ -= size_t(std::min<int64_t>(drop, int64_t(len_)));
    ctx_done_ = std::min(ctx_done_, keep);
    member_ctx_ = FileContext{};
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
    int64_t keep_from = std::min<int64_t>(total_ - std::min<int64_t>(kWindowBytes, total_ - base), ctx_done_);
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
  int64_t member_last_nl_ = 0, member_lines_ = 0;  // state at the current member's start
  bool pending_ = false;
  Checkpoint pend_;
  FileContext member_ctx_;  // context from the current member's lines (not yet CRC-checked)
};

}  // namespace dftracer::reader
