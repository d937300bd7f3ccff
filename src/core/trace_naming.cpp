// Trace file naming (trace_naming.h) and the TracerImpl members that apply it.
#include "trace_naming.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "paths.h"
#include "tracer_impl.h"

namespace dftracer {
namespace naming {

std::string strip_trace_suffix(std::string s) {
  for (const char* suf : {".pfw.gz", ".pfw", ".gz"}) {
    size_t n = std::strlen(suf);
    if (s.size() > n && s.compare(s.size() - n, n, suf) == 0) {
      s.resize(s.size() - n);
      break;
    }
  }
  return s;
}

std::string versioned_path(const std::string& base, int n, const char* ext) {
  return n == 0 ? base + ext : base + "." + std::to_string(n) + ext;
}

bool is_descendant(bool forked_child, const char* root_pid_env, int pid) noexcept {
  if (forked_child) return true;
  return root_pid_env && *root_pid_env && std::atoi(root_pid_env) != pid;
}

std::string trace_base(const NameInputs& in) {
  std::string pid = std::to_string(in.pid);
  if (in.log_file && *in.log_file) {
    std::string b = paths::absolute(strip_trace_suffix(in.log_file));
    bool inherited_name = (in.forked_child && b == in.parent_base) || (in.inherited_base && b == in.inherited_base);
    if (in.descendant && inherited_name) b += "-" + pid;
    return b;
  }
  if (in.forked_child) return std::string(in.current_base);
  if (in.descendant && in.inherited_base && *in.inherited_base) return std::string(in.inherited_base) + "-" + pid;
  return std::string(in.log_prefix) + "-" + std::string(in.hostname) + "-" + pid;
}

}  // namespace naming

bool TracerImpl::is_child() const {
  return naming::is_descendant(forked_child, std::getenv("DFTRACER_ROOT_PID"), static_cast<int>(getpid()));
}

std::string TracerImpl::compute_base(const char* log_file) const {
  naming::NameInputs in;
  in.log_file = log_file;
  in.descendant = is_child();
  in.forked_child = forked_child;
  in.parent_base = parent_base;
  in.current_base = base;
  in.inherited_base = std::getenv("DFTRACER_TRACE_BASE");
  in.pid = static_cast<int>(getpid());
  in.log_prefix = config().log_file;
  in.hostname = hostname;
  return naming::trace_base(in);
}

// The root exports its name so that spawned descendants name themselves after it.
void TracerImpl::export_env() const {
  if (is_child()) return;
  setenv("DFTRACER_ROOT_PID", std::to_string(getpid()).c_str(), 1);
  setenv("DFTRACER_TRACE_BASE", base.c_str(), 1);
}

}  // namespace dftracer
