/*
 * dbuf-shard fuzz harnesses: what they share.
 *
 * Each harness feeds the fuzzer's bytes to one parser through the library
 * API, and when the parser accepts them, drives the result through what the
 * command does next (validation, queries, reports, the wire and JSON round
 * trips), checking invariants that must hold for ANY accepted input.  A
 * broken invariant aborts, so libFuzzer records the input as a finding.
 */
#ifndef DBUF_FUZZ_COMMON_H
#define DBUF_FUZZ_COMMON_H

#include "dbuf/dbuf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The libFuzzer entry point (declared here for -Wmissing-prototypes). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort with the failed condition: libFuzzer keeps the input as a crash. */
#define FUZZ_CHECK(cond)                                                       \
  ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond))

void fuzz_fail(const char *file, int line, const char *what)
    __attribute__((noreturn));

/* A parser refused its input: the result was not written and the diagnostic
 * carries the returned code and one line of text. */
#define FUZZ_REFUSED(rc, out, d)                                               \
  FUZZ_CHECK((out) == NULL && (d).code == (rc) && (d).msg[0] != '\0' &&        \
             strchr((d).msg, '\n') == NULL)

/*
 * A private directory for the harness's files, made once per process under
 * $TMPDIR (or /tmp) and removed at exit.  Parsers that only read files
 * (owners lists, safetensors) get their input written there.
 */
const char *fuzz_dir(void);

/* Write data to fuzz_dir()/name, replacing it; returns the full path
 * (a static buffer, valid until the next call). */
const char *fuzz_write(const char *name, const void *data, size_t size);

/*
 * The bytes [text, text + len) are one JSON document as a strict reader
 * takes it (jansson: UTF-8 checked, no raw control characters in strings);
 * otherwise abort, naming what (the writer) and jansson's reason.
 */
void fuzz_check_json(const char *what, const char *text, size_t len);

/*
 * Validate a layout (every invariant of its kind, each violation message
 * checked to be one line); if it is valid, run what a rank does with it:
 * statistics, rank and tensor pieces, owner and tensor queries, the pattern
 * fill and verify on a window of each rank's segment, the node report, and
 * the wire and JSON round trips, which must give back the same layout.
 * Reports are written in every format for small layouts, valid or not.
 * Returns 1 when the layout is valid.
 */
int fuzz_layout(const dbuf_layout_t *l);

/*
 * Build a layout of every kind from a tensor list (padded, unpadded,
 * BlockAtomic, TensorAtomic with planned owners) and check that each layout
 * the builder accepts is valid.
 */
void fuzz_tensors(const dbuf_tensors_t *t);

#endif /* DBUF_FUZZ_COMMON_H */
