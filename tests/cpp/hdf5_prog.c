/* HDF5 program for tests/test_preload_hdf5.py: writes a ROWS x COLS chunked int32 dataset in a
 * group row by row, adds an attribute, flushes, closes, then reopens the file and reads the rows
 * back one by one and the whole dataset once (H5S_ALL). Prints its own counts as JSON lines:
 * {"call": name, "n": calls, "bytes": bytes}. Built as a program (main) or, with -DHDF5_PLUGIN,
 * as a shared library whose hdf5_run() a loader dlopens (tests/cpp/hdf5_dlopen.c). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>

#define ROWS 64
#define COLS 300

static long n_write, b_write, n_read, b_read;

static int check(long ok, const char* what) {
  if (!ok) fprintf(stderr, "hdf5_prog: %s failed\n", what);
  return ok ? 0 : 1;
}

int hdf5_run(const char* path) {
  static int row[COLS], all[ROWS][COLS];
  hsize_t dims[2] = {ROWS, COLS}, chunk[2] = {1, COLS}, one[2] = {1, COLS}, start[2] = {0, 0};
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (check(f >= 0, "H5Fcreate")) return 1;
  hid_t g = H5Gcreate2(f, "grp", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t fs = H5Screate_simple(2, dims, NULL);
  hid_t ms = H5Screate_simple(2, one, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  hid_t d = H5Dcreate2(g, "data", H5T_NATIVE_INT, fs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (check(g >= 0 && d >= 0, "create")) return 1;
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < COLS; ++c) row[c] = r * COLS + c;
    start[0] = (hsize_t)r;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    if (check(H5Dwrite(d, H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, row) >= 0, "H5Dwrite")) return 1;
    n_write++, b_write += (long)sizeof row;
  }
  hsize_t adim = 3;
  double av[3] = {1.5, 2.5, 3.5};
  hid_t as = H5Screate_simple(1, &adim, NULL);
  hid_t a = H5Acreate2(d, "scale", H5T_NATIVE_DOUBLE, as, H5P_DEFAULT, H5P_DEFAULT);
  if (check(a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, av) >= 0, "attribute")) return 1;
  H5Aclose(a);
  H5Sclose(as);
  if (check(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, "H5Fflush")) return 1;
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Gclose(g);
  H5Fclose(f);

  f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  g = H5Gopen2(f, "grp", H5P_DEFAULT);
  d = H5Dopen2(g, "data", H5P_DEFAULT);
  if (check(f >= 0 && g >= 0 && d >= 0, "open")) return 1;
  for (int r = 0; r < ROWS; ++r) {
    start[0] = (hsize_t)r;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    if (check(H5Dread(d, H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, row) >= 0, "H5Dread")) return 1;
    if (check(row[COLS - 1] == r * COLS + COLS - 1, "row value")) return 1;
    n_read++, b_read += (long)sizeof row;
  }
  if (check(H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0, "H5Dread all")) return 1;
  n_read++, b_read += (long)sizeof all;
  a = H5Aopen(d, "scale", H5P_DEFAULT);
  if (check(a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, av) >= 0 && av[2] == 3.5, "H5Aread")) return 1;
  H5Aclose(a);
  /* A failing call: the wrapper returns what HDF5 returned (and HDF5 prints its error stack). */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (check(H5Dopen2(g, "missing", H5P_DEFAULT) < 0, "H5Dopen2 missing")) return 1;
  H5Sclose(ms);
  H5Sclose(fs);
  H5Dclose(d);
  H5Gclose(g);
  H5Fclose(f);
  printf("{\"call\": \"H5Dwrite\", \"n\": %ld, \"bytes\": %ld}\n", n_write, b_write);
  printf("{\"call\": \"H5Dread\", \"n\": %ld, \"bytes\": %ld}\n", n_read, b_read);
  printf("{\"call\": \"H5Awrite\", \"n\": 1, \"bytes\": %ld}\n", (long)sizeof av);
  printf("{\"call\": \"H5Aread\", \"n\": 1, \"bytes\": %ld}\n", (long)sizeof av);
  fflush(stdout);
  return 0;
}

#ifndef HDF5_PLUGIN
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  return hdf5_run(argv[1]);
}
#endif
