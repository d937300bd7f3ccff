/*
 * DFTRACER_EXPORT marks the API of libdftracer_core.so (the C functions of dftracer.h and the
 * internal C++ API of src/core/tracer.h that the preload library, the Python modules, tests and
 * benchmarks link against). The library is built with -fvisibility=hidden: everything else is
 * internal and not part of its ABI.
 */
#ifndef DFTRACER_EXPORT_H
#define DFTRACER_EXPORT_H
#define DFTRACER_EXPORT __attribute__((visibility("default")))
#endif
