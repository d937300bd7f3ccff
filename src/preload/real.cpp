// The real-function pointers of real.h and their start-up resolution, from src/format/calls.def.
#include "real.h"

namespace dftracer::preload {

#define DFT_CALL(interface, name, ret, params, bytes) std::atomic<name##_fn> real_##name##_ptr{nullptr};
#include "../format/calls.def"
#undef DFT_CALL

void resolve_all() noexcept {
#define DFT_CALL(interface, name, ret, params, bytes) (void)real_##name();
#include "../format/calls.def"
#undef DFT_CALL
}

}  // namespace dftracer::preload
