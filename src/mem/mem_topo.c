/* The topology handle and CPU binding of the calling process. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup, access */
#endif

#include "mem_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
dbuf__list_out(hwloc_const_bitmap_t set, char *buf, size_t len, const char *what,
               dbuf_diag_t *diag)
{
  char *s = NULL;
  if (hwloc_bitmap_list_asprintf(&s, set) < 0 || s == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot format the %s list", what);
  size_t need = strlen(s) + 1;
  if (need > len) {
    int rc =
        dbuf__diag(diag, DBUF_ENOBUFS, "%s list \"%.64s%s\" needs %zu bytes, the buffer has %zu",
                   what, s, need > 65 ? "..." : "", need, len);
    free(s);
    return rc;
  }
  memcpy(buf, s, need);
  free(s);
  return 0;
}

static int
ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

int
dbuf_topo_create(dbuf_topo_t **out, const char *synthetic_or_null, dbuf_diag_t *diag)
{
  if (out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_topo_create: out is NULL");

  /* hwloc's rule: the library's major API version must match the header's. */
  if ((hwloc_get_api_version() >> 16) != (HWLOC_API_VERSION >> 16))
    return dbuf__diag(diag, DBUF_ETOPO,
                      "hwloc library API 0x%x does not match the headers' 0x%x",
                      hwloc_get_api_version(), (unsigned)HWLOC_API_VERSION);

  int rc = 0;
  dbuf_topo_t *t = calloc(1, sizeof *t);
  if (t == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a topology handle");
  if (hwloc_topology_init(&t->h) != 0) {
    free(t);
    return dbuf__diag(diag, DBUF_ENOMEM, "hwloc_topology_init failed: %s", strerror(errno));
  }

  const char *s = synthetic_or_null;
  size_t desc_len = (s != NULL ? strlen(s) : 0) + 32;
  t->desc = malloc(desc_len);
  if (t->desc == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a topology handle");
    goto cleanup;
  }
  if (s == NULL) {
    snprintf(t->desc, desc_len, "this system");
  } else if (access(s, R_OK) == 0 || ends_with(s, ".xml")) {
    snprintf(t->desc, desc_len, "XML file \"%s\"", s);
    if (hwloc_topology_set_xml(t->h, s) != 0) {
      rc = dbuf__diag(diag, DBUF_ETOPO, "cannot use topology XML file \"%s\": %s", s,
                      strerror(errno));
      goto cleanup;
    }
  } else {
    snprintf(t->desc, desc_len, "synthetic \"%s\"", s);
    if (hwloc_topology_set_synthetic(t->h, s) != 0) {
      rc = dbuf__diag(diag, DBUF_ETOPO,
                      "invalid synthetic topology \"%s\" (expected e.g. "
                      "\"pack:2 numa:2 core:2 pu:1\")",
                      s);
      goto cleanup;
    }
  }
  if (hwloc_topology_load(t->h) != 0) {
    rc = dbuf__diag(diag, DBUF_ETOPO, "cannot load the topology of %s: %s", t->desc,
                    strerror(errno));
    goto cleanup;
  }
  if (hwloc_get_nbobjs_by_type(t->h, HWLOC_OBJ_NUMANODE) < 1) {
    rc = dbuf__diag(diag, DBUF_ETOPO, "the topology of %s has no NUMA node", t->desc);
    goto cleanup;
  }
  t->thissystem = hwloc_topology_is_thissystem(t->h) ? 1 : 0;
  *out = t;
  return 0;

cleanup:
  dbuf_topo_destroy(t);
  return rc;
}

void
dbuf_topo_destroy(dbuf_topo_t *topo)
{
  if (topo == NULL)
    return;
  hwloc_topology_destroy(topo->h);
  free(topo->desc);
  free(topo);
}

int
dbuf_topo_is_thissystem(const dbuf_topo_t *topo)
{
  return topo != NULL ? topo->thissystem : 0;
}

int
dbuf_topo_numa_count(const dbuf_topo_t *topo)
{
  return topo != NULL ? hwloc_get_nbobjs_by_type(topo->h, HWLOC_OBJ_NUMANODE) : 0;
}

int
dbuf_topo_core_count(const dbuf_topo_t *topo)
{
  return topo != NULL ? hwloc_get_nbobjs_by_type(topo->h, HWLOC_OBJ_CORE) : 0;
}

int
dbuf__process_cpuset(const dbuf_topo_t *topo, hwloc_cpuset_t out, dbuf_diag_t *diag)
{
  hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo->h);
  if (!topo->thissystem)
    return hwloc_bitmap_copy(out, all) == 0
               ? 0
               : dbuf__diag(diag, DBUF_ENOMEM, "cannot copy a CPU set");
  if (hwloc_get_cpubind(topo->h, out, HWLOC_CPUBIND_PROCESS) != 0)
    return dbuf__diag(diag, DBUF_EBIND, "cannot read the CPU binding of this process: %s",
                      strerror(errno));
  if (hwloc_bitmap_and(out, out, all) != 0)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot intersect CPU sets");
  return 0;
}

int
dbuf_topo_get_cpubind(const dbuf_topo_t *topo, char *cpus, size_t cpus_len, char *nodes,
                      size_t nodes_len, int *is_bound, dbuf_diag_t *diag)
{
  if (topo == NULL || cpus == NULL || nodes == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_topo_get_cpubind: NULL argument");
  if (!topo->thissystem)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "the topology of %s is not this machine: it has no process binding",
                      topo->desc);

  int rc = 0;
  char *cbuf = malloc(cpus_len > 0 ? cpus_len : 1);
  hwloc_cpuset_t set = hwloc_bitmap_alloc();
  hwloc_nodeset_t ns = hwloc_bitmap_alloc();
  if (cbuf == NULL || set == NULL || ns == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "out of memory reading the CPU binding");
    goto cleanup;
  }
  if ((rc = dbuf__process_cpuset(topo, set, diag)) != 0)
    goto cleanup;
  if (hwloc_cpuset_to_nodeset(topo->h, set, ns) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot convert a CPU set to NUMA nodes");
    goto cleanup;
  }
  /* Format into a scratch buffer first: outputs are written only on success. */
  if ((rc = dbuf__list_out(set, cbuf, cpus_len, "CPU", diag)) != 0)
    goto cleanup;
  if ((rc = dbuf__list_out(ns, nodes, nodes_len, "NUMA node", diag)) != 0)
    goto cleanup;
  memcpy(cpus, cbuf, strlen(cbuf) + 1);
  if (is_bound != NULL)
    *is_bound = !hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(topo->h), set);

cleanup:
  hwloc_bitmap_free(ns);
  hwloc_bitmap_free(set);
  free(cbuf);
  return rc;
}

int
dbuf_bind_parse(const char *s, dbuf_bind_t *out, dbuf_diag_t *diag)
{
  if (s == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_bind_parse: NULL argument");
  if (strcmp(s, "none") == 0)
    *out = DBUF_BIND_NONE;
  else if (strcmp(s, "core") == 0)
    *out = DBUF_BIND_CORE;
  else if (strcmp(s, "numa") == 0)
    *out = DBUF_BIND_NUMA;
  else
    return dbuf__diag(diag, DBUF_EPARSE,
                      "invalid CPU binding \"%.100s\": expected none, core or numa", s);
  return 0;
}

/* Copy the cpuset of the target into out. */
static int
bind_target(const dbuf_topo_t *topo, dbuf_bind_t how, int local_index, hwloc_cpuset_t out,
            dbuf_diag_t *diag)
{
  if (local_index < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "local index %d is negative", local_index);
  hwloc_obj_t obj = NULL;
  if (how == DBUF_BIND_CORE) {
    int n = hwloc_get_nbobjs_by_type(topo->h, HWLOC_OBJ_CORE);
    if (n < 1)
      return dbuf__diag(diag, DBUF_ETOPO, "the topology of %s has no cores", topo->desc);
    obj = hwloc_get_obj_by_type(topo->h, HWLOC_OBJ_CORE, (unsigned)(local_index % n));
  } else if (how == DBUF_BIND_NUMA) {
    /* Memory-only nodes (no CPUs) cannot be bound to; count the others. */
    int n = 0;
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_obj_by_type(topo->h, HWLOC_OBJ_NUMANODE, o)) != NULL)
      n += !hwloc_bitmap_iszero(o->cpuset);
    if (n < 1)
      return dbuf__diag(diag, DBUF_ETOPO, "the topology of %s has no NUMA node with CPUs",
                        topo->desc);
    int k = local_index % n;
    while ((o = hwloc_get_next_obj_by_type(topo->h, HWLOC_OBJ_NUMANODE, o)) != NULL) {
      if (hwloc_bitmap_iszero(o->cpuset))
        continue;
      if (k-- == 0) {
        obj = o;
        break;
      }
    }
  } else {
    return dbuf__diag(diag, DBUF_EINVAL, "CPU binding kind %d has no target", (int)how);
  }
  assert(obj != NULL && obj->cpuset != NULL);
  if (hwloc_bitmap_copy(out, obj->cpuset) != 0)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot copy a CPU set");
  return 0;
}

int
dbuf_topo_bind_target(const dbuf_topo_t *topo, dbuf_bind_t how, int local_index, char *cpus,
                      size_t cpus_len, dbuf_diag_t *diag)
{
  if (topo == NULL || cpus == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_topo_bind_target: NULL argument");
  hwloc_cpuset_t set = hwloc_bitmap_alloc();
  if (set == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a CPU set");
  int rc = bind_target(topo, how, local_index, set, diag);
  if (rc == 0)
    rc = dbuf__list_out(set, cpus, cpus_len, "CPU", diag);
  hwloc_bitmap_free(set);
  return rc;
}

int
dbuf_topo_bind(const dbuf_topo_t *topo, dbuf_bind_t how, int local_index, dbuf_diag_t *diag)
{
  if (topo == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_topo_bind: topology is NULL");
  if (how == DBUF_BIND_NONE)
    return 0;
  if (how != DBUF_BIND_CORE && how != DBUF_BIND_NUMA)
    return dbuf__diag(diag, DBUF_EINVAL, "unknown CPU binding kind %d", (int)how);
  if (local_index < 0)
    return dbuf__diag(diag, DBUF_EINVAL, "local index %d is negative", local_index);
  if (!topo->thissystem)
    return dbuf__diag(diag, DBUF_EUNSUPPORTED,
                      "cannot bind this process with the topology of %s: it is not this "
                      "machine",
                      topo->desc);

  int rc = 0;
  char want_s[64], got_s[64];
  hwloc_cpuset_t want = hwloc_bitmap_alloc();
  hwloc_cpuset_t got = hwloc_bitmap_alloc();
  if (want == NULL || got == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate CPU sets");
    goto cleanup;
  }
  if ((rc = bind_target(topo, how, local_index, want, diag)) != 0)
    goto cleanup;
  hwloc_bitmap_list_snprintf(want_s, sizeof want_s, want);
  if (hwloc_set_cpubind(topo->h, want, HWLOC_CPUBIND_PROCESS) != 0) {
    rc = dbuf__diag(diag, DBUF_EBIND, "binding local index %d to %s CPUs %s failed: %s",
                    local_index, how == DBUF_BIND_CORE ? "core" : "NUMA node", want_s,
                    strerror(errno));
    goto cleanup;
  }
  /* Read it back: a binding the OS narrowed or ignored is not the one asked for. */
  if ((rc = dbuf__process_cpuset(topo, got, diag)) != 0)
    goto cleanup;
  if (!hwloc_bitmap_isequal(got, want)) {
    hwloc_bitmap_list_snprintf(got_s, sizeof got_s, got);
    rc = dbuf__diag(diag, DBUF_EBIND,
                    "bound local index %d to CPUs %s but the process reports CPUs %s",
                    local_index, want_s, got_s);
  }

cleanup:
  hwloc_bitmap_free(got);
  hwloc_bitmap_free(want);
  return rc;
}
