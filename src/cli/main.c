/*
 * dbuf-shard: the command.  `dbuf-shard SUBCOMMAND ...`; without a
 * subcommand it runs the MPI service (see `dbuf-shard run --help`).
 */
#include "cli.h"

#include "config.h"

#include <stdio.h>
#include <string.h>

static void
usage(FILE *f)
{
  fprintf(f,
          "Usage: dbuf-shard [run] [OPTIONS]      MPI service (mpirun -np N "
          "dbuf-shard)\n"
          "       dbuf-shard plan [OPTIONS]       plan a layout (serial)\n"
          "       dbuf-shard verify LAYOUT.json [OPTIONS]\n"
          "                                       check a layout file (serial)\n"
          "       dbuf-shard compare [OPTIONS]    compare sharding schemes, ours and\n"
          "                                       the peers' (serial)\n"
          "       dbuf-shard models               list the built-in models\n"
          "       dbuf-shard --help | --version\n"
          "'dbuf-shard COMMAND --help' describes each command.\n");
#ifndef DBUF_WITH_MPI
  fprintf(f, "This dbuf-shard was built without MPI: 'run' is not available.\n");
#endif
}

static const struct {
  const char *name;
  int (*fn)(int, char **);
} commands[] = {
    {"plan", cmd_plan},
    {"models", cmd_models},
    {"verify", cmd_verify},
    {"compare", cmd_compare},
    {"run", cmd_run},
};

static int
run_command(int argc, char **argv)
{
  /* No subcommand, or an option first: the MPI service (`mpirun dbuf-shard`). */
  if (argc < 2 || (argv[1][0] == '-' && argv[1][1] != '\0' &&
                   strcmp(argv[1], "--help") != 0 && strcmp(argv[1], "-h") != 0 &&
                   strcmp(argv[1], "--version") != 0 && strcmp(argv[1], "-V") != 0))
    return cmd_run(argc, argv);
  if (argc >= 2) {
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
      printf("dbuf-shard %s\n", PACKAGE_VERSION);
      return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
      if (strcmp(argv[1], commands[i].name) == 0)
        return commands[i].fn(argc - 1, argv + 1);
    }
  }
  cli_suggest_t s;
  char hint[256];
  cli_suggest_init(&s, argv[1], strlen(argv[1]));
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    cli_suggest_add(&s, commands[i].name);
  cli_err("unknown command '%s'%s (see 'dbuf-shard --help')", argv[1],
          cli_suggest_text(&s, "", hint, sizeof hint));
  return CLI_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
  int rc = run_command(argc, argv);
  /* Whatever went to stdout (--help and --version too) must have arrived: a
   * failed write is a failure of a command that went well otherwise. */
  int w = cli_stdout_flush();
  return rc != CLI_EXIT_OK ? rc : w;
}
