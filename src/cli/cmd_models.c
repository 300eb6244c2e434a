/* `dbuf-shard models`: the built-in models with tensor counts and totals. */
#include "cli.h"

#include "dbuf/models.h"

#include <stdio.h>
#include <string.h>

int
cmd_models(int argc, char **argv)
{
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("Usage: dbuf-shard models\n"
           "List the built-in models: name, tensors, parameters, config.\n"
           "The default model is %s.\n",
           DBUF_MODEL_DEFAULT);
    return CLI_EXIT_OK;
  }
  if (argc > 1) {
    cli_err("models: unexpected argument '%s'", argv[1]);
    return CLI_EXIT_USAGE;
  }
  printf("%-16s %8s %18s  %s\n", "MODEL", "TENSORS", "PARAMETERS", "CONFIG");
  for (int i = 0; i < dbuf_models_count(); i++) {
    dbuf_tensors_t *t;
    dbuf_diag_t d;
    char summary[DBUF_MODEL_SUMMARY_LEN];
    if (dbuf_model_build(dbuf_model_name(i), &t, &d) != 0) {
      cli_err("%s", d.msg);
      return cli_exit_code(d.code);
    }
    dbuf_model_summary(i, summary, sizeof summary);
    printf("%-16s %8lld %18lld  %s\n", dbuf_model_name(i),
           (long long)dbuf_tensors_count(t), (long long)dbuf_tensors_total(t),
           summary);
    dbuf_tensors_destroy(t);
  }
  return CLI_EXIT_OK;
}
