// Two processes of an I/O loop (tests/test_analyzer_identity.py): the parent writes argv[1]
// (4 KiB), forks, and both processes open it and pread 16 bytes argv[2] times; the parent waits
// for the child. Exit status 0 when every read returned 16 bytes.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  long n = atol(argv[2]);
  char block[4096] = {0};
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block || close(fd) != 0) return 3;
  pid_t child = fork();
  if (child < 0) return 4;
  fd = open(argv[1], O_RDONLY);
  if (fd < 0) return 5;
  char buf[16];
  for (long i = 0; i < n; ++i)
    if (pread(fd, buf, sizeof buf, (i * 16) % 4096) != (ssize_t)sizeof buf) return 6;
  close(fd);
  if (child == 0) return 0;
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 7;
  return 0;
}
