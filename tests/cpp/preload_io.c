/* Test driver for the LD_PRELOAD interception (tests/test_preload_*.py compile it with gcc).
 *
 *   preload_io MODE ARGS...
 *
 * Every mode prints facts on stdout (one "key value" per line) that the tests compare with the
 * trace, with strace, or with a run without the preload. Exit status 0 unless noted. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static void die(const char* what) {
  printf("FAIL %s errno %d\n", what, errno);
  exit(99);
}

/* Open fds of the application: the tracer's own trace file (opened whenever its writer first
   writes, e.g. at a timed flush) is not counted. */
static int count_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) die("opendir /proc/self/fd");
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char link[64], target[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(link, target, sizeof(target) - 1);
    target[k > 0 ? k : 0] = '\0';
    if (strstr(target, ".pfw") == NULL) ++n;
  }
  closedir(d);
  return n - 1; /* the directory's own fd */
}

/* pread FILE N BS: N preads of BS bytes at offsets i*BS (past EOF they return 0 or less). */
static int mode_pread(char** a) {
  int n = atoi(a[1]), bs = atoi(a[2]);
  char* buf = malloc(bs);
  int fd = open(a[0], O_RDONLY);
  if (fd < 0) die("open");
  long total = 0;
  for (int i = 0; i < n; ++i) {
    ssize_t r = pread(fd, buf, bs, (off_t)i * bs);
    if (r < 0) die("pread");
    total += r;
  }
  close(fd);
  printf("bytes %ld\n", total);
  free(buf);
  return 0;
}

/* fdtable TRACED UNTRACED: the fd -> path table across dup/dup2/dup3/fcntl/close. */
static int mode_fdtable(char** a) {
  char b[16];
  int fd = open(a[0], O_RDONLY);
  int d1 = dup(fd);
  int d2 = dup2(fd, 40);
  int d3 = dup3(fd, 41, O_CLOEXEC);
  int d4 = fcntl(fd, F_DUPFD, 50);
  int d5 = fcntl(fd, F_DUPFD_CLOEXEC, 60);
  close(fd);
  /* Each of these reads is on the traced file. */
  if (pread(d1, b, 1, 0) != 1 || pread(d2, b, 1, 1) != 1 || pread(d3, b, 1, 2) != 1 || pread(d4, b, 1, 3) != 1 ||
      pread(d5, b, 1, 4) != 1)
    die("pread dup");
  close(d1);
  close(d2);
  close(d3);
  close(d4);
  close(d5);
  /* The numbers are reused by an untraced file: these reads must not be traced. */
  int u = open(a[1], O_RDONLY);
  int u2 = dup2(u, 40);
  if (pread(u, b, 1, 0) != 1 || pread(u2, b, 1, 0) != 1) die("pread untraced");
  /* dup2 of an untraced fd over a traced one forgets the traced name. */
  int t = open(a[0], O_RDONLY);
  dup2(u, t);
  if (pread(t, b, 1, 0) != 1) die("pread over");
  close(t);
  close(u);
  close(u2);
  printf("fds %d %d %d %d %d %d %d\n", fd, d1, d2, d3, d4, d5, u);
  return 0;
}

/* errno: each wrapper leaves errno exactly as the real call did, also on success. */
static int mode_errno(char** a) {
  char b[8];
  errno = 1234;
  int fd = open(a[0], O_RDONLY);
  printf("open_ok errno %d\n", errno);
  errno = 4321;
  ssize_t r = read(fd, b, sizeof b);
  printf("read_ok %zd errno %d\n", r, errno);
  r = read(-1, b, sizeof b);
  printf("read_badfd %zd errno %d\n", r, errno);
  r = pread(fd, b, sizeof b, -5);
  printf("pread_neg %zd errno %d\n", r, errno);
  off_t o = lseek(fd, 0, 42);
  printf("lseek_badwhence %lld errno %d\n", (long long)o, errno);
  errno = 777;
  struct stat st;
  int s = fstat(fd, &st);
  printf("fstat_ok %d errno %d size %lld\n", s, errno, (long long)st.st_size);
  s = close(fd);
  printf("close_ok %d errno %d\n", s, errno);
  s = close(fd);
  printf("close_again %d errno %d\n", s, errno);
  int m = open(a[1], O_RDONLY);
  printf("open_missing %d errno %d\n", m, errno);
  m = open(a[1], O_WRONLY | O_CREAT | O_EXCL, 0600);
  int m2 = open(a[1], O_WRONLY | O_CREAT | O_EXCL, 0600);
  printf("open_excl %d errno %d\n", m2, errno);
  close(m);
  unlink(a[1]);
  s = stat(a[1], &st);
  printf("stat_missing %d errno %d\n", s, errno);
  s = access(a[1], R_OK);
  printf("access_missing %d errno %d\n", s, errno);
  FILE* f = fopen(a[1], "r");
  printf("fopen_missing %d errno %d\n", f == NULL ? -1 : 0, errno);
  s = mkdir(a[0], 0700);
  printf("mkdir_exists %d errno %d\n", s, errno);
  s = rename(a[1], a[1]);
  printf("rename_missing %d errno %d\n", s, errno);
  s = unlink(a[1]);
  printf("unlink_missing %d errno %d\n", s, errno);
  DIR* d = opendir(a[1]);
  printf("opendir_missing %d errno %d\n", d == NULL ? -1 : 0, errno);
  return 0;
}

/* stdio FILE: buffered calls on a traced file. */
static int mode_stdio(char** a) {
  FILE* f = fopen(a[0], "w+");
  if (f == NULL) die("fopen");
  char buf[100];
  memset(buf, 'x', sizeof buf);
  size_t w = fwrite(buf, 10, 10, f);
  fflush(f);
  fseek(f, 0, SEEK_SET);
  size_t r = fread(buf, 4, 30, f); /* 100 bytes = 25 items of 4 */
  long t = ftell(f);
  fseeko(f, 8, SEEK_SET);
  off_t t2 = ftello(f);
  fclose(f);
  printf("fwrite %zu fread %zu ftell %ld ftello %lld\n", w, r, t, (long long)t2);
  return 0;
}

struct thr {
  const char* path;
  int n;
};
static void* thread_main(void* p) {
  struct thr* t = p;
  char b[64];
  int fd = open(t->path, O_RDONLY);
  if (fd < 0) die("open");
  for (int i = 0; i < t->n; ++i)
    if (pread(fd, b, sizeof b, i % 64) != (ssize_t)sizeof b) die("pread thr");
  close(fd);
  return NULL;
}

/* threads FILE T N: T threads, each open + N preads + close. */
static int mode_threads(char** a) {
  int nt = atoi(a[1]), n = atoi(a[2]);
  pthread_t th[64];
  struct thr t = {a[0], n};
  for (int i = 0; i < nt; ++i) pthread_create(&th[i], NULL, thread_main, &t);
  for (int i = 0; i < nt; ++i) pthread_join(th[i], NULL);
  printf("threads %d reads %d\n", nt, nt * n);
  return 0;
}

static int g_sigfd = -1;
static volatile sig_atomic_t g_handler_reads = 0;
static void on_alarm(int sig) {
  (void)sig;
  char b[16];
  int e = errno;
  if (pread(g_sigfd, b, sizeof b, 0) == (ssize_t)sizeof b) g_handler_reads++;
  errno = e;
}

/* signals FILE N: N preads in the main loop while a 50 µs timer's handler also preads. */
static int mode_signals(char** a) {
  int n = atoi(a[1]);
  g_sigfd = open(a[0], O_RDONLY);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &it, NULL);
  char b[32];
  for (int i = 0; i < n; ++i)
    if (pread(g_sigfd, b, sizeof b, 0) != (ssize_t)sizeof b) die("pread main");
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  signal(SIGALRM, SIG_IGN);
  close(g_sigfd);
  printf("main %d handler %d\n", n, (int)g_handler_reads);
  return 0;
}

static volatile sig_atomic_t g_seen_signo, g_seen_term, g_seen_int, g_seen_usr1;
static void on_term_info(int sig, siginfo_t* info, void* ctx) {
  (void)ctx;
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, NULL, &m);
  g_seen_signo = info->si_signo == sig ? sig : -1;
  g_seen_term = sigismember(&m, SIGTERM);
  g_seen_int = sigismember(&m, SIGINT);
  g_seen_usr1 = sigismember(&m, SIGUSR1);
}
static void on_term_kill(int sig) {
  (void)sig;
  kill(getpid(), SIGKILL);
}

static void preads(int fd, int n) {
  char b[8];
  for (int i = 0; i < n; ++i)
    if (pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) die("pread");
}

/* sigchain FILE N: what the program's own SIGTERM handlers see (read-back, flags, mask, siginfo,
   SA_RESETHAND, signal()'s previous handler); the output must not depend on the tracer. N preads,
   a handler that records, N preads, a handler that SIGKILLs the process (status -9). */
static int mode_sigchain(char** a) {
  int n = atoi(a[1]);
  int fd = open(a[0], O_RDONLY);
  if (fd < 0) die("open");
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_term_info;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  if (sigaction(SIGTERM, &sa, &old) != 0) die("sigaction");
  printf("before %s\n", old.sa_handler == SIG_DFL ? "default" : "other");
  sigaction(SIGTERM, NULL, &old);
  printf("readback %d flags %d usr1 %d\n", old.sa_sigaction == on_term_info,
         (old.sa_flags & (SA_SIGINFO | SA_RESETHAND)) == (SA_SIGINFO | SA_RESETHAND),
         sigismember(&old.sa_mask, SIGUSR1));
  preads(fd, n);
  raise(SIGTERM);
  printf("handler signo %d term %d int %d usr1 %d\n", (int)g_seen_signo, (int)g_seen_term, (int)g_seen_int,
         (int)g_seen_usr1);
  sigaction(SIGTERM, NULL, &old);
  printf("after %s\n", old.sa_handler == SIG_DFL ? "default" : "other");
  sighandler_t prev = signal(SIGTERM, on_term_kill);
  printf("signal_prev %s\n", prev == SIG_DFL ? "default" : "other");
  preads(fd, n);
  raise(SIGTERM);
  die("not reached");
  return 1;
}

/* forkexec N PROG: N times fork + exec PROG ("true"), with a traced open before each. */
static int mode_forkexec(char** a) {
  int n = atoi(a[0]);
  int before = count_fds();
  for (int i = 0; i < n; ++i) {
    int fd = open(a[2], O_RDONLY);
    pid_t p = fork();
    if (p == 0) {
      char b[4];
      if (read(fd, b, 1) != 1) _exit(3);
      execl(a[1], a[1], (char*)NULL);
      _exit(127);
    }
    close(fd);
    int st = 0;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die("child");
  }
  printf("fds_before %d fds_after %d\n", before, count_fds());
  return 0;
}

/* vforkenv ENVPROG: vfork + execve with a minimal environment; the child prints its env. */
static int mode_vforkenv(char** a) {
  char* argv[] = {a[0], NULL};
  char* envp[] = {"ONLY=1", "LD_PRELOAD=/nonexistent/libother.so", NULL};
  pid_t p = vfork();
  if (p == 0) {
    execve(a[0], argv, envp);
    _exit(127);
  }
  int st = 0;
  waitpid(p, &st, 0);
  printf("child_status %d\n", WEXITSTATUS(st));
  return 0;
}

/* relative DIR: chdir + relative open, openat on a dirfd, opendir/readdir. */
static int mode_relative(char** a) {
  char b[4];
  if (chdir(a[0]) != 0) die("chdir");
  int fd = open("./sub/../f.bin", O_RDONLY);
  if (fd < 0 || read(fd, b, 4) != 4) die("rel open");
  close(fd);
  int dfd = open("sub", O_RDONLY | O_DIRECTORY);
  int g = openat(dfd, "g.bin", O_RDONLY);
  if (g < 0 || read(g, b, 4) != 4) die("openat");
  close(g);
  close(dfd);
  DIR* d = opendir("sub");
  int h = openat(dirfd(d), "g.bin", O_RDONLY);
  if (h < 0 || read(h, b, 2) != 2) die("openat dirfd");
  close(h);
  closedir(d);
  printf("ok\n");
  return 0;
}

/* mmap FILE: map, touch, msync, unmap. */
static int mode_mmap(char** a) {
  int fd = open(a[0], O_RDWR);
  char* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) die("mmap");
  p[0] = p[1];
  if (msync(p, 4096, MS_SYNC) != 0) die("msync");
  if (munmap(p, 4096) != 0) die("munmap");
  close(fd);
  printf("ok\n");
  return 0;
}

/* output FILE: prints a fixed text and the file's size, reads via read/readv/stdio, exits 7. */
static int mode_output(char** a) {
  struct stat st;
  stat(a[0], &st);
  printf("size %lld\n", (long long)st.st_size);
  int fd = open(a[0], O_RDONLY);
  char b1[10], b2[20];
  struct iovec iov[2] = {{b1, sizeof b1}, {b2, sizeof b2}};
  printf("readv %zd\n", readv(fd, iov, 2));
  close(fd);
  fprintf(stderr, "to stderr\n");
  return 7;
}

/* Before main: if PRELOAD_IO_CTOR_FILE is set, read 7 bytes of it from a constructor. */
static int g_ctor_bytes = -1;
__attribute__((constructor)) static void read_before_main(void) {
  const char* f = getenv("PRELOAD_IO_CTOR_FILE");
  if (f == NULL) return;
  char b[7];
  int fd = open(f, O_RDONLY);
  g_ctor_bytes = (int)read(fd, b, sizeof b);
  close(fd);
}

/* ctor: report what the constructor read. */
static int mode_ctor(void) {
  printf("ctor_bytes %d\n", g_ctor_bytes);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* m = argv[1];
  char** a = argv + 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(m, "pread")) return mode_pread(a);
  if (!strcmp(m, "fdtable")) return mode_fdtable(a);
  if (!strcmp(m, "errno")) return mode_errno(a);
  if (!strcmp(m, "stdio")) return mode_stdio(a);
  if (!strcmp(m, "threads")) return mode_threads(a);
  if (!strcmp(m, "signals")) return mode_signals(a);
  if (!strcmp(m, "sigchain")) return mode_sigchain(a);
  if (!strcmp(m, "forkexec")) return mode_forkexec(a);
  if (!strcmp(m, "vforkenv")) return mode_vforkenv(a);
  if (!strcmp(m, "relative")) return mode_relative(a);
  if (!strcmp(m, "mmap")) return mode_mmap(a);
  if (!strcmp(m, "output")) return mode_output(a);
  if (!strcmp(m, "ctor")) return mode_ctor();
  (void)environ;
  return 2;
}
