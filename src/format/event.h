// The event vocabulary of the trace format (docs/format.md, "Lines" and "Fields"): the tracer's
// own category, the core field names and the phases. Used by the tracer core (event formatting),
// the preload and the reader (parser.cpp), and exposed to Python as
// dftracer._dftracer.TRACER_CATEGORY. Header-only, C++17.
#pragma once

#include <string_view>

// The category of the tracer's own metadata events (process name, hostname, config, file and
// host hashes): a literal so that writers can splice it into fixed JSON fragments.
#define DFT_TRACER_CATEGORY "dftracer"

namespace dftracer::format {

inline constexpr std::string_view kTracerCategory = DFT_TRACER_CATEGORY;

// Core fields of an event line, in the order the tracer writes them.
inline constexpr std::string_view kFieldId = "id";      // integer, unique within the file
inline constexpr std::string_view kFieldName = "name";  // string
inline constexpr std::string_view kFieldCat = "cat";    // string: category
inline constexpr std::string_view kFieldPid = "pid";    // integer: OS process id
inline constexpr std::string_view kFieldTid = "tid";    // integer: OS thread id
inline constexpr std::string_view kFieldTs = "ts";      // integer: start, µs since the epoch
inline constexpr std::string_view kFieldDur = "dur";    // integer: duration, µs ("X" only)
inline constexpr std::string_view kFieldPh = "ph";      // string: phase
inline constexpr std::string_view kFieldArgs = "args";  // object: call arguments and tags

// args keys with a meaning beyond the event (docs/preload.md, "Arguments").
inline constexpr std::string_view kArgFname = "fname";  // absolute path of a file event
inline constexpr std::string_view kArgRet = "ret";      // the call's result
inline constexpr std::string_view kArgSize = "size";    // fread/fwrite item size, bytes

// Phases ("ph").
inline constexpr char kPhaseComplete = 'X';  // with "dur"
inline constexpr char kPhaseInstant = 'i';   // with "s":"t" (thread scope)
inline constexpr char kPhaseMetadata = 'M';

}  // namespace dftracer::format
