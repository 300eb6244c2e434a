/* The planning options shared by `plan` and the MPI run, and input loading. */
#include "cli.h"

#include "dbuf/models.h"
#include "dbuf/parallel.h"
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
    "  --dp N                 shard count, 1 to 2^24 (plan: default 1; run: the\n"
    "                         rank count); a dp above the tensors' rows, or\n"
    "                         padding above 10% of the buffer, is warned about\n"
    "  --layout KIND          padded (default), unpadded, tensor or compact\n"
    "  --block-size B         rows kept together (BlockAtomic), default 1\n"
    "  --owners FILE|auto|auto-ns\n"
    "                         tensor layout: owner rank a line, or planned by\n"
    "                         LPT: auto balances elements, auto-ns the\n"
    "                         Newton-Schulz cost numel x min(rows, cols)\n"
    "  --dtype T              element type of every tensor: bf16, fp16, fp32,\n"
    "                         fp64, fp8 ... (default: the checkpoint's or shapes\n"
    "                         file's own, else bf16)\n"
    "  --dtype-map PATTERN=T  tensors whose name contains PATTERN are of type T\n"
    "                         (repeatable; the first matching rule wins, over\n"
    "                         --dtype and the file's own)\n"
    "  --units U              one buffer per FSDP unit and dtype: none (default:\n"
    "                         one unit), layer (one per layers.N/h.N/blocks.N\n"
    "                         prefix, the rest in 'root'), re:REGEX (the first\n"
    "                         capture group names the unit), or a file of\n"
    "                         'TENSOR UNIT' lines\n"
    "  --align-bytes N        report byte figures aligned to N bytes; compact:\n"
    "                         every tensor also starts at a multiple of N bytes\n"
    "  --node-size K          padded, compact, unpadded: keep every tensor that\n"
    "                         fits in K consecutive ranks' span inside one such\n"
    "                         node; plan: adds the node report and its crossing\n"
    "                         tensors, bytes and padding without and with it\n"
    "  --ranks-per-node K     plan: add the node report for nodes of K\n"
    "                         consecutive ranks, named node0, node1, ... (the\n"
    "                         last node has fewer ranks when K does not divide\n"
    "                         dp); run: ignored, the launcher places the ranks\n"
    "Model parallelism (--model only; the tensors of one data-parallel group on\n"
    "tensor-parallel rank 0 and expert-parallel rank 0 of one pipeline stage):\n"
    "  --tp N                 tensor-parallel degree (default 1)\n"
    "  --pp N                 pipeline stages (default 1), layers split evenly\n"
    "  --pp-layers A,B,...    decoder layers of each stage (uneven split)\n"
    "  --stage S              the stage, 0 .. pp-1 (plan: default every stage,\n"
    "                         one block each; run: default the largest)\n"
    "  --ep N                 expert-parallel degree (default 1)\n"
    "  --expert-tp N          expert tensor-parallel degree (default: --tp)\n"
    "  --vocab-divisor N      pad the vocabulary to a multiple of N x tp\n"
    "                         (default 128)\n"
    "  --naming hf|megatron   the model's own names (default), or Megatron-Core's\n"
    "                         names and fused shapes (Transformer Engine spec)\n";

int
cli_check_dp(const char *what, int64_t dp)
{
  if (dp <= CLI_DP_MAX)
    return 0;
  /* The plan keeps at least one 8-byte offset per rank, and the reports a
   * line or more per rank: refuse before any of it is allocated. */
  double gib = ((double)dp + 1.0) * 8.0 / (1024.0 * 1024.0 * 1024.0);
  cli_err("%s %lld is above the limit of %d (2^24) ranks: planning keeps 8 bytes or more "
          "per rank (%.1f GiB here) and the reports a line per rank",
          what, (long long)dp, CLI_DP_MAX, gib);
  return CLI_EXIT_USAGE;
}

void
cli_plan_opts_init(cli_plan_opts_t *o)
{
  memset(o, 0, sizeof *o);
  dbuf_layout_params_init(&o->params);
  o->dtype = "bf16";
  o->dtype_code = DBUF_DTYPE_BF16;
  o->elem_size = 2;
  dbuf_parallel_init(&o->par);
  o->stage = -1;
}

/* --pp-layers A,B,C: every value >= 1. */
static int
parse_pp_layers(cli_plan_opts_t *o, const char *arg)
{
  const char *p = arg;
  int64_t n = 0;
  char num[32];
  for (;;) {
    size_t k = strcspn(p, ",");
    if (n == DBUF_PARALLEL_MAX_PP) {
      cli_err("--pp-layers: more than %d stages", DBUF_PARALLEL_MAX_PP);
      return CLI_OPT_BAD;
    }
    if (k >= sizeof num) {
      cli_err("--pp-layers: '%.*s' is not an integer", (int)k, p);
      return CLI_OPT_BAD;
    }
    memcpy(num, p, k);
    num[k] = '\0';
    if (cli_parse_i64("pp-layers", num, 1, INT_MAX, &o->par.pp_layers[n]) != 0)
      return CLI_OPT_BAD;
    n++;
    if (p[k] == '\0')
      break;
    p += k + 1;
  }
  o->par.npp_layers = n;
  return 1;
}

void
cli_plan_opts_free(cli_plan_opts_t *o)
{
  free(o->safetensors);
  o->safetensors = NULL;
  free(o->dtype_map);
  o->dtype_map = NULL;
}

/* --dtype-map PATTERN=DTYPE: a non-empty pattern and a byte-sized type. */
static int
dtype_map_opt(cli_plan_opts_t *o, const char *arg)
{
  const char *eq = strrchr(arg, '=');
  dbuf_dtype_t d;
  if (eq == NULL || eq == arg || dbuf_dtype_parse(eq + 1, &d) != 0 || dbuf_dtype_size(d) == 0) {
    cli_err("--dtype-map: '%s' is not PATTERN=DTYPE (a part of tensor names, then one of %s)",
            arg, dbuf_dtype_list());
    return CLI_OPT_BAD;
  }
  const char **nv = realloc(o->dtype_map, (size_t)(o->ndtype_map + 1) * sizeof *nv);
  if (nv == NULL) {
    cli_err("out of memory");
    return CLI_OPT_BAD;
  }
  o->dtype_map = nv;
  o->dtype_map[o->ndtype_map++] = arg;
  return 1;
}

/* The model-parallel options; 0 if c is none of them. */
static int
parallel_opt(cli_plan_opts_t *o, int c, const char *arg)
{
  static const struct {
    int code;
    const char *name;
  } names[] = {{CLI_OPT_TP, "tp"},       {CLI_OPT_PP, "pp"},
               {CLI_OPT_EP, "ep"},       {CLI_OPT_EXPERT_TP, "expert-tp"},
               {CLI_OPT_STAGE, "stage"}, {CLI_OPT_PP_LAYERS, "pp-layers"},
               {CLI_OPT_VOCAB_DIVISOR, "vocab-divisor"}, {CLI_OPT_NAMING, "naming"}};
  const char *name = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (names[i].code == c)
      name = names[i].name;
  }
  if (name == NULL)
    return 0;
  if (o->par_opt == NULL)
    o->par_opt = name;
  switch (c) {
  case CLI_OPT_TP:
    return cli_parse_i64(name, arg, 1, INT_MAX, &o->par.tp) ? CLI_OPT_BAD : 1;
  case CLI_OPT_PP:
    return cli_parse_i64(name, arg, 1, DBUF_PARALLEL_MAX_PP, &o->par.pp) ? CLI_OPT_BAD : 1;
  case CLI_OPT_EP:
    return cli_parse_i64(name, arg, 1, INT_MAX, &o->par.ep) ? CLI_OPT_BAD : 1;
  case CLI_OPT_EXPERT_TP:
    return cli_parse_i64(name, arg, 1, INT_MAX, &o->par.expert_tp) ? CLI_OPT_BAD : 1;
  case CLI_OPT_STAGE:
    return cli_parse_i64(name, arg, 0, DBUF_PARALLEL_MAX_PP - 1, &o->stage) ? CLI_OPT_BAD : 1;
  case CLI_OPT_VOCAB_DIVISOR:
    return cli_parse_i64(name, arg, 1, INT_MAX, &o->par.vocab_divisor) ? CLI_OPT_BAD : 1;
  case CLI_OPT_PP_LAYERS:
    return parse_pp_layers(o, arg);
  default: /* CLI_OPT_NAMING */
    if (dbuf_naming_parse(arg, &o->par.naming) != 0) {
      cli_err("--naming: '%s' is not hf or megatron", arg);
      return CLI_OPT_BAD;
    }
    return 1;
  }
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
  case CLI_OPT_DTYPE: {
    dbuf_dtype_t d;
    if (dbuf_dtype_parse(arg, &d) != 0 || dbuf_dtype_size(d) == 0) {
      cli_err("--dtype: unknown type '%s' (%s)", arg, dbuf_dtype_list());
      return CLI_OPT_BAD;
    }
    o->dtype_code = d;
    o->dtype = dbuf_dtype_name(d);
    o->elem_size = dbuf_dtype_size(d);
    o->dtype_set = 1;
    return 1;
  }
  case CLI_OPT_DTYPE_MAP:
    return dtype_map_opt(o, arg);
  case CLI_OPT_UNITS:
    o->units = arg;
    return 1;
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
    return parallel_opt(o, c, arg);
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
    return d.code;
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
        return DBUF_ENOMEM;
      }
      v = nv;
    }
    v[1 + count++] = tok;
  }
  if (v == NULL) {
    free(data);
    cli_err("%s: no tensor names", path);
    return DBUF_EPARSE;
  }
  v[0] = data;
  *names = v;
  *n = count;
  return 0;
}

int64_t
cli_plan_stages(const cli_plan_opts_t *o)
{
  int built_in = o->shapes == NULL && o->nsafetensors == 0;
  return built_in && o->par_opt != NULL && o->stage < 0 ? o->par.pp : 1;
}

/* The tensors of one stage of a built-in model under the parallel options. */
static int
load_parallel(const cli_plan_opts_t *o, const char *model, dbuf_tensors_t **out, char *what,
              size_t what_len)
{
  dbuf_parallel_t p = o->par;
  dbuf_parallel_stats_t st;
  dbuf_diag_t d;
  int rc = 0;
  if (o->stage >= 0)
    p.stage = o->stage;
  else
    rc = dbuf_model_largest_stage(model, &p, &p.stage, &d);
  if (rc == 0)
    rc = dbuf_model_build_parallel(model, &p, out, &st, &d);
  if (rc != 0) {
    cli_err("%s", d.msg);
    return rc;
  }
  snprintf(what, what_len,
           "model %s, tp %lld, pp %lld stage %lld (layers %lld-%lld), ep %lld, expert tp "
           "%lld, vocab %lld, %s names",
           model, (long long)p.tp, (long long)p.pp, (long long)p.stage,
           (long long)st.first_layer, (long long)(st.first_layer + st.nlayers - 1),
           (long long)p.ep, (long long)dbuf_parallel_expert_tp(&p), (long long)st.vocab_padded,
           dbuf_naming_name(p.naming));
  return 0;
}

/* A model name that is not built in but close to one: the error with the
 * suggestion.  Other unknown names are left to the core's message, which
 * lists every model. */
static int
check_model(const char *name)
{
  cli_suggest_t s;
  char hint[256];
  cli_suggest_init(&s, name, strlen(name));
  for (int i = 0; i < dbuf_models_count(); i++) {
    if (strcmp(name, dbuf_model_name(i)) == 0)
      return 0;
    cli_suggest_add(&s, dbuf_model_name(i));
  }
  if (s.n == 0)
    return 0;
  cli_err("--model: unknown model '%s'%s (see 'dbuf-shard models')", name,
          cli_suggest_text(&s, "", hint, sizeof hint));
  return CLI_EXIT_USAGE;
}

static int
load_tensors(const cli_plan_opts_t *o, dbuf_tensors_t **out, uint64_t *digest, char *what,
             size_t what_len)
{
  dbuf_diag_t d;
  int sources = (o->shapes != NULL) + (o->model != NULL) + (o->nsafetensors > 0);
  /* Here, not when --dp is parsed: under MPI a rank that alone was given a
   * huge --dp must reach the agreement that names the differing option, and
   * rank 0's refusal reaches every rank with the layout broadcast. */
  if (cli_check_dp("--dp", o->params.nranks) != 0)
    return DBUF_EINVAL; /* the library code of a bad argument: exit 2 */
  if (sources > 1) {
    cli_err("give only one of --shapes, --model and --safetensors");
    return DBUF_EINVAL;
  }
  if (o->order != NULL && o->nsafetensors == 0) {
    cli_err("--order applies to --safetensors only");
    return DBUF_EINVAL;
  }
  if (o->par_opt != NULL && (o->shapes != NULL || o->nsafetensors > 0)) {
    cli_err("--%s applies to the built-in models (--model) only", o->par_opt);
    return DBUF_EINVAL;
  }
  if (o->shapes != NULL) {
    snprintf(what, what_len, "%s", strcmp(o->shapes, "-") ? o->shapes : "<stdin>");
    if (dbuf_shapes_read(o->shapes, out, digest, &d) != 0) {
      cli_err("%s", d.msg);
      return d.code;
    }
    return 0;
  }
  if (o->nsafetensors > 0) {
    char **order = NULL;
    int64_t norder = 0;
    dbuf_st_t *st;
    snprintf(what, what_len, "%s", o->safetensors[0]);
    int rc;
    if (o->order != NULL && (rc = load_order(o->order, &order, &norder)) != 0)
      return rc;
    rc = dbuf_st_open(o->safetensors, o->nsafetensors,
                          order ? (const char *const *)order + 1 : NULL, norder,
                          &st, &d);
    if (order) {
      free(order[0]);
      free(order);
    }
    if (rc != 0) {
      cli_err("%s", d.msg);
      return rc;
    }
    rc = dbuf_tensors_dup(dbuf_st_tensors(st), out);
    if (digest)
      *digest = dbuf_st_digest(st);
    dbuf_st_destroy(st);
    if (rc != 0) {
      cli_err("%s: %s", what, dbuf_strerror(rc));
      return rc;
    }
    return 0;
  }
  const char *model = o->model ? o->model : DBUF_MODEL_DEFAULT;
  if (check_model(model) != 0)
    return DBUF_ENOTFOUND; /* exit 2, like any unknown name */
  snprintf(what, what_len, "model %s", model);
  if (o->par_opt != NULL) {
    int rc = load_parallel(o, model, out, what, what_len);
    if (rc == 0 && digest) /* the model and every parallel setting */
      *digest = dbuf_hash64(what, strlen(what), 0);
    return rc;
  }
  if (dbuf_model_build(model, out, &d) != 0) {
    cli_err("--model: %s", d.msg);
    return d.code;
  }
  if (digest)
    *digest = dbuf_hash64(model, strlen(model), 0);
  return 0;
}

/* The dtype rules: a --dtype-map rule whose pattern is part of the name
 * (the first in the order given), else --dtype when given, else the
 * tensor's own.  A rule that matches no tensor is warned about. */
static int
apply_dtypes(const cli_plan_opts_t *o, dbuf_tensors_t *t)
{
  int64_t n = dbuf_tensors_count(t);
  char *hit = o->ndtype_map > 0 ? calloc((size_t)o->ndtype_map, 1) : NULL;
  if (o->ndtype_map > 0 && hit == NULL) {
    cli_err("--dtype-map: out of memory");
    return DBUF_ENOMEM;
  }
  for (int64_t i = 0; i < n; i++) {
    const char *name = dbuf_tensors_name(t, i);
    dbuf_dtype_t d = o->dtype_set ? o->dtype_code : dbuf_tensors_dtype(t, i);
    for (int k = 0; k < o->ndtype_map; k++) {
      const char *rule = o->dtype_map[k], *eq = strrchr(rule, '=');
      size_t plen = (size_t)(eq - rule);
      const char *at = name;
      while ((at = strchr(at, rule[0])) != NULL && strncmp(at, rule, plen) != 0)
        at++;
      if (at != NULL) {
        dbuf_dtype_parse(eq + 1, &d); /* checked when the option was read */
        hit[k] = 1;
        break;
      }
    }
    dbuf_tensors_set_dtype(t, i, d);
  }
  for (int k = 0; k < o->ndtype_map; k++) {
    if (!hit[k])
      cli_err("warning: --dtype-map %s matches no tensor", o->dtype_map[k]);
  }
  free(hit);
  return 0;
}

int
cli_load_tensors(const cli_plan_opts_t *o, dbuf_tensors_t **out, uint64_t *digest, char *what,
                 size_t what_len)
{
  int rc = load_tensors(o, out, digest, what, what_len);
  if (rc == 0 && (rc = apply_dtypes(o, *out)) != 0) {
    dbuf_tensors_destroy(*out);
    *out = NULL;
  }
  return rc;
}

/* Padding above this share of the buffer is worth a warning. */
#define WARN_PADDING_PERCENT 10

/*
 * A valid layout that is probably not what was meant: more ranks than the
 * tensors have rows (some ranks hold no row: valid, empty segments are part
 * of the rules), or padding above WARN_PADDING_PERCENT of the buffer.  One
 * line each on stderr, "dbuf-shard: warning: ...".
 */
static void
warn_layout(const dbuf_tensors_t *t, const dbuf_layout_t *l, const char *what,
            const char *label)
{
  int64_t rows = 0;
  int dp = dbuf_layout_nranks(l);
  /* rows reaching dp end the count: the warning only needs to know that */
  for (int64_t i = 0; i < dbuf_tensors_count(t) && rows < dp; i++)
    if (__builtin_add_overflow(rows, dbuf_tensors_rows(t, i), &rows))
      return; /* more rows than any dp */
  if (dp > rows)
    cli_err("warning: %sdp %d is more than the %lld row%s of %s: at least %lld %s no "
            "row (valid, but probably not what was meant)",
            label, dp, (long long)rows, rows == 1 ? "" : "s", what, (long long)(dp - rows),
            dp - rows == 1 ? "rank holds" : "ranks hold");
  /* the padding as dbuf_layout_stats() counts it, without its pass */
  int64_t size = dbuf_layout_size(l), logical = dbuf_tensors_total(dbuf_layout_tensors(l)), tenfold;
  int64_t padding = size > logical ? size - logical : 0;
  if (size == 0)
    return;
  /* padding x 100 / PERCENT > size; a product past INT64_MAX is past size. */
  if (__builtin_mul_overflow(padding, 100 / WARN_PADDING_PERCENT, &tenfold) ||
      tenfold > size) {
    cli_err("warning: %spadding is %.2f%% of the buffer (%lld of %lld elements)%s",
            label, 100.0 * (double)padding / (double)size, (long long)padding, (long long)size,
            dbuf_layout_kind(l) == DBUF_LAYOUT_PADDED ? "; --layout unpadded has none" : "");
  }
}

void
cli_warn_layout(const dbuf_tensors_t *t, const dbuf_layout_t *l, const char *what)
{
  warn_layout(t, l, what, "");
}

int
cli_plan_is_single(const dbuf_plan_t *p)
{
  dbuf_plan_buffer_t b;
  return dbuf_plan_nbuffers(p) == 1 && dbuf_plan_buffer(p, 0, &b) == 0 &&
         strcmp(b.unit, DBUF_UNIT_ALL) == 0;
}

void
cli_warn_plan(const dbuf_plan_t *p, const char *what)
{
  char label[DBUF_DIAG_LEN];
  int single = cli_plan_is_single(p);
  for (int64_t k = 0; k < dbuf_plan_nbuffers(p); k++) {
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(p, k, &b);
    snprintf(label, sizeof label, single ? "" : "buffer %s/%s: ", b.unit,
             dbuf_dtype_name(b.dtype));
    warn_layout(dbuf_layout_tensors(b.layout), b.layout, what, label);
  }
}

/*
 * The layout parameters of the options for tensors t: the kind's checks,
 * --owners (a file's owners in *owners, malloc'd, indexed by tensor id).
 * 0 or a DBUF_E* code, printed.
 */
static int
layout_params(const cli_plan_opts_t *o, const dbuf_tensors_t *t, dbuf_layout_params_t *p,
              int **owners)
{
  dbuf_diag_t d;
  int64_t *vals = NULL, n = 0;
  *p = o->params;
  *owners = NULL;
  if (o->owners != NULL && p->kind != DBUF_LAYOUT_TENSOR) {
    cli_err("--owners applies to --layout tensor only");
    return DBUF_EINVAL;
  }
  if (p->node_size > 0 && p->kind == DBUF_LAYOUT_TENSOR) {
    cli_err("--node-size applies to --layout padded, compact and unpadded");
    return DBUF_EINVAL;
  }
  if (p->kind != DBUF_LAYOUT_TENSOR)
    return 0;
  if (o->owners == NULL || strcmp(o->owners, "auto") == 0) {
    p->auto_owners = DBUF_OWNERS_NUMEL;
    return 0;
  }
  if (strcmp(o->owners, "auto-ns") == 0) {
    p->auto_owners = DBUF_OWNERS_NS;
    return 0;
  }
  if (dbuf_ints_read(o->owners, &vals, &n, &d) != 0) {
    cli_err("%s", d.msg);
    return d.code;
  }
  int *w = malloc((size_t)(n ? n : 1) * sizeof *w);
  if (w == NULL) {
    free(vals);
    cli_err("%s: out of memory", o->owners);
    return DBUF_ENOMEM;
  }
  for (int64_t i = 0; i < n; i++) {
    if (vals[i] < 0 || vals[i] >= p->nranks) {
      cli_err("%s:%lld: owner %lld of tensor %s out of range [0, %d)", o->owners,
              (long long)i + 1, (long long)vals[i],
              i < dbuf_tensors_count(t) ? dbuf_tensors_name(t, i) : "(none)", p->nranks);
      free(vals);
      free(w);
      return DBUF_EOWNER;
    }
    w[i] = (int)vals[i];
  }
  free(vals);
  p->owners = w;
  p->nowners = n;
  *owners = w;
  return 0;
}

/* A build error of the layout or plan: the owners file's own, or the input's. */
static int
build_error(const cli_plan_opts_t *o, const dbuf_layout_params_t *p, const char *what, int rc,
            const dbuf_diag_t *d)
{
  if (rc == DBUF_EOWNER && o->owners != NULL && p->auto_owners == 0)
    cli_err("%s: %s", o->owners, d->msg);
  else
    cli_err("%s: %s", what, d->msg);
  return rc;
}

/* --units as units of t: none, layer, re:REGEX or a file. */
static int
load_units(const cli_plan_opts_t *o, const dbuf_tensors_t *t, dbuf_units_t **u)
{
  dbuf_diag_t d;
  const char *spec = o->units ? o->units : "none";
  int rc;
  if (strcmp(spec, "none") == 0)
    rc = dbuf_units_none(t, u, &d);
  else if (strcmp(spec, "layer") == 0)
    rc = dbuf_units_layer(t, u, &d);
  else if (strncmp(spec, "re:", 3) == 0)
    rc = dbuf_units_regex(t, spec + 3, u, &d);
  else
    rc = dbuf_units_read(t, spec, u, &d);
  if (rc != 0)
    cli_err("--units: %s", d.msg);
  return rc;
}

int
cli_build_plan(const cli_plan_opts_t *o, const dbuf_tensors_t *t, const char *what,
               dbuf_plan_t **out)
{
  dbuf_layout_params_t p;
  dbuf_units_t *u = NULL;
  dbuf_diag_t d;
  int *owners = NULL;
  int rc = layout_params(o, t, &p, &owners);
  if (rc == 0)
    rc = load_units(o, t, &u);
  if (rc == 0) {
    int64_t align = p.kind == DBUF_LAYOUT_COMPACT ? o->align_bytes : 0;
    rc = dbuf_plan_build(t, u, o->dtype_code, &p, align, out, &d);
    if (rc != 0)
      build_error(o, &p, what, rc, &d);
  }
  dbuf_units_destroy(u);
  free(owners);
  return rc;
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

int
cli_next_opt(cli_plan_opts_t *o, const char *cmd, int argc, char **argv,
             const struct option *longopts, void (*usage)(FILE *), const char **out)
{
  int c;
  while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
    int h = cli_plan_opt(o, c, optarg, argv, argc);
    if (h == CLI_OPT_BAD)
      return CLI_OPTS_BAD;
    if (h == 1)
      continue;
    switch (c) {
    case 'o':
      *out = optarg;
      continue;
    case 'h':
      usage(stdout);
      return CLI_OPTS_HELP;
    case ':': /* missing value */
    case '?': /* unknown option */
      cli_bad_option(cmd, c, argv, longopts);
      return CLI_OPTS_BAD;
    default:
      return c;
    }
  }
  if (optind < argc) {
    cli_err("%s: unexpected argument '%s'", cmd, argv[optind]);
    return CLI_OPTS_BAD;
  }
  return CLI_OPTS_END;
}
