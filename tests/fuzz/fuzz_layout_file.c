/*
 * Fuzz every writer of JSON on what `plan` and `run` read.  The input is a
 * first line of any bytes, text from outside that the reports quote (a
 * source path, a host name, a problem message, the --units text), then a
 * tensor list (shapes text or JSON, dbuf_shapes_parse) or a layout file
 * ('{': dbuf_plan_from_json, version 1 or 2).  What reads is planned (a
 * shape list: as one buffer and with --units layer) and written by each
 * JSON writer: layout JSON version 1 (dbuf_layout_to_json, with and
 * without pieces), version 2 (dbuf_plan_to_json, dbuf_plan_write_json), and
 * the run's report JSON (run_report_json with a node report, and
 * run_report_stopped_json).  Every output must be one JSON document a
 * strict reader takes (fuzz_check_json), whatever the names and text hold.
 */
#include "fuzz_common.h"

#include "run_report.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TENSORS 256
#define MAX_RANKS 64 /* of a layout file; a shape list is planned on 4 */

/* dbuf_write_fn collecting the streamed text. */
typedef struct {
  char *p;
  size_t len;
} text_t;

static int
collect(void *arg, const char *data, size_t len)
{
  text_t *t = arg;
  char *p = realloc(t->p, t->len + len);
  FUZZ_CHECK(p != NULL);
  memcpy(p + t->len, data, len);
  t->p = p;
  t->len += len;
  return 0;
}

/* The run's report of plan p (every buffer valid), every text from outside
 * set to ext, its ranks in two nodes (one with a single rank), the first
 * named ext. */
static void
write_reports(const dbuf_plan_t *p, const char *ext)
{
  int64_t nb = dbuf_plan_nbuffers(p);
  int nr = dbuf_plan_nranks(p), nn = nr >= 2 ? 2 : 1, node_of[MAX_RANKS];
  run_buffer_sum_t *bs = calloc((size_t)nb, sizeof *bs);
  run_rank_rec_t recs[MAX_RANKS];
  const char *hosts[2] = {ext[0] != '\0' ? ext : "h", "node1"};
  char *line[1] = {(char *)ext};
  FUZZ_CHECK(bs != NULL && nr >= 1 && nr <= MAX_RANKS);
  for (int r = 0; r < nr; r++)
    node_of[r] = r < nr - 1 ? 0 : nn - 1;
  for (int64_t i = 0; i < nb; i++) {
    dbuf_plan_buffer_t b;
    FUZZ_CHECK(dbuf_plan_buffer(p, i, &b) == 0);
    bs[i] = (run_buffer_sum_t){.unit = b.unit,
                               .dtype = dbuf_dtype_name(b.dtype),
                               .elem_size = b.elem_size,
                               .l = b.layout,
                               .structure_ok = 1,
                               .data_ok = -1,
                               .message = ext};
    FUZZ_CHECK(dbuf_wire_digest(b.layout, &bs[i].digest, NULL) == 0);
    int rc = dbuf_nodes_create(b.layout, nr, node_of, nn, hosts, b.elem_size, &bs[i].nodes, NULL);
    FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW || rc == DBUF_ENRANKS);
  }
  memset(recs, 0, sizeof recs);
  for (int r = 0; r < nr; r++) {
    run_rank_rec_t *x = &recs[r];
    x->rank = r;
    x->node = node_of[r];
    x->offset = x->end = -1;
    x->first_tensor = x->last_tensor = dbuf_layout_ntensors(bs[0].l) > 0 ? 0 : -1;
    x->first_buf = x->last_buf = 0;
    snprintf(x->host, sizeof x->host, "%s", ext);
    snprintf(x->verify, sizeof x->verify, "%s", ext);
    snprintf(x->note, sizeof x->note, "%s", ext);
    snprintf(x->cpus, sizeof x->cpus, "%s", ext);
    snprintf(x->numa, sizeof x->numa, "%s", ext);
  }
  run_load_sum_t ld = {.io = "posix", .lines = line, .nlines = 1};
  run_summary_t s = {.nranks = nr,
                     .per_rank = 1,
                     .membind = ext,
                     .message = ext,
                     .problem_lines = line,
                     .nproblem_lines = 1,
                     .buffers = bs,
                     .nbuffers = nb,
                     .units = ext,
                     .load = &ld,
                     .verdict = "ERROR",
                     .phase = "report",
                     .exit_code = 2};
  run_timings_t tm = {0};
  dbuf_report_opts_init(&s.report);
  s.report.source = ext;
  s.report.dtype = bs[0].dtype;
  s.report.elem_size = bs[0].elem_size;
  int nodes_ok = 1;
  for (int64_t i = 0; i < nb; i++)
    nodes_ok &= bs[i].nodes != NULL;
  if (nodes_ok) {
    char *json = run_report_json(&s, recs, &tm);
    FUZZ_CHECK(json != NULL);
    fuzz_check_json("run_report_json", json, strlen(json));
    free(json);
  }
  for (int file = 0; file < 2; file++) {
    char *json = run_report_stopped_json(ext, file, &s);
    FUZZ_CHECK(json != NULL);
    fuzz_check_json("run_report_stopped_json", json, strlen(json));
    free(json);
  }
  for (int64_t i = 0; i < nb; i++)
    dbuf_nodes_destroy(bs[i].nodes);
  free(bs);
}

/* Every JSON writer on plan p; the report's only for valid layouts, as
 * the run validates first. */
static void
write_all(const dbuf_plan_t *p, const char *ext)
{
  char *text = NULL;
  size_t len = 0;
  text_t streamed = {NULL, 0};
  int valid = 1;
  for (int64_t i = 0; i < dbuf_plan_nbuffers(p); i++) {
    dbuf_plan_buffer_t b;
    FUZZ_CHECK(dbuf_plan_buffer(p, i, &b) == 0);
    valid &= dbuf_layout_validate(b.layout, NULL, NULL, NULL, NULL) == 0;
  }
  FUZZ_CHECK(dbuf_plan_to_json(p, 0, &text, &len) == 0);
  fuzz_check_json("dbuf_plan_to_json", text, len);
  free(text);
  if (!valid)
    return;
  FUZZ_CHECK(dbuf_plan_to_json(p, DBUF_JSON_PIECES, &text, &len) == 0);
  fuzz_check_json("dbuf_plan_to_json", text, len);
  FUZZ_CHECK(dbuf_plan_write_json(p, 0, collect, &streamed) == 0);
  fuzz_check_json("dbuf_plan_write_json", streamed.p, streamed.len);
  free(streamed.p);
  free(text);
  for (int64_t i = 0; i < dbuf_plan_nbuffers(p); i++) {
    dbuf_plan_buffer_t b;
    FUZZ_CHECK(dbuf_plan_buffer(p, i, &b) == 0);
    if (dbuf_layout_ntensors(b.layout) == 0)
      continue;
    for (unsigned flags = 0; flags <= DBUF_JSON_PIECES; flags += DBUF_JSON_PIECES) {
      FUZZ_CHECK(dbuf_layout_to_json(b.layout, flags, &text, &len) == 0);
      fuzz_check_json("dbuf_layout_to_json", text, len);
      free(text);
    }
  }
  write_reports(p, ext);
}

/* A shape list planned as `plan` does: one buffer per dtype, then per
 * layer unit and dtype. */
static void
plan_tensors(const dbuf_tensors_t *t, const char *ext)
{
  dbuf_layout_params_t lp;
  dbuf_units_t *u = NULL;
  dbuf_layout_params_init(&lp);
  lp.nranks = 4;
  for (int k = 0; k < 2; k++) {
    dbuf_plan_t *p = NULL;
    if (k == 1)
      FUZZ_CHECK(dbuf_units_layer(t, &u, NULL) == 0);
    int rc = dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, NULL);
    FUZZ_CHECK(rc == 0 || rc == DBUF_EOVERFLOW);
    if (rc == 0)
      write_all(p, ext);
    dbuf_plan_destroy(p);
  }
  dbuf_units_destroy(u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const uint8_t *nl = memchr(data, '\n', size);
  if (nl == NULL)
    return -1; /* no body */
  size_t elen = (size_t)(nl - data), blen = size - elen - 1;
  const char *body = (const char *)nl + 1;
  char *ext = malloc(elen + 1);
  dbuf_diag_t d;
  FUZZ_CHECK(ext != NULL);
  memcpy(ext, data, elen);
  ext[elen] = '\0'; /* a NUL inside ends the text, as in C */
  size_t i = 0;
  while (i < blen && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
    i++;
  dbuf_diag_clear(&d);
  dbuf_plan_t *p = NULL;
  dbuf_tensors_t *t = NULL;
  int rc = i < blen && body[i] == '{' ? dbuf_plan_from_json("fuzz.json", body, blen, &p, &d)
                                      : dbuf_shapes_parse("fuzz.shapes", body, blen, &t, &d);
  if (rc != 0)
    FUZZ_REFUSED(rc, p != NULL ? (void *)p : (void *)t, d);
  else if (p != NULL && dbuf_plan_nranks(p) <= MAX_RANKS)
    write_all(p, ext);
  else if (t != NULL && dbuf_tensors_count(t) <= MAX_TENSORS)
    plan_tensors(t, ext);
  dbuf_plan_destroy(p);
  dbuf_tensors_destroy(t);
  free(ext);
  return 0;
}
