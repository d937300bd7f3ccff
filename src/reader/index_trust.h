// Checks of a loaded index against its trace (docs/index.md, "Trust rules"). Internal.
#pragma once

#include <string>

#include "io_util.h"
#include "reader.h"

namespace dftracer::reader {

// Why the loaded index does not describe file `f` ("" when it does). Cheap: no inflation; reads
// a few hundred bytes at the first and last checkpoints.
std::string validate_index(const IndexInfo& info, const File& f);

}  // namespace dftracer::reader
