// Clock and thread identity of the core: now_us, current_tid, the re-entry marker that keeps
// the preload wrappers from tracing the tracer's own work, and the LastEventScope marker.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tracer_impl.h"

namespace dftracer {

namespace {
thread_local int t_guard = 0;
thread_local int t_last_event = 0;  // LastEventScope depth
thread_local int t_tid = 0;
}  // namespace

int64_t now_us() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

ReentryGuard::ReentryGuard() noexcept { ++t_guard; }
ReentryGuard::~ReentryGuard() noexcept { --t_guard; }
bool in_tracer() noexcept { return t_guard > 0; }
LastEventScope::LastEventScope() noexcept { ++t_last_event; }
LastEventScope::~LastEventScope() noexcept { --t_last_event; }
bool in_last_event_scope() noexcept { return t_last_event > 0; }

int current_tid() noexcept {
  if (__builtin_expect(t_tid == 0, 0)) t_tid = static_cast<int>(syscall(SYS_gettid));
  return t_tid;
}

void reset_current_tid() noexcept { t_tid = 0; }

}  // namespace dftracer
