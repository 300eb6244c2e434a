/*
 * dbuf-shard: the binary wire format of a whole layout.
 *
 * Not collective.  A message carries everything a layout is made of: its
 * kind, rank count, block and chunk size, buffer size, the tensor list (names
 * and shapes), every tensor offset, the rank ranges and the owners.  It is
 * what rank 0 broadcasts, and its checksum is the identity ranks compare to
 * prove they hold the same plan.
 *
 * Format version 2, the compact format (integers little-endian, written
 * byte by byte, so the bytes are the same on every host; "word": 64 bits,
 * signed values in two's complement; "u32": 32 bits):
 *
 *   header, 128 bytes (16 words):
 *     0 magic "DBUFWIRE"          8 format version (2)
 *    16 total bytes, trailer in  24 header bytes (128)
 *    32 kind (1..4)              40 nranks (1 .. INT_MAX)
 *    48 block_size               56 chunk_size
 *    64 size                     72 tensors (0 .. 2^32 - 1)
 *    80 layout flags (0)         88 distinct shapes (0 .. tensors)
 *    96 sections                 104 record bytes per tensor (16 .. 256)
 *   112 reserved (0)             120 XXH3-64 of bytes [0, 120)
 *   sections, each: tag (word), payload bytes (word), payload, in any order:
 *     1 SHAPES:  per distinct shape, in order of first use: ndim (u32,
 *                1 .. DBUF_MAX_DIMS), then its dims (words)
 *     2 TENSORS: per tensor a fixed record of "record bytes": shape index
 *                (u32), name prefix (u32: bytes shared with the previous
 *                tensor's name), name suffix bytes (u32), flags (u32, 0);
 *                a reader skips record bytes past the 16 it knows (room for
 *                later per-tensor fields: element size, Muon or checkpoint
 *                resharding data)
 *     3 NAMES:   every name suffix back to back (no NUL), tensor order
 *     4 OFFSETS: one word per tensor
 *     5 RANGE:   nranks + 1 words
 *     6 OWNERS:  one u32 per tensor (TENSOR kind only)
 *     tags >= 256 are optional: a reader skips the ones it does not know, so
 *     later messages (a Muon gather/scatter plan, a resharding map) can ride
 *     along without a new version
 *   trailer: XXH3-64 of every byte before it.
 *
 * Every count and length read is checked against the bytes that hold it
 * before use (products and sums overflow-checked); a structural error
 * behind a good checksum is DBUF_EFORMAT naming the section, shape or
 * tensor.  Version 1 (one record per tensor with its name and dims in
 * words: about 1.6x the bytes for a MoE-like list) is no longer read: a
 * version 1 message is refused with DBUF_EVERSION ("format version 1, this
 * build reads only version 2"); all ranks of a job run one build, and the
 * format is not a file format (JSON is, dbuf/layout_json.h).
 *
 * Plan messages (format version 2: version 1 embedded version 1 layouts)
 * carry a whole plan (dbuf/plan.h): every
 * buffer's unit name and dtype, then the buffer's layout as one complete
 * layout message above, so each buffer keeps its own checksum (the identity
 * dbuf_comm_verify_structure() compares):
 *
 *   header, 64 bytes (8 words):
 *     0 magic "DBUFPLAN"          8 format version (2)
 *    16 total bytes, trailer in  24 buffers
 *    32 nranks of every buffer   40, 48 reserved (0)
 *    56 XXH3-64 of bytes [0, 56)
 *   per buffer, in plan order:
 *     unit name bytes (1 .. DBUF_WIRE_UNIT_MAX), the name (no blank or
 *     control character, no NUL), dtype (dbuf/dtype.h number, with a byte
 *     size), layout message bytes, the layout message
 *   trailer: XXH3-64 of every byte before it.
 *
 * Thread safety: no global state; any thread, one layout shared read-only.
 * Ownership: dbuf_wire_encode() returns a message freed with dbuf_free();
 * dbuf_wire_decode() copies what it needs from the message and returns a
 * layout freed with dbuf_layout_destroy().
 */
#ifndef DBUF_WIRE_H
#define DBUF_WIRE_H

#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/plan.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The 8 magic bytes at the start of every message. */
#define DBUF_WIRE_MAGIC "DBUFWIRE"
/** The format version this library writes and reads. */
#define DBUF_WIRE_VERSION 2
/** Header bytes of version 2 (as of version 1). */
#define DBUF_WIRE_HEADER_BYTES 128
/** Smallest possible message: a header and the trailer. */
#define DBUF_WIRE_MIN_BYTES (DBUF_WIRE_HEADER_BYTES + 8)

/**
 * \brief Serialize a layout.
 *
 * Not collective.  Deterministic: the same layout gives the same bytes.
 * \param[in]  l      the layout (not modified)
 * \param[out] buf    malloc'd message; dbuf_free() it
 * \param[out] len    its length in bytes
 * \return 0
 * \return DBUF_EINVAL     NULL argument
 * \return DBUF_EOVERFLOW  the message would exceed INT64_MAX or SIZE_MAX bytes,
 *                         or its names share so much that they decode to
 *                         more than 64 times its bytes plus 64 MiB
 * \return DBUF_ENOMEM     out of memory
 */
DBUF_EXPORT int dbuf_wire_encode(const dbuf_layout_t *l, void **buf, int64_t *len,
                                 dbuf_diag_t *diag);

/**
 * \brief Rebuild a layout from a message.
 *
 * Not collective.  Checks, in this order: the magic, the header checksum, the
 * total length against len, the trailer checksum, the version, then every
 * length and count inside the sections, and assembles the layout with the
 * checks of dbuf_layout_from_parts().  Decodes into one tensor list whose
 * arrays are reserved up front (no allocation per tensor), its names checked
 * for duplicates in one pass.  A message that is the encoder's own bytes for
 * the layout gives a layout that carries the message's checksum as its
 * digest (dbuf_wire_digest()).  It does NOT check the layout's invariants: run
 * dbuf_layout_validate() on the result.  A bit flip anywhere but in the magic
 * is reported as DBUF_ECHECKSUM.
 * \param[in]  buf, len  the message
 * \param[out] out       the layout, freed with dbuf_layout_destroy()
 * \return 0
 * \return DBUF_EINVAL        NULL argument, negative len
 * \return DBUF_EFORMAT       bad magic, truncated or over-long message, a
 *                            length or count that does not fit the message,
 *                            a missing or repeated section, names that
 *                            decode to more than 64 times the message's
 *                            bytes plus 64 MiB (front coding's bound)
 * \return DBUF_ECHECKSUM     header or trailer checksum mismatch
 * \return DBUF_EVERSION      a format version other than DBUF_WIRE_VERSION
 * \return DBUF_ESHAPE, DBUF_EDUP, DBUF_EOVERFLOW, DBUF_EOWNER, DBUF_ENRANKS,
 *         DBUF_ELAYOUT (also a range that does not end at the size, or does
 *         not start at 0), DBUF_EINVAL (a block size < 1), DBUF_ENOMEM  from
 *         rebuilding the tensors and layout (dbuf_layout_from_parts())
 */
DBUF_EXPORT int dbuf_wire_decode(const void *buf, int64_t len, dbuf_layout_t **out,
                                 dbuf_diag_t *diag);

/**
 * \brief The checksum of a message (its trailer), without decoding it.
 *
 * Not collective.
 * \return 0, or DBUF_EINVAL (NULL), DBUF_EFORMAT (shorter than DBUF_WIRE_MIN_BYTES)
 */
DBUF_EXPORT int dbuf_wire_checksum(const void *buf, int64_t len, uint64_t *sum);

/**
 * \brief The identity of a layout: the checksum of its message.
 *
 * Not collective.  Two layouts have the same digest if and only if (up to
 * XXH3 collisions) every field of them is equal.  A layout decoded by
 * dbuf_wire_decode() from the encoder's own bytes for it (every message
 * dbuf_wire_encode() writes) carries that message's checksum, which is its
 * digest: O(1); so does each layout of a plan rank 0 sent with
 * dbuf_comm_share_plan(), with the checksum of what it sent.  Any other
 * layout (built, read from JSON, derived from a decoded one, or decoded
 * from a message a later writer extended) is encoded again and hashed as
 * it is written, 64 KiB at a time:
 * O(tensors) time, O(distinct shapes) memory and 8 bytes a tensor, not the
 * message.
 * \return 0, or the errors of dbuf_wire_encode()
 */
DBUF_EXPORT int dbuf_wire_digest(const dbuf_layout_t *l, uint64_t *digest,
                                 dbuf_diag_t *diag);

/** The 8 magic bytes of a plan message. */
#define DBUF_WIRE_PLAN_MAGIC "DBUFPLAN"
/** The plan format version this library writes and reads. */
#define DBUF_WIRE_PLAN_VERSION 2
/** Header bytes of a plan message. */
#define DBUF_WIRE_PLAN_HEADER_BYTES 64
/** Smallest plan message: a header and the trailer (no buffers). */
#define DBUF_WIRE_PLAN_MIN_BYTES (DBUF_WIRE_PLAN_HEADER_BYTES + 8)
/** Longest unit name a plan message carries, in bytes. */
#define DBUF_WIRE_UNIT_MAX 4096

/**
 * \brief Serialize a plan: every buffer's unit, dtype and layout message.
 *
 * Not collective.  Deterministic.
 * \param[out] buf  malloc'd message; dbuf_free() it
 * \param[out] len  its length in bytes
 * \return 0, or DBUF_EINVAL (NULL argument, a unit name longer than
 *   DBUF_WIRE_UNIT_MAX or with a blank or control character, which
 *   dbuf_wire_plan_decode() would refuse), DBUF_EOVERFLOW, DBUF_ENOMEM, the errors of
 *   dbuf_wire_encode()
 */
DBUF_EXPORT int dbuf_wire_plan_encode(const dbuf_plan_t *p, void **buf, int64_t *len,
                                      dbuf_diag_t *diag);

/**
 * \brief Rebuild a plan from a plan message.
 *
 * Not collective.  Checks the magic, the header checksum, the total length,
 * the trailer checksum, the version, the buffer count against the length,
 * then each buffer: its name, dtype and layout length against the bytes
 * left, the layout message (dbuf_wire_decode(), whose errors it returns with
 * "plan buffer I (UNIT/DTYPE): " before the message), the rank count against
 * the header's, and that no byte follows the last buffer.  Like
 * dbuf_wire_decode() it does not validate the layouts' invariants.  The
 * plan's buffers have no model ids.
 * \param[out] out  the plan, freed with dbuf_plan_destroy()
 * \return 0, or DBUF_EINVAL (NULL, negative len), DBUF_EFORMAT,
 *   DBUF_ECHECKSUM, DBUF_EVERSION, DBUF_ENRANKS (a buffer of another rank
 *   count), DBUF_EDUP (a unit and dtype twice), DBUF_ENOMEM, the errors of
 *   dbuf_wire_decode()
 */
DBUF_EXPORT int dbuf_wire_plan_decode(const void *buf, int64_t len, dbuf_plan_t **out,
                                      dbuf_diag_t *diag);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_WIRE_H */
