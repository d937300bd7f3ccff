/* Loads libhdf5 late: dlopens argv[1] (tests/cpp/hdf5_prog.c built with -DHDF5_PLUGIN, linked
 * against libhdf5) RTLD_LOCAL, as Python loads an extension module, and runs its hdf5_run(argv[2]).
 * The program itself does not link libhdf5. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "hdf5_dlopen: %s\n", dlerror());
    return 3;
  }
  int (*run)(const char*) = (int (*)(const char*))dlsym(h, "hdf5_run");
  if (run == NULL) return 4;
  return run(argv[2]);
}
