// next_symbols() (src/preload/next_symbol.h) gives exactly what dlsym(RTLD_NEXT) gives from the
// same object, for every call of the call table, for libc symbols with several versions (the
// default one), for C++ symbols defined before libc in the load order, and leaves IFUNC and
// unknown names to dlsym (null). loaded_symbol() (HDF5's real functions) also finds a definition
// in a library loaded RTLD_LOCAL, outside dlsym(RTLD_NEXT)'s scope.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "next_symbol.h"

namespace {
int anchor() { return 1; }  // an address inside this executable: lookups start after it

struct Lookup {
  std::vector<const char*> names;
  std::vector<void*> fast, slow;
  size_t resolved = 0;
};

Lookup lookup(std::vector<const char*> names) {
  Lookup r;
  r.names = std::move(names);
  r.fast.assign(r.names.size(), reinterpret_cast<void*>(1));
  r.resolved = dftracer::preload::next_symbols(reinterpret_cast<const void*>(&anchor), r.names.data(), r.fast.data(),
                                               r.names.size());
  for (const char* n : r.names) r.slow.push_back(dlsym(RTLD_NEXT, n));
  return r;
}
}  // namespace

TEST(PreloadNextSymbol, EveryCallOfTheTableAsDlsym) {
  // libc's calls (the interfaces resolved with dlsym(RTLD_NEXT); HDF5's and MPI-IO's resolve in
  // loaded objects).
  constexpr bool kLibc_POSIX = true, kLibc_STDIO = true, kLibc_PROCESS = true, kLibc_HDF5 = false, kLibc_MPIIO = false;
  std::vector<const char*> names;
#define DFT_CALL(interface, name, ret, params, bytes) \
  if (kLibc_##interface) names.push_back(#name);
#include "../../src/format/calls.def"
#undef DFT_CALL
  Lookup r = lookup(names);
  size_t defined = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (r.slow[i] != nullptr) ++defined;
    // Decided: the same address as dlsym; undecided (null): dlsym is asked by the caller.
    if (r.fast[i] != nullptr) {
      EXPECT_EQ(r.fast[i], r.slow[i]) << names[i];
    }
  }
  EXPECT_EQ(names.size(), 128u);  // the call table's size (tests/test_calls_table.py pins the same count)
  EXPECT_EQ(r.resolved, defined) << "a plain libc function was left to dlsym";
}

TEST(PreloadNextSymbol, DefaultVersionOfMultiVersionSymbols) {
  // libc.so.6 defines each of these twice: name@OLD (hidden) and name@@NEW (default).
  Lookup r = lookup({"pthread_cond_wait", "regexec", "sched_getaffinity", "fmemopen", "glob64"});
  EXPECT_EQ(r.resolved, 5u);
  for (size_t i = 0; i < r.names.size(); ++i) {
    ASSERT_NE(r.slow[i], nullptr) << r.names[i];
    EXPECT_EQ(r.fast[i], r.slow[i]) << r.names[i];
  }
  // And the default is not the old version: dlvsym with the old version differs.
  EXPECT_NE(r.fast[0], dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.2.5"));
  EXPECT_EQ(r.fast[0], dlvsym(RTLD_NEXT, "pthread_cond_wait", "GLIBC_2.3.2"));
}

TEST(PreloadNextSymbol, LoadOrderIfuncAndUnknown) {
  // operator new / __cxa_throw: libstdc++.so, loaded before libc; memcpy, strlen: IFUNCs (dlsym
  // runs their resolvers), left undecided; an unknown name: undecided too.
  Lookup r = lookup({"_Znwm", "__cxa_throw", "memcpy", "strlen", "dftracer_no_such_symbol"});
  EXPECT_EQ(r.resolved, 2u);
  EXPECT_NE(r.fast[0], nullptr);
  EXPECT_EQ(r.fast[0], r.slow[0]);
  EXPECT_EQ(r.fast[1], r.slow[1]);
  EXPECT_EQ(r.fast[2], nullptr);
  EXPECT_EQ(r.fast[3], nullptr);
  EXPECT_NE(r.slow[2], nullptr);
  EXPECT_EQ(r.fast[4], nullptr);
  EXPECT_EQ(r.slow[4], nullptr);
}

TEST(PreloadLoadedSymbol, GlobalLocalIfuncAndUnknown) {
  const void* self = reinterpret_cast<const void*>(&anchor);
  // A libc function: the same definition dlsym(RTLD_NEXT) gives.
  EXPECT_EQ(dftracer::preload::loaded_symbol(self, "pread"), dlsym(RTLD_NEXT, "pread"));
  // An IFUNC: handed to dlsym in its object, which runs the resolver.
  EXPECT_EQ(dftracer::preload::loaded_symbol(self, "memcpy"), dlsym(RTLD_NEXT, "memcpy"));
  EXPECT_EQ(dftracer::preload::loaded_symbol(self, "dftracer_no_such_symbol"), nullptr);
  // A library loaded RTLD_LOCAL later (h5py's bundled libhdf5's case): outside the global
  // scope, so dlsym(RTLD_DEFAULT) misses it; loaded_symbol finds its definition.
  ASSERT_EQ(dlsym(RTLD_DEFAULT, "deflateBound"), nullptr) << "libz is already global here";
  EXPECT_EQ(dftracer::preload::loaded_symbol(self, "deflateBound"), nullptr);  // not loaded yet
  void* h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "deflateBound"), nullptr);
  void* want = dlsym(h, "deflateBound");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(dftracer::preload::loaded_symbol(self, "deflateBound"), want);
  dlclose(h);
}
