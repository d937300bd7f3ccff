/* Hot loop for tests/test_aggregation.py: known numbers of small POSIX and STDIO calls on two
 * threads, spread over several aggregation buckets (phases separated by sleeps), with failing
 * reads (a directory) and fwrite calls of two item sizes. Prints its own counts and bytes as JSON:
 * {"read": [calls, bytes], ...}; "read_failed" counts the reads that returned -1.
 * Usage: agg_io <data dir> <reads per thread> <sleep ms between phases> */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* dir;
static long reads;
static int pause_ms;

struct counts {
  long read_n, read_bytes, read_failed, pread_n, pread_bytes, write_n, write_bytes;
};

static void* worker(void* arg) {
  struct counts* c = arg;
  char path[4096], buf[64];
  snprintf(path, sizeof path, "%s/in-%p.bin", dir, arg);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  if (fd < 0) exit(2);
  for (int i = 0; i < 4096; ++i) {
    ssize_t w = write(fd, "abcdefgh", 1 + i % 8);
    c->write_n++;
    c->write_bytes += w;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  for (int phase = 0; phase < 3; ++phase) {
    lseek(fd, 0, SEEK_SET);
    for (long i = 0; i < reads / 3; ++i) {
      ssize_t r = read(fd, buf, 1 + i % 7);
      if (r <= 0) {
        lseek(fd, 0, SEEK_SET);
        r = read(fd, buf, 1 + i % 7);
      }
      c->read_n++;
      c->read_bytes += r;
      if (i % 1000 == 0) {
        ssize_t p = pread(fd, buf, 5, i % 100);
        c->pread_n++;
        c->pread_bytes += p;
        if (read(dfd, buf, 4) == -1) c->read_failed++; /* EISDIR */
        c->read_n++;
      }
    }
    usleep(pause_ms * 1000);
  }
  close(dfd);
  close(fd);
  unlink(path);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  dir = argv[1];
  reads = atol(argv[2]);
  pause_ms = atoi(argv[3]);
  struct counts c[2];
  memset(c, 0, sizeof c);
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, &c[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  char path[4096];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  FILE* f = fopen(path, "w");
  long fw_n = 0, fw_bytes = 0;
  for (int i = 0; i < 3000; ++i) {
    size_t size = i % 2 ? 4 : 3; /* two item sizes: ret * size bytes each */
    size_t got = fwrite("abcdefgh", size, 2, f);
    fw_n++;
    fw_bytes += (long)(got * size);
  }
  fclose(f);
  unlink(path);
  struct counts s;
  memset(&s, 0, sizeof s);
  for (int i = 0; i < 2; ++i) {
    s.read_n += c[i].read_n;
    s.read_bytes += c[i].read_bytes;
    s.read_failed += c[i].read_failed;
    s.pread_n += c[i].pread_n;
    s.pread_bytes += c[i].pread_bytes;
    s.write_n += c[i].write_n;
    s.write_bytes += c[i].write_bytes;
  }
  printf(
      "{\"read\": [%ld, %ld], \"read_failed\": %ld, \"pread\": [%ld, %ld], \"write\": [%ld, %ld],"
      " \"fwrite\": [%ld, %ld]}\n",
      s.read_n, s.read_bytes, s.read_failed, s.pread_n, s.pread_bytes, s.write_n, s.write_bytes, fw_n, fw_bytes);
  return 0;
}
