// Small I/O program traced under upstream DFTracer 2.2.0's preload (tests/data/dftracer-v2.2.0).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  char path[512], buf[4096];
  memset(buf, 'x', sizeof buf);
  for (int f = 0; f < 2; ++f) {
    snprintf(path, sizeof path, "%s/file%d.dat", dir, f);
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    for (int i = 0; i < 3; ++i) write(fd, buf, 1000 + 100 * f);
    pwrite(fd, buf, 512, 0);
    lseek(fd, 0, SEEK_SET);
    for (int i = 0; i < 4; ++i) read(fd, buf, 700);
    pread(fd, buf, 256, 10);
    close(fd);
    FILE* fp = fopen(path, "r");
    fread(buf, 10, 5, fp);
    fclose(fp);
  }
  // once each: a failing read (ret -1), one writev and one fwrite
  snprintf(path, sizeof path, "%s/file0.dat", dir);
  int fd = open(path, O_WRONLY);
  read(fd, buf, 10);
  struct iovec iov[2] = {{buf, 300}, {buf, 200}};
  writev(fd, iov, 2);
  close(fd);
  FILE* fp = fopen(path, "w");
  fwrite(buf, 4, 25, fp);
  fclose(fp);
  return 0;
}
