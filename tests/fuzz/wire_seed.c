/*
 * Seed maker for fuzz_wire (tests/fuzz/make-corpus.sh): reads a layout JSON
 * file and writes 'W' followed by the layout's wire message, or with a third
 * argument "plan", 'P' followed by a plan message of two buffers holding it
 * (units "root" in fp32 and "layers.0" in bf16).
 */
#include "dbuf/dbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main(int argc, char **argv)
{
  char *text;
  size_t len;
  dbuf_layout_t *l;
  void *msg;
  int64_t mlen;
  dbuf_diag_t d;
  FILE *f;

  int plan = argc == 4 && strcmp(argv[3], "plan") == 0;
  dbuf_plan_t *p = NULL;
  if (argc != 3 && !plan) {
    fprintf(stderr, "usage: wire_seed LAYOUT.json OUT [plan]\n");
    return 2;
  }
  if (dbuf_file_read_all(argv[1], &text, &len, &d) != 0 ||
      dbuf_layout_from_json(argv[1], text, len, &l, &d) != 0 ||
      (!plan && dbuf_wire_encode(l, &msg, &mlen, &d) != 0)) {
    fprintf(stderr, "wire_seed: %s\n", d.msg);
    return 1;
  }
  if (plan && (dbuf_plan_create(&p) != 0 ||
               dbuf_plan_add(p, "root", DBUF_DTYPE_F32, l, NULL, &d) != 0 ||
               dbuf_layout_from_json(argv[1], text, len, &l, &d) != 0 ||
               dbuf_plan_add(p, "layers.0", DBUF_DTYPE_BF16, l, NULL, &d) != 0 ||
               dbuf_wire_plan_encode(p, &msg, &mlen, &d) != 0)) {
    fprintf(stderr, "wire_seed: %s\n", d.msg);
    return 1;
  }
  if ((f = fopen(argv[2], "wb")) == NULL || fputc(plan ? 'P' : 'W', f) == EOF ||
      fwrite(msg, 1, (size_t)mlen, f) != (size_t)mlen || fclose(f) != 0) {
    perror(argv[2]);
    return 1;
  }
  free(msg);
  free(text);
  if (plan)
    dbuf_plan_destroy(p); /* it holds both layouts */
  else
    dbuf_layout_destroy(l);
  return 0;
}
