// The real-function pointers of real.h and their start-up resolution, from src/format/calls.def.
#include "real.h"

#include "next_symbol.h"

namespace dftracer::preload {

void* resolve_loaded(const char* name) noexcept {
  return loaded_symbol(reinterpret_cast<const void*>(&resolve_loaded), name);
}

#define DFT_CALL(interface, name, ret, params, bytes) std::atomic<name##_fn> real_##name##_ptr{nullptr};
#include "../format/calls.def"
#undef DFT_CALL

// Eager: every call an application may make in a signal handler or a vfork child, where dlsym
// (locks, malloc) must not run: the POSIX and PROCESS interfaces (the async-signal-safe calls,
// exec*, _exit, fork, sigaction, ... are all there). Lazy: the STDIO interface (fopen, fread,
// ...): stdio is not async-signal-safe and not allowed in a vfork child, so its wrappers only run
// where dlsym may; each resolves on its first call (real.h). Saves 16 of the ~120 dlsym calls.
namespace {
constexpr bool kEager_POSIX = true, kEager_PROCESS = true, kEager_STDIO = false, kEager_HDF5 = false;
// MPI-IO: PMPI_* exist only once an MPI library is loaded (mpiio.cpp resolves them on first use).
constexpr bool kEager_MPIIO = false;

constexpr const char* kEagerNames[] = {
#define DFT_CALL(interface, name, ret, params, bytes) kEager_##interface ? #name : nullptr,
#include "../format/calls.def"
#undef DFT_CALL
};
constexpr size_t kCalls = sizeof(kEagerNames) / sizeof(kEagerNames[0]);
}  // namespace

// The eager names in one walk of the loaded objects' GNU hash tables (next_symbol.h: what dlsym
// would give, ~6x fewer instructions); dlsym for whatever that walk leaves undecided.
void resolve_all() noexcept {
  const char* names[kCalls];
  void* found[kCalls];
  size_t n = 0;
  for (const char* name : kEagerNames)
    if (name != nullptr) names[n++] = name;
  next_symbols(reinterpret_cast<const void*>(&resolve_all), names, found, n);
  // One check against dlsym: the walk follows the load order, dlsym(RTLD_NEXT) the scope of
  // the object that loaded us; they differ if this library was dlopened instead of preloaded.
  if (n > 0 && found[0] != nullptr && found[0] != resolve(names[0]))
    for (size_t i = 0; i < n; ++i) found[i] = nullptr;  // dlsym decides every name
  size_t k = 0;
#define DFT_CALL(interface, name, ret, params, bytes) \
  if (kEager_##interface) { \
    void* p = found[k++]; \
    if (p != nullptr && real_##name##_ptr.load(std::memory_order_relaxed) == nullptr) \
      real_##name##_ptr.store(reinterpret_cast<name##_fn>(p), std::memory_order_relaxed); \
    (void)real_##name(); \
  }
#include "../format/calls.def"
#undef DFT_CALL
}

}  // namespace dftracer::preload
