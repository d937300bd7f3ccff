/* Helper of benchmarks/bench_process_start.py: short-lived processes, started one after another.
 *
 *   bench_process_start spawn N K VAR=VALUE... PROG ARGS...
 *       posix_spawn PROG ARGS N times in a row, waiting for each; the children get this process's
 *       environment plus the K given VAR=VALUE entries (e.g. LD_PRELOAD=...), this process keeps
 *       its own (untraced). Exit status 0 if every child exited with 0, else 1.
 *   bench_process_start io FILE
 *       one open, one read of up to 4 KiB and one close of FILE (three intercepted calls, so a
 *       traced run has an event to write); exit status 0 if all three succeeded. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static int spawn_loop(int argc, char** argv) {
  if (argc < 5) return 2;
  long n = strtol(argv[2], NULL, 10);
  int k = atoi(argv[3]);
  if (n < 0 || k < 0 || 4 + k >= argc) return 2;
  size_t nenv = 0;
  while (environ[nenv] != NULL) ++nenv;
  char** env = calloc(nenv + (size_t)k + 1, sizeof(char*));
  if (env == NULL) return 2;
  size_t m = 0;
  for (size_t i = 0; i < nenv; ++i) {
    /* drop entries the extra ones replace */
    int replaced = 0;
    for (int j = 0; j < k && !replaced; ++j) {
      const char* eq = strchr(argv[4 + j], '=');
      size_t len = eq != NULL ? (size_t)(eq - argv[4 + j]) + 1 : strlen(argv[4 + j]);
      replaced = strncmp(environ[i], argv[4 + j], len) == 0;
    }
    if (!replaced) env[m++] = environ[i];
  }
  for (int j = 0; j < k; ++j) env[m++] = argv[4 + j];
  env[m] = NULL;
  char** child_argv = argv + 4 + k;
  int bad = 0;
  for (long i = 0; i < n; ++i) {
    pid_t pid;
    if (posix_spawn(&pid, child_argv[0], NULL, NULL, child_argv, env) != 0) return 2;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  }
  return bad;
}

static int one_io(const char* path) {
  char buf[4096];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 1;
  ssize_t r = read(fd, buf, sizeof(buf));
  if (close(fd) != 0 || r < 0) return 1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 5 && strcmp(argv[1], "spawn") == 0) return spawn_loop(argc, argv);
  if (argc == 3 && strcmp(argv[1], "io") == 0) return one_io(argv[2]);
  fprintf(stderr, "usage: %s spawn N K VAR=VALUE... PROG ARGS... | io FILE\n", argv[0]);
  return 2;
}
