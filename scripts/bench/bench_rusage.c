/*
 * Runs a command and writes its wall time and peak resident memory:
 *
 *   bench_rusage OUT CMD [ARG...]
 *
 * OUT gets one line "wall_seconds max_rss_kib exit_code".  A "%r" in OUT is
 * replaced by the MPI rank of the environment (OMPI_COMM_WORLD_RANK or
 * PMIX_RANK), so that `mpirun -np 2 bench_rusage out.%r PROG` measures each
 * rank.  The peak is ru_maxrss of wait4() on the child (the largest
 * process of its tree that was waited for).  The exit status is the
 * command's; 127 when it cannot run.  GNU time may be absent: this is its
 * small replacement for the benchmark suite (scripts/bench/run-all.sh).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* wait4 */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* OUT with "%r" replaced by the rank ("0" outside MPI). */
static void
out_name(const char *tmpl, char *buf, size_t len)
{
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (rank == NULL)
    rank = getenv("PMIX_RANK");
  if (rank == NULL)
    rank = "0";
  const char *at = strstr(tmpl, "%r");
  if (at == NULL)
    snprintf(buf, len, "%s", tmpl);
  else
    snprintf(buf, len, "%.*s%s%s", (int)(at - tmpl), tmpl, rank, at + 2);
}

int
main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: bench_rusage OUT CMD [ARG...]\n");
    return 2;
  }
  char path[4096];
  out_name(argv[1], path, sizeof path);
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "bench_rusage: fork: %s\n", strerror(errno));
    return 127;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    fprintf(stderr, "bench_rusage: %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  pid_t w;
  while ((w = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR)
    ;
  double wall = now() - t0;
  if (w < 0) {
    fprintf(stderr, "bench_rusage: wait4: %s\n", strerror(errno));
    return 127;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE *f = fopen(path, "w");
  if (f == NULL || fprintf(f, "%.6f %ld %d\n", wall, ru.ru_maxrss, code) < 0 ||
      fclose(f) != 0) {
    fprintf(stderr, "bench_rusage: %s: %s\n", path, strerror(errno));
    return 127;
  }
  return code;
}
