/*
 * `dbuf-shard run` (and a bare `dbuf-shard`) in a build configured
 * --without-mpi: the MPI service is not there, so say so and exit 2.  The
 * serial commands (plan, verify, compare, models) are unaffected.  `run
 * --help` still answers on stdout with exit 0, as every --help does.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

int
cmd_run(int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("Usage: dbuf-shard [run] [OPTIONS]\n"
             "This dbuf-shard was built without MPI: the MPI run is not available.\n"
             "plan, verify, compare and models are.\n");
      return CLI_EXIT_OK;
    }
  }
  cli_err("built without MPI (configure --without-mpi): the MPI run is not "
          "available; plan, verify, compare and models are");
  return CLI_EXIT_USAGE;
}
