// The real (next-in-scope, normally libc's) definition of every intercepted call, generated from
// the call table src/format/calls.def: for each call `name`, the pointer type name_fn and
// real_name(), which yields the correctly typed pointer, resolving it on first use. Those of the
// POSIX and PROCESS interfaces are resolved by resolve_all() in the library constructor, so no
// dlsym runs inside a wrapper that may run in a vfork child or a signal handler; STDIO ones
// resolve on first use (real.cpp).
#pragma once

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>

#include "mpi_abi.h"

namespace dftracer::preload {

// Resolves the next definition of `name` (libc's; for an MPI_* name the loaded MPI library's
// PMPI_<name>, mpiio.cpp); aborts with a message when there is none.
// Safe to call concurrently; idempotent.
void* resolve(const char* name) noexcept __attribute__((visibility("hidden")));

#define DFT_CALL(interface, name, ret, params, bytes) \
  using name##_fn = ret(*) params; \
  extern std::atomic<name##_fn> real_##name##_ptr __attribute__((visibility("hidden"))); \
  inline name##_fn real_##name() noexcept { \
    name##_fn f = real_##name##_ptr.load(std::memory_order_relaxed); \
    if (__builtin_expect(f == nullptr, 0)) { \
      f = reinterpret_cast<name##_fn>(resolve(#name)); \
      real_##name##_ptr.store(f, std::memory_order_relaxed); \
    } \
    return f; \
  }
#include "../format/calls.def"
#undef DFT_CALL

// Resolves the real function of every POSIX and PROCESS call of the table (the library constructor).
void resolve_all() noexcept __attribute__((visibility("hidden")));

}  // namespace dftracer::preload
