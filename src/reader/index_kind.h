// The three ways a trace is indexed (docs/index.md, "Kinds").
#pragma once

#include <string>

namespace dftracer::reader {

enum class IndexKind {
  Member,   // our gzip member format: hop from header to header with the 'DF' FEXTRA subfield
  Inflate,  // any other gzip: one inflate pass, zran-style checkpoints with 32 KiB windows
  Plain,    // uncompressed JSON lines: line-start checkpoints found with memchr
};

// Stored name of a kind: the index's metadata `kind` and Python's build_index()["kind"].
inline const char* index_kind_name(IndexKind k) {
  switch (k) {
    case IndexKind::Member: return "member";
    case IndexKind::Inflate: return "inflate";
    case IndexKind::Plain: return "plain";
  }
  return "?";
}

// Parses a stored name; false when it is none of "member", "inflate", "plain".
inline bool parse_index_kind(const std::string& s, IndexKind* out) {
  for (IndexKind k : {IndexKind::Member, IndexKind::Inflate, IndexKind::Plain})
    if (s == index_kind_name(k)) {
      *out = k;
      return true;
    }
  return false;
}

}  // namespace dftracer::reader
