// Raw deflate (RFC 1951, dynamic Huffman blocks) specialised for trace text: JSON lines that
// mostly repeat one of the last few lines except for a few digits (id, ts, dur, sizes). Instead of
// a hash-chain search at every byte (libdeflate/zlib), matches are only looked for at the
// distances that align the current line with each of the last kHistory lines and with the last
// line of the same event name (start aligned with start, and end with end for lines whose lengths
// differ), plus, where none of them matches at a non-digit byte, within 16 bytes of the line being
// copied (a field after a number of another width). Any inflater reads the output; it is ~2.5x
// cheaper than libdeflate level 1 and ~5x cheaper than level 6 on trace text, and smaller than
// both (docs/perf/preload.md, "Encoder, round 5").
#pragma once

#include <cstddef>

#include "dftracer/export.h"

namespace dftracer {

// Upper bound of line_deflate's output for n input bytes (every byte a 15-bit literal plus
// block headers).
DFTRACER_EXPORT size_t line_deflate_bound(size_t n);

// Compresses in[0..n) into out as one complete raw deflate stream (last block final). Returns the
// compressed size, or 0 if out_cap < needed (never with out_cap >= line_deflate_bound(n)).
// *literals (if given) = input bytes coded as literals: a high share means the lines do not repeat
// the last few lines (e.g. interleaved event kinds), where a general deflater does better. With
// probe_bytes > 0: once probe_bytes of input are coded, gives up (returns 0, *literals set) if
// literals * max_literal_share > bytes coded, or (min_ratio > 0) if the output so far, estimated
// from the symbol frequencies (entropy + extra bits), times min_ratio exceeds the bytes coded
// (a general deflater usually does better on such text). *lines (if given) = '\n' bytes in the
// input.
DFTRACER_EXPORT size_t line_deflate(const char* in, size_t n, unsigned char* out, size_t out_cap,
                                    size_t* literals = nullptr, size_t probe_bytes = 0, size_t max_literal_share = 0,
                                    size_t* lines = nullptr, size_t min_ratio = 0);

}  // namespace dftracer
