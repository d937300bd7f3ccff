// Trace file naming (docs/format.md "File naming"): pure functions of the explicit name, the
// environment a process inherited (DFTRACER_ROOT_PID, DFTRACER_TRACE_BASE), its pid and its
// parent's name. A "base" is the trace path without the ".pfw"/".pfw.gz" extension.
#pragma once

#include <string>
#include <string_view>

namespace dftracer::naming {

// "x.pfw.gz", "x.pfw", "x.gz" -> "x" (one suffix, the first that matches).
std::string strip_trace_suffix(std::string s);

// The n-th candidate path of a trace file: <base><ext>, then <base>.1<ext>, <base>.2<ext>, ...
// (a file that exists already is never replaced).
std::string versioned_path(const std::string& base, int n, const char* ext);

// A descendant of the traced root process: forked from a tracing process, or spawned with
// DFTRACER_ROOT_PID naming another pid.
bool is_descendant(bool forked_child, const char* root_pid_env, int pid) noexcept;

struct NameInputs {
  const char* log_file = nullptr;        // explicit trace name (Tracer::initialize), or null/empty
  bool descendant = false;               // is_descendant()
  bool forked_child = false;             // this process is a fork of a tracing process
  std::string_view parent_base;          // forked child: the parent's base
  std::string_view current_base;         // forked child: already "<parent base>-<pid>"
  const char* inherited_base = nullptr;  // DFTRACER_TRACE_BASE
  int pid = 0;
  std::string_view log_prefix;  // DFTRACER_LOG_FILE (absolute)
  std::string_view hostname;
};

// The trace base of this process. An explicit name is used as given (absolute, suffix stripped),
// except that the name this process inherited (its parent's, or DFTRACER_TRACE_BASE) gets
// "-<pid>", so parent and child never share a file. Without one: a forked child keeps
// current_base, a spawned descendant takes "<DFTRACER_TRACE_BASE>-<pid>", the root
// "<DFTRACER_LOG_FILE>-<hostname>-<pid>".
std::string trace_base(const NameInputs& in);

}  // namespace dftracer::naming
