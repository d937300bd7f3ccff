// Checks of a loaded index against its trace (index_trust.h; docs/index.md, "Trust rules").
#include "index_trust.h"

#include "gzip_scan.h"
#include "index_strategy.h"

namespace dftracer::reader {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// header, its DF sizes, and the trailer's ISIZE (uncompressed size mod 2^32).
std::string check_member(const File& f, const Checkpoint& c, bool whole) {
  unsigned char hb[512];
  size_t got = f.pread_full(hb, sizeof hb, c.compressed_offset);
  MemberHeader h = parse_member_header(hb, got);
  std::string at = "checkpoint " + str(c.number) + ": ";
  if (!h.ok) return at + "no gzip member header at byte " + str(c.compressed_offset);
  if (!whole) return "";
  // (a member whose DF header lied was indexed from its data: only the trailer is compared)
  if (h.df && !(c.flags & kHeaderMismatch) &&
      (int64_t(h.fields.member_size) != c.compressed_size || int64_t(h.fields.text_size) != c.uncompressed_size))
    return at + "sizes differ from the member header";
  if (c.compressed_size < 18) return at + "member of " + str(c.compressed_size) + " bytes";
  unsigned char tr[4];
  if (f.pread_full(tr, 4, c.compressed_offset + c.compressed_size - 4) != 4 ||
      format::load_u32(tr) != uint32_t(uint64_t(c.uncompressed_size)))
    return at + "uncompressed size differs from the member trailer";
  return "";
}

// Why the loaded index does not describe file `f` ("" when it does). Cheap: no inflation; reads

}  // namespace

std::string validate_index(const IndexInfo& info, const File& f) {
  const int64_t size = f.size();
  const auto& cps = info.checkpoints;
  const IndexKind want = detect_index_kind(f, info.path);
  if (info.kind != want)
    return std::string("kind '") + index_kind_name(info.kind) + "' but the file's bytes are kind '" +
           index_kind_name(want) + "'";
  const bool member = info.kind == IndexKind::Member, inflate = info.kind == IndexKind::Inflate,
             plain = info.kind == IndexKind::Plain;
  // Deflate expands at most ~1032:1; anything larger is not from this file.
  const int64_t max_u = size * kMaxInflateRatio + 64;
  if (info.lines < 0 || info.uncompressed_bytes < 0 || info.uncompressed_bytes > max_u || info.truncated_bytes < 0 ||
      info.truncated_bytes > max_u || info.lost_bytes < 0 || info.lost_bytes > size || info.events < 0 ||
      info.metadata_records < 0 || info.skipped_lines < 0)
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
        c.num_lines > c.uncompressed_size || c.bit_offset < 0 || c.bit_offset > 7 || c.flags < 0 ||
        c.flags > kAllCheckpointFlags || c.block_offset < 0 || c.block_offset > c.uncompressed_offset)
      return at + "field out of range";
    if (c.uncompressed_offset != u || c.first_line != line)
      return at + "does not start where checkpoint " + str(int64_t(i) - 1) + " ends (checkpoints deleted or moved)";
    if ((c.flags & kLost) && (c.uncompressed_size != 0 || c.num_lines != 0)) return at + "lost region with lines";
    if (c.compressed_offset < c_end - (c.bit_offset ? 1 : 0)) return at + "compressed offsets go backwards";
    if (member || plain) {
      if (c.compressed_offset != c_end) return at + "compressed bytes are not contiguous";
      if (c.bit_offset != 0 || c.block_offset != c.uncompressed_offset || c.has_window)
        return at + "restart fields set for kind " + index_kind_name(info.kind);
    }
    if (member && !(c.flags & (kMemberStart | kLost))) return at + "not a member start";
    if (plain &&
        (c.compressed_offset != c.uncompressed_offset || c.compressed_size != c.uncompressed_size || c.flags & kLost))
      return at + "plain checkpoint with compressed offsets";
    if (inflate && !(c.flags & (kMemberStart | kLost)) && !c.has_window)
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
  if (plain && c_end != size) return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  if (inflate && (cps.empty() ? size > 1024 : c_end != size))
    return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  if (member && c_end < size) {
    unsigned char hb[512];
    size_t got = f.pread_full(hb, sizeof hb, c_end);
    if (parse_member_header(hb, got).ok) return "the gzip member at byte " + str(c_end) + " is not indexed";
    if (size - c_end > info.lost_bytes + info.truncated_bytes)
      return "checkpoints cover " + str(c_end) + " of " + str(size) + " bytes";
  }
  // Cross-check the first and the last checkpoint with the file's bytes.
  for (size_t i : {size_t(0), cps.size() - 1}) {
    if (cps.empty()) break;
    const Checkpoint& c = cps[i];
    if (c.flags & kLost) continue;
    if (member) {
      std::string why = check_member(f, c, !(c.flags & kTruncated));
      if (!why.empty()) return why;
    } else if (inflate && (c.flags & kMemberStart)) {
      std::string why = check_member(f, c, false);
      if (!why.empty()) return why;
    } else if (plain) {
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

}  // namespace dftracer::reader
