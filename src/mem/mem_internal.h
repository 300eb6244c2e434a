/* Internal to the mem layer: the topology handle and helpers shared by
 * mem_topo.c, mem_policy.c and mem_seg.c.  Includes hwloc; never included by
 * the core, the comm layer or the CLI. */
#ifndef DBUF_MEM_INTERNAL_H
#define DBUF_MEM_INTERNAL_H

#include "dbuf/mem.h"
#include "core_internal.h"

#include <hwloc.h>

struct dbuf_topo {
  hwloc_topology_t h; /* loaded; read-only after dbuf_topo_create() */
  int thissystem;     /* hwloc_topology_is_thissystem(), cached */
  char *desc;         /* "this system", "synthetic \"...\"" or "XML file \"...\"" */
};

/* Write the list string of set into buf (len bytes) or fail with DBUF_ERANGE
 * naming `what` and the size needed. */
int dbuf__list_out(hwloc_const_bitmap_t set, char *buf, size_t len, const char *what,
                   dbuf_diag_t *diag);

/* The CPUs the process may run on, cut to the topology's CPUs; on a
 * synthetic/XML topology the whole machine (there is no process binding to
 * read).  out must be allocated. */
int dbuf__process_cpuset(const dbuf_topo_t *topo, hwloc_cpuset_t out, dbuf_diag_t *diag);

/* Select the nodes of a policy.  binding NULL: dbuf__process_cpuset().  On
 * success nodes holds the intended nodeset (empty for NONE), *hpol the hwloc
 * policy, note (when not NULL) an explanation or "". */
int dbuf__membind_nodes(const dbuf_topo_t *topo, const dbuf_membind_t *policy,
                        hwloc_const_cpuset_t binding, hwloc_nodeset_t nodes,
                        hwloc_membind_policy_t *hpol, char *note, size_t note_len,
                        dbuf_diag_t *diag);

/* Index of the i-th of n sampled pages among npages (n = min(npages,
 * DBUF_LOCATE_MAX_PAGES)): every page when npages <= DBUF_LOCATE_MAX_PAGES,
 * else evenly spaced with the first and last included. */
int64_t dbuf__sample_count(int64_t npages);
int dbuf__sample_page(int64_t i, int64_t n, int64_t npages, int64_t *page);

#endif /* DBUF_MEM_INTERNAL_H */
