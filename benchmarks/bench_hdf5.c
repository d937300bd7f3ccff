/* HDF5 wrapper cost (docs/preload.md "HDF5"): creates FILE with a 1024-int dataset, then times
 * N H5Dread calls of one element each through a hyperslab. Prints microseconds per call; count
 * instructions with callgrind (slope between two N). Usage: bench_hdf5 FILE N
 *   gcc -O2 -o /tmp/bench_hdf5 benchmarks/bench_hdf5.c -I/usr/include/hdf5/serial \
 *       -L/usr/lib/x86_64-linux-gnu/hdf5/serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int n = atoi(argv[2]);
  hsize_t dims[1] = {1024}, one[1] = {1}, start[1];
  static int buf[1024];
  hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t fs = H5Screate_simple(1, dims, NULL), ms = H5Screate_simple(1, one, NULL);
  hid_t d = H5Dcreate2(f, "d", H5T_NATIVE_INT, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < n; ++i) {
    start[0] = i % 1024;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    H5Dread(d, H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, buf);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%.3f us/call\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / n);
  H5Sclose(ms);
  H5Sclose(fs);
  H5Dclose(d);
  H5Fclose(f);
  return 0;
}
