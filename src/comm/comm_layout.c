/* Broadcasting the layout, comparing inputs, and finding the nodes. */
#include "comm_internal.h"
#include "core_internal.h"

#include "dbuf/wire.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Agree on a local code without a message (used where the message follows). */
static int
agree_rc(dbuf_comm_t *ctx, int local_rc)
{
  int g;
  int rc = dbuf_comm_agree(ctx, local_rc, &g);
  return rc != 0 ? rc : g;
}

/* What rank 0 sends: the message of obj, streamed (dbuf__wire_send()). */
typedef int (*send_fn)(const void *obj, const dbuf__wire_sink_t *sink, uint64_t *sum,
                       int note, dbuf_diag_t *diag);

/* A receiver's decoder fed as the windows arrive (dbuf__wire_rx_t): made
 * once the length is known, fed the whole buffer and its bytes so far. */
typedef struct {
  int (*create)(int64_t total, dbuf__wire_rx_t **rx);
  void (*feed)(dbuf__wire_rx_t *rx, const void *msg, int64_t have);
} rx_fn;

/* The windows of a message (MPI_Bcast counts must match on every rank):
 * at most 1 MiB, which stays in cache, and at most the context's chunk. */
static int64_t
window_of(const dbuf_comm_t *ctx)
{
  const int64_t most = (int64_t)1 << 20;
  return ctx->chunk < most ? ctx->chunk : most;
}

/* The ranks' agreement on a step of the len-byte message (mine: this
 * rank's code): 0, or the code with diag "cannot DOING the LEN-byte WHAT". */
static int
agree_on(dbuf_comm_t *ctx, int mine, const char *doing, int64_t len, const char *what,
         dbuf_diag_t *diag)
{
  int rc = agree_rc(ctx, mine);
  if (rc != 0 && diag != NULL) {
    diag->code = rc;
    snprintf(diag->msg, sizeof diag->msg, "cannot %s the %" PRId64 "-byte %s: %s", doing, len,
             what, dbuf_strerror(rc));
  }
  return rc;
}

/* Rank 0's end of the stream: the header once the length is known, then
 * every window as written (and into copy, when rank 0 keeps one). */
typedef struct {
  dbuf_comm_t *ctx;
  const char *what;
  dbuf_diag_t *diag; /* where a receiver's failure goes */
  int keep;          /* rank 0 keeps a copy of the message */
  uint8_t *copy;
  int64_t len, at; /* the message's bytes; those in copy so far */
  int began;       /* the header went out */
  int ready;       /* every rank has room: the windows follow */
  int rc;          /* the first window that failed */
} root_stream_t;

static int
root_begin(void *arg, int64_t total)
{
  root_stream_t *s = arg;
  if (s->keep && (s->copy = dbuf__mallocn(total, 1)) == NULL)
    return DBUF_ENOMEM; /* before the header: rank 0's error, sent as one */
  s->began = 1;
  s->len = total;
  int64_t hdr[2] = {0, total};
  if (MPI_Bcast(hdr, 2, MPI_INT64_T, 0, s->ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  /* every rank has room for it (the receivers allocated it) */
  int rc = agree_on(s->ctx, 0, "receive", total, s->what, s->diag);
  s->ready = rc == 0;
  return rc;
}

/* Every window goes out, after a failure too, so that every rank makes
 * the same calls; the failure is agreed after the last one. */
static int
root_bytes(void *arg, const void *p, int64_t n)
{
  root_stream_t *s = arg;
  int count = 0;
  int rc = dbuf_comm_count(n, &count);
  if (rc == 0 && MPI_Bcast((void *)p, count, MPI_BYTE, 0, s->ctx->comm) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  if (s->rc == 0)
    s->rc = rc;
  if (s->copy != NULL) {
    memcpy(s->copy + s->at, p, (size_t)n);
    s->at += n;
  }
  return 0;
}

/*
 * The message of rank 0 (root_rc 0: obj sent as send() writes it, window
 * by window, without the whole message in its memory unless keep) or its
 * error, to every rank.  On 0 every rank holds *sum, the message's
 * trailer, and every other rank (rank 0 too when keep) *msg (malloc'd)
 * and *len; otherwise every rank returns the same code with diag filled.
 */
static int
bcast_message(dbuf_comm_t *ctx, int root_rc, const char *root_msg, const void *obj,
              const char *what, send_fn send, const rx_fn *recv, int keep, int note,
              int out_ok, int64_t nranks_expected, void **msg, int64_t *len, uint64_t *sum,
              dbuf__wire_rx_t **rx, dbuf_diag_t *diag)
{
  void *buf = NULL;
  int64_t hdr[2] = {0, 0}; /* rank 0's code; then message or payload bytes */
  dbuf_diag_t local;
  int rc = 0;

  if (ctx == NULL)
    return DBUF_EINVAL;
  dbuf_diag_clear(&local);
  int64_t global[2] = {nranks_expected, ctx->chunk};
  rc = dbuf__comm_check_args(ctx, out_ok && msg != NULL && nranks_expected >= 0, 2, global,
                             (const char *const[]){"nranks_expected", "chunk size"}, local.msg,
                             sizeof local.msg);
  if (rc != 0) {
    if (diag != NULL) {
      diag->code = rc;
      memcpy(diag->msg, local.msg, sizeof diag->msg);
    }
    return rc;
  }
  *msg = NULL;
  if (ctx->rank == 0) {
    if (root_rc == 0 && obj == NULL) {
      root_rc = DBUF_EINVAL;
      root_msg = "nothing to broadcast";
    }
    if (root_rc == 0) {
      root_stream_t s = {.ctx = ctx, .what = what, .diag = diag, .keep = keep};
      const dbuf__wire_sink_t sink = {root_begin, root_bytes, &s, window_of(ctx)};
      rc = send(obj, &sink, sum, note, &local);
      if (s.ready && (rc = agree_on(ctx, s.rc, "broadcast", s.len, what, diag)) == 0) {
        *msg = s.copy;
        *len = s.len;
        return 0;
      }
      free(s.copy);
      if (s.began) /* failed with every rank */
        return rc;
      root_rc = rc;
      root_msg = local.msg;
    }
    if (root_rc > 0) /* not an error code: keep the promise of a negative one */
      root_rc = DBUF_EINVAL;
    hdr[0] = root_rc;
    hdr[1] = root_msg ? (int64_t)strnlen(root_msg, DBUF_DIAG_LEN - 1) : 0;
  }
  /* Everyone learns what follows: a failure message or the bytes. */
  if (MPI_Bcast(hdr, 2, MPI_INT64_T, 0, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  if (hdr[0] != 0) {
    char m[DBUF_DIAG_LEN];
    memset(m, 0, sizeof m);
    if (hdr[1] < 0 || hdr[1] >= DBUF_DIAG_LEN) /* rank 0 never sends that */
      return DBUF_EMPI;
    if (ctx->rank == 0 && hdr[1] > 0)
      memcpy(m, root_msg, (size_t)hdr[1]);
    if (MPI_Bcast(m, (int)hdr[1], MPI_CHAR, 0, ctx->comm) != MPI_SUCCESS)
      return DBUF_EMPI;
    if (diag != NULL) {
      diag->code = (int)hdr[0];
      snprintf(diag->msg, sizeof diag->msg, "%s", m[0] ? m : dbuf_strerror((int)hdr[0]));
    }
    return (int)hdr[0];
  }
  /* A large message comes in huge pages (dbuf__mallocn): 4 KiB pages
   * would take a fault each on first touch, as long as the copy itself.
   * Never enter the windows unless every rank has its buffer. */
  if (hdr[1] < 8 || (buf = dbuf__mallocn(hdr[1], 1)) == NULL) /* 8: the trailer */
    rc = hdr[1] < 8 ? DBUF_EFORMAT : DBUF_ENOMEM;
  if ((rc = agree_on(ctx, rc, "receive", hdr[1], what, diag)) != 0) {
    free(buf);
    return rc;
  }
  /* Every window, after a failure too (as rank 0 sends them all), each
   * decoded as far as it goes while rank 0 writes the next (no decoder:
   * decoded once all are in). */
  const int64_t win = window_of(ctx);
  if (recv != NULL && rx != NULL && recv->create(hdr[1], rx) != 0)
    *rx = NULL;
  for (int64_t done = 0; done < hdr[1]; done += win) {
    int64_t n = hdr[1] - done < win ? hdr[1] - done : win;
    if (MPI_Bcast((char *)buf + done, (int)n, MPI_BYTE, 0, ctx->comm) != MPI_SUCCESS && rc == 0)
      rc = DBUF_EMPI;
    if (rc == 0 && rx != NULL && *rx != NULL)
      recv->feed(*rx, buf, done + n);
  }
  if ((rc = agree_on(ctx, rc, "broadcast", hdr[1], what, diag)) != 0) {
    free(buf);
    return rc;
  }
  *msg = buf;
  *len = hdr[1];
  *sum = 0;
  for (int i = 0; i < 8; i++)
    *sum |= (uint64_t)((const unsigned char *)buf)[hdr[1] - 8 + i] << (8 * i);
  return 0;
}

/* A layout's invariants and rank count, on a rank that has "received" it
 * or (rank 0 keeping its own) "sent" it; 0 or the code, msg filled. */
static int
check_got(const dbuf_layout_t *l, const char *how, const char *what, int nranks_expected,
          dbuf_diag_t *local)
{
  dbuf_diag_t v;
  dbuf_diag_clear(&v);
  if (dbuf_layout_validate(l, NULL, NULL, NULL, &v) != 0) {
    snprintf(local->msg, sizeof local->msg, "%s %s: %.480s", how, what, v.msg);
    return DBUF_ELAYOUT;
  }
  if (nranks_expected > 0 && dbuf_layout_nranks(l) != nranks_expected) {
    snprintf(local->msg, sizeof local->msg, "%s %s has %d segments, expected %d", how, what,
             dbuf_layout_nranks(l), nranks_expected);
    return DBUF_ENRANKS;
  }
  return 0;
}

static int
send_layout(const void *obj, const dbuf__wire_sink_t *sink, uint64_t *sum, int note,
            dbuf_diag_t *diag)
{
  (void)note; /* a layout broadcast never hands rank 0's layout over */
  return dbuf__wire_send(obj, sink, sum, diag);
}

static int
send_plan(const void *obj, const dbuf__wire_sink_t *sink, uint64_t *sum, int note,
          dbuf_diag_t *diag)
{
  return dbuf__wire_plan_send(obj, sink, sum, note, diag);
}

/* A message decoded (decode_fn), then, the message freed, the decoded
 * object (or rank 0's own) re-validated (check_fn): 0 or the code, msg
 * filled. */
typedef int (*decode_fn)(const void *buf, int64_t len, dbuf__wire_rx_t *rx, void **obj,
                         dbuf_diag_t *local);
typedef int (*check_fn)(const void *obj, int nranks_expected, const char *how,
                        dbuf_diag_t *local);

static int
decode_layout(const void *buf, int64_t len, dbuf__wire_rx_t *rx, void **obj,
              dbuf_diag_t *local)
{
  (void)rx; /* a layout is decoded once it is all in */
  dbuf_layout_t *l = NULL;
  int rc = dbuf_wire_decode(buf, len, &l, local);
  *obj = l;
  return rc;
}

static int
check_layout(const void *obj, int nranks_expected, const char *how, dbuf_diag_t *local)
{
  return check_got(obj, how, "layout", nranks_expected, local);
}

static int
decode_plan(const void *buf, int64_t len, dbuf__wire_rx_t *rx, void **obj,
            dbuf_diag_t *local)
{
  dbuf_plan_t *p = NULL;
  int rc = dbuf__wire_rx_plan_decode(rx, buf, len, &p, local); /* rx NULL: from scratch */
  *obj = p;
  return rc;
}

static int
check_plan(const void *obj, int nranks_expected, const char *how, dbuf_diag_t *local)
{
  const dbuf_plan_t *p = obj;
  int rc = 0;
  if (dbuf_plan_nbuffers(p) < 1) {
    rc = DBUF_EFORMAT;
    snprintf(local->msg, sizeof local->msg, "%s plan has no buffer", how);
  }
  for (int64_t b = 0; rc == 0 && b < dbuf_plan_nbuffers(p); b++) {
    dbuf_plan_buffer_t pb;
    char what[128];
    dbuf_plan_buffer(p, b, &pb);
    snprintf(what, sizeof what, "buffer %.80s/%s", pb.unit, dbuf_dtype_name(pb.dtype));
    rc = check_got(pb.layout, how, what, nranks_expected, local);
  }
  return rc;
}

static const rx_fn plan_rx = {dbuf__wire_rx_create, dbuf__wire_rx_feed};

static void
destroy_layout(void *obj)
{
  dbuf_layout_destroy(obj);
}

static void
destroy_plan(void *obj)
{
  dbuf_plan_destroy(obj);
}

/* How rank 0 ends a broadcast: with a decoded copy of its message (the
 * public broadcasts: every rank a new object), or with obj itself. */
typedef struct {
  send_fn send;
  int copy; /* 0: rank 0 keeps obj (and notes its digests) */
  const rx_fn *recv; /* NULL: decode once the message is all in */
  int announce;      /* the announcement first (dbuf_comm_announce_plan()) */
  decode_fn decode;
  check_fn check;
  void (*destroy)(void *);
} codec_t;

/* The announcement of a plan broadcast (dbuf_comm_announce_plan()), after
 * its tag: the list's tensors (0: nothing announced), name bytes (NULs
 * included), distinct shapes and their dims, and the layout kind. */
#define ANNOUNCE_TAG INT64_C(0x314e4e4146554244) /* "DBUFANN1" */
enum { ANNOUNCE_WORDS = 5 };

/* Rank 0: what announces t's plan. */
static void
announce_of(const dbuf_tensors_t *t, dbuf_layout_kind_t kind, int64_t a[ANNOUNCE_WORDS])
{
  a[0] = dbuf_tensors_count(t);
  a[1] = dbuf__tensors_name_bytes(t);
  a[2] = dbuf__tensors_nshapes(t);
  a[3] = dbuf__tensors_ndims(t);
  a[4] = kind >= DBUF_LAYOUT_PADDED && kind <= DBUF_LAYOUT_COMPACT ? (int64_t)kind : 0;
}

/* The first step of a plan broadcast: rank 0's announcement reaches every
 * rank (an empty one unless rank 0 announced the plan already), waited for
 * without holding a core while rank 0 plans; every other rank then faults
 * in, while rank 0 still plans, the memory its decode will take (warm
 * blocks, given back by bcast_object() after the decode).  A hint: numbers
 * no plan has, or no memory, make nothing.  0 or the agreed code. */
static int
announce_step(dbuf_comm_t *ctx)
{
  int64_t a[ANNOUNCE_WORDS];
  if (ctx->rank == 0 && ctx->announced) {
    ctx->announced = 0;
    return 0;
  }
  memset(a, 0, sizeof a);
  int rc = dbuf__comm_root_values(ctx, ANNOUNCE_TAG, ANNOUNCE_WORDS, a);
  if (rc == 0 && ctx->rank != 0 && a[4] >= 0 && a[4] <= DBUF_LAYOUT_COMPACT) /* an int */
    (void)dbuf__wire_rx_warm(a[0], a[1], a[2], a[3], (int)a[4]); /* none held on failure */
  return rc;
}

int
dbuf_comm_announce_plan(dbuf_comm_t *ctx, const dbuf_tensors_t *tensors,
                        dbuf_layout_kind_t kind)
{
  int64_t a[ANNOUNCE_WORDS];
  if (ctx == NULL || tensors == NULL || ctx->rank != 0 || ctx->announced)
    return DBUF_EINVAL;
  announce_of(tensors, kind, a);
  int rc = dbuf__comm_root_values(ctx, ANNOUNCE_TAG, ANNOUNCE_WORDS, a);
  ctx->announced = rc == 0; /* failed: the broadcast makes the step itself */
  return rc;
}

/* Broadcast obj's message; every rank that holds the message decodes it,
 * every rank re-validates what it holds (rank 0 obj when it keeps it), and
 * the ranks agree on the outcome.  The digest is the message's trailer. */
static int
bcast_object(dbuf_comm_t *ctx, int root_rc, const char *root_msg, const void *obj,
             const char *what, const codec_t *c, int nranks_expected, void **out,
             uint64_t *digest, dbuf_diag_t *diag)
{
  void *buf = NULL, *got = NULL;
  int64_t len = 0;
  uint64_t sum = 0;
  dbuf_diag_t local;
  const int own = ctx != NULL && ctx->rank == 0 && !c->copy;
  dbuf__wire_rx_t *rx = NULL;
  if (ctx != NULL && !c->announce)
    ctx->announced = 0; /* a caller's slip: the others' step was this call's */
  int rc = ctx != NULL && c->announce ? announce_step(ctx) : 0;
  if (rc == 0)
    rc = bcast_message(ctx, root_rc, root_msg, obj, what, c->send, c->recv, c->copy, !c->copy,
                       out != NULL, nranks_expected, &buf, &len, &sum, &rx, diag);
  if (rc != 0) {
    dbuf__wire_rx_destroy(rx);
    dbuf__warm_release();
    return rc;
  }
  dbuf_diag_clear(&local);
  if (own)
    got = (void *)obj; /* the caller's own, handed back */
  else
    rc = c->decode(buf, len, rx, &got, &local);
  dbuf__warm_release(); /* what the decode did not take */
  dbuf__wire_rx_destroy(rx);
  free(buf); /* decoded: the checks run without it */
  if (rc == 0)
    rc = c->check(got, nranks_expected, own ? "sent" : "received", &local);
  local.code = rc;
  rc = dbuf_comm_agree_diag(ctx, rc, &local);
  if (rc != 0) {
    if (got != obj)
      c->destroy(got);
    if (diag != NULL)
      *diag = local;
    return rc;
  }
  *out = got;
  if (digest != NULL)
    *digest = sum;
  return 0;
}

int
dbuf_comm_bcast_layout(dbuf_comm_t *ctx, int root_rc, const char *root_msg,
                       const dbuf_layout_t *layout, int nranks_expected,
                       dbuf_layout_t **out, uint64_t *digest, dbuf_diag_t *diag)
{
  const codec_t c = {send_layout, 1, NULL, 0, decode_layout, check_layout, destroy_layout};
  return bcast_object(ctx, root_rc, root_msg, layout, "layout", &c, nranks_expected,
                      (void **)out, digest, diag);
}

int
dbuf_comm_bcast_plan(dbuf_comm_t *ctx, int root_rc, const char *root_msg,
                     const dbuf_plan_t *plan, int nranks_expected, dbuf_plan_t **out,
                     uint64_t *digest, dbuf_diag_t *diag)
{
  const codec_t c = {send_plan, 1, &plan_rx, 1, decode_plan, check_plan, destroy_plan};
  return bcast_object(ctx, root_rc, root_msg, plan, "plan", &c, nranks_expected, (void **)out,
                      digest, diag);
}

int
dbuf_comm_share_plan(dbuf_comm_t *ctx, int root_rc, const char *root_msg, dbuf_plan_t **plan,
                     int nranks_expected, uint64_t *digest, dbuf_diag_t *diag)
{
  const codec_t c = {send_plan, 0, &plan_rx, 1, decode_plan, check_plan, destroy_plan};
  void *got = NULL;
  if (ctx == NULL)
    return DBUF_EINVAL;
  int rc = bcast_object(ctx, root_rc, root_msg, ctx->rank == 0 && plan != NULL ? *plan : NULL,
                        "plan", &c, nranks_expected, plan != NULL ? &got : NULL, digest, diag);
  if (rc == 0)
    *plan = got; /* rank 0: its own again */
  else if (ctx->rank != 0 && plan != NULL)
    *plan = NULL;
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                     */

void
dbuf_comm_nodemap_free(dbuf_comm_nodemap_t *map)
{
  if (map == NULL)
    return;
  free(map->node_of_rank);
  free(map->host);
  free(map->node_name);
  map->node_of_rank = NULL;
  map->host = NULL;
  map->node_name = NULL;
}

int
dbuf_comm_nodes(dbuf_comm_t *ctx, dbuf_comm_nodemap_t *map, dbuf_diag_t *diag)
{
  MPI_Comm shm = MPI_COMM_NULL;
  char name[DBUF_HOST_LEN];
  int len = 0, leader = 0, rc = 0;
  int *leaders = NULL;

  if (ctx == NULL)
    return DBUF_EINVAL;
  /* A NULL map on one rank fails every rank before the split. */
  if ((rc = dbuf__comm_check_args(ctx, map != NULL, 0, NULL, NULL, NULL, 0)) != 0) {
    if (diag != NULL) {
      diag->code = rc;
      snprintf(diag->msg, sizeof diag->msg, "node discovery: %s", dbuf_strerror(rc));
    }
    return rc;
  }
  memset(map, 0, sizeof *map);
  memset(name, 0, sizeof name);
  /* The key keeps the ranks of a node in global order: local 0 is the lowest. */
  if (MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL,
                          &shm) != MPI_SUCCESS)
    return DBUF_EMPI;
  MPI_Comm_rank(shm, &map->local_index);
  MPI_Comm_size(shm, &map->local_size);
  leader = ctx->rank;
  if (MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, shm) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  MPI_Comm_free(&shm);
  if (MPI_Get_processor_name(name, &len) != MPI_SUCCESS || len < 1)
    snprintf(name, sizeof name, "unknown");
  name[sizeof name - 1] = '\0';

  map->nranks = ctx->size;
  map->node_of_rank = calloc((size_t)ctx->size, sizeof *map->node_of_rank);
  map->host = calloc((size_t)ctx->size, sizeof *map->host);
  leaders = calloc((size_t)ctx->size, sizeof *leaders);
  if (rc == 0 && (!map->node_of_rank || !map->host || !leaders))
    rc = DBUF_ENOMEM;
  if ((rc = agree_rc(ctx, rc)) != 0)
    goto fail;
  if (MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, ctx->comm) != MPI_SUCCESS ||
      MPI_Allgather(name, DBUF_HOST_LEN, MPI_CHAR, map->host, DBUF_HOST_LEN, MPI_CHAR,
                    ctx->comm) != MPI_SUCCESS) {
    rc = DBUF_EMPI;
    goto fail;
  }
  /* Nodes numbered in the order of their lowest rank: O(nranks). */
  int *index_of_leader = map->node_of_rank; /* reused as scratch, then filled */
  for (int r = 0; r < ctx->size; r++)
    index_of_leader[r] = -1;
  int nn = 0;
  for (int r = 0; r < ctx->size; r++)
    if (leaders[r] == r)
      index_of_leader[r] = nn++;
  for (int r = 0; r < ctx->size; r++)
    leaders[r] = index_of_leader[leaders[r]];
  memcpy(map->node_of_rank, leaders, (size_t)ctx->size * sizeof *leaders);
  map->nnodes = nn;
  map->node_name = calloc((size_t)nn, sizeof *map->node_name);
  rc = map->node_name ? 0 : DBUF_ENOMEM;
  if ((rc = agree_rc(ctx, rc)) != 0)
    goto fail;
  for (int r = ctx->size - 1; r >= 0; r--) {
    map->host[r][DBUF_HOST_LEN - 1] = '\0';
    map->node_name[map->node_of_rank[r]] = map->host[r];
  }
  free(leaders);
  return 0;
fail:
  free(leaders);
  dbuf_comm_nodemap_free(map);
  if (diag != NULL) {
    diag->code = rc;
    snprintf(diag->msg, sizeof diag->msg, "node discovery failed: %s", dbuf_strerror(rc));
  }
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Inputs                                                                    */

typedef struct {
  uint64_t digest;
  int64_t readable;
  char host[DBUF_HOST_LEN];
} input_rec_t;

static int
same_input(const input_rec_t *a, const input_rec_t *b)
{
  return a->readable == b->readable && (!a->readable || a->digest == b->digest);
}

int
dbuf_comm_check_inputs(dbuf_comm_t *ctx, uint64_t digest, int readable,
                       dbuf_diag_t *diag)
{
  input_rec_t mine, *all;
  int len = 0, rc = 0;
  if (ctx == NULL)
    return DBUF_EINVAL;
  memset(&mine, 0, sizeof mine);
  mine.digest = digest;
  mine.readable = readable != 0;
  if (MPI_Get_processor_name(mine.host, &len) != MPI_SUCCESS || len < 1)
    snprintf(mine.host, sizeof mine.host, "unknown");
  mine.host[sizeof mine.host - 1] = '\0';
  all = calloc((size_t)ctx->size, sizeof *all);
  if ((rc = agree_rc(ctx, all ? 0 : DBUF_ENOMEM)) != 0) {
    free(all);
    return rc;
  }
  if (MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                    ctx->comm) != MPI_SUCCESS) {
    free(all);
    return DBUF_EMPI;
  }
  /* Every rank builds the same message from the same gathered table. */
  char msg[DBUF_DIAG_LEN];
  size_t at = 0;
  int ndiff = 0;
  for (int r = 1; r < ctx->size; r++) {
    if (same_input(&all[r], &all[0]))
      continue;
    if (ndiff++ == 0)
      at = (size_t)snprintf(msg, sizeof msg, "input differs from rank 0's (%s, %s%016" PRIx64 ") on",
                            all[0].host, all[0].readable ? "digest " : "unreadable ",
                            all[0].readable ? all[0].digest : 0);
    /* One group: consecutive differing ranks on the same host seeing the same. */
    int e = r;
    while (e + 1 < ctx->size && !same_input(&all[e + 1], &all[0]) &&
           strcmp(all[e + 1].host, all[r].host) == 0 && same_input(&all[e + 1], &all[r]))
      e++;
    if (at < sizeof msg) {
      char what[64];
      if (all[r].readable)
        snprintf(what, sizeof what, "digest %016" PRIx64, all[r].digest);
      else
        snprintf(what, sizeof what, "cannot read it");
      if (e > r)
        at += (size_t)snprintf(msg + at, sizeof msg - at, "%s ranks %d-%d (%s, %s)",
                               ndiff > 1 ? "," : "", r, e, all[r].host, what);
      else
        at += (size_t)snprintf(msg + at, sizeof msg - at, "%s rank %d (%s, %s)",
                               ndiff > 1 ? "," : "", r, all[r].host, what);
    }
    r = e;
  }
  free(all);
  if (ndiff == 0)
    return 0;
  if (diag != NULL) {
    diag->code = DBUF_EMISMATCH;
    memcpy(diag->msg, msg, sizeof msg);
    diag->msg[sizeof diag->msg - 1] = '\0';
  }
  return DBUF_EMISMATCH;
}
