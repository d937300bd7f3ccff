/* Exercises the C API compiled as C (not C++). Usage: core_c_api_c [N]
 * Writes per iteration one function event ("c_work", tags i, fname) and one region
 * ("LOOP_BODY", tag sq), plus once: a metadata record and two instants. */
#include <stdio.h>
#include <stdlib.h>

#include "dftracer/dftracer.h"

static void c_work(int i) {
  DFTRACER_C_FUNCTION_START();
  DFTRACER_C_FUNCTION_UPDATE_INT("i", i);
  DFTRACER_C_FUNCTION_UPDATE_STR("fname", "/data/c.bin");
  DFTRACER_C_REGION_START(LOOP_BODY);
  DFTRACER_C_REGION_UPDATE_INT(LOOP_BODY, "sq", (int64_t)i * i);
  DFTRACER_C_REGION_UPDATE_DOUBLE(LOOP_BODY, "half", i / 2.0);
  DFTRACER_C_REGION_END(LOOP_BODY);
  DFTRACER_C_FUNCTION_END();
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  int i;
  DFTRACER_C_INIT(NULL, NULL, NULL);
  DFTRACER_C_METADATA(run, "c_key", "c_value");
  DFTRACER_C_INSTANT(c_start);
  for (i = 0; i < n; ++i) c_work(i);
  DFTRACER_C_INSTANT_STR(c_end, "state", "done");
  if (dftracer_c_time_us() <= 0) return 2;
  DFTRACER_C_FINI();
  return 0;
}
