/* Internal helpers of the comm layer: the context and chunked collectives. */
#ifndef DBUF_COMM_INTERNAL_H
#define DBUF_COMM_INTERNAL_H

#include "dbuf/comm.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

struct dbuf_comm {
  MPI_Comm comm; /* our duplicate, MPI_ERRORS_RETURN */
  int rank, size;
  int64_t chunk; /* largest payload of one MPI call, bytes */
  int announced;  /* rank 0: the next plan broadcast was announced */
};

/* MPI return code -> 0 or DBUF_EMPI. */
static inline int
dbuf__mpi(int mpi_rc)
{
  return mpi_rc == MPI_SUCCESS ? 0 : DBUF_EMPI;
}

/* MPI_Bcast of len bytes from root, in pieces of at most ctx->chunk. */
int dbuf__comm_bcast_bytes(dbuf_comm_t *ctx, void *buf, int64_t len, int root);

/* In-place MPI_Allreduce of count values of type (elem_size bytes each), in
 * pieces of at most the context's chunk. */
int dbuf__comm_allreduce_n(dbuf_comm_t *ctx, void *buf, int64_t count, MPI_Datatype type,
                           int64_t elem_size, MPI_Op op);
/* The same for int64 values. */
int dbuf__comm_allreduce_i64(dbuf_comm_t *ctx, int64_t *buf, int64_t count, MPI_Op op);

/* Most global arguments one call checks with dbuf__comm_check_args(). */
#define DBUF__ARGS_MAX 8

/*
 * Agree on the arguments of a collective call before any rank enters it:
 * local_ok is this rank's own check; global[0..n) are the values that must
 * be equal on every rank (names[i] names value i).  One MPI_Iallreduce,
 * waited for with MPI_Test and sleeps: a rank that comes early (while rank 0
 * plans) sleeps.  Returns 0, DBUF_EINVAL (a rank's local check failed; msg
 * names the lowest such rank), DBUF_EMISMATCH (msg names the argument and
 * its range), or DBUF_EMPI (msg says so) -- the same on every rank.  msg
 * may be NULL.
 */
int dbuf__comm_check_args(dbuf_comm_t *ctx, int local_ok, int n, const int64_t *global,
                          const char *const *names, char *msg, size_t msg_len);

/*
 * Rank 0's values v[0..n) (n < DBUF__ARGS_MAX) to every rank, in the shape
 * of an argument agreement (the same reduction, waited for without holding
 * a core): the other ranks' v is ignored and overwritten; tag, the same on
 * every rank, tells the step from other calls.  0 (the same on every rank),
 * or v untouched and: DBUF_EINVAL (a rank in a call of its own failed its
 * argument check, as dbuf__comm_check_args() returns there), DBUF_EMISMATCH
 * (the ranks are in different calls), DBUF_EMPI (this rank's).  Against a
 * call that does not begin with an argument agreement (dbuf_comm_agree()
 * and the like) it waits, as any mismatched collective does.
 */
int dbuf__comm_root_values(dbuf_comm_t *ctx, int64_t tag, int n, int64_t *v);

/* One problem found by a verification, ranked by level (1 most important). */
typedef struct {
  int level;      /* 0: none */
  int rank;       /* rank named */
  int64_t tensor; /* or -1 */
  int64_t row;    /* or -1 */
  char msg[DBUF_DIAG_LEN];
} dbuf__problem_t;

/* Record p as this rank's problem if it ranks before the one held. */
void dbuf__problem_offer(dbuf__problem_t *held, const dbuf__problem_t *p);

/*
 * Agree on a verdict: the problem of the lowest (level, rank) wins and is
 * broadcast; nproblems are summed.  Fills v (code, rank, tensor, row, msg,
 * problems); local_ok/local_msg are left to the caller.
 */
int dbuf__comm_agree_verdict(dbuf_comm_t *ctx, const dbuf__problem_t *mine,
                             int64_t nproblems, dbuf_verdict_t *v);

/*
 * Who re-reads whose rows in the load proof (dbuf_comm_verify_load()), from
 * the node of each rank: node[r] in [0, nranks) names rank r's node (any id;
 * the nodes are taken in the order of their lowest rank).  The rows of rank
 * r are re-read by checker[r], and rank r re-reads those of the ranks
 * checked[first[r] .. first[r + 1]), ascending (first has nranks + 1
 * entries; every rank is in exactly one list).
 * - One node: checker[r] = (r + 1) mod nranks (at one rank, itself).
 * - Two nodes or more: checker[r] is on another node than r.  The ranks in
 *   node order (by node, then by rank); m the largest node's rank count
 *   (the first such node).  If 2 m <= nranks, each rank is checked by the
 *   one m places after it (cyclically), one each.  Else the largest node's
 *   ranks go round-robin to the nranks - m others (taken in node order from
 *   the node after it, cyclically), and the others one each to the largest
 *   node's first ranks: a checker re-reads the rows of at most
 *   ceil(m / (nranks - m)) ranks, the least possible.
 * Not collective, O(nranks).  *nnodes may be NULL.  Returns 0, DBUF_EINVAL
 * (nranks < 1, a NULL array, a node id out of range) or DBUF_ENOMEM.
 */
int dbuf__load_checkers(int nranks, const int *node, int *checker, int *first, int *checked,
                        int *nnodes);

#endif /* DBUF_COMM_INTERNAL_H */
