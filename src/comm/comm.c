/* The comm context, agreement, chunked collectives and gathers. */
#include "comm_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
dbuf_comm_count(int64_t n, int *out)
{
  if (out == NULL)
    return DBUF_EINVAL;
  if (n < 0 || n > INT_MAX)
    return DBUF_EOVERFLOW;
  *out = (int)n;
  return 0;
}

int
dbuf_comm_create(MPI_Comm comm, dbuf_comm_t **out)
{
  int inited = 0, finalized = 0;
  /* Without MPI or a communicator there is nobody to agree with. */
  if (comm == MPI_COMM_NULL)
    return DBUF_EINVAL;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (!inited || finalized)
    return DBUF_EINVAL;
  /* Everyone duplicates (collective) before any local check can return, then
   * the local outcomes are agreed on the duplicate. */
  MPI_Comm dup = MPI_COMM_NULL;
  if (MPI_Comm_dup(comm, &dup) != MPI_SUCCESS)
    return DBUF_EMPI;
  dbuf_comm_t *c = out != NULL ? calloc(1, sizeof *c) : NULL;
  int rc = out == NULL ? DBUF_EINVAL : c == NULL ? DBUF_ENOMEM : 0, g = rc;
  if (MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN) != MPI_SUCCESS)
    rc = DBUF_EMPI;
  if (MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, dup) != MPI_SUCCESS)
    g = DBUF_EMPI;
  if (g != 0) {
    MPI_Comm_free(&dup);
    free(c);
    return g;
  }
  c->comm = dup;
  MPI_Comm_rank(dup, &c->rank);
  MPI_Comm_size(dup, &c->size);
  c->chunk = DBUF_COMM_CHUNK_BYTES;
  *out = c;
  return 0;
}

void
dbuf_comm_destroy(dbuf_comm_t *ctx)
{
  if (ctx == NULL)
    return;
  MPI_Comm_free(&ctx->comm);
  free(ctx);
}

int
dbuf_comm_rank(const dbuf_comm_t *ctx)
{
  return ctx ? ctx->rank : -1;
}

int
dbuf_comm_size(const dbuf_comm_t *ctx)
{
  return ctx ? ctx->size : 0;
}

MPI_Comm
dbuf_comm_mpi(const dbuf_comm_t *ctx)
{
  return ctx ? ctx->comm : MPI_COMM_NULL;
}

int
dbuf_comm_set_chunk(dbuf_comm_t *ctx, int64_t bytes)
{
  if (ctx == NULL || bytes < 1 || bytes > INT_MAX)
    return DBUF_EINVAL;
  ctx->chunk = bytes;
  return 0;
}

int
dbuf__comm_bcast_bytes(dbuf_comm_t *ctx, void *buf, int64_t len, int root)
{
  char *p = buf;
  for (int64_t done = 0; done < len;) {
    int n = 0;
    int rc = dbuf_comm_count(len - done < ctx->chunk ? len - done : ctx->chunk, &n);
    if (rc != 0)
      return rc;
    if (MPI_Bcast(p + done, n, MPI_BYTE, root, ctx->comm) != MPI_SUCCESS)
      return DBUF_EMPI;
    done += n;
  }
  return 0;
}

int
dbuf__comm_allreduce_n(dbuf_comm_t *ctx, void *buf, int64_t count, MPI_Datatype type,
                       int64_t elem_size, MPI_Op op)
{
  int64_t per = ctx->chunk / elem_size;
  if (per < 1)
    per = 1;
  for (int64_t done = 0; done < count;) {
    int n = 0;
    int rc = dbuf_comm_count(count - done < per ? count - done : per, &n);
    if (rc != 0)
      return rc;
    if (MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * elem_size, n, type, op, ctx->comm) !=
        MPI_SUCCESS)
      return DBUF_EMPI;
    done += n;
  }
  return 0;
}

int
dbuf__comm_allreduce_i64(dbuf_comm_t *ctx, int64_t *buf, int64_t count, MPI_Op op)
{
  return dbuf__comm_allreduce_n(ctx, buf, count, MPI_INT64_T, (int64_t)sizeof *buf, op);
}

int
dbuf_comm_agree(dbuf_comm_t *ctx, int local_rc, int *global_rc)
{
  if (ctx == NULL)
    return DBUF_EINVAL;
  /* A NULL global_rc on one rank is agreed in the same reduction. */
  int in[2] = {local_rc, global_rc != NULL ? 0 : DBUF_EINVAL}, out[2];
  if (MPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  if (out[1] != 0)
    return DBUF_EINVAL;
  *global_rc = out[0];
  return 0;
}

int
dbuf_comm_agree_diag(dbuf_comm_t *ctx, int local_rc, dbuf_diag_t *diag)
{
  if (ctx == NULL)
    return DBUF_EINVAL;
  /* [0]: the most negative code; [1]: the lowest failing rank. */
  int in[2] = {local_rc, local_rc != 0 ? ctx->rank : INT_MAX}, out[2];
  if (MPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  if (out[1] == INT_MAX)
    return 0;
  char msg[DBUF_DIAG_LEN];
  memset(msg, 0, sizeof msg);
  if (ctx->rank == out[1]) {
    const char *m = diag && diag->msg[0] ? diag->msg : dbuf_strerror(local_rc);
    snprintf(msg, sizeof msg, "rank %d: %.490s", ctx->rank, m);
  }
  if (MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, out[1], ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  msg[sizeof msg - 1] = '\0';
  if (diag != NULL) {
    diag->code = out[0];
    memcpy(diag->msg, msg, sizeof msg);
  }
  return out[0];
}

int
dbuf_comm_gather(dbuf_comm_t *ctx, const void *rec, int64_t rec_bytes, void *all)
{
  int n = 0;
  if (ctx == NULL)
    return DBUF_EINVAL;
  /* Rank 0's own check (all) is agreed too: nobody gathers alone. */
  int ok = rec != NULL && rec_bytes >= 1 && (ctx->rank != 0 || all != NULL) &&
           dbuf_comm_count(rec_bytes, &n) == 0;
  int rc = dbuf__comm_check_args(ctx, ok, 1, &rec_bytes, (const char *const[]){"rec_bytes"},
                                 NULL, 0);
  if (rc != 0)
    return rc;
  return dbuf__mpi(MPI_Gather(rec, n, MPI_BYTE, all, n, MPI_BYTE, 0, ctx->comm));
}

void
dbuf__problem_offer(dbuf__problem_t *held, const dbuf__problem_t *p)
{
  if (p->level > 0 && (held->level == 0 || p->level < held->level))
    *held = *p;
}

int
dbuf__comm_agree_verdict(dbuf_comm_t *ctx, const dbuf__problem_t *mine,
                         int64_t nproblems, dbuf_verdict_t *v)
{
  /* Key: level x size + rank, lowest wins; INT64_MAX for no problem. */
  int64_t in[2], out[2];
  in[0] = mine->level > 0 ? (int64_t)mine->level * ctx->size + ctx->rank : INT64_MAX;
  in[1] = nproblems;
  if (MPI_Allreduce(in, out, 1, MPI_INT64_T, MPI_MIN, ctx->comm) != MPI_SUCCESS ||
      MPI_Allreduce(in + 1, out + 1, 1, MPI_INT64_T, MPI_SUM, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  v->problems = out[1];
  v->code = 0;
  v->rank = -1;
  v->tensor = v->row = -1;
  v->msg[0] = '\0';
  if (out[0] == INT64_MAX)
    return 0;
  int root = (int)(out[0] % ctx->size);
  dbuf__problem_t p;
  if (ctx->rank == root)
    p = *mine;
  else
    memset(&p, 0, sizeof p);
  if (MPI_Bcast(&p, (int)sizeof p, MPI_BYTE, root, ctx->comm) != MPI_SUCCESS)
    return DBUF_EMPI;
  p.msg[sizeof p.msg - 1] = '\0';
  v->code = DBUF_EVERIFY;
  v->rank = p.rank;
  v->tensor = p.tensor;
  v->row = p.row;
  memcpy(v->msg, p.msg, sizeof v->msg);
  if (v->problems < 1)
    v->problems = 1;
  return DBUF_EVERIFY;
}
