// dlsym(RTLD_NEXT, name) for many names at once, without dlsym: one walk of the loaded objects
// after the caller's, a GNU-hash lookup of each name in each (its Bloom filter rejects most at
// once). ~90 k instructions for the preload's ~105 eager names with dlsym, ~15 k with this.
#pragma once

#include <cstddef>

namespace dftracer::preload {

// For each names[i]: out[i] = the definition dlsym(RTLD_NEXT, names[i]) gives when called from
// the object that contains `self` (the loaded objects after it, in load order; unversioned
// lookup: a symbol without version, else the one default (non-hidden) version of the object,
// as glibc's dlsym picks). out[i] = nullptr where this cannot decide exactly as dlsym would
// (an IFUNC, TLS or unique symbol, an object without a GNU hash table, LD_AUDIT set, no
// definition found): the caller asks dlsym for those. Async-signal-unsafe (reads the loader's
// object list unlocked): call it from a constructor, while no other thread loads libraries.
// Returns how many names were resolved.
size_t next_symbols(const void* self, const char* const* names, void** out, size_t n) noexcept
    __attribute__((visibility("hidden")));

// The definition of `name` in the first object of the loader's list (load order) that defines
// it, other than the object containing `self`: also an object loaded RTLD_LOCAL (h5py's bundled
// libhdf5), which dlsym(RTLD_NEXT) does not search. Null when no loaded object defines it.
// Takes the loader's lock (dl_iterate_phdr): not for signal handlers or vfork children.
void* loaded_symbol(const void* self, const char* name) noexcept __attribute__((visibility("hidden")));

}  // namespace dftracer::preload
