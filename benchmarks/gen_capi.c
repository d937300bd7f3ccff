/* Writes N POSIX-like events through the dftracer C API (a real traced process, not a
 * synthetic writer): per file an open, 62 reads/writes of 4 KiB-1 MiB with `ret` (bytes) and
 * `fname` tags, a close. Used for the out-of-core summary at 1B events (docs/perf/analyzer.md):
 *   cc -O2 benchmarks/gen_capi.c -I include -L $LIB -ldftracer_core -Wl,-rpath,$LIB -o gen_capi
 *   DFTRACER_ENABLE=1 DFTRACER_LOG_FILE=/data/part ./gen_capi 100000000
 * Prints the number of events it wrote (opens + data calls + closes), the truth to check. */
#include <dftracer/dftracer.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  long long n = argc > 1 ? atoll(argv[1]) : 1000000;
  dftracer_c_init(NULL, "all", NULL);
  static const long long sizes[4] = {4096, 65536, 262144, 1048576};
  char fname[64];
  long long written = 0;
  for (long long f = 0; written < n; ++f) {
    snprintf(fname, sizeof fname, "/data/run/file-%lld.bin", f % 4096);
    dftracer_region_t* r = dftracer_c_region_begin("open64", "POSIX");
    dftracer_c_region_update_str(r, "fname", fname);
    dftracer_c_region_end(r);
    ++written;
    for (int i = 0; i < 62 && written < n - 1; ++i, ++written) {
      r = dftracer_c_region_begin(i % 4 == 3 ? "write" : "read", "POSIX");
      dftracer_c_region_update_str(r, "fname", fname);
      dftracer_c_region_update_int(r, "ret", sizes[(f + i) & 3]); /* bytes, as the preload records them */
      dftracer_c_region_end(r);
    }
    r = dftracer_c_region_begin("close", "POSIX");
    dftracer_c_region_update_str(r, "fname", fname);
    dftracer_c_region_end(r);
    ++written;
  }
  dftracer_c_fini();
  printf("%lld\n", written);
  return 0;
}
