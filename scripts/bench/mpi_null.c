/*
 * The baseline of the start-up benchmark: an MPI program that only
 * initializes and finalizes (scripts/bench/run-all.sh runs it beside
 * `mpirun -np 2 dbuf-shard --no-materialize`).
 */
#include <mpi.h>

int
main(int argc, char **argv)
{
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
    return 1;
  return MPI_Finalize() == MPI_SUCCESS ? 0 : 1;
}
