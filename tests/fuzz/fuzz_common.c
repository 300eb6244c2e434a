/* dbuf-shard fuzz harnesses: the shared layout and tensor-list drivers. */
#include "fuzz_common.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bounds that keep one input well under a millisecond or so. */
#define FUZZ_MAX_RANKS_ALL 4096   /* walk every rank's pieces up to this */
#define FUZZ_MAX_RANKS_EACH 16    /* pattern windows and queries per rank */
#define FUZZ_MAX_TENSORS_EACH 256 /* tensor pieces */
#define FUZZ_MAX_REPORT 256       /* reports: ranks and tensors at most */
#define FUZZ_WINDOW 256           /* elements of the pattern window */

void
fuzz_fail(const char *file, int line, const char *what)
{
  fprintf(stderr, "fuzz: %s:%d: invariant broken: %s\n", file, line, what);
  abort();
}

static char dir[4096];

static void
dir_remove(void)
{
  char path[4200];
  static const char *const names[] = {"input", "model.safetensors",
                                      "model.safetensors.index.json",
                                      "a.safetensors", "b.safetensors"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

const char *
fuzz_dir(void)
{
  if (dir[0] == '\0') {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dbuf-fuzz.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(dir) == NULL) {
      perror("fuzz: mkdtemp");
      abort();
    }
    atexit(dir_remove);
  }
  return dir;
}

const char *
fuzz_write(const char *name, const void *data, size_t size)
{
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) ||
      fclose(f) != 0) {
    perror("fuzz: writing the input file");
    abort();
  }
  return path;
}

void
fuzz_check_json(const char *what, const char *text, size_t len)
{
  json_error_t err;
  json_t *doc = json_loadb(text, len, 0, &err);
  if (doc == NULL) {
    fprintf(stderr, "fuzz: %s wrote invalid JSON: %s (line %d, column %d)\n", what, err.text,
            err.line, err.column);
    abort();
  }
  json_decref(doc);
}

/* ------------------------------------------------------------------ */

static int
one_line(const dbuf_violation_t *v, void *arg)
{
  int64_t *count = arg;
  FUZZ_CHECK(v->msg[0] != '\0' && strchr(v->msg, '\n') == NULL);
  FUZZ_CHECK(v->kind >= DBUF_VIOL_RANGE && v->kind <= DBUF_VIOL_CHUNK);
  (*count)++;
  return 0;
}

/* Identity of a layout through the wire format. */
static uint64_t
digest_of(const dbuf_layout_t *l)
{
  uint64_t d = 0;
  FUZZ_CHECK(dbuf_wire_digest(l, &d, NULL) == 0);
  return d;
}

static void
check_pieces(const dbuf_layout_t *l)
{
  int nranks = dbuf_layout_nranks(l);
  const int64_t *range = dbuf_layout_range(l);
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t ntensors = dbuf_layout_ntensors(l), covered = 0;
  dbuf_piece_t *buf = NULL;
  int64_t cap = 0;

  /* Every element of every tensor is in exactly one piece. */
  if (nranks <= FUZZ_MAX_RANKS_ALL) {
    for (int r = 0; r < nranks; r++) {
      int64_t n = 0;
      FUZZ_CHECK(dbuf_layout_rank_pieces(l, r, NULL, 0, &n) == 0 && n >= 0);
      if (n > cap) {
        free(buf);
        cap = n;
        FUZZ_CHECK((buf = malloc((size_t)cap * sizeof *buf)) != NULL);
      }
      FUZZ_CHECK(dbuf_layout_rank_pieces(l, r, buf, cap, &n) == 0);
      for (int64_t k = 0; k < n; k++) {
        const dbuf_piece_t *p = &buf[k];
        FUZZ_CHECK(p->rank == r && p->tensor >= 0 && p->tensor < ntensors);
        FUZZ_CHECK(p->nelems > 0 && p->offset >= 0 &&
                   p->offset <= range[r + 1] - range[r] - p->nelems);
        FUZZ_CHECK(p->elem_begin >= 0 &&
                   p->elem_begin <= dbuf_tensors_numel(t, p->tensor) - p->nelems);
        covered += p->nelems;
      }
    }
    FUZZ_CHECK(covered == dbuf_tensors_total(t));
  }
  for (int64_t i = 0; i < ntensors && i < FUZZ_MAX_TENSORS_EACH; i++) {
    int64_t n = 0, sum = 0;
    FUZZ_CHECK(dbuf_layout_tensor_pieces(l, i, NULL, 0, &n) == 0 && n >= 0);
    if (n > cap) {
      free(buf);
      cap = n;
      FUZZ_CHECK((buf = malloc((size_t)cap * sizeof *buf)) != NULL);
    }
    FUZZ_CHECK(dbuf_layout_tensor_pieces(l, i, buf, cap, &n) == 0);
    for (int64_t k = 0; k < n; k++)
      sum += buf[k].nelems;
    FUZZ_CHECK(sum == dbuf_tensors_numel(t, i));
  }
  free(buf);
}

static void
check_queries(const dbuf_layout_t *l)
{
  int nranks = dbuf_layout_nranks(l);
  const int64_t *range = dbuf_layout_range(l), *off = dbuf_layout_offsets(l);
  const dbuf_tensors_t *t = dbuf_layout_tensors(l);
  int64_t size = dbuf_layout_size(l);

  for (int r = 0; r < nranks && r < FUZZ_MAX_RANKS_EACH; r++) {
    int64_t s, e;
    FUZZ_CHECK(dbuf_layout_rank_range(l, r, &s, &e) == 0);
    FUZZ_CHECK(s == range[r] && e == range[r + 1]);
    int64_t probes[3] = {s, e - 1, s + (e - s) / 2};
    for (int k = 0; k < 3 && s < e; k++) {
      int owner;
      int64_t tensor;
      FUZZ_CHECK(dbuf_layout_owner_of(l, probes[k], &owner) == 0);
      FUZZ_CHECK(owner >= 0 && owner < nranks && range[owner] <= probes[k] &&
                 probes[k] < range[owner + 1]);
      FUZZ_CHECK(dbuf_layout_tensor_at(l, probes[k], &tensor) == 0);
      FUZZ_CHECK(tensor == -1 ||
                 (off[tensor] <= probes[k] &&
                  probes[k] - off[tensor] < dbuf_tensors_numel(t, tensor)));
    }
  }
  int owner;
  int64_t tensor;
  FUZZ_CHECK(dbuf_layout_owner_of(l, size, &owner) == DBUF_ERANGE);
  FUZZ_CHECK(dbuf_layout_tensor_at(l, -1, &tensor) == DBUF_ERANGE);

  dbuf_layout_stats_t st;
  FUZZ_CHECK(dbuf_layout_stats(l, &st) == 0);
  FUZZ_CHECK(st.logical == dbuf_tensors_total(t) && st.padding == size - st.logical);
  FUZZ_CHECK(st.padding >= 0 && st.gap_elems + st.tail_elems == st.padding);
  FUZZ_CHECK(st.min_segment <= st.max_segment);
}

/* The pattern fill and its independent verifier agree on a window of each
 * of the first ranks, and the verifier sees one changed element. */
static void
check_pattern(const dbuf_layout_t *l)
{
  const int64_t *range = dbuf_layout_range(l);
  uint16_t buf[FUZZ_WINDOW];
  for (int r = 0; r < dbuf_layout_nranks(l) && r < FUZZ_MAX_RANKS_EACH; r++) {
    int64_t s = range[r], e = range[r + 1], nbad = -1;
    if (e - s > FUZZ_WINDOW)
      e = s + FUZZ_WINDOW;
    if (s == e)
      continue;
    FUZZ_CHECK(dbuf_pattern_fill(l, s, e, buf, 2, NULL, NULL) == 0);
    FUZZ_CHECK(dbuf_pattern_verify(l, s, e, buf, 2, NULL, NULL, &nbad, NULL) == 0);
    FUZZ_CHECK(nbad == 0);
    buf[(e - s) / 2] ^= 0x5a5a;
    dbuf_pattern_bad_t first;
    FUZZ_CHECK(dbuf_pattern_verify(l, s, e, buf, 2, NULL, NULL, &nbad, &first) == 0);
    FUZZ_CHECK(nbad == 1 && first.offset == s + (e - s) / 2);
  }
}

static void
check_nodes(const dbuf_layout_t *l)
{
  int nranks = dbuf_layout_nranks(l);
  dbuf_nodes_t *nodes = NULL;
  if (nranks > FUZZ_MAX_RANKS_ALL)
    return;
  int rc = dbuf_nodes_create_blocked(l, nranks, 2, 2, &nodes, NULL);
  FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW);
  if (rc != 0)
    return;
  int64_t elements = 0;
  for (int k = 0; k < dbuf_nodes_count(nodes); k++) {
    dbuf_node_info_t info;
    FUZZ_CHECK(dbuf_nodes_info(nodes, k, &info) == 0 && info.nranks >= 1);
    elements += info.elements;
  }
  FUZZ_CHECK(elements == dbuf_layout_size(l));
  for (int64_t i = 0; i < dbuf_nodes_ncrossing(nodes); i++) {
    dbuf_node_crossing_t c;
    FUZZ_CHECK(dbuf_nodes_crossing(nodes, i, &c) == 0 && c.nsides >= 2);
  }
  dbuf_nodes_destroy(nodes);
}

/* Encoding then decoding, and writing then reading the JSON, give back the
 * same layout (same wire digest), and the copies are valid too. */
static void
check_round_trips(const dbuf_layout_t *l)
{
  uint64_t want = digest_of(l);
  void *msg;
  int64_t len;
  dbuf_layout_t *back = NULL;
  dbuf_diag_t d;

  FUZZ_CHECK(dbuf_wire_encode(l, &msg, &len, NULL) == 0);
  FUZZ_CHECK(dbuf_wire_decode(msg, len, &back, &d) == 0);
  free(msg);
  FUZZ_CHECK(digest_of(back) == want);
  FUZZ_CHECK(dbuf_layout_validate(back, NULL, NULL, NULL, NULL) == 0);
  dbuf_layout_destroy(back);

  /* The JSON reader refuses a layout without tensors ("no tensors"). */
  if (dbuf_layout_ntensors(l) == 0)
    return;
  char *text;
  size_t tlen;
  unsigned flags = dbuf_layout_nranks(l) <= 64 ? DBUF_JSON_PIECES : 0;
  FUZZ_CHECK(dbuf_layout_to_json(l, flags, &text, &tlen) == 0);
  fuzz_check_json("dbuf_layout_to_json", text, tlen);
  back = NULL;
  FUZZ_CHECK(dbuf_layout_from_json("round-trip", text, tlen, &back, &d) == 0);
  free(text);
  FUZZ_CHECK(digest_of(back) == want);
  dbuf_layout_destroy(back);
}

static void
write_reports(const dbuf_layout_t *l)
{
  if (dbuf_layout_nranks(l) > FUZZ_MAX_REPORT ||
      dbuf_layout_ntensors(l) > FUZZ_MAX_REPORT)
    return;
  for (int f = DBUF_REPORT_SUMMARY; f <= DBUF_REPORT_SVG; f++) {
    char *text = NULL;
    size_t len = 0;
    dbuf_diag_t d;
    int rc = dbuf_report_write(l, (dbuf_report_format_t)f, NULL, &text, &len, &d);
    /* DBUF_ELAYOUT: segments not ordered inside the buffer (a layout that
     * reads but fails validation). */
    FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW || rc == DBUF_ELAYOUT);
    if (rc == 0)
      FUZZ_CHECK(len > 0 && strlen(text) == len && text[len - 1] == '\n');
    free(text);
  }
}

int
fuzz_layout(const dbuf_layout_t *l)
{
  int64_t nviol = -1, seen = 0;
  dbuf_diag_t d;
  int rc = dbuf_layout_validate(l, one_line, &seen, &nviol, &d);
  FUZZ_CHECK(rc == 0 || rc == DBUF_ELAYOUT);
  FUZZ_CHECK(nviol == seen && (rc == 0) == (nviol == 0));
  write_reports(l);
  if (rc != 0)
    return 0;
  check_queries(l);
  check_pieces(l);
  check_pattern(l);
  check_nodes(l);
  check_round_trips(l);
  return 1;
}

/* ------------------------------------------------------------------ */

static void
build_one(const dbuf_tensors_t *t, dbuf_layout_kind_t kind, int nranks,
          int64_t block)
{
  dbuf_layout_params_t p;
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_layout_params_init(&p);
  p.kind = kind;
  p.nranks = nranks;
  p.block_size = block;
  p.auto_owners = kind == DBUF_LAYOUT_TENSOR;
  int rc = dbuf_layout_build(t, &p, &l, &d);
  FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW || rc == DBUF_EBLOCK);
  if (rc != 0)
    return;
  /* What the builder accepts is valid: fuzz_layout returns 1. */
  FUZZ_CHECK(fuzz_layout(l) == 1);
  dbuf_layout_destroy(l);
}

void
fuzz_tensors(const dbuf_tensors_t *t)
{
  dbuf_tensors_t *copy = NULL;
  int64_t n = dbuf_tensors_count(t), total = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t id = -1;
    char shape[DBUF_MAX_DIMS * 21 + 1];
    FUZZ_CHECK(dbuf_tensors_find(t, dbuf_tensors_name(t, i), &id) == 0 && id == i);
    FUZZ_CHECK(dbuf_tensors_shape_str(t, i, shape, sizeof shape) == 0);
    FUZZ_CHECK(dbuf_tensors_rows(t, i) * dbuf_tensors_row_elems(t, i) ==
               dbuf_tensors_numel(t, i));
    total += dbuf_tensors_numel(t, i);
  }
  FUZZ_CHECK(total == dbuf_tensors_total(t));
  FUZZ_CHECK(dbuf_tensors_dup(t, &copy) == 0);
  FUZZ_CHECK(dbuf_tensors_compare(copy, t, NULL, NULL, NULL) == 0);
  dbuf_tensors_destroy(copy);

  build_one(t, DBUF_LAYOUT_PADDED, 3, 1);
  build_one(t, DBUF_LAYOUT_PADDED, 2, 2);
  build_one(t, DBUF_LAYOUT_UNPADDED, 5, 1);
  build_one(t, DBUF_LAYOUT_TENSOR, 2, 1);
}
