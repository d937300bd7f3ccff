// The real-function pointers of real.h and their start-up resolution, from src/format/calls.def.
#include "real.h"

namespace dftracer::preload {

#define DFT_CALL(interface, name, ret, params, bytes) std::atomic<name##_fn> real_##name##_ptr{nullptr};
#include "../format/calls.def"
#undef DFT_CALL

// Eager: every call an application may make in a signal handler or a vfork child, where dlsym
// (locks, malloc) must not run: the POSIX and PROCESS interfaces (the async-signal-safe calls,
// exec*, _exit, fork, sigaction, ... are all there). Lazy: the STDIO interface (fopen, fread,
// ...): stdio is not async-signal-safe and not allowed in a vfork child, so its wrappers only run
// where dlsym may; each resolves on its first call (real.h). Saves 16 of the ~120 dlsym calls.
namespace {
constexpr bool kEager_POSIX = true, kEager_PROCESS = true, kEager_STDIO = false;
}

void resolve_all() noexcept {
#define DFT_CALL(interface, name, ret, params, bytes) \
  if (kEager_##interface) (void)real_##name();
#include "../format/calls.def"
#undef DFT_CALL
}

}  // namespace dftracer::preload
