/* `dbuf-shard plan`: plan a layout serially (never initializes MPI). */
#include "cli.h"

#include "dbuf/layout_json.h"
#include "dbuf/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_FORMAT = CLI_OPT_FIRST_FREE, OPT_PIECES, OPT_HELP };

static void
plan_usage(FILE *f)
{
  fprintf(f,
          "Usage: dbuf-shard plan [--shapes FILE | --model NAME | "
          "--safetensors FILE...]\n"
          "                       [--dp N] [--layout padded|unpadded|tensor]\n"
          "                       [--block-size B] [--owners FILE|auto]\n"
          "                       [--dtype T] [--align-bytes N]\n"
          "                       [--format F] [--pieces] [-o OUT]\n"
          "Plan the global layout and report it (serial: no MPI).\n\n%s"
          "Output:\n"
          "  --format F             summary (default): sizes, padding, balance\n"
          "                         table: one line per rank\n"
          "                         diagram: one picture line per rank\n"
          "                         json: the layout file (see 'verify')\n"
          "                         csv: one line per (rank, tensor) piece\n"
          "                         svg: a picture of the buffer\n"
          "  --pieces               json: add each rank's pieces\n"
          "  -o, --output OUT       write OUT atomically instead of stdout\n"
          "  -h, --help             this help\n"
          "Exit status: 0 planned, 1 runtime failure, 2 bad usage or input.\n",
          cli_plan_help);
}

int
cmd_plan(int argc, char **argv)
{
  static const struct option longopts[] = {
      CLI_PLAN_LONGOPTS,
      {"format", required_argument, NULL, OPT_FORMAT},
      {"pieces", no_argument, NULL, OPT_PIECES},
      {"output", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  cli_plan_opts_t o;
  const char *out = NULL, *format = "summary";
  unsigned flags = 0;
  int c, rc = CLI_EXIT_USAGE;
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  char what[1024];

  cli_plan_opts_init(&o);
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
    int h = cli_plan_opt(&o, c, optarg, argv, argc);
    if (h == 1)
      continue;
    if (h == CLI_OPT_BAD)
      goto out;
    switch (c) {
    case OPT_FORMAT:
      format = optarg;
      break;
    case OPT_PIECES:
      flags |= DBUF_JSON_PIECES;
      break;
    case 'o':
      out = optarg;
      break;
    case 'h':
      plan_usage(stdout);
      rc = CLI_EXIT_OK;
      goto out;
    case ':':
      cli_err("plan: option '%s' needs a value (see 'dbuf-shard plan --help')",
              argv[optind - 1]);
      goto out;
    default:
      cli_err("plan: unknown option '%s' (see 'dbuf-shard plan --help')",
              argv[optind - 1]);
      goto out;
    }
  }
  if (optind < argc) {
    cli_err("plan: unexpected argument '%s'", argv[optind]);
    goto out;
  }
  dbuf_report_format_t rfmt = 0;
  int json = strcmp(format, "json") == 0;
  if (!json && dbuf_report_format_parse(format, &rfmt) != 0) {
    cli_err("--format: '%s' is not a known format (summary, table, diagram, "
            "json, csv, svg)",
            format);
    goto out;
  }
  if ((flags & DBUF_JSON_PIECES) && !json) {
    cli_err("--pieces applies to --format json only");
    goto out;
  }
  if ((rc = cli_load_tensors(&o, &t, NULL, what, sizeof what)) != 0 ||
      (rc = cli_build_layout(&o, t, what, &l)) != 0)
    goto out;

  char *text;
  size_t len;
  if (json) {
    if (dbuf_layout_to_json(l, flags, &text, &len) != 0) {
      cli_err("out of memory writing the layout");
      rc = CLI_EXIT_FAIL;
      goto out;
    }
  } else {
    dbuf_report_opts_t ro;
    dbuf_diag_t d;
    dbuf_report_opts_init(&ro);
    ro.elem_size = o.elem_size;
    ro.dtype = o.dtype;
    ro.align_bytes = o.align_bytes;
    ro.source = what;
    int e = dbuf_report_write(l, rfmt, &ro, &text, &len, &d);
    if (e != 0) {
      cli_err("%s report: %s", format, d.msg);
      rc = e == DBUF_ENOMEM ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
      goto out;
    }
  }
  rc = cli_write_output(out, text, len);
  free(text);
out:
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  cli_plan_opts_free(&o);
  return rc;
}
