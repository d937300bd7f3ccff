/* Microbenchmark of the DFTracer paper (SC24, §V-A): each of P processes opens a file, does N reads
 * of B bytes, closes it; the cycle is repeated R times so one run lasts long enough to time.
 *
 *   bench_preload FILE P N B R
 *
 * Prints one JSON object: {"procs":P,"reads":N,"bs":B,"rounds":R,"calls":<intercepted calls per
 * process>,"ns_per_proc":[...]} where ns_per_proc is each process's wall time (CLOCK_MONOTONIC, ns)
 * for its R cycles, and thread_cpu_ns_per_proc the CPU time of the worker's own thread
 * (CLOCK_THREAD_CPUTIME_ID: excludes the tracer's writer thread). Workers are fork()ed children;
 * at most 64 processes; exit status 0 on success. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int worker(const char* path, long n, long bs, long rounds, int out) {
  char* buf = malloc((size_t)bs);
  if (buf == NULL) return 1;
  int64_t c0 = thread_cpu_ns();
  int64_t t0 = now_ns();
  for (long r = 0; r < rounds; ++r) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 2;
    for (long i = 0; i < n; ++i) {
      ssize_t got = read(fd, buf, (size_t)bs);
      if (got <= 0) return 3;
    }
    if (close(fd) != 0) return 4;
  }
  int64_t dt[2] = {now_ns() - t0, thread_cpu_ns() - c0};
  if (write(out, dt, sizeof(dt)) != (ssize_t)sizeof(dt)) return 5;
  free(buf);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s FILE PROCS READS BLOCK_BYTES ROUNDS\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  int procs = atoi(argv[2]);
  if (procs < 1 || procs > 64) return 2;
  long n = atol(argv[3]), bs = atol(argv[4]), rounds = atol(argv[5]);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  for (int p = 0; p < procs; ++p) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      close(fds[0]);
      int rc = worker(path, n, bs, rounds, fds[1]);
      close(fds[1]);
      _exit(rc);
    }
  }
  close(fds[1]);
  int failed = 0;
  for (int p = 0; p < procs; ++p) {
    int st = 0;
    if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  printf("{\"procs\":%d,\"reads\":%ld,\"bs\":%ld,\"rounds\":%ld,\"calls\":%ld,\"ns_per_proc\":[", procs, n,
         bs, rounds, rounds * (n + 2));
  int64_t cpu[64];
  for (int p = 0; p < procs; ++p) {
    int64_t dt[2] = {-1, -1};
    if (read(fds[0], dt, sizeof(dt)) != (ssize_t)sizeof(dt)) failed = 1;
    printf("%s%lld", p ? "," : "", (long long)dt[0]);
    if (p < 64) cpu[p] = dt[1];
  }
  printf("],\"thread_cpu_ns_per_proc\":[");
  for (int p = 0; p < procs && p < 64; ++p) printf("%s%lld", p ? "," : "", (long long)cpu[p]);
  printf("]}\n");
  return failed;
}
