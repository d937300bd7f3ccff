// The real (next-in-scope, normally libc's) definition of every intercepted call, generated from
// the call table src/format/calls.def: for each call `name`, the pointer type name_fn and
// real_name(), which yields the correctly typed pointer, resolving it on first use. Those of the
// POSIX and PROCESS interfaces are resolved by resolve_all() in the library constructor, so no
// dlsym runs inside a wrapper that may run in a vfork child or a signal handler; STDIO ones
// resolve on first use (real.cpp). HDF5 ones resolve on first use in whichever loaded object
// defines them (resolve_loaded; null while none does).
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
#include <cstdint>

#include "mpi_abi.h"

namespace dftracer::preload {

// HDF5's ABI types (H5Ipublic.h, H5public.h of HDF5 >= 1.10), so that no HDF5 header is needed.
using hid_t = int64_t;
using herr_t = int;

// Interfaces whose real functions live in a library the application loads (maybe RTLD_LOCAL,
// maybe later with dlopen), not in libc: resolved by resolve_loaded, and null while unresolved.
inline constexpr bool kLoaded_POSIX = false, kLoaded_STDIO = false, kLoaded_PROCESS = false, kLoaded_HDF5 = true,
                      kLoaded_MPIIO = false;  // resolve(): PMPI_<name>, mpiio.cpp

// Resolves the next definition of `name` (libc's; for an MPI_* name the loaded MPI library's
// PMPI_<name>, mpiio.cpp); aborts with a message when there is none.
// Safe to call concurrently; idempotent.
void* resolve(const char* name) noexcept __attribute__((visibility("hidden")));
// The definition of `name` in the first loaded object, in load order, other than this library
// (next_symbol.h loaded_symbol), or null when no loaded object defines it (nothing aborts: the
// wrapper then fails the call as the library would). Safe to call concurrently.
void* resolve_loaded(const char* name) noexcept __attribute__((visibility("hidden")));

#define DFT_CALL(interface, name, ret, params, bytes) \
  using name##_fn = ret(*) params; \
  extern std::atomic<name##_fn> real_##name##_ptr __attribute__((visibility("hidden"))); \
  inline name##_fn real_##name() noexcept { \
    name##_fn f = real_##name##_ptr.load(std::memory_order_relaxed); \
    if (__builtin_expect(f == nullptr, 0)) { \
      f = reinterpret_cast<name##_fn>(kLoaded_##interface ? resolve_loaded(#name) : resolve(#name)); \
      real_##name##_ptr.store(f, std::memory_order_relaxed); \
    } \
    return f; \
  }
#include "../format/calls.def"
#undef DFT_CALL

// Resolves the real function of every POSIX and PROCESS call of the table (the library constructor).
void resolve_all() noexcept __attribute__((visibility("hidden")));

}  // namespace dftracer::preload
