/*
 * Seed maker for fuzz_wire (tests/fuzz/make-corpus.sh): reads a layout JSON
 * file and writes 'W' followed by the layout's wire message.
 */
#include "dbuf/dbuf.h"

#include <stdio.h>
#include <stdlib.h>

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

  if (argc != 3) {
    fprintf(stderr, "usage: wire_seed LAYOUT.json OUT\n");
    return 2;
  }
  if (dbuf_file_read_all(argv[1], &text, &len, &d) != 0 ||
      dbuf_layout_from_json(argv[1], text, len, &l, &d) != 0 ||
      dbuf_wire_encode(l, &msg, &mlen, &d) != 0) {
    fprintf(stderr, "wire_seed: %s\n", d.msg);
    return 1;
  }
  if ((f = fopen(argv[2], "wb")) == NULL || fputc('W', f) == EOF ||
      fwrite(msg, 1, (size_t)mlen, f) != (size_t)mlen || fclose(f) != 0) {
    perror(argv[2]);
    return 1;
  }
  free(msg);
  free(text);
  dbuf_layout_destroy(l);
  return 0;
}
