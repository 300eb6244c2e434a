/*
 * `dbuf-shard run` (and a bare `dbuf-shard`) in a build configured
 * --without-mpi: the MPI service is not there, so say so and exit 2.  The
 * serial commands (plan, verify, compare, models) are unaffected.
 */
#include "cli.h"

int
cmd_run(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  cli_err("built without MPI (configure --without-mpi): the MPI run is not "
          "available; plan, verify, compare and models are");
  return CLI_EXIT_USAGE;
}
