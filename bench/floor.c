/*
 * The kernel floors of the directory-lock benchmarks: what the kernel work costs with no
 * runtime around it.
 *
 *   floor <lock-file> <iterations> [fence]
 *   floor <lock-file> hold [MiB]
 *   floor <lock-file> wait
 *
 * Timed loop: runs iterations/10 warm-up operations, then `iterations` timed ones, and prints
 * the mean nanoseconds per operation on one line. Exit status 1 on any failure.
 * - Plain: each operation is open + fcntl(F_OFD_SETLK, F_WRLCK, whole file) + fstat +
 *   fcntl(F_OFD_SETLK, F_UNLCK) + close, the least a correct native lock does.
 * - `fence`: the exact system calls of one locksmith NativeFS obtain+release, fencing token
 *   included: open + fcntl(F_OFD_SETLK, F_WRLCK) + fstat + statx (lstat) of the
 *   `<lock-file>.fence` path + pread of the kept-open fence descriptor + close (no explicit
 *   unlock: closing the only descriptor frees an OFD lock, which is what NativeFS relies on).
 *   Like locksmith, the fence file holds a reservation 10 ms of wall clock ahead of the clock
 *   (tokens are max(last + 1, wall clock in µs)); when a token passes it, that operation also
 *   makes fstat + pwrite + fstat of the fence file, so about once per 10 ms.
 *
 * `hold`: takes the same lock, prints "held", and keeps it until its stdin closes: a holder
 * whose death under kill -9 costs the kernel almost nothing to clean up. With `MiB`, it first
 * allocates and touches that much memory, so the kernel has that much more to tear down.
 *
 * `wait`: the kernel's own waiter. On each "wait" line from stdin it opens the lock file,
 * prints "waiting", blocks in fcntl(F_OFD_SETLKW), reads CLOCK_MONOTONIC the moment it holds
 * and prints "got <ns>" (the same clock as Node's process.hrtime.bigint()), then closes the
 * descriptor and prints "freed". Exits when its stdin closes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OPEN_FLAGS (O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC)
#define FENCE_WIDTH 20
#define FENCE_RESERVE 10000LL

static int fence_fd = -1;
static char fence_path[4096];
/* The counter value this process last wrote (-1: none), and the last token it issued. */
static long long fence_reserved = -1;
static long long fence_last = 0;

static void fail(const char *what) {
  perror(what);
  exit(1);
}

static long long clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void write_lock(int fd, int cmd) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (fcntl(fd, cmd, &fl) != 0) fail("fcntl(F_WRLCK)");
}

/* locksmith's advanceFenceToken, uncontended: one pread, and a write when the reservation
 * ran out. */
static void fence_token(void) {
  char buf[FENCE_WIDTH + 2];
  /* Re-validation by path: locksmith's lstat is a statx without following links. */
  struct statx sx;
  if (statx(AT_FDCWD, fence_path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0)
    fail("statx(fence)");
  ssize_t n = pread(fence_fd, buf, FENCE_WIDTH + 1, 0);
  if (n < 0) fail("pread(fence)");
  buf[n] = '\0';
  long long stored = n > 0 ? atoll(buf) : -1;
  /* Date.now() has ms resolution; the token floor is that in µs. */
  long long floor_us = clock_ns(CLOCK_REALTIME) / 1000000LL * 1000LL;
  int mine = stored == fence_reserved && fence_reserved >= 0;
  long long token;
  if (mine)
    token = fence_last + 1 > floor_us ? fence_last + 1 : floor_us;
  else
    token = stored + 1 > floor_us ? stored + 1 : floor_us;
  if (!mine || token > fence_reserved) {
    struct stat st;
    if (fstat(fence_fd, &st) != 0) fail("fstat(fence)");
    snprintf(buf, sizeof buf, "%0*lld\n", FENCE_WIDTH, token + FENCE_RESERVE);
    if (pwrite(fence_fd, buf, FENCE_WIDTH + 1, 0) != FENCE_WIDTH + 1) fail("pwrite(fence)");
    if (fstat(fence_fd, &st) != 0) fail("fstat(fence)");
    fence_reserved = token + FENCE_RESERVE;
  }
  fence_last = token;
}

static void one(const char *path) {
  int fd = open(path, OPEN_FLAGS, 0644);
  if (fd < 0) fail("open");
  write_lock(fd, F_OFD_SETLK);
  struct stat st;
  if (fstat(fd, &st) != 0) fail("fstat");
  if (fence_fd >= 0) {
    fence_token();
  } else {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0) fail("fcntl(F_OFD_SETLK, F_UNLCK)");
  }
  if (close(fd) != 0) fail("close");
}

static int hold(const char *path, long mib) {
  if (mib > 0) {
    size_t size = (size_t)mib << 20;
    char *mem = malloc(size);
    if (mem == NULL) fail("malloc");
    for (size_t i = 0; i < size; i += 4096) mem[i] = 1;
  }
  int fd = open(path, OPEN_FLAGS, 0644);
  if (fd < 0) fail("open");
  write_lock(fd, F_OFD_SETLK);
  printf("held\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}

static int wait_loop(const char *path) {
  char line[64];
  while (fgets(line, sizeof line, stdin) != NULL) {
    if (strcmp(line, "wait\n") != 0) continue;
    int fd = open(path, OPEN_FLAGS, 0644);
    if (fd < 0) fail("open");
    printf("waiting\n");
    fflush(stdout);
    write_lock(fd, F_OFD_SETLKW);
    long long got = clock_ns(CLOCK_MONOTONIC);
    printf("got %lld\n", got);
    fflush(stdout);
    if (close(fd) != 0) fail("close");
    printf("freed\n");
    fflush(stdout);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor <lock-file> <iterations> [fence] | hold [MiB] | wait\n");
    return 2;
  }
  const char *path = argv[1];
  if (strcmp(argv[2], "hold") == 0) return hold(path, argc > 3 ? atol(argv[3]) : 0);
  if (strcmp(argv[2], "wait") == 0) return wait_loop(path);
  long iterations = atol(argv[2]);
  if (iterations <= 0) return 2;
  if (argc > 3 && strcmp(argv[3], "fence") == 0) {
    snprintf(fence_path, sizeof fence_path, "%s.fence", path);
    fence_fd = open(fence_path, OPEN_FLAGS, 0644);
    if (fence_fd < 0) fail("open(fence)");
  }
  for (long i = 0; i < iterations / 10; i++) one(path);
  long long start = clock_ns(CLOCK_MONOTONIC);
  for (long i = 0; i < iterations; i++) one(path);
  long long elapsed = clock_ns(CLOCK_MONOTONIC) - start;
  printf("%.1f\n", (double)elapsed / (double)iterations);
  return 0;
}
