/* tests/test_preload_mpiio.py: dlopen(argv[1], RTLD_LOCAL) and run its run(argv[2]); prints
 * whether PMPI_File_open is in the global scope before and after (the preload must find PMPI_*
 * in the loaded object itself before: dl_iterate_phdr + dlopen(RTLD_NOLOAD)). */
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  int (*run)(const char*) = (int (*)(const char*))dlsym(h, "run");
  printf("global PMPI before: %p\n", dlsym(RTLD_DEFAULT, "PMPI_File_open"));
  int r = run(argv[2]);
  printf("global PMPI after: %p\n", dlsym(RTLD_DEFAULT, "PMPI_File_open"));
  return r;
}
