// Process module of the preload library (process.cpp): fork/vfork/exec*/posix_spawn/exit.
#pragma once

namespace dftracer::preload {

// Snapshot of the environment entries exec must keep (LD_PRELOAD with this library, DFTRACER_*),
// taken once by the constructor.  Also resolves every real function of all modules.
void process_init() noexcept __attribute__((visibility("hidden")));

}  // namespace dftracer::preload
