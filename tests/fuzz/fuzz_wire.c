/*
 * Fuzz the wire decoder (dbuf_wire_decode) past its checksums, then
 * validate the layout and run what every rank does with it after the
 * broadcast (see fuzz_layout()).
 *
 * The first input byte picks how the message is made:
 *  'J'  the rest is a layout JSON; a layout it accepts is encoded, so the
 *       decoder sees a well-formed message carrying any values the JSON
 *       reader lets through (the path of a crafted layout broadcast by rank 0);
 *  'P'  the rest is a plan message (dbuf_wire_plan_decode), resealed the same
 *       way: magic, total length and both checksums rewritten, and so is
 *       every layout message its framing points to that has a header; every
 *       layout of a plan it accepts goes through fuzz_layout().  It is
 *       decoded a second time as a receiver does (dbuf__wire_rx_t), fed in
 *       windows of a size its last byte picks with junk past what it was
 *       given, which must give the same code and message, and a plan that
 *       encodes to the same bytes;
 *  else the rest is a message whose magic, total length and both checksums
 *       are rewritten, so that every mutation reaches the structural checks
 *       behind them instead of stopping at a checksum mismatch.
 */
#include "fuzz_common.h"

#include "core_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void
put_u64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_u64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void
decode(const uint8_t *msg, int64_t len)
{
  dbuf_layout_t *l = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_wire_decode(msg, len, &l, &d);
  if (rc != 0) {
    FUZZ_REFUSED(rc, l, d);
    return;
  }
  fuzz_layout(l);
  dbuf_layout_destroy(l);
}

static void
decode_plan(const uint8_t *data, size_t size)
{
  size_t len = size < DBUF_WIRE_PLAN_MIN_BYTES ? DBUF_WIRE_PLAN_MIN_BYTES : size;
  uint8_t *msg = calloc(len, 1);
  FUZZ_CHECK(msg != NULL);
  memcpy(msg, data, size);
  memcpy(msg, DBUF_WIRE_PLAN_MAGIC, 8);
  put_u64(msg + 16, len);
  /* The layouts the framing points to, resealed (as far as it holds). */
  for (size_t pos = DBUF_WIRE_PLAN_HEADER_BYTES; pos + 8 <= len - 8;) {
    uint64_t ul = get_u64(msg + pos), ml;
    if (ul > len || pos + 24 + ul > len - 8)
      break;
    ml = get_u64(msg + pos + 16 + ul);
    pos += 24 + ul;
    if (ml < DBUF_WIRE_MIN_BYTES || ml > len - 8 - pos)
      break;
    put_u64(msg + pos + 16, ml);
    put_u64(msg + pos + 120, XXH3_64bits(msg + pos, 120));
    put_u64(msg + pos + ml - 8, XXH3_64bits(msg + pos, ml - 8));
    pos += ml;
  }
  put_u64(msg + 56, XXH3_64bits(msg, 56));
  put_u64(msg + len - 8, XXH3_64bits(msg, len - 8));
  dbuf_plan_t *p = NULL;
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  int rc = dbuf_wire_plan_decode(msg, (int64_t)len, &p, &d);
  /* Window by window, the bytes not received yet junk. */
  int64_t win = 1 + (int64_t)msg[len - 9] * 3;
  uint8_t *got = malloc(len);
  dbuf__wire_rx_t *rx = NULL;
  FUZZ_CHECK(got != NULL && dbuf__wire_rx_create((int64_t)len, &rx) == 0);
  memset(got, 0xa5, len);
  for (int64_t have = 0; have < (int64_t)len;) {
    int64_t from = have;
    have = (int64_t)len - have < win ? (int64_t)len : have + win;
    memcpy(got + from, msg + from, (size_t)(have - from));
    dbuf__wire_rx_feed(rx, got, have);
  }
  dbuf_plan_t *q = NULL;
  dbuf_diag_t e;
  dbuf_diag_clear(&e);
  int rc2 = dbuf__wire_rx_plan_decode(rx, got, (int64_t)len, &q, &e);
  FUZZ_CHECK(rc2 == rc && strcmp(d.msg, e.msg) == 0);
  if (rc == 0) { /* the same plan: the same bytes again */
    void *a = NULL, *b = NULL;
    int64_t la = 0, lb = 0;
    FUZZ_CHECK(dbuf_wire_plan_encode(p, &a, &la, NULL) == 0 &&
               dbuf_wire_plan_encode(q, &b, &lb, NULL) == 0 && la == lb &&
               memcmp(a, b, (size_t)la) == 0);
    free(a);
    free(b);
  }
  dbuf_plan_destroy(q);
  dbuf__wire_rx_destroy(rx);
  free(got);
  free(msg);
  if (rc != 0) {
    FUZZ_REFUSED(rc, p, d);
    return;
  }
  for (int64_t b = 0; b < dbuf_plan_nbuffers(p); b++) {
    dbuf_plan_buffer_t pb;
    FUZZ_CHECK(dbuf_plan_buffer(p, b, &pb) == 0 && pb.elem_size > 0 && pb.unit[0] != '\0');
    fuzz_layout(pb.layout);
  }
  dbuf_plan_destroy(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1)
    return -1;
  if (data[0] == 'P') {
    decode_plan(data + 1, size - 1);
    return 0;
  }
  if (data[0] == 'J') {
    dbuf_layout_t *l = NULL;
    void *msg;
    int64_t len;
    if (dbuf_layout_from_json("fuzz.json", (const char *)data + 1, size - 1, &l,
                              NULL) != 0)
      return 0;
    FUZZ_CHECK(dbuf_wire_encode(l, &msg, &len, NULL) == 0);
    /* The digest (hashed as written, no message) is the message's checksum. */
    uint64_t dig = 0, sum = 1;
    FUZZ_CHECK(dbuf_wire_digest(l, &dig, NULL) == 0 && dbuf_wire_checksum(msg, len, &sum) == 0 &&
               dig == sum);
    dbuf_layout_destroy(l);
    decode(msg, len);
    free(msg);
    return 0;
  }

  size_t len = size - 1 < DBUF_WIRE_MIN_BYTES ? DBUF_WIRE_MIN_BYTES : size - 1;
  uint8_t *msg = calloc(len, 1);
  FUZZ_CHECK(msg != NULL);
  memcpy(msg, data + 1, size - 1);
  memcpy(msg, DBUF_WIRE_MAGIC, 8);
  put_u64(msg + 16, len);
  put_u64(msg + 120, XXH3_64bits(msg, 120));
  put_u64(msg + len - 8, XXH3_64bits(msg, len - 8));
  decode(msg, (int64_t)len);
  free(msg);
  return 0;
}
