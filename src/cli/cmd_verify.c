/*
 * `dbuf-shard verify LAYOUT.json`: check a layout file offline (serial, no
 * MPI).  Every violated invariant and every difference from a given tensor
 * list is one line on stdout; the verdict is the exit status.
 */
#include "cli.h"

#include "dbuf/layout_json.h"
#include "dbuf/shapes_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_ALL = CLI_OPT_FIRST_FREE };

/* Problems shown per kind without --all. */
#define VERIFY_SHOW_MAX 20

static void
verify_usage(FILE *f)
{
  fprintf(f,
          "Usage: dbuf-shard verify LAYOUT.json [--shapes FILE | --model NAME |\n"
          "                         --safetensors FILE... [--order FILE]]\n"
          "Check a layout in the dbuf-shard JSON schema (from 'dbuf-shard plan\n"
          "--format json', or written by hand for another framework) against\n"
          "every invariant of its kind: tensors inside the buffer, no overlaps,\n"
          "rank cuts on row (block) boundaries, padded offsets aligned to their\n"
          "rows, equal padded segments that are multiples of the chunk,\n"
          "TensorAtomic tensors inside their owner's segment, no padding in\n"
          "unpadded and tensor layouts.  With a tensor list, also check that the\n"
          "layout has the same tensor names, order and shapes.  LAYOUT '-' reads\n"
          "stdin.  Give LAYOUT before --safetensors, which takes every following\n"
          "word that does not start with '-'.  A layout file of version 2 (several\n"
          "buffers) has every buffer checked; its problems read 'LAYOUT: KIND:\n"
          "buffer UNIT/DTYPE: message', and a buffer only one side has is a\n"
          "missing or extra problem.\n\n"
          "Tensor list to compare with (optional):\n"
          "  --shapes FILE          'NAME d0xd1...' lines or a JSON shape array\n"
          "  --model NAME           a built-in model (see 'dbuf-shard models')\n"
          "  --safetensors FILE...  checkpoint headers, or one index .json\n"
          "  --order FILE           tensor order for --safetensors\n"
          "  --units U, --dtype-map PATTERN=T, --dtype T\n"
          "                         group the tensor list into buffers as 'plan'\n"
          "                         does (see 'dbuf-shard plan --help'); each\n"
          "                         buffer of LAYOUT is compared with the buffer\n"
          "                         of the same unit and dtype\n"
          "  --tp, --pp, --pp-layers, --stage, --ep, --expert-tp, --vocab-divisor,\n"
          "  --naming               with --model: compare with the tensors of one\n"
          "                         model-parallel rank, as 'plan' lays them out\n"
          "                         (--stage default: the largest stage)\n"
          "  --all                  list every problem (default: at most %d of\n"
          "                         each kind)\n"
          "  -h, --help             this help\n\n"
          "Output on stdout: first 'LAYOUT: FAILED: N problems (KIND COUNT, ...)',\n"
          "then one line per problem, 'LAYOUT: KIND: message', with KIND one of\n"
          "range, bounds, overlap, align, cut, unequal, split, gap, block, chunk\n"
          "(layout invariants), duplicate (a tensor in two buffers) or missing,\n"
          "extra, shape, order (differences from the tensor list): at most %d of\n"
          "each kind, then 'LAYOUT: KIND: ... M more (use --all)'.  A valid\n"
          "layout gives the single line\n"
          "'LAYOUT: OK: ...'.  Errors reading the inputs go to stderr as\n"
          "'dbuf-shard: FILE[:LINE]: message'.\n"
          "Exit status: 0 valid, 1 problems found, 2 bad usage or unreadable\n"
          "input.\n",
          VERIFY_SHOW_MAX, VERIFY_SHOW_MAX);
}

static const char *const viol_names[] = {
    NULL,      "range", "bounds", "overlap", "align",    "cut",
    "unequal", "split", "gap",    "block",   "chunk",    "duplicate"};

const char *
cli_violation_name(int kind)
{
  return kind >= DBUF_VIOL_RANGE && kind <= DBUF_VIOL_DUPLICATE ? viol_names[kind] : "invalid";
}

/* The kinds of problem, as one index: a violation kind (1 ..
 * DBUF_VIOL_DUPLICATE), or DIFF_BASE + a difference kind (DBUF_TDIFF_*); 0
 * for anything else. */
#define DIFF_BASE DBUF_VIOL_DUPLICATE
#define NKINDS (DIFF_BASE + DBUF_TDIFF_ORDER + 1)

static const char *
kind_name(int k)
{
  static const char *const diff_names[] = {NULL, "missing", "extra", "shape", "order"};
  return k > DIFF_BASE ? diff_names[k - DIFF_BASE] : k > 0 ? cli_violation_name(k) : "other";
}

/*
 * The checks run twice: once counting the problems of each kind (the summary
 * comes first), once printing them, at most VERIFY_SHOW_MAX a kind unless
 * --all.  Both runs see the same problems in the same order (the checks are
 * deterministic), and nothing is kept in memory but the counts.
 */
typedef struct {
  const char *file;  /* the layout file, as named */
  const char *what;  /* the tensor list compared with */
  const dbuf_tensors_t *t, *ref; /* the buffer's tensors, the reference buffer's */
  const char *label; /* "buffer UNIT/DTYPE: " for a plan of several buffers, else "" */
  const dbuf_plan_t *plan, *rplan; /* the file's and the reference's (or NULL) */
  int64_t *rmatch;   /* [buffers of plan]: the reference buffer of each, or -1 */
  char *rused;       /* [buffers of rplan]: matched by a buffer of plan */
  int printing, all;
  int64_t count;
  int64_t found[NKINDS], shown[NKINDS];
} vstate_t;

/* Count the problem of kind k, or say whether to print it now. */
static int
take(vstate_t *s, int k)
{
  if (!s->printing) {
    s->found[k]++;
    s->count++;
    return 0;
  }
  if (!s->all && s->shown[k] >= VERIFY_SHOW_MAX)
    return 0;
  s->shown[k]++;
  return 1;
}

static int
on_violation(const dbuf_violation_t *v, void *arg)
{
  vstate_t *s = arg;
  int k = v->kind >= DBUF_VIOL_RANGE && v->kind <= DBUF_VIOL_DUPLICATE ? (int)v->kind : 0;
  if (take(s, k))
    printf("%s: %s: %s%s\n", s->file, cli_violation_name(v->kind), s->label, v->msg);
  return 0;
}

static const char *
shape(const dbuf_tensors_t *t, int64_t id, char *buf, size_t len)
{
  if (dbuf_tensors_shape_str(t, id, buf, len) != 0)
    snprintf(buf, len, "?");
  return buf;
}

static int
on_diff(const dbuf_tensors_diff_t *d, void *arg)
{
  vstate_t *s = arg;
  char a[512], b[512];
  int k = d->kind >= DBUF_TDIFF_MISSING && d->kind <= DBUF_TDIFF_ORDER
              ? DIFF_BASE + (int)d->kind
              : 0;
  if (!take(s, k))
    return 0;
  switch (d->kind) {
  case DBUF_TDIFF_MISSING:
    printf("%s: missing: %stensor %s (%s) of %s is not in the layout\n", s->file, s->label,
           dbuf_tensors_name(s->ref, d->ref_id),
           shape(s->ref, d->ref_id, b, sizeof b), s->what);
    break;
  case DBUF_TDIFF_EXTRA:
    printf("%s: extra: %stensor %s (%s) is not in %s\n", s->file, s->label,
           dbuf_tensors_name(s->t, d->id), shape(s->t, d->id, a, sizeof a),
           s->what);
    break;
  case DBUF_TDIFF_SHAPE:
    printf("%s: shape: %stensor %s has shape %s in the layout, %s in %s\n",
           s->file, s->label, dbuf_tensors_name(s->t, d->id),
           shape(s->t, d->id, a, sizeof a),
           shape(s->ref, d->ref_id, b, sizeof b), s->what);
    break;
  case DBUF_TDIFF_ORDER:
    printf("%s: order: %stensor %s is tensor %lld in the layout but %lld in %s\n",
           s->file, s->label, dbuf_tensors_name(s->t, d->id), (long long)d->id,
           (long long)d->ref_id, s->what);
    break;
  default:
    printf("%s: %s%s\n", s->file, s->label, d->msg);
  }
  return 0;
}

/* A buffer of the file or of the reference without a counterpart. */
static void
buffer_diff(vstate_t *s, int kind, const dbuf_plan_t *p, int64_t k)
{
  dbuf_plan_buffer_t b;
  dbuf_plan_buffer(p, k, &b);
  int64_t nt = dbuf_layout_ntensors(b.layout);
  if (!take(s, DIFF_BASE + kind))
    return;
  if (kind == DBUF_TDIFF_MISSING)
    printf("%s: missing: buffer %s/%s (%lld tensor%s) of %s is not in the layout\n",
           s->file, b.unit, dbuf_dtype_name(b.dtype), (long long)nt, nt == 1 ? "" : "s",
           s->what);
  else
    printf("%s: extra: buffer %s/%s (%lld tensor%s) is not in %s\n", s->file, b.unit,
           dbuf_dtype_name(b.dtype), (long long)nt, nt == 1 ? "" : "s", s->what);
}

/* Validate every buffer and compare its tensors with the reference buffer
 * of the same unit and dtype (when given); 0, or the exit code of the
 * library error with the error printed. */
static int
check(vstate_t *s)
{
  int single = cli_plan_is_single(s->plan);
  char label[DBUF_DIAG_LEN];
  for (int64_t k = 0; k < dbuf_plan_nbuffers(s->plan); k++) {
    dbuf_plan_buffer_t b, rb;
    dbuf_plan_buffer(s->plan, k, &b);
    snprintf(label, sizeof label, single ? "" : "buffer %s/%s: ", b.unit,
             dbuf_dtype_name(b.dtype));
    s->label = label;
    s->t = dbuf_layout_tensors(b.layout);
    int e = dbuf_layout_validate(b.layout, on_violation, s, NULL, NULL);
    if ((e == 0 || e == DBUF_ELAYOUT) && s->rplan != NULL) {
      if (s->rmatch[k] < 0) {
        buffer_diff(s, DBUF_TDIFF_EXTRA, s->plan, k);
        e = 0;
      } else {
        dbuf_plan_buffer(s->rplan, s->rmatch[k], &rb);
        s->ref = dbuf_layout_tensors(rb.layout);
        e = dbuf_tensors_compare(s->t, s->ref, on_diff, s, NULL);
      }
    }
    if (e != 0 && e != DBUF_ELAYOUT && e != DBUF_EVERIFY) {
      cli_err("%s: %s%s", s->file, label, dbuf_strerror(e));
      return cli_exit_code(e);
    }
  }
  s->label = "";
  int e = dbuf_plan_validate(s->plan, on_violation, s, NULL, NULL);
  if (e != 0 && e != DBUF_ELAYOUT) {
    cli_err("%s: %s", s->file, dbuf_strerror(e));
    return cli_exit_code(e);
  }
  for (int64_t k = 0; s->rplan != NULL && k < dbuf_plan_nbuffers(s->rplan); k++) {
    if (!s->rused[k])
      buffer_diff(s, DBUF_TDIFF_MISSING, s->rplan, k);
  }
  return 0;
}

/* "LAYOUT: FAILED: N problems (cut 25, shape 1)", then the problems, then
 * "LAYOUT: cut: ... 5 more (use --all)" for each kind cut short. */
static int
report_problems(vstate_t *s)
{
  const char *sep = " (";
  printf("%s: FAILED: %lld problem%s", s->file, (long long)s->count, s->count == 1 ? "" : "s");
  for (int k = 0; k < NKINDS; k++) {
    if (s->found[k] > 0) {
      printf("%s%s %lld", sep, kind_name(k), (long long)s->found[k]);
      sep = ", ";
    }
  }
  printf(")\n");
  s->printing = 1;
  int rc = check(s);
  if (rc != 0)
    return rc;
  for (int k = 0; k < NKINDS; k++) {
    if (s->found[k] > s->shown[k])
      printf("%s: %s: ... %lld more (use --all)\n", s->file, kind_name(k),
             (long long)(s->found[k] - s->shown[k]));
  }
  return CLI_EXIT_FAIL;
}

/* A buffer by (unit, dtype), for sorting the buffers of two plans. */
typedef struct {
  const char *unit;
  dbuf_dtype_t dtype;
  int64_t id;
} bkey_t;

static int
bkey_cmp(const void *a, const void *b)
{
  const bkey_t *x = a, *y = b;
  int c = strcmp(x->unit, y->unit);
  return c != 0 ? c : (x->dtype > y->dtype) - (x->dtype < y->dtype);
}

static bkey_t *
bkeys(const dbuf_plan_t *p)
{
  int64_t n = dbuf_plan_nbuffers(p);
  bkey_t *k = malloc((size_t)n * sizeof *k);
  for (int64_t i = 0; k != NULL && i < n; i++) {
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(p, i, &b);
    k[i] = (bkey_t){b.unit, b.dtype, i};
  }
  if (k != NULL)
    qsort(k, (size_t)n, sizeof *k, bkey_cmp);
  return k;
}

/* s->rmatch and s->rused: the buffers of the file and of the reference
 * matched by unit and dtype (both sorted, then merged: O(n log n)). */
static int
match_buffers(vstate_t *s)
{
  int64_t n = dbuf_plan_nbuffers(s->plan), rn = dbuf_plan_nbuffers(s->rplan), i = 0, j = 0;
  bkey_t *a = bkeys(s->plan), *b = bkeys(s->rplan);
  s->rmatch = malloc((size_t)n * sizeof *s->rmatch);
  s->rused = calloc((size_t)rn, 1);
  if (a == NULL || b == NULL || s->rmatch == NULL || s->rused == NULL) {
    free(a);
    free(b);
    cli_err("out of memory");
    return CLI_EXIT_FAIL;
  }
  for (int64_t k = 0; k < n; k++)
    s->rmatch[k] = -1;
  if (cli_plan_is_single(s->plan) && cli_plan_is_single(s->rplan)) {
    /* One layout each: compared whatever their dtypes (a version 1 file
     * written before dtypes has none, and the dtype moves no offset). */
    s->rmatch[0] = 0;
    s->rused[0] = 1;
    i = n;
  }
  while (i < n && j < rn) {
    int c = bkey_cmp(&a[i], &b[j]);
    if (c == 0) {
      s->rmatch[a[i].id] = b[j].id;
      s->rused[b[j].id] = 1;
    }
    i += c <= 0;
    j += c >= 0;
  }
  free(a);
  free(b);
  return 0;
}

int
cmd_verify(int argc, char **argv)
{
  static const struct option longopts[] = {
      CLI_INPUT_LONGOPTS,
      CLI_PARALLEL_LONGOPTS,
      {"dtype", required_argument, NULL, CLI_OPT_DTYPE},
      {"dtype-map", required_argument, NULL, CLI_OPT_DTYPE_MAP},
      {"units", required_argument, NULL, CLI_OPT_UNITS},
      {"all", no_argument, NULL, OPT_ALL},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  cli_plan_opts_t o;
  const char *file = NULL;
  int c, rc = CLI_EXIT_USAGE, all = 0;
  dbuf_tensors_t *ref = NULL;
  dbuf_plan_t *p = NULL, *rp = NULL;
  char *text = NULL;
  size_t len;
  dbuf_diag_t d;
  char what[1024];
  vstate_t st = {.all = all};

  cli_plan_opts_init(&o);
  optind = 1;
  opterr = 0;
  /* '+': stop at the first non-option, so LAYOUT may come first and
   * --safetensors can take the words after it without reordering. */
  while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1 ||
         (optind < argc && file == NULL)) {
    if (c == -1) {
      file = argv[optind++];
      continue;
    }
    int h = cli_plan_opt(&o, c, optarg, argv, argc);
    if (h == 1)
      continue;
    if (h == CLI_OPT_BAD)
      goto out;
    switch (c) {
    case OPT_ALL:
      all = 1;
      break;
    case 'h':
      verify_usage(stdout);
      rc = CLI_EXIT_OK;
      goto out;
    default: /* ':' missing value, '?' unknown option */
      cli_bad_option("verify", c, argv, longopts);
      goto out;
    }
  }
  if (file == NULL) {
    cli_err("verify: no layout file (see 'dbuf-shard verify --help')");
    goto out;
  }
  if (optind < argc) {
    cli_err("verify: unexpected argument '%s'", argv[optind]);
    goto out;
  }
  const char *name = strcmp(file, "-") == 0 ? "<stdin>" : file;
  int compare = o.shapes != NULL || o.model != NULL || o.nsafetensors > 0 || o.par_opt != NULL;
  if (!compare && o.order != NULL) {
    cli_err("--order applies to --safetensors only");
    goto out;
  }
  if (!compare && (o.units != NULL || o.ndtype_map > 0 || o.dtype_set)) {
    cli_err("--%s applies with a tensor list to compare with (--shapes, --model or "
            "--safetensors)",
            o.units != NULL ? "units" : o.ndtype_map > 0 ? "dtype-map" : "dtype");
    goto out;
  }
  if (dbuf_file_read_all(file, &text, &len, &d) != 0 ||
      dbuf_plan_from_json(name, text, len, &p, &d) != 0) {
    cli_err("%s", d.msg);
    rc = cli_exit_code(d.code);
    goto out;
  }
  if (compare) {
    /* The reference's buffers: its tensors grouped by --units and dtype
     * (the layout of one rank, unpadded, is all that is looked at). */
    o.params.kind = DBUF_LAYOUT_UNPADDED;
    o.params.nranks = 1;
    if ((rc = cli_load_tensors(&o, &ref, NULL, what, sizeof what)) != 0 ||
        (rc = cli_build_plan(&o, ref, what, &rp)) != 0) {
      rc = cli_exit_code(rc);
      goto out;
    }
  }

  char dp_what[1100];
  snprintf(dp_what, sizeof dp_what, "%s: dp_size", name);
  if ((rc = cli_check_dp(dp_what, dbuf_plan_nranks(p))) != 0)
    goto out;

  st = (vstate_t){.file = name, .what = what, .plan = p, .rplan = rp, .label = "", .all = all};
  if (rp != NULL && (rc = match_buffers(&st)) != 0)
    goto out;
  if ((rc = check(&st)) != 0)
    goto out;
  if (st.count > 0) {
    rc = report_problems(&st);
  } else {
    dbuf_plan_totals_t tt;
    dbuf_plan_buffer_t b;
    dbuf_plan_buffer(p, 0, &b);
    if (dbuf_plan_totals(p, &tt) != 0)
      tt.tensors = tt.buffer_elems = -1; /* a plan that validates cannot overflow */
    if (cli_plan_is_single(p))
      printf("%s: OK: %s layout, dp %d", name, dbuf_layout_kind_name(dbuf_layout_kind(b.layout)),
             dbuf_plan_nranks(p));
    else
      printf("%s: OK: %lld buffers, dp %d", name, (long long)tt.buffers, dbuf_plan_nranks(p));
    printf(", %lld tensors, %lld elements%s%s\n", (long long)tt.tensors,
           (long long)tt.buffer_elems, ref != NULL ? "; names, order and shapes match " : "",
           ref != NULL ? what : "");
    rc = CLI_EXIT_OK;
  }
  if (cli_stdout_flush() != CLI_EXIT_OK)
    rc = CLI_EXIT_FAIL;
out:
  free(st.rmatch);
  free(st.rused);
  free(text);
  dbuf_plan_destroy(p);
  dbuf_plan_destroy(rp);
  dbuf_tensors_destroy(ref);
  cli_plan_opts_free(&o);
  return rc;
}
