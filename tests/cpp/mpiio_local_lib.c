/* tests/test_preload_mpiio.py: MPI-IO from a library that the program dlopens with RTLD_LOCAL
 * (its libmpi is then outside the global scope until OpenMPI's MPI_Init promotes it). Each rank
 * writes 256 ints at rank * 1024 through MPI_File_write_at. */
#include <mpi.h>
#include <stdio.h>
int run(const char* path) {
  MPI_Init(NULL, NULL);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_File fh;
  int buf[256];
  for (int i = 0; i < 256; ++i) buf[i] = i;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
  MPI_Status st;
  MPI_File_write_at(fh, rank * 1024, buf, 256, MPI_INT, &st);
  MPI_File_close(&fh);
  MPI_Finalize();
  return 0;
}
