/*
 * The MPI run's watchdog (--timeout): a thread that ends the whole job with
 * MPI_Abort when one phase of the run takes longer than the limit.
 *
 * A rank that dies while the launcher keeps the job alive (mpirun with
 * abort-on-failure off, srun without -K) leaves the others in a collective
 * forever; nothing inside MPI can tell them.  The clock restarts at every
 * phase, so the limit bounds a phase, not the whole run.  This lives in the
 * CLI: the library never aborts.
 *
 * It starts before MPI_Init, whose wait for every rank of the job is a phase
 * too: a rank that never calls it (given another command than the others,
 * such as its --help or a serial command, it ends without starting MPI)
 * would leave the others there for ever.  Until MPI_Init has returned no
 * MPI call is allowed either, so a timeout there ends the rank with
 * _exit(1).
 *
 * The last phase, shutdown, covers MPI_Finalize (which waits for the other
 * ranks) and the moments after it.  No MPI call is allowed once
 * MPI_Finalize has begun (Open MPI prints "MPI_Abort() ... called after
 * MPI_FINALIZE was invoked" and cannot promise to end the others), so a
 * timeout there ends this rank alone with _exit(1); the launcher then ends
 * the job, or the other ranks' own watchdogs end them.
 */
#include "watchdog.h"

#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int running, stop, rank;
  int mpi_up;            /* MPI_Init has returned: MPI_Abort may be called */
  int no_mpi;            /* shutdown: MPI_Abort may no longer be called */
  double limit;          /* seconds */
  struct timespec since; /* start of the phase (CLOCK_MONOTONIC) */
  const char *phase;     /* static string */
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER};

static double
elapsed(const struct timespec *a, const struct timespec *b)
{
  return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void *
watch(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&wd.lock);
  while (!wd.stop) {
    struct timespec now, due = wd.since;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double spent = elapsed(&wd.since, &now);
    if (spent >= wd.limit)
      break;
    due.tv_sec += (time_t)wd.limit;
    due.tv_nsec += (long)((wd.limit - (double)(time_t)wd.limit) * 1e9);
    if (due.tv_nsec >= 1000000000L) {
      due.tv_sec++;
      due.tv_nsec -= 1000000000L;
    }
    /* Woken early by a new phase or stop; a timeout means: check again. */
    pthread_cond_timedwait(&wd.wake, &wd.lock, &due);
  }
  if (wd.stop) {
    pthread_mutex_unlock(&wd.lock);
    return NULL;
  }
  fprintf(stderr,
          "dbuf-shard: rank %d: timeout after %g s in phase %s (no progress: another rank "
          "may have died or hung while the launcher keeps the job; --timeout sets the limit)\n",
          wd.rank, wd.limit, wd.phase);
  fflush(stderr);
  /* The lock stays held: the phase cannot change under the abort, and
   * no_mpi, set under it before MPI_Finalize is entered, is final. */
  if (wd.no_mpi || !wd.mpi_up)
    _exit(1);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _exit(1); /* MPI_Abort does not return; if it ever did, end this rank anyway */
}

/* Start the thread: phase and rank as given, MPI up or not. */
static int
start(double seconds, int rank, const char *phase, int mpi_up)
{
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&wd.wake, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0)
    return rc;
  wd.limit = seconds;
  wd.rank = rank;
  wd.phase = phase;
  wd.stop = wd.no_mpi = 0;
  wd.mpi_up = mpi_up;
  clock_gettime(CLOCK_MONOTONIC, &wd.since);
  if ((rc = pthread_create(&wd.thread, NULL, watch, NULL)) != 0) {
    pthread_cond_destroy(&wd.wake);
    return rc;
  }
  wd.running = 1;
  return 0;
}

int
cli_watchdog_start_init(double seconds, int rank)
{
  if (seconds <= 0 || wd.running)
    return 0;
  return start(seconds, rank, "MPI_Init", 0);
}

int
cli_watchdog_start(double seconds, int rank, const char *phase)
{
  if (!wd.running)
    return seconds > 0 ? start(seconds, rank, phase, 1) : 0;
  if (seconds <= 0) { /* --timeout 0 where the early look saw none */
    cli_watchdog_stop();
    return 0;
  }
  pthread_mutex_lock(&wd.lock);
  wd.limit = seconds;
  wd.rank = rank;
  wd.phase = phase;
  wd.mpi_up = 1;
  clock_gettime(CLOCK_MONOTONIC, &wd.since);
  pthread_cond_signal(&wd.wake);
  pthread_mutex_unlock(&wd.lock);
  return 0;
}

/* A new phase: the clock restarts; no_mpi, once set, stays set. */
static void
begin_phase(const char *phase, int no_mpi)
{
  if (!wd.running)
    return;
  pthread_mutex_lock(&wd.lock);
  wd.phase = phase;
  wd.no_mpi |= no_mpi;
  clock_gettime(CLOCK_MONOTONIC, &wd.since);
  pthread_cond_signal(&wd.wake);
  pthread_mutex_unlock(&wd.lock);
}

void
cli_watchdog_phase(const char *phase)
{
  begin_phase(phase, 0);
}

void
cli_watchdog_shutdown(void)
{
  begin_phase("shutdown", 1);
}

void
cli_watchdog_stop(void)
{
  if (!wd.running)
    return;
  pthread_mutex_lock(&wd.lock);
  wd.stop = 1;
  pthread_cond_signal(&wd.wake);
  pthread_mutex_unlock(&wd.lock);
  pthread_join(wd.thread, NULL);
  pthread_cond_destroy(&wd.wake);
  wd.running = 0;
}
