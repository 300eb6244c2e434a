/*
 * Fuzz the units readers against a small fixed tensor list: the first line
 * of the input as a --units re: pattern (dbuf_units_regex, which measures a
 * pattern before regcomp; libFuzzer's time and memory limits catch one
 * whose cost slips past the measure), the rest as a units file
 * (dbuf_units_read).  Units that are accepted must give every tensor a unit
 * whose name the plan JSON and the wire carry: the plan is built, written
 * as JSON (valid for a strict reader, and read back) and encoded for the
 * wire (and decoded).
 */
#include "fuzz_common.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Names of one to four bytes a character; one longer than a unit name may
 * be, so that a capture of it is too long. */
static const char *const names[] = {"model.embed_tokens.weight",
                                    "model.layers.0.self_attn.q_proj.weight",
                                    "model.layers.0.mlp.up_proj.weight",
                                    "model.layers.1.input_layernorm.weight",
                                    "model.layers.12.mlp.down_proj.weight",
                                    "h.3.attn.c_attn.bias",
                                    "blocks.7.w",
                                    "blk.\xc3\xa9.w",
                                    "\xe5\xb1\xa4.0.\xe9\x87\x8d\xe3\x81\xbf",
                                    "emoji.\xf0\x9f\x98\x80.bias",
                                    "q\"uote\\back",
                                    "lm_head.weight"};
#define NNAMES (sizeof names / sizeof names[0])
#define LONG_NAME (DBUF_WIRE_UNIT_MAX + 40)

static dbuf_tensors_t *
tensor_list(void)
{
  static char longname[LONG_NAME + 3];
  dbuf_tensors_t *t = NULL;
  FUZZ_CHECK(dbuf_tensors_create(&t) == 0);
  for (size_t i = 0; i < NNAMES; i++) {
    int64_t dims[2] = {(int64_t)i + 1, 3};
    FUZZ_CHECK(dbuf_tensors_add(t, names[i], 2, dims, NULL) == 0);
  }
  memset(longname, 'x', LONG_NAME);
  memcpy(longname + LONG_NAME, ".w", 3);
  FUZZ_CHECK(dbuf_tensors_add(t, longname, 1, (int64_t[]){5}, NULL) == 0);
  return t;
}

/* Every tensor in a unit, every unit name one the JSON and the wire take
 * (checked here apart from the library's own check: jansson's UTF-8). */
static void
check_units(const dbuf_tensors_t *t, const dbuf_units_t *u)
{
  int64_t n = dbuf_units_count(u);
  FUZZ_CHECK(n >= 1 && n <= dbuf_tensors_count(t));
  for (int64_t i = 0; i < dbuf_tensors_count(t); i++)
    FUZZ_CHECK(dbuf_units_of(u, i) >= 0 && dbuf_units_of(u, i) < n);
  for (int64_t k = 0; k < n; k++) {
    const char *name = dbuf_units_name(u, k);
    size_t len = strlen(name);
    FUZZ_CHECK(len >= 1 && len <= DBUF_WIRE_UNIT_MAX);
    for (size_t i = 0; i < len; i++)
      FUZZ_CHECK((unsigned char)name[i] > ' ' && name[i] != 0x7f);
    json_t *s = json_string(name);
    FUZZ_CHECK(s != NULL);
    json_decref(s);
  }

  dbuf_layout_params_t lp;
  dbuf_plan_t *p = NULL, *back = NULL;
  dbuf_diag_t d;
  char *text = NULL;
  size_t len = 0;
  void *msg = NULL;
  int64_t mlen = 0;
  dbuf_layout_params_init(&lp);
  lp.nranks = 2;
  FUZZ_CHECK(dbuf_plan_build(t, u, DBUF_DTYPE_BF16, &lp, 0, &p, &d) == 0);
  FUZZ_CHECK(dbuf_plan_to_json(p, 0, &text, &len) == 0);
  fuzz_check_json("dbuf_plan_to_json", text, len);
  FUZZ_CHECK(dbuf_plan_from_json("units.json", text, len, &back, &d) == 0);
  FUZZ_CHECK(dbuf_plan_nbuffers(back) == dbuf_plan_nbuffers(p));
  dbuf_plan_destroy(back);
  back = NULL;
  FUZZ_CHECK(dbuf_wire_plan_encode(p, &msg, &mlen, &d) == 0);
  FUZZ_CHECK(dbuf_wire_plan_decode(msg, mlen, &back, &d) == 0);
  FUZZ_CHECK(dbuf_plan_nbuffers(back) == dbuf_plan_nbuffers(p));
  dbuf_plan_destroy(back);
  dbuf_free(msg);
  free(text);
  dbuf_plan_destroy(p);
}

/* What a reader returned: refused as every parser refuses, or checked. */
static void
outcome(const dbuf_tensors_t *t, int rc, dbuf_units_t *u, const dbuf_diag_t *d)
{
  if (rc != 0)
    FUZZ_REFUSED(rc, u, *d);
  else
    check_units(t, u);
  dbuf_units_destroy(u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static dbuf_tensors_t *t;
  if (t == NULL)
    t = tensor_list(); /* kept for the process: the same list every input */
  const uint8_t *nl = memchr(data, '\n', size);
  size_t plen = nl ? (size_t)(nl - data) : size;
  dbuf_units_t *u = NULL;
  dbuf_diag_t d;

  if (memchr(data, '\0', plen) == NULL) {
    char *re = malloc(plen + 1);
    FUZZ_CHECK(re != NULL);
    memcpy(re, data, plen);
    re[plen] = '\0';
    dbuf_diag_clear(&d);
    outcome(t, dbuf_units_regex(t, re, &u, &d), u, &d);
    free(re);
  }
  if (nl != NULL) {
    const char *path = fuzz_write("input", nl + 1, size - plen - 1);
    u = NULL;
    dbuf_diag_clear(&d);
    outcome(t, dbuf_units_read(t, path, &u, &d), u, &d);
  }
  return 0;
}
