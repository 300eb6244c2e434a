/*
 * dbuf-shard: the comm layer -- MPI broadcast, agreement and collective
 * verification of a layout.
 *
 * Every function here is collective on the context's communicator unless it
 * says "Not collective": all ranks call it, in the same order, and every rank
 * returns the same code (the local outcomes are agreed with an MPI_Allreduce
 * before returning), so one failing rank never leaves the others waiting.
 * Arguments are tagged "global" (must be equal on all ranks) or "local"
 * (this rank's own value).  Every argument check is agreed before any rank
 * enters a collective, and global integer arguments (and the chunk size a
 * call uses) are compared across the ranks in the same reduction: a bad
 * argument on one rank fails every rank with DBUF_EINVAL, a global argument
 * that differs fails every rank with DBUF_EMISMATCH.  Only a NULL context
 * returns DBUF_EINVAL at once, on the ranks that passed it.
 *
 * The library never calls MPI_Init, MPI_Finalize or MPI_Abort, never prints
 * and keeps no global state: a context works on its own duplicate of the
 * caller's communicator, with MPI_ERRORS_RETURN set on it.  MPI failures come
 * back as DBUF_EMPI (a rank that dies usually makes the launcher end the
 * job instead).  64-bit counts go through a checked cast to int and payloads
 * larger than the context's chunk (1 GiB by default) are sent in pieces.
 *
 * Messages: functions that agree on a verdict also agree on one line for
 * people, the message of the lowest failing rank, which starts with
 * "rank N: " and names the tensor and row where one applies.
 *
 * Thread safety: a context belongs to one thread at a time, and collective
 * calls on it must come in the same order on every rank.  The library makes
 * MPI calls on the calling thread only; with less than MPI_THREAD_MULTIPLE the
 * caller makes sure no other thread calls MPI meanwhile.  Contexts on
 * different communicators are independent.
 * Ownership: dbuf_comm_create() duplicates the caller's communicator (the
 * caller keeps and frees its own) and returns a context freed with
 * dbuf_comm_destroy() (collective, NULL accepted); dbuf_comm_mpi() is
 * borrowed; a received layout is freed with dbuf_layout_destroy(); a node
 * map with dbuf_comm_nodemap_free(); verdicts are plain data of the caller's.
 */
#ifndef DBUF_COMM_H
#define DBUF_COMM_H

#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/load.h"
#include "dbuf/plan.h"

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque communication context. */
typedef struct dbuf_comm dbuf_comm_t;

/** Default largest piece of one MPI call, in bytes. */
#define DBUF_COMM_CHUNK_BYTES ((int64_t)1 << 30)

/** Room for a host name (MPI_MAX_PROCESSOR_NAME is 256 in Open MPI). */
#define DBUF_HOST_LEN 256

/**
 * \brief Create a context on a duplicate of comm.
 *
 * Collective on comm.  comm is duplicated first, then the local outcomes
 * (out NULL, allocation) are agreed: a NULL out on one rank fails every rank
 * with DBUF_EINVAL, and nothing is left allocated on failure.  Only the
 * checks that leave nobody to agree with return at once: MPI not initialized
 * or finalized, comm MPI_COMM_NULL.  Its calls (the duplication, one
 * MPI_Allreduce of one int) are the same in every build: ranks of two
 * builds meet first in dbuf_comm_check_build(), the call to make next.
 * \param[in]  comm  an intracommunicator (global)
 * \param[out] out   local: freed with dbuf_comm_destroy()
 * \return 0, DBUF_EINVAL (out NULL, MPI not initialized, MPI_COMM_NULL),
 *   DBUF_EMPI (duplication failed), DBUF_ENOMEM -- agreed, except the last
 *   two cases of DBUF_EINVAL
 */
DBUF_EXPORT int dbuf_comm_create(MPI_Comm comm, dbuf_comm_t **out);

/** \brief Free a context; NULL is accepted.  Collective on the context's
 *  communicator (it frees the duplicate). */
DBUF_EXPORT void dbuf_comm_destroy(dbuf_comm_t *ctx);

/** \brief This rank, or -1 for NULL.  Not collective. */
DBUF_EXPORT int dbuf_comm_rank(const dbuf_comm_t *ctx);

/** \brief Number of ranks, or 0 for NULL.  Not collective. */
DBUF_EXPORT int dbuf_comm_size(const dbuf_comm_t *ctx);

/** \brief The duplicated communicator (borrowed).  Not collective. */
DBUF_EXPORT MPI_Comm dbuf_comm_mpi(const dbuf_comm_t *ctx);

/**
 * \brief Set the largest number of bytes moved by one MPI call (tests use
 * tiny values to exercise chunking).  Not collective, but every rank must
 * set the same value before the next collective call.
 * \return 0, DBUF_EINVAL (NULL ctx, bytes < 1 or > INT_MAX)
 */
DBUF_EXPORT int dbuf_comm_set_chunk(dbuf_comm_t *ctx, int64_t bytes);

/**
 * \brief Checked cast of a 64-bit count to an MPI int count.  Not collective.
 * \return 0, or DBUF_EOVERFLOW (n < 0 or n > INT_MAX), DBUF_EINVAL (NULL)
 */
DBUF_EXPORT int dbuf_comm_count(int64_t n, int *out);

/**
 * \brief Agree on a status: every rank returns the minimum of the local codes
 * (the most negative error wins; 0 only if every rank passed 0).
 *
 * Collective on the context's communicator.
 * \param[in]  local_rc   local
 * \param[out] global_rc  the agreed code
 * \return 0 (the agreement itself worked), DBUF_EINVAL (NULL ctx; or a NULL
 *   global_rc on any rank, then on every rank), DBUF_EMPI
 */
DBUF_EXPORT int dbuf_comm_agree(dbuf_comm_t *ctx, int local_rc, int *global_rc);

/**
 * \brief Agree on a status and on one message: every rank returns the code of
 * dbuf_comm_agree() and, in diag, the message of the lowest rank whose local
 * code is non-zero, prefixed with "rank N: ".
 *
 * Collective on the context's communicator.
 * \param[in]     local_rc  local
 * \param[in,out] diag      local: this rank's message (read when local_rc != 0);
 *                          out: the agreed code and message (may be NULL)
 * \return the agreed code (0 if every rank passed 0), DBUF_EMPI if the
 *   agreement itself failed
 */
DBUF_EXPORT int dbuf_comm_agree_diag(dbuf_comm_t *ctx, int local_rc, dbuf_diag_t *diag);

/**
 * \brief Broadcast a layout (or rank 0's failure to make one) from rank 0.
 *
 * Collective on the context's communicator.  Rank 0 passes either its layout
 * (root_rc 0) or root_rc < 0 and root_msg (why it could not read or plan).
 * In the second case every rank returns root_rc promptly with root_msg in
 * diag, unchanged (it is rank 0's message for people, already naming the
 * file and line).  Otherwise rank 0 encodes the layout (dbuf/wire.h), the
 * bytes go out in windows of at most 1 MiB as they are written, and every
 * rank, rank 0 included (from a copy of its message), decodes them,
 * re-validates every invariant (dbuf_layout_validate) and checks the layout
 * has nranks_expected segments; the outcome is agreed.
 * \param[in]  root_rc          rank 0: 0 or its error; ignored elsewhere
 * \param[in]  root_msg         rank 0: its message when root_rc < 0
 * \param[in]  layout           rank 0: the layout when root_rc == 0
 * \param[in]  nranks_expected  global: required segment count, or 0 for any
 * \param[out] out              a new layout on every rank (on success)
 * \param[out] digest           may be NULL: the message checksum, equal on all ranks
 * \return 0; root_rc; the decoding errors of dbuf_wire_decode() (DBUF_ECHECKSUM,
 *   DBUF_EFORMAT, ...), DBUF_ELAYOUT (an invariant fails), DBUF_ENRANKS (wrong
 *   segment count), DBUF_EINVAL (out NULL or nranks_expected < 0 on a rank),
 *   DBUF_EMISMATCH (nranks_expected or the chunk size differs between ranks),
 *   DBUF_EMPI, DBUF_ENOMEM -- agreed, with the message in diag
 */
DBUF_EXPORT int dbuf_comm_bcast_layout(dbuf_comm_t *ctx, int root_rc, const char *root_msg,
                                       const dbuf_layout_t *layout, int nranks_expected,
                                       dbuf_layout_t **out, uint64_t *digest,
                                       dbuf_diag_t *diag);

/**
 * \brief Broadcast a plan (or rank 0's failure to make one) from rank 0.
 *
 * Collective on the context's communicator.  The same protocol and
 * guarantees as dbuf_comm_bcast_layout(), for a whole plan: rank 0 encodes it
 * as one plan message (dbuf_wire_plan_encode(): every buffer's unit, dtype
 * and layout message), the bytes go out in windows as they are written,
 * and every rank decodes it (rank 0 a copy of what it sent; every length,
 * count and checksum checked; the other ranks hash each window and build
 * each layout's tensor list as the windows arrive, then decode with every
 * check and message of dbuf_wire_plan_decode()), re-validates every buffer's
 * layout and checks it has nranks_expected segments; the outcome is agreed.
 * A plan of no buffer is refused (DBUF_EFORMAT).  Each buffer's own identity
 * is its layout's digest (dbuf_wire_digest()), the checksum of the layout
 * message inside the plan message.
 * \param[in]  plan    rank 0: the plan when root_rc == 0
 * \param[out] out     a new plan on every rank (dbuf_plan_destroy()); its
 *                     buffers have no model ids
 * \param[out] digest  may be NULL: the plan message's checksum, equal on all ranks
 * \return as dbuf_comm_bcast_layout(), with the messages of
 *   dbuf_wire_plan_decode() and the buffer named ("received buffer
 *   UNIT/DTYPE: ...") -- agreed
 */
DBUF_EXPORT int dbuf_comm_bcast_plan(dbuf_comm_t *ctx, int root_rc, const char *root_msg,
                                     const dbuf_plan_t *plan, int nranks_expected,
                                     dbuf_plan_t **out, uint64_t *digest, dbuf_diag_t *diag);

/**
 * \brief Share rank 0's plan (or its failure to make one) with every rank.
 *
 * Collective on the context's communicator.  dbuf_comm_bcast_plan(), except
 * that rank 0 keeps its own plan instead of decoding a copy: it sends the
 * message as it writes it (a window of at most 1 MiB at a time, never the
 * whole message in its memory) and re-validates its plan as the others do
 * theirs.  Every other rank receives, decodes and re-validates, as with
 * dbuf_comm_bcast_plan(); the outcome is agreed.  On rank 0 the plan's
 * layouts remember their digests (dbuf_wire_digest() then costs nothing):
 * the call writes to rank 0's plan, which no other thread may use
 * meanwhile.  Rank 0's plan keeps what the wire does not carry (model ids,
 * per-tensor dtypes); the other ranks' plans have none, as with
 * dbuf_comm_bcast_plan().  Both plan broadcasts begin with rank 0's
 * announcement (dbuf_comm_announce_plan(), or an empty one they make).
 * \param[in,out] plan  rank 0: in, its plan when root_rc == 0 (still the
 *                      caller's, on failure too); every other rank: out,
 *                      a new plan on success (dbuf_plan_destroy()), NULL
 *                      on failure
 * \return as dbuf_comm_bcast_plan() -- agreed
 */
DBUF_EXPORT int dbuf_comm_share_plan(dbuf_comm_t *ctx, int root_rc, const char *root_msg,
                                     dbuf_plan_t **plan, int nranks_expected, uint64_t *digest,
                                     dbuf_diag_t *diag);

/**
 * \brief Tell the other ranks, while rank 0 still plans, how large the plan
 * it is about to share will be, so that they make room for it meanwhile.
 *
 * Called by rank 0 only, once it holds the tensor list it plans (tensors)
 * and knows the layout kind, at most once before its next
 * dbuf_comm_share_plan() or dbuf_comm_bcast_plan().  It is the first step
 * of that broadcast, which every other rank has entered (or will): they
 * call nothing else, and rank 0 makes no other collective call on ctx in
 * between; without it the broadcast makes the step itself, with nothing to
 * announce.  Like the argument agreement that begins most calls, the step
 * is one reduction of the same length, waited for without holding a core
 * (the other ranks sleep while rank 0 plans): against such a call instead
 * of a plan broadcast every rank fails (DBUF_EMISMATCH, or DBUF_EINVAL
 * where a rank's own arguments were bad) rather than wait; against a call
 * that begins otherwise (dbuf_comm_agree() and the like) it waits, as any
 * mismatched collective does.  A receiver then faults in, while rank 0
 * still plans, the memory its decode of a plan of one buffer of that list
 * will take (zeroed: the message's records and offsets, the list's arrays
 * and names, the duplicate check's table, the layout's offsets and order);
 * what the decode does not take is freed after it.  Only a hint: a plan of
 * other tensors is received as without it, and one of several buffers
 * takes none of that memory (it is freed as soon as the message's header
 * arrives: announce only plans of one buffer); numbers no plan has, or no
 * memory, make nothing.  A receiver's peak stays about as it was (what is
 * faulted in is what its decode takes, but for the order's 8 bytes a
 * tensor when a layout's offsets happen to rise; at 1M tensors 107 -> 108
 * bytes a tensor).
 * \return 0; DBUF_EINVAL on a rank other than 0, with a NULL argument or
 *         announced already (nothing done); DBUF_EMISMATCH, DBUF_EMPI (then
 *         nothing counts as announced: the broadcast makes its own step)
 */
DBUF_EXPORT int dbuf_comm_announce_plan(dbuf_comm_t *ctx, const dbuf_tensors_t *tensors,
                                        dbuf_layout_kind_t kind);

/* ------------------------------------------------------------------------ */
/* Builds                                                                    */

/** Room for a version string in a build record, its NUL included. */
#define DBUF_COMM_BUILD_VERSION_LEN 64

/** What one rank runs, as dbuf_comm_check_build() compares it.  Plain data. */
typedef struct dbuf_comm_build {
  /** The library's version string. */
  char version[DBUF_COMM_BUILD_VERSION_LEN];
  int wire;      /**< the layout message format, DBUF_WIRE_VERSION */
  int plan_wire; /**< the plan message format, DBUF_WIRE_PLAN_VERSION */
  /** The program's own, 0 unless it sets one: for example a hash of the
   *  names of the options it compares. */
  uint32_t schema;
} dbuf_comm_build_t;

/**
 * \brief This library's build: its version (dbuf_version_string()) and the
 * versions of the messages it exchanges, with schema 0.
 *
 * Not collective.
 * \param[out] b  filled on success
 * \return 0, DBUF_EINVAL (NULL)
 */
DBUF_EXPORT int dbuf_comm_build_init(dbuf_comm_build_t *b);

/**
 * \brief Check that every rank runs the same build: the same library version,
 * message formats and program schema.
 *
 * Collective on the context's communicator.  Call it first on a new context,
 * before anything whose shape a build may change is exchanged (the argument
 * agreements, the plan and layout messages): ranks of two builds would meet
 * there in calls of different shapes, and fail with DBUF_EINVAL or
 * DBUF_EMISMATCH naming something else, or wait.  dbuf_comm_create() makes
 * no such call.  This exchange is the same in every build, past and future:
 * one broadcast of rank 0's record (the version string, cut to 63 bytes and
 * padded, and the three numbers: 80 bytes), one MPI_Allreduce of two ints
 * (the lowest rank whose record differs, the lowest rank without one) and,
 * when a record differs, one broadcast of that rank's record.
 * \param[in]  mine         local: this rank's build (dbuf_comm_build_init(),
 *                          then the program's schema)
 * \param[in]  schema_name  local, may be NULL ("schema"): what the schema is,
 *                          for the message ("options")
 * \param[out] diag         may be NULL: on DBUF_EMISMATCH, rank 0's build and
 *   that of the lowest rank whose build differs, e.g. "the ranks run
 *   different builds: rank 0 has 0.9.0 (wire 2, plan 2, options 5c1e0a3b),
 *   rank 2 has 0.9.1 (wire 2, plan 2, options 5c1e0a3b)" (the schema in hex)
 * \return 0; DBUF_EMISMATCH; DBUF_EINVAL (mine NULL on a rank: then on every
 *   rank; NULL ctx: on the ranks that pass it) -- the same on every rank;
 *   DBUF_EMPI (this rank's)
 */
DBUF_EXPORT int dbuf_comm_check_build(dbuf_comm_t *ctx, const dbuf_comm_build_t *mine,
                                      const char *schema_name, dbuf_diag_t *diag);

/* ------------------------------------------------------------------------ */
/* Hosts and nodes                                                           */

/** Which node each rank runs on.  Plain data owned by the caller after
 *  dbuf_comm_nodes(); free it with dbuf_comm_nodemap_free(). */
typedef struct dbuf_comm_nodemap {
  int nranks;
  int nnodes;
  int *node_of_rank;  /**< [nranks]: node index; nodes are numbered in the
                           order of their lowest rank */
  char (*host)[DBUF_HOST_LEN]; /**< [nranks]: MPI_Get_processor_name of each rank */
  const char **node_name;      /**< [nnodes]: host of the node's lowest rank,
                                    pointing into host */
  int local_index;    /**< this rank's index among the ranks of its node */
  int local_size;     /**< ranks on this rank's node */
} dbuf_comm_nodemap_t;

/**
 * \brief Find the nodes: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) groups the
 * ranks, MPI_Get_processor_name names them, and every rank gets the whole
 * rank -> node table.
 *
 * Collective on the context's communicator.
 * \param[out] map  filled on success (free with dbuf_comm_nodemap_free())
 * \return 0, DBUF_EINVAL, DBUF_EMPI, DBUF_ENOMEM (agreed)
 */
DBUF_EXPORT int dbuf_comm_nodes(dbuf_comm_t *ctx, dbuf_comm_nodemap_t *map,
                                dbuf_diag_t *diag);

/** \brief Free the arrays of a node map; NULL is accepted.  Not collective. */
DBUF_EXPORT void dbuf_comm_nodemap_free(dbuf_comm_nodemap_t *map);

/**
 * \brief Compare the digests of the input each rank sees (--check-inputs).
 *
 * Collective on the context's communicator.  Every rank's digest and host are
 * gathered on every rank and compared with rank 0's.
 * \param[in] digest    local: the hash of the input this rank read
 * \param[in] readable  local: 0 if this rank could not read the input at all
 * \return 0 when every rank saw rank 0's input; DBUF_EMISMATCH with diag
 *   naming the differing ranks and hosts ("input differs from rank 0's
 *   (nodeA) on ranks 4-7 (nodeB)"); DBUF_EMPI, DBUF_ENOMEM (agreed)
 */
DBUF_EXPORT int dbuf_comm_check_inputs(dbuf_comm_t *ctx, uint64_t digest, int readable,
                                       dbuf_diag_t *diag);

/**
 * \brief Check that every rank holds the same values (options, file names):
 * a difference is named with rank 0's value and the value of the lowest rank
 * that differs from it.
 *
 * Collective on the context's communicator.  Values are compared through
 * 64-bit hashes (one MPI_Allreduce when they agree); a NULL value means "not
 * given" and differs from every string, "" included.
 * \param[in] n       global: the number of values
 * \param[in] names   local: what each value is, for the message ("option --dp")
 * \param[in] values  local: this rank's values as text (NULL: not given)
 * \param[out] diag   may be NULL: on DBUF_EMISMATCH the first value (in the
 *   order given) that differs, e.g. "option --dp differs between ranks: rank 0
 *   has 4, rank 2 has 8", with " (ranks 2-5 differ from rank 0)" when more
 *   ranks differ and " (and 2 more values differ)" when more values do
 * \return 0; DBUF_EMISMATCH; DBUF_EINVAL (n < 0, NULL names or values, or n
 *   itself differs); DBUF_ENOMEM; DBUF_EMPI -- the same on every rank
 */
DBUF_EXPORT int dbuf_comm_check_equal(dbuf_comm_t *ctx, int n, const char *const *names,
                                      const char *const *values, dbuf_diag_t *diag);

/**
 * \brief Gather one fixed-size record per rank on rank 0.
 *
 * Collective on the context's communicator.  The arguments are checked on
 * every rank and agreed before the gather: a NULL all on rank 0 fails every
 * rank, not rank 0 alone.
 * \param[in]  rec        local: rec_bytes bytes
 * \param[in]  rec_bytes  global, 1 .. INT_MAX
 * \param[out] all        rank 0: room for size x rec_bytes bytes, in rank
 *                        order; ignored elsewhere (may be NULL)
 * \return 0, DBUF_EINVAL (a NULL pointer, rec_bytes out of range, NULL ctx),
 *   DBUF_EMISMATCH (rec_bytes differs between ranks), DBUF_EMPI (agreed)
 */
DBUF_EXPORT int dbuf_comm_gather(dbuf_comm_t *ctx, const void *rec, int64_t rec_bytes,
                                 void *all);

/* ------------------------------------------------------------------------ */
/* Verification                                                              */

/** The agreed outcome of a verification. */
typedef struct dbuf_verdict {
  int code;        /**< 0 or DBUF_EVERIFY (or the error that stopped it) */
  int rank;        /**< rank named by msg, or -1 */
  int64_t tensor;  /**< tensor named by msg, or -1 */
  int64_t row;     /**< row named by msg, or -1 */
  int64_t problems;/**< number of problems found over all ranks */
  int local_ok;    /**< this rank's own part passed (local) */
  char local_msg[DBUF_DIAG_LEN]; /**< this rank's own first problem, or "" */
  char msg[DBUF_DIAG_LEN];       /**< the agreed first problem, or "" */
} dbuf_verdict_t;

/**
 * \brief Prove whole-row ownership across the ranks.
 *
 * Collective on the context's communicator.  In order:
 *  1. the layouts agree: every rank's layout digest (dbuf_wire_digest) is
 *     compared with plan_digest; a rank holding another layout (a stale plan)
 *     is named with its first cut or tensor offset that differs from the
 *     layout of the lowest rank holding the plan;
 *  2. locally, this rank's [start, end) lies in [0, size] and both ends fall
 *     on a row (block) boundary, or for the tensor kind on a tensor boundary,
 *     judged from this range and the layout alone;
 *  3. neighbours exchange their shared boundary (MPI_Sendrecv): rank r's
 *     start equals rank r-1's end, rank 0 starts at 0, the last rank ends at
 *     the buffer size;
 *  4. per tensor, the rows whose first element lies in each rank's range are
 *     summed over the ranks (MPI_Allreduce of int64) and must equal the
 *     tensor's rows: every row owned exactly once.  A lost or doubled row is
 *     named with the ranks around it.
 * \param[in]  l           local: this rank's layout (normally the broadcast one)
 * \param[in]  plan_digest global: the digest of the plan (from
 *                         dbuf_comm_bcast_layout()), or 0 for rank 0's layout
 * \param[in]  start, end  local: the global range this rank holds
 * \param[out] v           agreed verdict (local_ok and local_msg are local)
 * \return 0 (verified), DBUF_EVERIFY (a problem: see v), DBUF_EINVAL,
 *   DBUF_EMISMATCH (plan_digest or the chunk size differs between ranks; v->msg
 *   says which), DBUF_EMPI, DBUF_ENOMEM -- the same on every rank
 */
DBUF_EXPORT int dbuf_comm_verify_structure(dbuf_comm_t *ctx, const dbuf_layout_t *l,
                                           uint64_t plan_digest, int64_t start, int64_t end,
                                           dbuf_verdict_t *v);

/**
 * \brief Check the materialized data against dbuf/pattern.h.
 *
 * Collective on the context's communicator.  Every rank checks every element
 * of its segment with dbuf_pattern_verify(); then every rank sends rank 0 a
 * deterministic sample of whole rows of its segment (its first and last rows
 * and rows spread between, at most sample_rows rows and 1 MiB) with their
 * global offsets, and rank 0 recomputes them from its own layout.
 * \param[in] l           local: this rank's layout
 * \param[in] start, end  local: the global range held in seg
 * \param[in] seg         local: (end - start) x elem_size bytes
 * \param[in] elem_size   global: 1, 2, 4 or 8
 * \param[in] sample_rows global: rows each rank sends to rank 0 (0: none)
 * \param[out] v          agreed verdict
 * \return 0, DBUF_EVERIFY, DBUF_EINVAL, DBUF_EMISMATCH (elem_size or
 *   sample_rows differs between ranks; v->msg says which), DBUF_EMPI,
 *   DBUF_ENOMEM (agreed)
 */
DBUF_EXPORT int dbuf_comm_verify_data(dbuf_comm_t *ctx, const dbuf_layout_t *l,
                                      int64_t start, int64_t end, const void *seg,
                                      int64_t elem_size, int sample_rows,
                                      dbuf_verdict_t *v);

/* ------------------------------------------------------------------------ */
/* Loading real weights (dbuf/load.h)                                        */

/** Figures of a collective load of one buffer. */
typedef struct dbuf_comm_load_stats {
  dbuf_load_stats_t local; /**< this rank's (local) */
  /** Over the ranks: sums, except files (distinct files read by any rank),
   *  tensors (distinct tensors loaded) and seconds (the slowest rank). */
  dbuf_load_stats_t total;
  double local_gbps; /**< local.bytes / local.seconds / 1e9 (0 if no time) */
  double total_gbps; /**< total.bytes / total.seconds / 1e9 */
} dbuf_comm_load_stats_t;

/**
 * \brief Load every rank's range of one buffer from a safetensors checkpoint.
 *
 * Collective on the context's communicator.  Each rank makes its read plan
 * (dbuf_load_plan_create()) and reads only its own extents, in whole rows,
 * straight into dst (converting through a bounded bounce buffer when the
 * file's dtype is not the buffer's), and writes zeros into its padding:
 *  - DBUF_IO_POSIX: dbuf_load_posix() (pread);
 *  - DBUF_IO_MPIIO: the files it reads opened on MPI_COMM_SELF,
 *    MPI_File_read_at;
 *  - DBUF_IO_MPIIO_COLL: every file some rank reads opened on the
 *    communicator, MPI_File_read_at_all (ranks with fewer reads of a file
 *    join the later collective reads with a count of 0).
 * Reads are at most min(DBUF_LOAD_CHUNK_BYTES, the context's chunk) bytes.
 * Errors (a missing or short file, a tensor missing or of another shape, no
 * conversion rule) are agreed: every rank returns the same code and diag,
 * "rank R: FILE: ..." of the lowest failing rank.  Before a collective open,
 * every rank checks the files locally and the outcome is agreed, so a file
 * missing on one node fails every rank instead of hanging the open.
 * \param[in] l      global: the buffer's layout (the same on every rank)
 * \param[in] start, end  local: this rank's range (whole rows)
 * \param[in] dtype  global: the buffer's dtype
 * \param[in] st     global: the opened checkpoint
 * \param[out] dst   local: (end - start) x elem_size bytes
 * \param[in] io     global
 * \param[in] progress  local, may be NULL: called on this rank after every
 *   read with its file bytes read so far and its total (rank 0's, scaled by
 *   the ranks, is the job's estimate); non-zero stops this rank's load with
 *   DBUF_ECANCELED, agreed like any error
 * \param[out] stats may be NULL: figures (on success)
 * \return 0, or (agreed) DBUF_EINVAL, DBUF_EMISMATCH (dtype or io differ),
 *   the errors of dbuf_load_plan_create() and dbuf_load_posix(), DBUF_EIO,
 *   DBUF_ECANCELED,
 *   DBUF_ENOTFOUND (file), DBUF_EMPI, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_comm_load(dbuf_comm_t *ctx, const dbuf_layout_t *l, int64_t start,
                               int64_t end, dbuf_dtype_t dtype, const dbuf_st_t *st,
                               void *dst, int64_t dst_bytes, dbuf_io_t io,
                               dbuf_progress_fn progress, void *progress_arg,
                               dbuf_comm_load_stats_t *stats, dbuf_diag_t *diag);

/** Mismatches listed by name in a load verdict (the rest are counted). */
#define DBUF_LOAD_MAX_LISTED 8

/** One finding of dbuf_comm_verify_load(). */
typedef struct dbuf_load_mismatch {
  int64_t tensor; /**< layout tensor id, or -1 (padding) */
  int64_t row;    /**< first row that differs, or -1 */
  int64_t nrows;  /**< rows of the tensor that differ (0: only the sums differ) */
  int rank;       /**< the rank holding that row (or the padding) */
  char msg[DBUF_DIAG_LEN]; /**< one line naming tensor, row and rank */
} dbuf_load_mismatch_t;

/** The agreed outcome of dbuf_comm_verify_load(); the same on every rank. */
typedef struct dbuf_load_verdict {
  int code;           /**< 0 (PASS), DBUF_EVERIFY (FAIL) or the error that stopped it */
  int64_t tensors;    /**< tensors checked (the layout's) */
  int64_t rows;       /**< rows checked, over the ranks */
  int64_t bytes;      /**< bytes the checking ranks read from the files */
  int64_t bad_tensors;   /**< tensors whose sums differ */
  int64_t bad_padding;   /**< non-zero padding bytes, over the ranks */
  int64_t problems;      /**< bad_tensors + ranks with non-zero padding */
  int64_t nlisted;       /**< entries of listed */
  dbuf_load_mismatch_t listed[DBUF_LOAD_MAX_LISTED];
  double seconds;        /**< wall time of the check (slowest rank) */
  const char *checked_by;  /**< who re-read each rank's rows: "the same rank"
                                (one rank), "another rank" (one node) or "a
                                rank of another node"; static text, NULL if
                                the check stopped before choosing */
  char msg[DBUF_DIAG_LEN]; /**< "PASS: ..." or the first problem, or the error */
} dbuf_load_verdict_t;

/**
 * \brief Prove that the loaded buffer equals the checkpoint, row by row.
 *
 * Collective on the context's communicator.  Every rank computes the
 * per-tensor row checksum sums (dbuf/load.h) of its own rows from mem, and,
 * from the files, those of the rows of the ranks it checks.  Each rank has
 * exactly one checker.  On one node the rows of rank r are checked by rank
 * (r + 1) mod size (by itself at one rank).  Where the ranks span two nodes
 * or more, by a rank of another node, so that node-local copies of the
 * checkpoint are checked against each other: the ranks in node order, m the
 * largest node's rank count; if no node holds more than half of the ranks,
 * each is checked by the one m places after it (one each); else the largest
 * node's ranks are spread round-robin over the size - m others, which a
 * largest node's rank checks one each, so a checker re-reads the rows of at
 * most ceil(m / (size - m)) ranks.  The files are read once over the job
 * (every rank's rows, by its checker) however the checks are spread.  Both
 * sums are reduced over the ranks (MPI_Allreduce) and compared per tensor,
 * with the rows held against each tensor's row count.  For the first
 * DBUF_LOAD_MAX_LISTED tensors that differ, a second pass re-reads their
 * rows, sends the per-row hashes to each checked rank (point to point, in
 * messages of at most the context's chunk) and names the first row that
 * differs, its rank, its checker and the number of such rows.  Every rank
 * also checks that its padding is zero.
 * \param[in] l, dtype, st  global, as for dbuf_comm_load()
 * \param[in] start, end    local: this rank's range
 * \param[in] mem           local: the loaded range, mem_bytes bytes
 * \param[out] v            the agreed verdict
 * \return 0 (PASS), DBUF_EVERIFY (FAIL: see v), or (agreed) DBUF_EINVAL,
 *   DBUF_EMISMATCH, the file errors of dbuf_load_sums_file(), DBUF_EOVERFLOW,
 *   DBUF_EMPI, DBUF_ENOMEM, with v->msg "rank R: ..."
 */
DBUF_EXPORT int dbuf_comm_verify_load(dbuf_comm_t *ctx, const dbuf_layout_t *l,
                                      int64_t start, int64_t end, dbuf_dtype_t dtype,
                                      const dbuf_st_t *st, const void *mem,
                                      int64_t mem_bytes, dbuf_load_verdict_t *v);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_COMM_H */
