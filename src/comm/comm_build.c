/*
 * Agreement on the build: every rank must run the same library, message
 * formats and program.  Ranks of two builds must be able to tell each other
 * apart before anything else they exchange, whose shape a build may change
 * (argument vectors, message lengths): so this exchange never changes.
 * Every build makes the same calls here with the same counts -- one
 * broadcast of rank 0's record of RECORD_BYTES, one reduction of two ints,
 * and, when a record differs, one broadcast of that rank's record.
 */
#include "comm_internal.h"
#include "core_internal.h"

#include "dbuf/version.h"
#include "dbuf/wire.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The record: the version string, NUL-padded to DBUF_COMM_BUILD_VERSION_LEN
 * bytes, then wire, plan_wire, schema and a zero, each 4 bytes
 * little-endian.  Frozen, as the calls are. */
#define RECORD_BYTES (DBUF_COMM_BUILD_VERSION_LEN + 16)
_Static_assert(DBUF_COMM_BUILD_VERSION_LEN == 64, "the record's layout is frozen");

static void
put_u32(unsigned char *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> 8 * i);
}

static uint32_t
get_u32(const unsigned char *p)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << 8 * i;
  return v;
}

static void
encode(const dbuf_comm_build_t *b, unsigned char *rec)
{
  memset(rec, 0, RECORD_BYTES);
  memcpy(rec, b->version, strnlen(b->version, DBUF_COMM_BUILD_VERSION_LEN - 1));
  unsigned char *p = rec + DBUF_COMM_BUILD_VERSION_LEN;
  put_u32(p, (uint32_t)b->wire);
  put_u32(p + 4, (uint32_t)b->plan_wire);
  put_u32(p + 8, b->schema);
}

/* A record as people read it: "0.9.0 (wire 2, plan 2, options 5c1e0a3b)". */
static void
describe(const unsigned char *rec, const char *schema_name, char *buf, size_t len)
{
  const unsigned char *p = rec + DBUF_COMM_BUILD_VERSION_LEN;
  snprintf(buf, len, "%.*s (wire %" PRId32 ", plan %" PRId32 ", %s %08" PRIx32 ")",
           (int)strnlen((const char *)rec, DBUF_COMM_BUILD_VERSION_LEN - 1), (const char *)rec,
           (int32_t)get_u32(p), (int32_t)get_u32(p + 4), schema_name, get_u32(p + 8));
}

int
dbuf_comm_build_init(dbuf_comm_build_t *b)
{
  if (b == NULL)
    return DBUF_EINVAL;
  memset(b, 0, sizeof *b);
  snprintf(b->version, sizeof b->version, "%s", dbuf_version_string());
  b->wire = DBUF_WIRE_VERSION;
  b->plan_wire = DBUF_WIRE_PLAN_VERSION;
  return 0;
}

int
dbuf_comm_check_build(dbuf_comm_t *ctx, const dbuf_comm_build_t *mine, const char *schema_name,
                      dbuf_diag_t *diag)
{
  if (ctx == NULL)
    return DBUF_EINVAL;
  unsigned char root[RECORD_BYTES], rec[RECORD_BYTES];
  memset(rec, 0, sizeof rec);
  if (mine != NULL)
    encode(mine, rec);
  memcpy(root, rec, sizeof root);
  /* [0]: the lowest rank whose record differs from rank 0's; [1]: the
   * lowest rank without a record. */
  int low[2];
  if (MPI_Bcast(root, RECORD_BYTES, MPI_BYTE, 0, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  low[0] = memcmp(root, rec, sizeof rec) != 0 ? ctx->rank : INT_MAX;
  low[1] = mine == NULL ? ctx->rank : INT_MAX;
  if (MPI_Allreduce(MPI_IN_PLACE, low, 2, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  if (low[1] != INT_MAX)
    return dbuf__diag(diag, DBUF_EINVAL, "rank %d: no build to compare", low[1]);
  if (low[0] == INT_MAX)
    return 0;
  if (MPI_Bcast(rec, RECORD_BYTES, MPI_BYTE, low[0], ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  char a[DBUF_COMM_BUILD_VERSION_LEN + 64], b[sizeof a];
  const char *what = schema_name != NULL ? schema_name : "schema";
  describe(root, what, a, sizeof a);
  describe(rec, what, b, sizeof b);
  return dbuf__diag(diag, DBUF_EMISMATCH,
                    "the ranks run different builds: rank 0 has %s, rank %d has %s", a, low[0], b);
}
