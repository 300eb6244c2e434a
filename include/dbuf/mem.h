/*
 * dbuf-shard: the mem layer -- hardware topology, CPU binding and NUMA-bound
 * memory segments (hwloc underneath; no MPI).
 *
 * Not collective: nothing here communicates.  Every function acts on the
 * calling process only; callers that run one process per MPI rank pass the
 * rank's index on its node (its "local index") where a choice depends on it.
 *
 * Life cycle: dbuf_topo_create() once per process (loading the real topology
 * reads sysfs and costs milliseconds), then bind, allocate segments, locate
 * their pages, free the segments, dbuf_topo_destroy().  A topology must
 * outlive every segment allocated with it.  Read-only use of one topology from
 * several threads is safe (hwloc's rule); the library keeps no global state.
 *
 * Synthetic and XML topologies (dbuf_topo_is_thissystem() == 0) describe a
 * machine without being it: they test the SELECTION of CPUs and NUMA nodes,
 * never binding.  On them CPU binding is refused, strict memory binding is
 * refused, non-strict segments are plain allocations recorded as not bound,
 * and dbuf_seg_locate() reports "unknown".
 *
 * Strings of CPUs and NUMA nodes are hwloc "list" strings of OS indexes, as
 * Linux prints them: "0", "0-3", "0,2,4-5"; an empty set is "".
 *
 * Errors follow dbuf/error.h: 0 or a negative DBUF_E* code, out-pointers
 * written only on success, a line for people in diag when it is not NULL.
 *
 * Thread safety: read-only use of one topology from several threads is
 * safe; binding acts on the whole process (all its threads), so bind before
 * starting threads.  A segment belongs to one thread at a time for
 * allocation, locating and freeing; its memory is the caller's to share.
 * Ownership: dbuf_topo_create() returns a topology freed with
 * dbuf_topo_destroy(), which must outlive its segments; dbuf_seg_alloc()
 * returns a segment freed with dbuf_seg_free() (memory and record together);
 * strings a segment returns are borrowed, valid until dbuf_seg_free().
 */
#ifndef DBUF_MEM_H
#define DBUF_MEM_H

#include "dbuf/error.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A buffer size that holds the CPU or node list of most machines. */
#define DBUF_MEM_LIST_LEN 256

/** Transparent huge page size assumed by DBUF_SEG_HUGEPAGE (x86-64, 4 KiB base pages). */
#define DBUF_HUGEPAGE_BYTES ((int64_t)2 * 1024 * 1024)

/** At most this many pages are inspected by dbuf_seg_locate() (and by the
 *  binding check of dbuf_seg_alloc()); larger segments are sampled. */
#define DBUF_LOCATE_MAX_PAGES 4096

/* ------------------------------------------------------------------------ */
/* Topology                                                                  */
/* ------------------------------------------------------------------------ */

/** Opaque hardware topology (an hwloc topology, loaded). */
typedef struct dbuf_topo dbuf_topo_t;

/**
 * \brief Load a topology: the real system, a synthetic description or an XML file.
 *
 * Not collective.
 * \param[out] out   the loaded topology, to be freed with dbuf_topo_destroy()
 * \param[in]  synthetic_or_null
 *   NULL: this machine.  A string naming a readable file, or ending in
 *   ".xml": an hwloc XML export (not this system).  Anything else: an hwloc
 *   synthetic description such as "pack:2 numa:2 core:2 pu:1" (4 NUMA nodes,
 *   8 PUs; not this system).  The string is copied.
 * \param[out] diag  optional
 * \return 0 on success
 * \return DBUF_EINVAL   out is NULL
 * \return DBUF_ETOPO    hwloc library of another major version, bad synthetic
 *                       description, unreadable or invalid XML, load failure,
 *                       a topology without NUMA nodes
 * \return DBUF_ENOMEM   out of memory
 */
DBUF_EXPORT int dbuf_topo_create(dbuf_topo_t **out, const char *synthetic_or_null,
                                 dbuf_diag_t *diag);

/** \brief Free a topology; NULL is accepted.  Not collective. */
DBUF_EXPORT void dbuf_topo_destroy(dbuf_topo_t *topo);

/**
 * \brief Whether the topology is this machine (1) or a synthetic/XML description (0).
 *
 * Not collective.  Only a topology of this machine can bind CPUs or memory.
 * \return 1 or 0; 0 for NULL.
 */
DBUF_EXPORT int dbuf_topo_is_thissystem(const dbuf_topo_t *topo);

/** \brief Number of NUMA nodes (>= 1); 0 for NULL.  Not collective. */
DBUF_EXPORT int dbuf_topo_numa_count(const dbuf_topo_t *topo);

/** \brief Number of cores (>= 1 on Linux); 0 for NULL.  Not collective. */
DBUF_EXPORT int dbuf_topo_core_count(const dbuf_topo_t *topo);

/* ------------------------------------------------------------------------ */
/* CPU binding                                                               */
/* ------------------------------------------------------------------------ */

/** How to bind the calling process to CPUs. */
typedef enum dbuf_bind {
  DBUF_BIND_NONE = 0, /**< leave the binding as it is */
  DBUF_BIND_CORE = 1, /**< core (local_index mod cores), by logical index */
  DBUF_BIND_NUMA = 2  /**< CPUs of NUMA node (local_index mod nodes with CPUs) */
} dbuf_bind_t;

/**
 * \brief Parse "none", "core" or "numa".
 *
 * Not collective.
 * \param[in]  s     the text, exact lower case
 * \param[out] out   the binding kind
 * \return 0, DBUF_EINVAL (NULL argument), DBUF_EPARSE (other text; diag quotes it)
 */
DBUF_EXPORT int dbuf_bind_parse(const char *s, dbuf_bind_t *out, dbuf_diag_t *diag);

/**
 * \brief The current CPU binding of the calling process and its local NUMA nodes.
 *
 * Not collective.  Needs the topology of this machine.
 * \param[in]  topo
 * \param[out] cpus       list of the PUs the process may run on ("0-1"),
 *                        cut to the topology's CPUs; cpus_len bytes of room
 * \param[out] nodes      list of the NUMA nodes local to those PUs (the nodes
 *                        whose CPUs intersect them); nodes_len bytes of room
 * \param[out] is_bound   1 if the binding is narrower than the whole machine,
 *                        0 if the process may run anywhere; may be NULL
 * \return 0 on success
 * \return DBUF_EINVAL       NULL topo, cpus or nodes
 * \return DBUF_EUNSUPPORTED topology is synthetic or XML
 * \return DBUF_EBIND        the OS does not report the binding
 * \return DBUF_ENOBUFS      a buffer is too small (diag says how much is needed)
 * \return DBUF_ENOMEM       out of memory
 */
DBUF_EXPORT int dbuf_topo_get_cpubind(const dbuf_topo_t *topo, char *cpus, size_t cpus_len,
                                      char *nodes, size_t nodes_len, int *is_bound,
                                      dbuf_diag_t *diag);

/**
 * \brief The CPUs dbuf_topo_bind() would bind to, without binding.
 *
 * Not collective.  Works on synthetic and XML topologies (selection only).
 * \param[in]  how          DBUF_BIND_CORE or DBUF_BIND_NUMA
 * \param[in]  local_index  >= 0, the process's index among those on its node;
 *                          taken modulo the number of cores / of NUMA nodes
 *                          that have CPUs (memory-only nodes are skipped)
 * \param[out] cpus         the PU list, cpus_len bytes of room
 * \return 0, DBUF_EINVAL (NULL argument, DBUF_BIND_NONE or unknown how,
 *         negative local_index), DBUF_ETOPO (no cores / no node with CPUs),
 *         DBUF_ENOBUFS (buffer too small), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_topo_bind_target(const dbuf_topo_t *topo, dbuf_bind_t how, int local_index,
                                      char *cpus, size_t cpus_len, dbuf_diag_t *diag);

/**
 * \brief Bind the calling process (all its threads) to CPUs.
 *
 * Not collective.  DBUF_BIND_NONE returns 0 and changes nothing (also on a
 * synthetic topology).  Otherwise the target of dbuf_topo_bind_target() is
 * applied and read back; a binding that does not read back equal fails.
 * \return 0 on success
 * \return DBUF_EINVAL       NULL topo, unknown how, negative local_index
 * \return DBUF_EUNSUPPORTED topology is synthetic or XML (nothing to bind)
 * \return DBUF_ETOPO        no cores / no NUMA node with CPUs
 * \return DBUF_EBIND        the OS refused, or the binding did not take
 * \return DBUF_ENOMEM       out of memory
 */
DBUF_EXPORT int dbuf_topo_bind(const dbuf_topo_t *topo, dbuf_bind_t how, int local_index,
                               dbuf_diag_t *diag);

/* ------------------------------------------------------------------------ */
/* Memory policy                                                             */
/* ------------------------------------------------------------------------ */

/** Where a segment's memory should live. */
typedef enum dbuf_membind_kind {
  DBUF_MEMBIND_NONE = 0,      /**< plain allocation, first-touch placement */
  DBUF_MEMBIND_LOCAL = 1,     /**< the NUMA nodes local to the CPU binding */
  DBUF_MEMBIND_NODE = 2,      /**< one NUMA node, by OS index */
  DBUF_MEMBIND_INTERLEAVE = 3 /**< pages interleaved over every NUMA node */
} dbuf_membind_kind_t;

/** A memory policy.  Plain data; initialise every field. */
typedef struct dbuf_membind {
  dbuf_membind_kind_t kind;
  int node;   /**< NUMA node OS index for DBUF_MEMBIND_NODE, else ignored */
  int strict; /**< 1: a binding that does not really happen is DBUF_EBIND;
                   0: fall back to a plain allocation and record "not bound" */
} dbuf_membind_t;

/**
 * \brief Parse "local", "node:N" (N a decimal OS index), "interleave" or "none".
 *
 * Not collective.  Whether node N exists is checked later, against a
 * topology.  The result has strict = 0; the caller sets it.
 * \return 0, DBUF_EINVAL (NULL argument), DBUF_EPARSE (other text, missing,
 *         signed, non-decimal or out-of-range N; diag quotes the text)
 */
DBUF_EXPORT int dbuf_membind_parse(const char *s, dbuf_membind_t *out, dbuf_diag_t *diag);

/**
 * \brief The NUMA nodes a policy selects, without allocating.
 *
 * Not collective.  Works on synthetic and XML topologies (selection only).
 * DBUF_MEMBIND_LOCAL takes the nodes whose CPUs intersect the CPU binding;
 * when the binding covers the whole machine (an unbound process) that is
 * every node with CPUs, a deterministic choice that \p note states.
 * \param[in]  policy
 * \param[in]  cpus_or_null  CPU list standing for the binding (for LOCAL);
 *                           NULL: the process's binding on this machine, the
 *                           whole machine on a synthetic/XML topology
 * \param[out] nodes         node list ("" for DBUF_MEMBIND_NONE), nodes_len bytes
 * \param[out] note          optional (may be NULL): why the choice was made when
 *                           it is not obvious, else ""; note_len bytes
 * \return 0 on success
 * \return DBUF_EINVAL  NULL argument, unknown kind, negative node, strict not 0/1,
 *                      empty or malformed cpus
 * \return DBUF_ERANGE  node N does not exist (diag names N and the node count);
 *                      cpus outside the topology
 * \return DBUF_ENOBUFS a buffer too small
 * \return DBUF_ETOPO   the CPU binding has no local NUMA node
 * \return DBUF_EBIND   the OS does not report the process's binding
 * \return DBUF_ENOMEM  out of memory
 */
DBUF_EXPORT int dbuf_membind_select(const dbuf_topo_t *topo, const dbuf_membind_t *policy,
                                    const char *cpus_or_null, char *nodes, size_t nodes_len,
                                    char *note, size_t note_len, dbuf_diag_t *diag);

/* ------------------------------------------------------------------------ */
/* Segments                                                                  */
/* ------------------------------------------------------------------------ */

/** Opaque memory segment: one allocation with its binding record. */
typedef struct dbuf_seg dbuf_seg_t;

/** madvise(MADV_HUGEPAGE) before first touch, for segments >= DBUF_HUGEPAGE_BYTES;
 *  the segment then starts on a DBUF_HUGEPAGE_BYTES boundary. */
#define DBUF_SEG_HUGEPAGE 0x1u
/** mlock the segment (this faults every page in, under the policy). */
#define DBUF_SEG_LOCK 0x2u

/**
 * \brief Allocate a segment of \p bytes under a memory policy.
 *
 * Not collective.  The pages are not touched (except with DBUF_SEG_LOCK), so
 * with a policy placing them they land when first written.  Binding is
 * applied with hwloc (HWLOC_MEMBIND_BYNODESET; HWLOC_MEMBIND_STRICT when
 * policy->strict) and read back on up to DBUF_LOCATE_MAX_PAGES evenly spaced
 * pages: the segment is "bound" only if every such page reports the intended
 * policy and nodes.  A zero-byte segment (an empty rank) allocates nothing,
 * has ptr NULL and is never "bound"; it never fails for strictness on this
 * machine (a strict policy on a synthetic/XML topology fails at any size).
 * \param[in]  topo    must outlive the segment
 * \param[in]  bytes   >= 0
 * \param[in]  policy  copied; see dbuf_membind_select() for the nodes chosen
 * \param[in]  flags   0 or DBUF_SEG_HUGEPAGE | DBUF_SEG_LOCK
 * \param[out] out     the segment, to be freed with dbuf_seg_free()
 * \return 0 on success
 * \return DBUF_EINVAL     NULL argument, bytes < 0, unknown flag or kind
 * \return DBUF_EOVERFLOW  bytes (plus huge page alignment) does not fit size_t
 * \return DBUF_ERANGE, DBUF_ETOPO  as dbuf_membind_select()
 * \return DBUF_EBIND      strict policy on a synthetic/XML topology, or the
 *                         binding failed or did not read back (strict only)
 * \return DBUF_EMLOCK     DBUF_SEG_LOCK and mlock failed; diag names
 *                         RLIMIT_MEMLOCK's current value and the bytes needed
 * \return DBUF_ENOMEM     the allocation failed
 */
DBUF_EXPORT int dbuf_seg_alloc(const dbuf_topo_t *topo, int64_t bytes,
                               const dbuf_membind_t *policy, unsigned flags, dbuf_seg_t **out,
                               dbuf_diag_t *diag);

/** \brief Free a segment and its memory; NULL is accepted.  Not collective. */
DBUF_EXPORT void dbuf_seg_free(dbuf_seg_t *seg);

/**
 * \brief Fraction of the segment's pages that reside on its intended nodes.
 *
 * Not collective.  Call after the memory has been written: untouched pages
 * have no node and count as not on the intended nodes.  Each page is queried
 * on its own (hwloc_get_area_memlocation on a whole area gives only the union
 * of nodes); segments of more than DBUF_LOCATE_MAX_PAGES pages are sampled at
 * DBUF_LOCATE_MAX_PAGES evenly spaced pages, first and last included.
 * \param[out] frac_on_intended  in [0, 1]; -1 for "unknown": a synthetic/XML
 *             topology, a zero-byte segment, or DBUF_MEMBIND_NONE (no intended nodes)
 * \param[out] pages_sampled     pages queried (0 when unknown); may be NULL
 * \return 0, DBUF_EINVAL (NULL seg or frac_on_intended), DBUF_ETOPO (the query
 *         failed), DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_seg_locate(const dbuf_seg_t *seg, double *frac_on_intended,
                                int64_t *pages_sampled, dbuf_diag_t *diag);

/** \brief Start of the segment's memory; NULL for zero bytes (or NULL seg).  Not collective. */
DBUF_EXPORT void *dbuf_seg_ptr(const dbuf_seg_t *seg);

/** \brief Size in bytes as requested; 0 for NULL.  Not collective. */
DBUF_EXPORT int64_t dbuf_seg_bytes(const dbuf_seg_t *seg);

/**
 * \brief The intended NUMA nodes as a list ("0", "0-1"; "" for DBUF_MEMBIND_NONE).
 *
 * Not collective.  Borrowed: valid until dbuf_seg_free().  "" for NULL.
 */
DBUF_EXPORT const char *dbuf_seg_nodes(const dbuf_seg_t *seg);

/** \brief 1 if the binding really happened and read back, else 0.  Not collective. */
DBUF_EXPORT int dbuf_seg_is_bound(const dbuf_seg_t *seg);

/** \brief 1 if madvise(MADV_HUGEPAGE) was applied, else 0 (flag absent,
 *  segment under DBUF_HUGEPAGE_BYTES, synthetic topology, or madvise refused).
 *  Whether the kernel then used huge pages is its choice.  Not collective. */
DBUF_EXPORT int dbuf_seg_hugepage(const dbuf_seg_t *seg);

/** \brief 1 if the segment is mlocked, else 0.  Not collective. */
DBUF_EXPORT int dbuf_seg_is_locked(const dbuf_seg_t *seg);

/**
 * \brief Why the segment is as it is, when that is not obvious ("" otherwise):
 * an unbound process under DBUF_MEMBIND_LOCAL, a binding that fell back,
 * huge page advice not applied.
 *
 * Not collective.  Borrowed: valid until dbuf_seg_free().  "" for NULL.
 */
DBUF_EXPORT const char *dbuf_seg_note(const dbuf_seg_t *seg);

/* ------------------------------------------------------------------------ */
/* Available memory                                                          */
/* ------------------------------------------------------------------------ */

/** What the calling process can have, in bytes; -1 where unknown. */
typedef struct dbuf_mem_avail {
  char nodes[DBUF_MEM_LIST_LEN]; /**< the NUMA nodes counted ("0", "0-1"; "" none) */
  int64_t numa_free;     /**< MemFree summed over those nodes (sysfs node meminfo) */
  int64_t numa_total;    /**< their memory as hwloc reports it (local_memory) */
  int64_t mem_available; /**< MemAvailable of /proc/meminfo (the whole machine) */
  char cgroup[256];      /**< the process's cgroup v2 path ("" unknown) */
  int64_t cgroup_room;   /**< the least memory.max - memory.current over that
                              cgroup and its ancestors; -1: no limit or unknown */
} dbuf_mem_avail_t;

/**
 * \brief Read what memory the calling process can have: the free memory of
 * the NUMA nodes it will allocate on, MemAvailable, and its cgroup's room.
 *
 * Not collective.  Reads ROOT/sys/devices/system/node/nodeN/meminfo for each
 * node of nodes, ROOT/proc/meminfo, ROOT/proc/self/cgroup and the
 * memory.max and memory.current files of that cgroup and its ancestors under
 * ROOT/sys/fs/cgroup.  A file that is missing or unreadable leaves its figure
 * -1 (unknown), never an error: a container may hide any of them.
 * \param[in]  topo   the node totals (hwloc) come from it
 * \param[in]  nodes  NUMA node list (OS indexes); "" for none
 * \param[in]  root   prefix of every path (tests); NULL or "" for "/"
 * \param[out] out    the figures
 * \return 0, DBUF_EINVAL (NULL topo, nodes or out; nodes not a list),
 *   DBUF_ENOMEM
 */
DBUF_EXPORT int dbuf_mem_available(const dbuf_topo_t *topo, const char *nodes, const char *root,
                                   dbuf_mem_avail_t *out, dbuf_diag_t *diag);

/**
 * \brief The value of KEY in a meminfo text ("KEY:   123 kB", lines of a
 * node's file start with "Node N "), in bytes.  Not collective.
 * \return 0, DBUF_EINVAL (NULL, empty key), DBUF_ENOTFOUND (no such line),
 *   DBUF_EPARSE (not a number, a unit other than kB, overflow)
 */
DBUF_EXPORT int dbuf_mem_parse_meminfo(const char *text, const char *key, int64_t *bytes);

/**
 * \brief The cgroup v2 path of a /proc/PID/cgroup text (its "0::/PATH" line).
 * Not collective.
 * \return 0, DBUF_EINVAL, DBUF_ENOTFOUND (no v2 line), DBUF_EPARSE (no path),
 *   DBUF_ENOBUFS (path longer than len - 1)
 */
DBUF_EXPORT int dbuf_mem_parse_cgroup_path(const char *text, char *path, size_t len);

/**
 * \brief A memory.max or memory.current value: bytes, or -1 for "max".
 * Not collective.
 * \return 0, DBUF_EINVAL, DBUF_EPARSE
 */
DBUF_EXPORT int dbuf_mem_parse_cgroup_value(const char *text, int64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* DBUF_MEM_H */
