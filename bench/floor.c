/*
 * The floor for an uncontended native lock obtain+release: what the kernel work costs with no
 * runtime around it. Each operation is open + fcntl(F_OFD_SETLK, F_WRLCK, whole file) + fstat +
 * fcntl(F_OFD_SETLK, F_UNLCK) + close, the minimum a correct NativeFS-style lock does.
 *
 *   floor <lock-file> <iterations> [fence]
 *   floor <lock-file> hold
 *
 * Runs iterations/10 warm-up operations, then `iterations` timed ones, and prints the mean
 * nanoseconds per operation on one line. With `fence`, each operation also does what locksmith's
 * fencing token costs in system calls (fstat + pread + pwrite of a kept-open `<lock-file>.fence`),
 * so the difference shows that part of the cost. Exit status 1 on any failure.
 *
 * With `hold`, it takes the same lock, prints "held", and keeps it until its stdin closes: a
 * holder whose death under kill -9 costs the kernel almost nothing to clean up.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fence_fd = -1;

static void fail(const char *what) {
  perror(what);
  exit(1);
}

static void one(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail("open");
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) fail("fcntl(F_OFD_SETLK, F_WRLCK)");
  struct stat st;
  if (fstat(fd, &st) != 0) fail("fstat");
  if (fence_fd >= 0) {
    char buf[21];
    struct stat fst;
    if (fstat(fence_fd, &fst) != 0) fail("fstat(fence)");
    if (pread(fence_fd, buf, sizeof buf, 0) < 0) fail("pread(fence)");
    long long token = atoll(buf) + 1;
    snprintf(buf, sizeof buf, "%020lld", token);
    buf[20] = '\n';
    if (pwrite(fence_fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) fail("pwrite(fence)");
  }
  fl.l_type = F_UNLCK;
  if (fcntl(fd, F_OFD_SETLK, &fl) != 0) fail("fcntl(F_OFD_SETLK, F_UNLCK)");
  if (close(fd) != 0) fail("close");
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor <lock-file> <iterations> [fence]\n");
    return 2;
  }
  const char *path = argv[1];
  if (strcmp(argv[2], "hold") == 0) {
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail("open");
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) fail("fcntl(F_OFD_SETLK, F_WRLCK)");
    printf("held\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return 0;
  }
  long iterations = atol(argv[2]);
  if (iterations <= 0) return 2;
  if (argc > 3 && strcmp(argv[3], "fence") == 0) {
    char fence[4096];
    snprintf(fence, sizeof fence, "%s.fence", path);
    fence_fd = open(fence, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fence_fd < 0) fail("open(fence)");
  }
  for (long i = 0; i < iterations / 10; i++) one(path);
  long long start = now_ns();
  for (long i = 0; i < iterations; i++) one(path);
  long long elapsed = now_ns() - start;
  printf("%.1f\n", (double)elapsed / (double)iterations);
  return 0;
}
