/* Helper of tests/test_preload_shellio.py (issue 21): descriptors the program did not open
 * itself, kernel-side copies and children made by raw system calls.
 *
 *   shellio dup2 FILE BS          open FILE, dup2 it onto fd 0, close it, read fd 0 in BS-byte
 *                                 reads to EOF; prints "reads N bytes B" (N counts the EOF read)
 *   shellio sysfork FILE N        child by syscall(SYS_fork): N preads of 4 KiB; the parent waits
 *   shellio clone3 FILE N         the same with syscall(SYS_clone3) (no CLONE_VM, SIGCHLD)
 *   shellio clonefn FILE N        the same with glibc's clone(fn, stack, SIGCHLD, arg)
 *   shellio clone3bad X           syscall(SYS_clone3) with a bad pointer; prints "ret R errno E"
 *   shellio splice IN OUT         copy IN to OUT through a pipe with splice(2), 64 KiB a call;
 *                                 prints "splices N bytes B" (both directions counted)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int child_reads(const char* path, int n) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 1;
  char buf[4096];
  for (int i = 0; i < n; ++i)
    if (pread(fd, buf, sizeof buf, (off_t)i * 4096) < 0) return 2;
  close(fd);
  return 0;
}

static const char* g_path;
static int g_n;
static int clone_fn(void* arg) {
  (void)arg;
  return child_reads(g_path, g_n);
}

static int wait_child(long pid) {
  int st;
  if (pid < 0 || waitpid((pid_t)pid, &st, 0) != pid) return 3;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (strcmp(argv[1], "dup2") == 0 && argc == 4) {
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0 || dup2(fd, 0) != 0) return 1;
    close(fd);
    size_t bs = (size_t)atol(argv[3]);
    char* buf = malloc(bs);
    long n = 0, b = 0;
    ssize_t r;
    do {
      r = read(0, buf, bs);
      ++n;
      if (r > 0) b += r;
    } while (r > 0);
    printf("reads %ld bytes %ld\n", n, b);
    return r < 0;
  }
  if ((strcmp(argv[1], "sysfork") == 0 || strcmp(argv[1], "clone3") == 0 || strcmp(argv[1], "clonefn") == 0) &&
      argc == 4) {
    int n = atoi(argv[3]);
    long pid;
    if (strcmp(argv[1], "sysfork") == 0) {
      pid = syscall(SYS_fork);
    } else if (strcmp(argv[1], "clonefn") == 0) {
      size_t size = 1 << 20;
      char* stack = malloc(size);
      g_path = argv[2];
      g_n = n;
      pid = clone(clone_fn, stack + size, SIGCHLD, NULL);
    } else {
      struct clone_args ca;
      memset(&ca, 0, sizeof ca);
      ca.exit_signal = SIGCHLD;
      pid = syscall(SYS_clone3, &ca, sizeof ca);
    }
    if (pid == 0) exit(child_reads(argv[2], n));
    int rc = wait_child(pid);
    printf("child %ld status %d\n", pid, rc);
    return rc;
  }
  if (strcmp(argv[1], "clone3bad") == 0) {
    errno = 0;
    long r = syscall(SYS_clone3, (void*)16, (size_t)88);
    printf("ret %ld errno %d\n", r, errno);
    return 0;
  }
  if (strcmp(argv[1], "splice") == 0 && argc == 4) {
    int in = open(argv[2], O_RDONLY), out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644), p[2];
    if (in < 0 || out < 0 || pipe(p) != 0) return 1;
    long n = 0, b = 0;
    for (;;) {
      ssize_t r = splice(in, NULL, p[1], NULL, 65536, 0);
      ++n;
      if (r < 0) return 1;
      if (r == 0) break;
      b += r;
      while (r > 0) {
        ssize_t w = splice(p[0], NULL, out, NULL, (size_t)r, 0);
        ++n;
        if (w <= 0) return 1;
        b += w;
        r -= w;
      }
    }
    printf("splices %ld bytes %ld\n", n, b);
    return close(in) | close(out);
  }
  return 2;
}
