/*
 * A program that only plans: linked against libdbuf alone (no libdbuf-mpi),
 * it builds and validates the seed document's padded layout of five tensors
 * over five ranks, then checks its own memory map: neither an MPI library
 * (libmpi, Open MPI's libopen-pal / libopen-rte, PMIx) nor hwloc may be
 * loaded.  Prints "size 60 chunk 12 valid" and "no MPI, no hwloc"; exit 1 on
 * any failure.  Run by tests/check-lib-deps.sh.
 */
#include "dbuf/dbuf.h"

#include <stdio.h>
#include <string.h>

/* 1 when a line of /proc/self/maps names one of the forbidden libraries. */
static int
forbidden_loaded(void)
{
  static const char *const names[] = {"/libmpi", "/libopen-pal", "/libopen-rte",
                                      "/libpmix", "/libhwloc"};
  enum { NNAMES = sizeof names / sizeof names[0] };
  int seen[NNAMES] = {0};
  char line[4096];
  int found = 0;
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) {
    perror("plan_only: /proc/self/maps");
    return 1;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    for (size_t i = 0; i < NNAMES; i++) {
      const char *path = strchr(line, '/');
      if (!seen[i] && path != NULL && strstr(path, names[i]) != NULL) {
        fprintf(stderr, "plan_only: loaded: %s", path); /* once per library */
        seen[i] = 1;
        found = 1;
      }
    }
  }
  fclose(f);
  return found;
}

int
main(void)
{
  static const int64_t shapes[5][2] = {{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}};
  dbuf_tensors_t *t = NULL;
  dbuf_layout_t *l = NULL;
  dbuf_layout_params_t p;
  dbuf_diag_t diag;
  int rc = 1;

  dbuf_diag_clear(&diag);
  if (dbuf_tensors_create(&t) != 0)
    goto cleanup;
  for (int i = 0; i < 5; i++) {
    char name[8];
    snprintf(name, sizeof name, "P%d", i);
    if (dbuf_tensors_add(t, name, 2, shapes[i], &diag) != 0)
      goto cleanup;
  }
  dbuf_layout_params_init(&p);
  p.kind = DBUF_LAYOUT_PADDED;
  p.nranks = 5;
  if (dbuf_layout_build(t, &p, &l, &diag) != 0 ||
      dbuf_layout_validate(l, NULL, NULL, NULL, &diag) != 0)
    goto cleanup;
  printf("size %lld chunk %lld valid\n", (long long)dbuf_layout_size(l),
         (long long)dbuf_layout_chunk_size(l));
  if (forbidden_loaded())
    goto cleanup;
  printf("no MPI, no hwloc\n");
  rc = 0;
cleanup:
  if (rc != 0 && diag.msg[0] != '\0')
    fprintf(stderr, "plan_only: %s\n", diag.msg);
  dbuf_layout_destroy(l);
  dbuf_tensors_destroy(t);
  return rc;
}
