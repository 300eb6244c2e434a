/*
 * dbuf-shard: safetensors checkpoint header reader.
 *
 * Not collective.  Reads only the headers of one or more .safetensors files
 * (8-byte little-endian header length N, N bytes of JSON, then the data
 * region) and checks them against the format: known dtype, integer shape,
 * data_offsets that hold exactly numel * elem_size bytes, and regions that
 * tile the data region from 0 to its end with no gap and no overlap.  No
 * tensor data is read.  The result is a tensor list (dbuf/tensors.h) plus,
 * per tensor, the file, dtype and absolute byte range, so that a later reader
 * can fetch the rows of each tensor.
 *
 * Error rule: as for the whole API (dbuf/error.h).  Every diagnostic names
 * the file and, where one applies, the tensor.
 *
 * Thread safety: no global state; an opened checkpoint is never changed and
 * may be queried from any number of threads at once.
 * Ownership: dbuf_st_open() copies the paths and returns a checkpoint freed
 * with dbuf_st_destroy(); its tensor list, file paths and dtype strings are
 * borrowed, valid until dbuf_st_destroy() (duplicate the list with
 * dbuf_tensors_dup() to keep it longer).
 */
#ifndef DBUF_SAFETENSORS_H
#define DBUF_SAFETENSORS_H

#include "dbuf/dtype.h"
#include "dbuf/error.h"
#include "dbuf/tensors.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest header length the format allows (bytes); longer headers are rejected. */
#define DBUF_ST_MAX_HEADER INT64_C(100000000)

/** Opaque description of a checkpoint: files, tensors and their byte ranges. */
typedef struct dbuf_st dbuf_st_t;

/** Where the bytes of one tensor live. */
typedef struct dbuf_st_info {
  int64_t file;       /**< file index, 0 .. dbuf_st_file_count() - 1 */
  const char *path;   /**< borrowed path of that file, valid until destroy */
  const char *dtype;  /**< static safetensors dtype name, e.g. "BF16" */
  int64_t elem_size;  /**< bytes per element */
  int64_t data_begin; /**< absolute file offset of the first byte */
  int64_t data_end;   /**< absolute file offset one past the last byte */
  dbuf_dtype_t type;  /**< the dtype as a number (dbuf/dtype.h) */
} dbuf_st_info_t;

/**
 * \brief Read and validate the headers of a safetensors checkpoint.
 *
 * Not collective.  Two ways to name the checkpoint:
 *  - one path ending in ".json": an index file
 *    ({"metadata": {...}, "weight_map": {"tensor": "file", ...}}).  The
 *    files it names are resolved relative to the index file's directory and
 *    must be relative paths with no ".." component.  The files are read in
 *    byte-wise (strcmp) order of their names, which is shard order for the
 *    usual "model-00001-of-00004.safetensors" names and does not depend on
 *    the key order of the JSON.  Every weight_map entry must be a tensor of
 *    the file it names, and every tensor of those files must be in weight_map.
 *  - one or more .safetensors paths, read in the order given.
 *
 * Tensor order (tensor ids): if order is not NULL, exactly the norder names
 * it lists (each must be a tensor of the checkpoint, no duplicates, all
 * tensors covered; norder may be 0 only for an empty checkpoint).  If order
 * is NULL, the tensors of each file by increasing data offset (ties between
 * empty tensors by name), files in the order above.
 *
 * In a file header, "__metadata__" (an object of string values, if present)
 * is skipped, and tensor keys other than "dtype", "shape" and "data_offsets"
 * are ignored.  Tensors with sub-byte dtypes (F4, F6_*) are rejected.
 * Shapes must also satisfy dbuf_tensors_add() (no 0-D, no zero non-leading
 * dim, at most DBUF_MAX_DIMS dims).
 *
 * \param[in]  paths   npaths paths, copied
 * \param[in]  npaths  >= 1; a ".json" path must be the only one
 * \param[in]  order   NULL, or norder tensor names, copied
 * \param[in]  norder  >= 0
 * \param[out] out     the checkpoint, to be freed with dbuf_st_destroy()
 * \param[out] diag    NULL, or filled on failure
 * \return 0, or
 *   DBUF_EINVAL (NULL or empty argument, a .json path among several, bad
 *     tensor name),
 *   DBUF_ENOTFOUND (a file does not exist; an index entry names a tensor its
 *     file lacks; a file tensor is not in weight_map; an order name is not a
 *     tensor, or a tensor is not in the order list),
 *   DBUF_EIO (a file cannot be opened or read, or is not a regular file),
 *   DBUF_EPARSE (a header or index is not valid UTF-8 JSON or has a
 *     duplicate key),
 *   DBUF_EFORMAT (file shorter than 8 bytes, header length over
 *     DBUF_ST_MAX_HEADER or past the end of the file, header not an object,
 *     missing or wrongly typed field, non-integer dim, bad or mismatched
 *     data_offsets, overlap, gap, data region shorter or longer than the
 *     tensors, index inconsistent with the files),
 *   DBUF_EUNSUPPORTED (unknown or sub-byte dtype),
 *   DBUF_ESHAPE (negative dim, 0-D tensor, zero non-leading dim, too many dims),
 *   DBUF_EOVERFLOW (element count, byte size or offset past INT64_MAX),
 *   DBUF_EDUP (a tensor name in two files, or twice in the order list),
 *   DBUF_ENOMEM.
 */
DBUF_EXPORT int dbuf_st_open(const char *const *paths, int64_t npaths,
                             const char *const *order, int64_t norder,
                             dbuf_st_t **out, dbuf_diag_t *diag);

/** \brief Free a checkpoint description; NULL is accepted. Not collective. */
DBUF_EXPORT void dbuf_st_destroy(dbuf_st_t *st);

/**
 * \brief The tensor list (names and shapes in tensor-id order).
 * \return borrowed pointer valid until dbuf_st_destroy(); NULL if st is NULL
 */
DBUF_EXPORT const dbuf_tensors_t *dbuf_st_tensors(const dbuf_st_t *st);

/** \brief Number of data files read (0 for NULL). */
DBUF_EXPORT int64_t dbuf_st_file_count(const dbuf_st_t *st);

/**
 * \brief Path of data file f, as opened (index entries joined to the index's
 *        directory).
 * \return borrowed string valid until dbuf_st_destroy(); NULL if f is out of range
 */
DBUF_EXPORT const char *dbuf_st_file_path(const dbuf_st_t *st, int64_t f);

/**
 * \brief Whether data file f is still the file whose header dbuf_st_open()
 *        read: the same device and inode, size and modification time.
 *
 * The loaders call it on every file they open for data, so that a file
 * replaced (renamed over) or written again since its header was read is
 * refused instead of read at the old offsets.  Not collective.
 * \param fd  an open descriptor of the file to check (fstat), or -1 to
 *            check the path (stat)
 * \return 0, or DBUF_EIO ("PATH: changed since its header was read: ..."),
 *   DBUF_ENOTFOUND (the path is gone), DBUF_EINVAL (NULL st, f out of range)
 */
DBUF_EXPORT int dbuf_st_file_check(const dbuf_st_t *st, int64_t f, int fd, dbuf_diag_t *diag);

/**
 * \brief Where tensor id lives.
 * \param[out] info  filled on success; its strings are borrowed (see dbuf_st_info_t)
 * \return 0, or DBUF_EINVAL (NULL argument), DBUF_ERANGE (id out of range)
 */
DBUF_EXPORT int dbuf_st_tensor_info(const dbuf_st_t *st, int64_t id,
                                    dbuf_st_info_t *info);

/**
 * \brief 64-bit FNV-1a digest of what was read, for ranks to compare.
 *
 * Covers, in file order, each file's 8-byte length prefix and header bytes,
 * then the tensor names in tensor-id order.  Equal digests mean (up to hash
 * collisions) the same tensors, shapes, dtypes, offsets and order; file paths
 * are not covered.  Not cryptographic.  0 for NULL.
 */
DBUF_EXPORT uint64_t dbuf_st_digest(const dbuf_st_t *st);

/**
 * \brief Bits per element of a safetensors dtype name (e.g. "F4" -> 4).
 * \return 0 and *bits, or DBUF_EINVAL (NULL argument), DBUF_ENOTFOUND (unknown name)
 */
DBUF_EXPORT int dbuf_st_dtype_bits(const char *name, int *bits);

/**
 * \brief Bytes per element of a safetensors dtype name (e.g. "BF16" -> 2).
 * \return 0 and *elem_size, or DBUF_EINVAL (NULL argument),
 *   DBUF_ENOTFOUND (unknown name), DBUF_EUNSUPPORTED (sub-byte dtype: F4, F6_*)
 */
DBUF_EXPORT int dbuf_st_dtype_size(const char *name, int64_t *elem_size);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_SAFETENSORS_H */
