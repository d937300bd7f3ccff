/* An application that closes or replaces descriptors it did not open (docs/preload.md,
 * "The trace descriptor"). Used by tests/test_fd_guard.py.
 *
 * Usage: fd_guard MODE DATA_FILE OUT_DIR N
 *   MODE: daemon (close 3..1023 one by one) | close_range (close_range(3, ~0U, 0)) |
 *         closefrom (closefrom(3)) | dup2 / dup3 (its own file dup'ed onto the number the
 *         tracer's file has) | stdout (stdout closed before the tracer opens its file, then
 *         the redirect idiom: open() must give fd 1)
 * Phase 1: N preads of 4 KiB from DATA_FILE (opened first, fd 3); waits until the tracer holds its trace file open
 * (a /proc/self/task/TID/fd link to a ".pfw" file: the writer thread's own table, or the
 * application's when the tracer writes on an application thread). Then the MODE's operation, then OUT_DIR/a.bin and
 * OUT_DIR/b.bin each get N blocks of 4 KiB (block i of a.bin is all 'a' + i % 26, of b.bin
 * 'A' + i % 26), and phase 2: DATA_FILE re-opened, N more preads. stdout mode also prints N
 * lines "line <i>" into OUT_DIR/out.log through fd 1.
 * Built with -DFD_GUARD_API (linked to libdftracer_core, no preload): each pread and each block
 * write is also one C API region ("read_block" / "write_block", cat "C_APP").
 * Exit status 0; failures of the application's own calls exit 2 with a message on stderr. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef FD_GUARD_API
#include "dftracer/dftracer.h"
#define REGION_BEGIN(name) dftracer_region_t* r_ = dftracer_c_region_begin((name), "C_APP")
#define REGION_END() dftracer_c_region_end(r_)
#else
#define REGION_BEGIN(name) ((void)0)
#define REGION_END() ((void)0)
#endif

#define BLOCK 4096

static void die(const char* what) {
  fprintf(stderr, "fd_guard: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* The descriptor of the tracer's file: an entry of a thread's descriptor table
 * (/proc/self/task/TID/fd) naming a non-empty ".pfw" file (the tracer writes only through its
 * final descriptor); -1 if none. *tid: the thread whose table holds it, searched main thread
 * first: the writer thread keeps its own table, so a tid other than getpid() shows that the
 * application's table does not hold the trace file. */
static int find_trace_fd(int* tid) {
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) die("opendir /proc/self/task");
  int found = -1;
  struct dirent* t;
  int ids[64], nids = 0;
  ids[nids++] = getpid();
  while ((t = readdir(tasks)) != NULL && nids < 64)
    if (t->d_name[0] != '.' && atoi(t->d_name) != getpid()) ids[nids++] = atoi(t->d_name);
  closedir(tasks);
  for (int k = 0; k < nids && found < 0; ++k) {
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/self/task/%d/fd", ids[k]);
    DIR* d = opendir(dir);
    if (!d) continue;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      char link[384], target[PATH_MAX];
      if (e->d_name[0] == '.') continue;
      snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
      ssize_t n = readlink(link, target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      struct stat st;
      if (strstr(target, ".pfw") && stat(link, &st) == 0 && st.st_size > 0) {
        found = atoi(e->d_name);
        *tid = ids[k];
      }
    }
    closedir(d);
  }
  return found;
}

/* O_CLOEXEC of descriptor fd in thread tid's table (its fdinfo "flags:", octal). */
static int cloexec_of(int tid, int fd) {
  char path[96], line[128];
  snprintf(path, sizeof(path), "/proc/self/task/%d/fdinfo/%d", tid, fd);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  int r = -1;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "flags:", 6) == 0) r = (strtol(line + 6, NULL, 8) & O_CLOEXEC) != 0;
  fclose(f);
  return r;
}

static int wait_trace_fd(int* tid) {
  for (int i = 0; i < 20000; ++i) {
    int fd = find_trace_fd(tid);
    if (fd >= 0) return fd;
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "fd_guard: the tracer never opened its trace file\n");
  exit(2);
}

static void read_blocks(int fd, int n) {
  static char buf[BLOCK];
  for (int i = 0; i < n; ++i) {
    REGION_BEGIN("read_block");
    if (pread(fd, buf, BLOCK, (off_t)(i % 16) * BLOCK) != BLOCK) die("pread");
    REGION_END();
  }
}

static void write_blocks(int fd, char first, int n) {
  static char buf[BLOCK];
  for (int i = 0; i < n; ++i) {
    memset(buf, first + i % 26, BLOCK);
    REGION_BEGIN("write_block");
    if (write(fd, buf, BLOCK) != BLOCK) die("write");
    REGION_END();
  }
}

static int open_out(const char* dir, const char* name) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die(path);
  return fd;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: fd_guard MODE DATA_FILE OUT_DIR N\n");
    return 2;
  }
  const char* mode = argv[1];
  const char* data = argv[2];
  const char* out = argv[3];
  int n = atoi(argv[4]);
#ifdef FD_GUARD_API
  DFTRACER_C_INIT(NULL, NULL, NULL);
#endif
  int dfd = open(data, O_RDONLY);
  if (dfd < 0) die("open data");
  if (strcmp(mode, "stdout") == 0) close(1); /* before the tracer opens its file */
  read_blocks(dfd, n);
  int tid = 0;
  int trace_fd = wait_trace_fd(&tid);
  fprintf(stderr, "fd_guard: trace fd %d cloexec %d table %s\n", trace_fd, cloexec_of(tid, trace_fd),
          tid == getpid() ? "app" : "writer");

  int fa = -1;
  if (strcmp(mode, "daemon") == 0) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
  } else if (strcmp(mode, "close_range") == 0) {
    if (close_range(3, ~0U, 0) != 0) die("close_range");
  } else if (strcmp(mode, "closefrom") == 0) {
    closefrom(3);
  } else if (strcmp(mode, "dup2") == 0 || strcmp(mode, "dup3") == 0) {
    int own = open_out(out, "a.bin");
    int r = mode[3] == '2' ? dup2(own, trace_fd) : dup3(own, trace_fd, O_CLOEXEC);
    if (r != trace_fd) die("dup onto the trace fd number");
    if (close(own) != 0) die("close");
    fa = trace_fd; /* a.bin is written through the number the tracer had */
  } else if (strcmp(mode, "stdout") == 0) {
    int fd = open_out(out, "out.log");
    if (fd != 1) fprintf(stderr, "fd_guard: out.log got fd %d, not 1\n", fd);
    for (int i = 0; i < n; ++i) printf("line %d\n", i);
    if (fflush(stdout) != 0) die("fflush stdout");
  } else {
    fprintf(stderr, "fd_guard: unknown mode %s\n", mode);
    return 2;
  }
  if (fa < 0) fa = open_out(out, "a.bin");
  int fb = open_out(out, "b.bin");
  write_blocks(fa, 'a', n);
  write_blocks(fb, 'A', n);
  if (close(fa) != 0 || close(fb) != 0) die("close out");
  close(dfd); /* EBADF where MODE closed it already */
  if ((dfd = open(data, O_RDONLY)) < 0) die("open data");
  read_blocks(dfd, n);
  if (close(dfd) != 0) die("close data");
#ifdef FD_GUARD_API
  DFTRACER_C_FINI();
#endif
  return 0;
}
