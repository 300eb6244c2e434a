/* The MPI run's watchdog (--timeout): see watchdog.c. */
#ifndef DBUF_CLI_WATCHDOG_H
#define DBUF_CLI_WATCHDOG_H

/* Default limit of one phase of the run, seconds. */
#define CLI_TIMEOUT_DEFAULT 600

/*
 * Start watching before MPI_Init, in phase "MPI_Init" (rank: the
 * launcher's, or 0): a timeout prints the line below and ends this rank
 * with _exit(1), as no MPI call is allowed yet.  Nothing if seconds <= 0 or
 * already watching.  Returns 0 or an errno value.
 */
int cli_watchdog_start_init(double seconds, int rank);

/*
 * Watch (after MPI_Init): when one phase lasts seconds, print
 * "dbuf-shard: rank R: timeout after N s in phase PHASE (...)" and
 * MPI_Abort the job (from cli_watchdog_shutdown() on: _exit(1)).  Started
 * by cli_watchdog_start_init(), it now takes this limit, rank and phase and
 * may call MPI; seconds <= 0 disables it (stops it).  phase is a static
 * string.  Returns 0 or an errno value (the thread could not start).
 */
int cli_watchdog_start(double seconds, int rank, const char *phase);

/* A new phase begins: the clock restarts.  phase is a static string. */
void cli_watchdog_phase(const char *phase);

/*
 * The last phase, "shutdown", before MPI_Finalize: the clock restarts, and
 * a timeout from now on ends this rank with _exit(1) after the same line,
 * never with an MPI call (none is allowed once MPI_Finalize has begun).
 */
void cli_watchdog_shutdown(void);

/* Stop watching (after MPI_Finalize, which the watchdog also covers). */
void cli_watchdog_stop(void);

#endif /* DBUF_CLI_WATCHDOG_H */
