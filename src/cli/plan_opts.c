/* The planning options shared by `plan` and the MPI run, and input loading. */
#include "cli.h"

#include "dbuf/models.h"
#include "dbuf/safetensors.h"
#include "dbuf/shapes_io.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_plan_help[] =
    "Input (one of; default: --model " DBUF_MODEL_DEFAULT "):\n"
    "  --shapes FILE          shape list: 'NAME d0xd1...' lines, or a JSON array\n"
    "                         of {\"name\",\"shape\"}; '-' reads stdin\n"
    "  --model NAME           a built-in model (see 'dbuf-shard models')\n"
    "  --safetensors FILE...  checkpoint headers: .safetensors files or one\n"
    "                         model.safetensors.index.json (repeatable)\n"
    "  --order FILE           tensor order for --safetensors: one name a line\n"
    "Layout:\n"
    "  --dp N                 shard count (plan: default 1; run: the rank count)\n"
    "  --layout KIND          padded (default), unpadded, tensor or compact\n"
    "  --block-size B         rows kept together (BlockAtomic), default 1\n"
    "  --owners FILE|auto|auto-ns\n"
    "                         tensor layout: owner rank a line, or planned by\n"
    "                         LPT: auto balances elements, auto-ns the\n"
    "                         Newton-Schulz cost numel x min(rows, cols)\n"
    "  --dtype T              element type for byte figures: bf16 (default),\n"
    "                         fp16, fp32, fp64, fp8, int8, int32, int64\n"
    "  --align-bytes N        report byte figures aligned to N bytes; compact:\n"
    "                         every tensor also starts at a multiple of N bytes\n"
    "  --node-size K          padded, compact, unpadded: keep every tensor that\n"
    "                         fits in K consecutive ranks' span inside one such\n"
    "                         node (with --ranks-per-node K: before and after)\n"
    "  --ranks-per-node K     plan: add the node report for nodes of K\n"
    "                         consecutive ranks, named node0, node1, ... (the\n"
    "                         last node has fewer ranks when K does not divide\n"
    "                         dp); run: ignored, the launcher places the ranks\n";

/* CLI dtype names onto the safetensors dtype table of the core. */
static const struct {
  const char *cli, *st;
} dtypes[] = {
    {"bf16", "BF16"}, {"fp16", "F16"},     {"f16", "F16"},   {"fp32", "F32"},
    {"f32", "F32"},   {"fp64", "F64"},     {"f64", "F64"},   {"fp8", "F8_E4M3"},
    {"fp8-e4m3", "F8_E4M3"}, {"fp8-e5m2", "F8_E5M2"}, {"int8", "I8"},
    {"uint8", "U8"},  {"int16", "I16"},    {"int32", "I32"}, {"int64", "I64"},
};

void
cli_plan_opts_init(cli_plan_opts_t *o)
{
  memset(o, 0, sizeof *o);
  dbuf_layout_params_init(&o->params);
  o->dtype = "bf16";
  o->elem_size = 2;
}

void
cli_plan_opts_free(cli_plan_opts_t *o)
{
  free(o->safetensors);
  o->safetensors = NULL;
}

int
cli_plan_opt(cli_plan_opts_t *o, int c, const char *arg, char **argv, int argc)
{
  int64_t v;
  switch (c) {
  case CLI_OPT_SHAPES:
    o->shapes = arg;
    return 1;
  case CLI_OPT_MODEL:
    o->model = arg;
    return 1;
  case CLI_OPT_SAFETENSORS: {
    /* --safetensors A B C: take the following non-option words too. */
    const char **nv = realloc(o->safetensors,
                              (size_t)(o->nsafetensors + argc + 1) * sizeof *nv);
    if (nv == NULL) {
      cli_err("out of memory");
      return CLI_OPT_BAD;
    }
    o->safetensors = nv;
    o->safetensors[o->nsafetensors++] = arg;
    while (optind < argc && argv[optind][0] != '-')
      o->safetensors[o->nsafetensors++] = argv[optind++];
    return 1;
  }
  case CLI_OPT_ORDER:
    o->order = arg;
    return 1;
  case CLI_OPT_DP:
    if (cli_parse_i64("dp", arg, 1, INT_MAX, &v) != 0)
      return CLI_OPT_BAD;
    o->params.nranks = (int)v;
    o->dp_set = 1;
    return 1;
  case CLI_OPT_LAYOUT:
    if (dbuf_layout_kind_parse(arg, &o->params.kind) != 0) {
      cli_err("--layout: '%s' is not padded, unpadded, tensor or compact", arg);
      return CLI_OPT_BAD;
    }
    return 1;
  case CLI_OPT_BLOCK:
    if (cli_parse_i64("block-size", arg, 1, INT64_MAX, &v) != 0)
      return CLI_OPT_BAD;
    o->params.block_size = v;
    return 1;
  case CLI_OPT_OWNERS:
    o->owners = arg;
    return 1;
  case CLI_OPT_DTYPE:
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
      if (strcmp(arg, dtypes[i].cli) == 0 &&
          dbuf_st_dtype_size(dtypes[i].st, &o->elem_size) == 0) {
        o->dtype = dtypes[i].cli;
        return 1;
      }
    }
    cli_err("--dtype: unknown type '%s' (bf16, fp16, fp32, fp64, fp8, "
            "fp8-e5m2, int8, uint8, int16, int32, int64)",
            arg);
    return CLI_OPT_BAD;
  case CLI_OPT_ALIGN:
    if (cli_parse_i64("align-bytes", arg, 1, INT64_MAX, &v) != 0)
      return CLI_OPT_BAD;
    o->align_bytes = v;
    return 1;
  case CLI_OPT_RPN:
    if (cli_parse_i64("ranks-per-node", arg, 1, INT_MAX, &v) != 0)
      return CLI_OPT_BAD;
    o->ranks_per_node = v;
    return 1;
  case CLI_OPT_NODE_SIZE:
    if (cli_parse_i64("node-size", arg, 1, INT_MAX, &v) != 0)
      return CLI_OPT_BAD;
    o->params.node_size = (int)v;
    return 1;
  default:
    return 0;
  }
}

static int
load_order(const char *path, char ***names, int64_t *n)
{
  char *data;
  size_t len;
  dbuf_diag_t d;
  int64_t count = 0, cap = 0;
  char **v = NULL;
  if (dbuf_file_read_all(path, &data, &len, &d) != 0) {
    cli_err("%s", d.msg);
    return CLI_EXIT_USAGE;
  }
  /* The names point into data, which is kept as v[-1] for freeing. */
  for (char *save = NULL, *tok = strtok_r(data, "\n", &save); tok != NULL;
       tok = strtok_r(NULL, "\n", &save)) {
    char *h = strchr(tok, '#');
    if (h)
      *h = '\0';
    tok += strspn(tok, " \t\r");
    tok[strcspn(tok, " \t\r")] = '\0';
    if (*tok == '\0')
      continue;
    if (count + 2 > cap) {
      cap = cap ? cap * 2 : 64;
      char **nv = realloc(v, (size_t)cap * sizeof *nv);
      if (nv == NULL) {
        free(v);
        free(data);
        cli_err("%s: out of memory", path);
        return CLI_EXIT_USAGE;
      }
      v = nv;
    }
    v[1 + count++] = tok;
  }
  if (v == NULL) {
    free(data);
    cli_err("%s: no tensor names", path);
    return CLI_EXIT_USAGE;
  }
  v[0] = data;
  *names = v;
  *n = count;
  return 0;
}

int
cli_load_tensors(const cli_plan_opts_t *o, dbuf_tensors_t **out,
                 uint64_t *digest, char *what, size_t what_len)
{
  dbuf_diag_t d;
  int sources = (o->shapes != NULL) + (o->model != NULL) + (o->nsafetensors > 0);
  if (sources > 1) {
    cli_err("give only one of --shapes, --model and --safetensors");
    return CLI_EXIT_USAGE;
  }
  if (o->order != NULL && o->nsafetensors == 0) {
    cli_err("--order applies to --safetensors only");
    return CLI_EXIT_USAGE;
  }
  if (o->shapes != NULL) {
    snprintf(what, what_len, "%s", strcmp(o->shapes, "-") ? o->shapes : "<stdin>");
    if (dbuf_shapes_read(o->shapes, out, digest, &d) != 0) {
      cli_err("%s", d.msg);
      return CLI_EXIT_USAGE;
    }
    return 0;
  }
  if (o->nsafetensors > 0) {
    char **order = NULL;
    int64_t norder = 0;
    dbuf_st_t *st;
    snprintf(what, what_len, "%s", o->safetensors[0]);
    if (o->order != NULL && load_order(o->order, &order, &norder) != 0)
      return CLI_EXIT_USAGE;
    int rc = dbuf_st_open(o->safetensors, o->nsafetensors,
                          order ? (const char *const *)order + 1 : NULL, norder,
                          &st, &d);
    if (order) {
      free(order[0]);
      free(order);
    }
    if (rc != 0) {
      cli_err("%s", d.msg);
      return CLI_EXIT_USAGE;
    }
    rc = dbuf_tensors_dup(dbuf_st_tensors(st), out);
    if (digest)
      *digest = dbuf_st_digest(st);
    dbuf_st_destroy(st);
    if (rc != 0) {
      cli_err("%s: %s", what, dbuf_strerror(rc));
      return CLI_EXIT_FAIL;
    }
    return 0;
  }
  const char *model = o->model ? o->model : DBUF_MODEL_DEFAULT;
  snprintf(what, what_len, "model %s", model);
  if (dbuf_model_build(model, out, &d) != 0) {
    cli_err("--model: %s", d.msg);
    return CLI_EXIT_USAGE;
  }
  if (digest)
    *digest = dbuf_hash64(model, strlen(model), 0);
  return 0;
}

int
cli_build_layout(const cli_plan_opts_t *o, const dbuf_tensors_t *t,
                 const char *what, dbuf_layout_t **out)
{
  dbuf_layout_params_t p = o->params;
  dbuf_diag_t d;
  int64_t *vals = NULL, n = 0;
  int *owners = NULL;
  int rc;

  if (o->owners != NULL && p.kind != DBUF_LAYOUT_TENSOR) {
    cli_err("--owners applies to --layout tensor only");
    return CLI_EXIT_USAGE;
  }
  if (p.node_size > 0 && p.kind == DBUF_LAYOUT_TENSOR) {
    cli_err("--node-size applies to --layout padded, compact and unpadded");
    return CLI_EXIT_USAGE;
  }
  if (p.kind == DBUF_LAYOUT_COMPACT && o->align_bytes > 0) {
    /* N bytes of elem_size-byte elements: offsets multiple of N / gcd. */
    int64_t a = o->align_bytes, b = o->elem_size;
    while (b != 0) {
      int64_t r = a % b;
      a = b;
      b = r;
    }
    p.align_elems = o->align_bytes / a;
  }
  if (p.kind == DBUF_LAYOUT_TENSOR) {
    if (o->owners == NULL || strcmp(o->owners, "auto") == 0) {
      p.auto_owners = DBUF_OWNERS_NUMEL;
    } else if (strcmp(o->owners, "auto-ns") == 0) {
      p.auto_owners = DBUF_OWNERS_NS;
    } else {
      if (dbuf_ints_read(o->owners, &vals, &n, &d) != 0) {
        cli_err("%s", d.msg);
        return CLI_EXIT_USAGE;
      }
      owners = malloc((size_t)(n ? n : 1) * sizeof *owners);
      if (owners == NULL) {
        free(vals);
        cli_err("%s: out of memory", o->owners);
        return CLI_EXIT_FAIL;
      }
      for (int64_t i = 0; i < n; i++) {
        if (vals[i] < 0 || vals[i] >= p.nranks) {
          cli_err("%s:%lld: owner %lld of tensor %s out of range [0, %d)",
                  o->owners, (long long)i + 1, (long long)vals[i],
                  i < dbuf_tensors_count(t) ? dbuf_tensors_name(t, i) : "(none)",
                  p.nranks);
          free(vals);
          free(owners);
          return CLI_EXIT_USAGE;
        }
        owners[i] = (int)vals[i];
      }
      free(vals);
      p.owners = owners;
      p.nowners = n;
    }
  }
  rc = dbuf_layout_build(t, &p, out, &d);
  free(owners);
  if (rc != 0) {
    if (rc == DBUF_EOWNER && o->owners != NULL && p.auto_owners == 0)
      cli_err("%s: %s", o->owners, d.msg);
    else
      cli_err("%s: %s", what, d.msg);
    return rc == DBUF_ENOMEM ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
  }
  return 0;
}

void
cli_report_opts(const cli_plan_opts_t *o, const char *source, dbuf_report_opts_t *ro)
{
  dbuf_report_opts_init(ro);
  ro->elem_size = o->elem_size;
  ro->dtype = o->dtype;
  ro->align_bytes = o->align_bytes;
  ro->source = source;
}
