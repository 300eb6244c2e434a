/*
 * dbuf-shard: loading real weights -- one rank's rows of one buffer, from a
 * safetensors checkpoint, and the row checksums that prove the copy.
 *
 * Not collective, no MPI (the collective load and proof are in dbuf/comm.h).
 * Everything works per buffer: a layout (its own tensor list, whose names are
 * looked up in the checkpoint), a global element range [start, end) of that
 * layout (a rank's segment, or its run of segments), the destination memory
 * of the range ((end - start) x elem_size bytes, byte 0 = element start) and
 * the buffer's dtype.
 *
 * The read plan (dbuf_load_plan_create()) lists, for the range, extents
 * (file, file offset, bytes, destination offset, source dtype) in whole rows:
 * the pieces of the tensors inside the range, sorted by file and file offset,
 * and merged where both the file bytes and the destination bytes follow on
 * (the same file and source dtype), so that a rank reads its part in a few
 * large sequential reads and never more.  The zero runs are the bytes of the
 * range that no piece covers (padding), which the loaders write with zeros.
 * Every layout tensor is checked against the checkpoint (name, shape, a
 * conversion rule from its stored dtype to the buffer's) on every rank, also
 * those outside the range, so that every rank finds the same first problem.
 *
 * Row checksum: for tensor t and row r, h(t, r) = XXH3-64 of the row's bytes
 * in the buffer dtype with seed r; a tensor's sum is the sum of h(t, r) mod
 * 2^64 over the rows counted.  The rows of a range are those whose first
 * element lies in it (with whole-row cuts, the rows it holds).  Sums over
 * disjoint ranges add up to the sum over their union.
 *
 * Thread safety: no global state; a plan is never changed after create and
 * may be used by several threads at once (with different destinations).
 * Ownership: a plan borrows the layout and the checkpoint (both must outlive
 * it) and is freed with dbuf_load_plan_destroy() (NULL accepted); getters
 * return borrowed arrays valid until then.
 */
#ifndef DBUF_LOAD_H
#define DBUF_LOAD_H

#include "dbuf/convert.h"
#include "dbuf/dtype.h"
#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/pattern.h" /* dbuf_progress_fn */
#include "dbuf/safetensors.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest single read of the loaders (bytes). */
#define DBUF_LOAD_CHUNK_BYTES ((int64_t)64 << 20)
/** Size of the bounce buffer a converting read goes through (bytes). */
#define DBUF_LOAD_BOUNCE_BYTES ((int64_t)8 << 20)

/** How the ranks read (the MPI loader, dbuf_comm_load() in dbuf/comm.h). */
typedef enum dbuf_io {
  DBUF_IO_POSIX = 1,      /**< "posix": pread */
  DBUF_IO_MPIIO = 2,      /**< "mpiio": MPI_File_read_at, files opened on MPI_COMM_SELF */
  DBUF_IO_MPIIO_COLL = 3  /**< "mpiio-coll": MPI_File_read_at_all, files opened on the
                               communicator */
} dbuf_io_t;

/** \brief "posix", "mpiio", "mpiio-coll"; "unknown" for other values. */
DBUF_EXPORT const char *dbuf_io_name(int io);

/** \brief An I/O method by name. \return 0, or DBUF_EINVAL (NULL), DBUF_ENOTFOUND */
DBUF_EXPORT int dbuf_io_parse(const char *name, dbuf_io_t *io);

/** One sequential read: bytes of one file into the destination. */
typedef struct dbuf_load_extent {
  int64_t file;           /**< checkpoint file index (dbuf_st_file_path()) */
  int64_t file_offset;    /**< absolute byte offset in the file */
  int64_t bytes;          /**< bytes to read from the file */
  int64_t dst_offset;     /**< byte offset in the destination (buffer dtype) */
  dbuf_dtype_t src_dtype; /**< element type in the file */
  int64_t tensor;         /**< layout id of the first tensor it covers */
} dbuf_load_extent_t;

/** A run of destination bytes that no tensor covers (padding). */
typedef struct dbuf_load_zero {
  int64_t dst_offset, bytes;
} dbuf_load_zero_t;

/** Figures of a plan and of a load (a loader copies the plan's and adds its own). */
typedef struct dbuf_load_stats {
  int64_t files;         /**< files read from */
  int64_t tensors;       /**< tensors with rows in the range */
  int64_t rows;          /**< rows in the range */
  int64_t bytes;         /**< bytes read from the files */
  int64_t dst_bytes;     /**< tensor bytes written to the destination */
  int64_t padding_bytes; /**< zero bytes written (padding) */
  int64_t extents;       /**< extents after merging */
  int64_t reads;         /**< read calls made (loaders) */
  dbuf_convert_stats_t convert; /**< what conversion did (loaders) */
  double seconds;        /**< wall time of the load (loaders) */
} dbuf_load_stats_t;

/** Opaque read plan. */
typedef struct dbuf_load_plan dbuf_load_plan_t;

/**
 * \brief The read plan of the range [start, end) of a layout.
 *
 * Not collective.  O(n + k log k) for n layout tensors and k pieces in range.
 * \param[in] l      the buffer's layout (borrowed by the plan)
 * \param[in] start, end  0 <= start <= end <= size; both on row boundaries
 * \param[in] dtype  the buffer's element type (a byte size)
 * \param[in] st     the checkpoint (borrowed by the plan)
 * \param[out] out   the plan, freed with dbuf_load_plan_destroy()
 * \param[out] diag  may be NULL; names the tensor (and file) on failure
 * \return 0, or DBUF_EINVAL (NULL, dtype without a byte size, a bad range),
 *   DBUF_ENOTFOUND ("tensor X: not in the checkpoint"), DBUF_ESHAPE
 *   ("tensor X: shape AxB in the layout, CxD in FILE"), DBUF_EUNSUPPORTED
 *   ("tensor X in FILE: no conversion from int32 to bf16 ..."), DBUF_ELAYOUT
 *   (start or end cuts a row: names tensor and row), DBUF_EOVERFLOW, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_load_plan_create(const dbuf_layout_t *l, int64_t start, int64_t end,
                                      dbuf_dtype_t dtype, const dbuf_st_t *st,
                                      dbuf_load_plan_t **out, dbuf_diag_t *diag);

/** \brief Free a plan; NULL accepted.  Not collective. */
DBUF_EXPORT void dbuf_load_plan_destroy(dbuf_load_plan_t *p);

/** \brief The extents, by (file, file offset); *n their count (0 for NULL p). */
DBUF_EXPORT const dbuf_load_extent_t *dbuf_load_plan_extents(const dbuf_load_plan_t *p,
                                                             int64_t *n);

/** \brief The zero runs, by offset; *n their count (0 for NULL p). */
DBUF_EXPORT const dbuf_load_zero_t *dbuf_load_plan_zeros(const dbuf_load_plan_t *p,
                                                         int64_t *n);

/** \brief The plan's figures (files, tensors, rows, bytes, dst_bytes,
 * padding_bytes, extents; the rest 0).  \return 0, or DBUF_EINVAL */
DBUF_EXPORT int dbuf_load_plan_stats(const dbuf_load_plan_t *p, dbuf_load_stats_t *out);

/** \brief Destination bytes of the plan: (end - start) x elem_size. */
DBUF_EXPORT int64_t dbuf_load_plan_dst_bytes(const dbuf_load_plan_t *p);

/**
 * \brief The size file f must have at least: the end of the data region its
 * header describes (the largest data_end of its tensors; 0 for a file
 * without tensors).  -1 for NULL p or f out of range.
 */
DBUF_EXPORT int64_t dbuf_load_file_needed(const dbuf_load_plan_t *p, int64_t f);

/**
 * \brief Whether the plan reads from file f (0 or 1).
 */
DBUF_EXPORT int dbuf_load_plan_uses_file(const dbuf_load_plan_t *p, int64_t f);

/**
 * Reads exactly bytes bytes of file f at offset into buf, or fails with a
 * DBUF_E* code and a message naming the file (the loader adds nothing).
 */
typedef int (*dbuf_load_read_fn)(void *arg, int64_t file, int64_t offset, void *buf,
                                 int64_t bytes, dbuf_diag_t *diag);

/**
 * \brief Execute a plan with a caller's reader (the MPI-IO loader's way).
 *
 * Not collective.  Zero runs are written with zeros; extents in the buffer
 * dtype are read straight into dst in reads of at most chunk_bytes; others
 * go through a bounce buffer of DBUF_LOAD_BOUNCE_BYTES (or chunk_bytes if
 * smaller) and are converted (dbuf_convert()).  The reads come in extent
 * order, so file by file; dbuf_load_plan_reads() counts them.
 * \param[in] chunk_bytes  >= 16, largest read
 * \param[in] progress  may be NULL: called after every read with the file
 *   bytes read so far and the plan's total; non-zero stops the load
 * \param[out] stats  may be NULL: the plan's figures, reads, conversion
 *   counts, seconds
 * \return 0, the reader's error (its diag), DBUF_EINVAL (NULL, dst_bytes not
 *   the plan's), DBUF_ECANCELED (progress returned non-zero), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_load_execute(const dbuf_load_plan_t *p, void *dst, int64_t dst_bytes,
                                  int64_t chunk_bytes, dbuf_load_read_fn read_fn, void *arg,
                                  dbuf_progress_fn progress, void *progress_arg,
                                  dbuf_load_stats_t *stats, dbuf_diag_t *diag);

/**
 * \brief How many reads dbuf_load_execute() makes from each file with this
 * chunk_bytes: per_file[f] for every file of the checkpoint.
 * \return 0, or DBUF_EINVAL
 */
DBUF_EXPORT int dbuf_load_plan_reads(const dbuf_load_plan_t *p, int64_t chunk_bytes,
                                     int64_t *per_file);

/**
 * \brief Load with pread: open the files the plan reads (only those; the way
 * every input is opened: regular files only), check each is at least as long
 * as its header says, then dbuf_load_execute() with pread in reads of
 * DBUF_LOAD_CHUNK_BYTES.
 * \return 0, or DBUF_ENOTFOUND ("FILE: cannot open: ..."), DBUF_EIO ("FILE:
 *   file is N bytes, shorter than its header says (M bytes)", a read error or
 *   an early end of file, naming the file and offset), DBUF_EINVAL,
 *   DBUF_ECANCELED (progress, as for dbuf_load_execute()), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_load_posix(const dbuf_load_plan_t *p, void *dst, int64_t dst_bytes,
                                dbuf_progress_fn progress, void *progress_arg,
                                dbuf_load_stats_t *stats, dbuf_diag_t *diag);

/**
 * \brief The first non-zero byte of the plan's zero runs in dst.
 * \param[out] bad_offset  destination byte offset of the first non-zero
 *   byte, or -1
 * \param[out] nbad        may be NULL: non-zero bytes in the zero runs
 * \return 0, or DBUF_EINVAL
 */
DBUF_EXPORT int dbuf_load_check_zeros(const dbuf_load_plan_t *p, const void *dst,
                                      int64_t dst_bytes, int64_t *bad_offset, int64_t *nbad);

/* ------------------------------------------------------------------------ */
/* Row checksums                                                             */

/** \brief h(t, r) of one row: XXH3-64 of its bytes with seed row. */
DBUF_EXPORT uint64_t dbuf_load_row_hash(const void *bytes, int64_t len, int64_t row);

/**
 * \brief Per-tensor sums of the rows of [start, end) held in mem.
 *
 * Not collective.  O(n + bytes).
 * \param[in] mem       (end - start) x elem_size bytes: the range's memory
 * \param[out] sums     dbuf_layout_ntensors(l) entries: all written (0 for
 *                      tensors without rows in the range)
 * \param[out] rows     may be NULL; same size: rows counted per tensor
 * \return 0, or DBUF_EINVAL (NULL, mem_bytes not the range's), DBUF_ELAYOUT
 *   (the range cuts a row)
 */
DBUF_EXPORT int dbuf_load_sums_mem(const dbuf_layout_t *l, int64_t start, int64_t end,
                                   dbuf_dtype_t dtype, const void *mem, int64_t mem_bytes,
                                   uint64_t *sums, int64_t *rows, dbuf_diag_t *diag);

/**
 * \brief The same sums computed from the checkpoint files: the rows of
 * [start, end) read with pread (row by row, in bounded chunks) and converted
 * to dtype as the loaders do.  Independent of the read plan's extents.
 * \param[out] bytes_read  may be NULL: bytes read from the files
 * \return 0, or the errors of dbuf_load_plan_create() for the tensors in
 *   range, DBUF_ENOTFOUND / DBUF_EIO naming the file, DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_load_sums_file(const dbuf_layout_t *l, int64_t start, int64_t end,
                                    dbuf_dtype_t dtype, const dbuf_st_t *st, uint64_t *sums,
                                    int64_t *rows, int64_t *bytes_read, dbuf_diag_t *diag);

/**
 * \brief h(tensor, r) of each row r of tensor `tensor` in [start, end), from
 * mem (st NULL) or from the files (st not NULL; mem ignored).
 *
 * Not collective.  Rows first_row .. first_row + nrows - 1; hashes[i] is row
 * first_row + i (cap entries at most are written; nrows is the full count).
 * \return 0, or as dbuf_load_sums_mem() / dbuf_load_sums_file(), DBUF_ERANGE
 *   (tensor)
 */
DBUF_EXPORT int dbuf_load_row_hashes(const dbuf_layout_t *l, int64_t start, int64_t end,
                                     dbuf_dtype_t dtype, const void *mem, int64_t mem_bytes,
                                     const dbuf_st_t *st, int64_t tensor, uint64_t *hashes,
                                     int64_t cap, int64_t *first_row, int64_t *nrows,
                                     dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_LOAD_H */
