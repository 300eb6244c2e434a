/* Memory segments: allocation under a policy, binding check, page location. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MADV_HUGEPAGE */
#endif

#include "mem_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

struct dbuf_seg {
  const dbuf_topo_t *topo;     /* borrowed; hwloc_free needs it */
  void *base;                  /* what hwloc_alloc returned (NULL when empty) */
  size_t alloc_len;            /* what hwloc_alloc was given */
  void *ptr;                   /* start of the caller's bytes (huge page aligned) */
  int64_t bytes;               /* the caller's size */
  dbuf_membind_t policy;       /* as given */
  hwloc_nodeset_t nodes;       /* intended nodes; empty for DBUF_MEMBIND_NONE */
  hwloc_membind_policy_t hpol; /* intended hwloc policy */
  char *nodes_str;             /* list string of nodes (hwloc-allocated, free()) */
  int bound;                   /* binding applied and read back on every sampled page */
  int hugepage;                /* madvise(MADV_HUGEPAGE) applied */
  int locked;                  /* mlock succeeded */
  char note[DBUF_DIAG_LEN];
};

static void note_add(dbuf_seg_t *seg, const char *fmt, ...) DBUF__PRINTF(2, 3);

static void
note_add(dbuf_seg_t *seg, const char *fmt, ...)
{
  size_t used = strlen(seg->note);
  if (used > 0 && used + 2 < sizeof seg->note) {
    memcpy(seg->note + used, "; ", 3);
    used += 2;
  }
  if (used + 1 >= sizeof seg->note)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(seg->note + used, sizeof seg->note - used, fmt, ap);
  va_end(ap);
}

int64_t
dbuf__sample_count(int64_t npages)
{
  return npages < DBUF_LOCATE_MAX_PAGES ? npages : DBUF_LOCATE_MAX_PAGES;
}

int
dbuf__sample_page(int64_t i, int64_t n, int64_t npages, int64_t *page)
{
  assert(0 <= i && i < n && n <= npages);
  if (n == npages) {
    *page = i;
    return 0;
  }
  /* n >= 2 here: spread i = 0 .. n-1 over pages 0 .. npages-1. */
  int64_t prod;
  int rc = dbuf__mul(i, npages - 1, &prod);
  if (rc == 0)
    *page = prod / (n - 1);
  return rc;
}

static const char *
hpol_name(hwloc_membind_policy_t pol)
{
  switch (pol) {
  case HWLOC_MEMBIND_DEFAULT:
    return "default";
  case HWLOC_MEMBIND_FIRSTTOUCH:
    return "first-touch";
  case HWLOC_MEMBIND_BIND:
    return "bind";
  case HWLOC_MEMBIND_INTERLEAVE:
    return "interleave";
  case HWLOC_MEMBIND_NEXTTOUCH:
    return "next-touch";
  case HWLOC_MEMBIND_MIXED:
    return "mixed";
  default:
    return "unknown";
  }
}

static int64_t
page_size(void)
{
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? (int64_t)ps : 4096;
}

/* Read the binding back on the sampled pages of [ptr, ptr+bytes).  1: every
 * page has the intended policy and nodes; 0: not (why in `why`); < 0 error. */
static int
check_binding(const dbuf_seg_t *seg, char *why, size_t why_len, dbuf_diag_t *diag)
{
  int64_t ps = page_size();
  int64_t npages = (seg->bytes + ps - 1) / ps;
  int64_t n = dbuf__sample_count(npages);
  int ok = 1;
  hwloc_nodeset_t got = hwloc_bitmap_alloc();
  if (got == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a node set");
  hwloc_const_nodeset_t all = hwloc_topology_get_topology_nodeset(seg->topo->h);
  for (int64_t i = 0; i < n && ok; i++) {
    int64_t pg;
    int rc = dbuf__sample_page(i, n, npages, &pg);
    if (rc != 0) {
      hwloc_bitmap_free(got);
      return dbuf__diag(diag, rc, "page index overflow checking the binding");
    }
    const char *addr = (const char *)seg->ptr + pg * ps;
    hwloc_membind_policy_t pol;
    if (hwloc_get_area_membind(seg->topo->h, addr, (size_t)ps, got, &pol,
                               HWLOC_MEMBIND_BYNODESET) != 0) {
      snprintf(why, why_len, "reading the binding of page %lld failed: %s", (long long)pg,
               strerror(errno));
      ok = 0;
      break;
    }
    /* hwloc may report the complete nodeset (with disallowed nodes) for
     * "all nodes"; compare within the topology's nodes. */
    hwloc_bitmap_and(got, got, all);
    if (pol != seg->hpol || !hwloc_bitmap_isequal(got, seg->nodes)) {
      char gl[DBUF_MEM_LIST_LEN];
      hwloc_bitmap_list_snprintf(gl, sizeof gl, got);
      snprintf(why, why_len, "page %lld reads back policy %s on nodes %s, not %s on %s",
               (long long)pg, hpol_name(pol), gl, hpol_name(seg->hpol), seg->nodes_str);
      ok = 0;
    }
  }
  hwloc_bitmap_free(got);
  return ok;
}

static void
fmt_rlim(char *buf, size_t len, rlim_t v)
{
  if (v == RLIM_INFINITY)
    snprintf(buf, len, "unlimited");
  else
    snprintf(buf, len, "%llu bytes", (unsigned long long)v);
}

static int
lock_segment(dbuf_seg_t *seg, size_t len, dbuf_diag_t *diag)
{
  if (mlock(seg->ptr, len) == 0) {
    seg->locked = 1;
    return 0;
  }
  int err = errno;
  struct rlimit rl;
  char soft[32] = "unknown", hard[32] = "unknown";
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    fmt_rlim(soft, sizeof soft, rl.rlim_cur);
    fmt_rlim(hard, sizeof hard, rl.rlim_max);
  }
  return dbuf__diag(diag, DBUF_EMLOCK,
                    "mlock of %lld bytes failed (%s): RLIMIT_MEMLOCK is %s (hard limit %s) "
                    "and the segment needs %lld bytes plus what this process already "
                    "locked; raise it (ulimit -l) or grant CAP_IPC_LOCK",
                    (long long)seg->bytes, strerror(err), soft, hard, (long long)seg->bytes);
}

int
dbuf_seg_alloc(const dbuf_topo_t *topo, int64_t bytes, const dbuf_membind_t *policy,
               unsigned flags, dbuf_seg_t **out, dbuf_diag_t *diag)
{
  if (topo == NULL || policy == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_seg_alloc: NULL argument");
  if (bytes < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "segment size %lld is negative", (long long)bytes);
  if ((flags & ~(DBUF_SEG_HUGEPAGE | DBUF_SEG_LOCK)) != 0)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown segment flags 0x%x",
                      flags & ~(DBUF_SEG_HUGEPAGE | DBUF_SEG_LOCK));
  /* The one conversion to size_t, checked (it matters on 32-bit targets). */
  if ((uint64_t)bytes > SIZE_MAX)
    return dbuf__diag(diag, DBUF_EOVERFLOW, "segment size %lld does not fit size_t",
                      (long long)bytes);
  size_t len = (size_t)bytes;

  int rc = 0;
  dbuf_seg_t *seg = calloc(1, sizeof *seg);
  if (seg == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a segment handle");
  seg->topo = topo;
  seg->bytes = bytes;
  seg->policy = *policy;
  seg->nodes = hwloc_bitmap_alloc();
  if (seg->nodes == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a node set");
    goto cleanup;
  }
  if ((rc = dbuf__membind_nodes(topo, policy, NULL, seg->nodes, &seg->hpol, seg->note,
                                sizeof seg->note, diag)) != 0)
    goto cleanup;
  if (hwloc_bitmap_list_asprintf(&seg->nodes_str, seg->nodes) < 0 || seg->nodes_str == NULL) {
    seg->nodes_str = NULL;
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot format a node list");
    goto cleanup;
  }
  int binding = policy->kind != DBUF_MEMBIND_NONE;
  if (binding && policy->strict && !topo->thissystem) {
    rc = dbuf__diag(diag, DBUF_EBIND,
                    "strict binding to NUMA node(s) %s is impossible with the topology of "
                    "%s: it is not this machine",
                    seg->nodes_str, topo->desc);
    goto cleanup;
  }
  if (len == 0) {
    note_add(seg, "empty segment: nothing allocated or bound");
    *out = seg;
    return 0;
  }

  /* Huge pages: start the bytes on a 2 MiB boundary so that whole huge pages
   * cover them; the padding stays untouched virtual space. */
  size_t pad = 0;
  int huge = (flags & DBUF_SEG_HUGEPAGE) && bytes >= DBUF_HUGEPAGE_BYTES;
  if (huge) {
    if (!topo->thissystem) {
      note_add(seg, "huge page advice skipped: topology is not this machine");
      huge = 0;
    } else {
      pad = (size_t)DBUF_HUGEPAGE_BYTES;
    }
  }
  if (len > SIZE_MAX - pad) {
    rc = dbuf__diag(diag, DBUF_EOVERFLOW,
                    "segment size %lld plus huge page alignment does not fit size_t",
                    (long long)bytes);
    goto cleanup;
  }
  seg->alloc_len = len + pad;
  seg->base = hwloc_alloc(topo->h, seg->alloc_len);
  if (seg->base == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a segment of %lld bytes: %s",
                    (long long)bytes, strerror(errno));
    goto cleanup;
  }
  seg->ptr = seg->base;
  if (pad > 0) {
    uintptr_t a = (uintptr_t)seg->base, h = (uintptr_t)DBUF_HUGEPAGE_BYTES;
    seg->ptr = (char *)seg->base + ((h - a % h) % h);
  }

  /* Bind before any page is touched (madvise does not touch; mlock does). */
  if (binding) {
    int hflags = HWLOC_MEMBIND_BYNODESET | (policy->strict ? HWLOC_MEMBIND_STRICT : 0);
    if (!topo->thissystem) {
      /* hwloc would "succeed" and bind nothing. */
      note_add(seg, "not bound: topology is %s, not this machine", topo->desc);
    } else if (hwloc_set_area_membind(topo->h, seg->base, seg->alloc_len, seg->nodes, seg->hpol,
                                      hflags) != 0) {
      int err = errno;
      if (policy->strict) {
        rc = dbuf__diag(diag, DBUF_EBIND, "binding %lld bytes to NUMA node(s) %s failed: %s",
                        (long long)bytes, seg->nodes_str, strerror(err));
        goto cleanup;
      }
      note_add(seg, "not bound: binding to NUMA node(s) %s failed (%s), plain allocation",
               seg->nodes_str, strerror(err));
    } else {
      char why[DBUF_MEM_LIST_LEN * 2];
      int ok = check_binding(seg, why, sizeof why, diag);
      if (ok < 0) {
        rc = ok;
        goto cleanup;
      }
      if (!ok && policy->strict) {
        rc = dbuf__diag(diag, DBUF_EBIND,
                        "binding %lld bytes to NUMA node(s) %s did not take: %s",
                        (long long)bytes, seg->nodes_str, why);
        goto cleanup;
      }
      if (!ok)
        note_add(seg, "not bound: %s", why);
      seg->bound = ok;
    }
  }

  if (huge) {
    if (madvise(seg->base, seg->alloc_len, MADV_HUGEPAGE) == 0)
      seg->hugepage = 1;
    else
      note_add(seg, "madvise(MADV_HUGEPAGE) refused: %s", strerror(errno));
  }

  if ((flags & DBUF_SEG_LOCK) && (rc = lock_segment(seg, len, diag)) != 0)
    goto cleanup;

  *out = seg;
  return 0;

cleanup:
  dbuf_seg_free(seg);
  return rc;
}

void
dbuf_seg_free(dbuf_seg_t *seg)
{
  if (seg == NULL)
    return;
  /* munmap (inside hwloc_free) also drops an mlock. */
  if (seg->base != NULL)
    hwloc_free(seg->topo->h, seg->base, seg->alloc_len);
  hwloc_bitmap_free(seg->nodes);
  free(seg->nodes_str);
  free(seg);
}

int
dbuf_seg_locate(const dbuf_seg_t *seg, double *frac_on_intended, int64_t *pages_sampled,
                dbuf_diag_t *diag)
{
  if (seg == NULL || frac_on_intended == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_seg_locate: NULL argument");
  /* Unknown: hwloc's answer on a synthetic/XML topology is made up, an empty
   * segment has no page, and DBUF_MEMBIND_NONE has no intended node. */
  if (!seg->topo->thissystem || seg->bytes == 0 || hwloc_bitmap_iszero(seg->nodes)) {
    *frac_on_intended = -1.0;
    if (pages_sampled != NULL)
      *pages_sampled = 0;
    return 0;
  }

  int64_t ps = page_size();
  int64_t npages = (seg->bytes + ps - 1) / ps;
  int64_t n = dbuf__sample_count(npages), on = 0;
  int rc = 0;
  hwloc_nodeset_t where = hwloc_bitmap_alloc();
  if (where == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a node set");
  for (int64_t i = 0; i < n; i++) {
    int64_t pg;
    if ((rc = dbuf__sample_page(i, n, npages, &pg)) != 0) {
      rc = dbuf__diag(diag, rc, "page index overflow locating a segment");
      goto cleanup;
    }
    int64_t off = pg * ps;
    int64_t plen = seg->bytes - off < ps ? seg->bytes - off : ps;
    /* One page at a time: on a range hwloc returns only the union of nodes. */
    if (hwloc_get_area_memlocation(seg->topo->h, (const char *)seg->ptr + off, (size_t)plen,
                                   where, HWLOC_MEMBIND_BYNODESET) != 0) {
      rc = dbuf__diag(diag, DBUF_ETOPO, "locating page %lld of a %lld-byte segment failed: %s",
                      (long long)pg, (long long)seg->bytes, strerror(errno));
      goto cleanup;
    }
    /* An untouched page has no node: it counts as not on the intended nodes. */
    if (!hwloc_bitmap_iszero(where) && hwloc_bitmap_isincluded(where, seg->nodes))
      on++;
  }
  *frac_on_intended = (double)on / (double)n;
  if (pages_sampled != NULL)
    *pages_sampled = n;

cleanup:
  hwloc_bitmap_free(where);
  return rc;
}

void *
dbuf_seg_ptr(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->ptr : NULL;
}

int64_t
dbuf_seg_bytes(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->bytes : 0;
}

const char *
dbuf_seg_nodes(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->nodes_str : "";
}

int
dbuf_seg_is_bound(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->bound : 0;
}

int
dbuf_seg_hugepage(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->hugepage : 0;
}

int
dbuf_seg_is_locked(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->locked : 0;
}

const char *
dbuf_seg_note(const dbuf_seg_t *seg)
{
  return seg != NULL ? seg->note : "";
}
