/* Memory policies: parsing and the selection of NUMA nodes. */
#include "mem_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
dbuf_membind_parse(const char *s, dbuf_membind_t *out, dbuf_diag_t *diag)
{
  if (s == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_membind_parse: NULL argument");
  dbuf_membind_t p = {DBUF_MEMBIND_NONE, 0, 0};
  if (strcmp(s, "local") == 0) {
    p.kind = DBUF_MEMBIND_LOCAL;
  } else if (strcmp(s, "interleave") == 0) {
    p.kind = DBUF_MEMBIND_INTERLEAVE;
  } else if (strcmp(s, "none") == 0) {
    p.kind = DBUF_MEMBIND_NONE;
  } else if (strncmp(s, "node:", 5) == 0) {
    const char *num = s + 5;
    /* strtol alone would accept "", " 3", "+3" and "-3". */
    if (!isdigit((unsigned char)num[0]))
      return dbuf__diag(diag, DBUF_EPARSE,
                        "invalid memory policy \"%.100s\": node:N needs a decimal NUMA "
                        "node index N >= 0",
                        s);
    char *end = NULL;
    errno = 0;
    long v = strtol(num, &end, 10);
    if (*end != '\0')
      return dbuf__diag(diag, DBUF_EPARSE,
                        "invalid memory policy \"%.100s\": trailing text after the node "
                        "index",
                        s);
    if (errno == ERANGE || v > INT_MAX)
      return dbuf__diag(diag, DBUF_EPARSE,
                        "invalid memory policy \"%.100s\": node index out of range "
                        "(max %d)",
                        s, INT_MAX);
    p.kind = DBUF_MEMBIND_NODE;
    p.node = (int)v;
  } else {
    return dbuf__diag(diag, DBUF_EPARSE,
                      "invalid memory policy \"%.100s\": expected local, node:N, "
                      "interleave or none",
                      s);
  }
  *out = p;
  return 0;
}

static int
check_policy(const dbuf_membind_t *policy, dbuf_diag_t *diag)
{
  switch (policy->kind) {
  case DBUF_MEMBIND_NONE:
  case DBUF_MEMBIND_LOCAL:
  case DBUF_MEMBIND_INTERLEAVE:
    break;
  case DBUF_MEMBIND_NODE:
    if (policy->node < 0)
      return dbuf__diag(diag, DBUF_EINVAL, "NUMA node %d is negative", policy->node);
    break;
  default:
    return dbuf__diag(diag, DBUF_EINVAL, "unknown memory policy kind %d", (int)policy->kind);
  }
  if (policy->strict != 0 && policy->strict != 1)
    return dbuf__diag(diag, DBUF_EINVAL, "memory policy strict flag is %d, not 0 or 1",
                      policy->strict);
  return 0;
}

static void
set_note(char *note, size_t note_len, const char *text)
{
  if (note != NULL && note_len > 0)
    snprintf(note, note_len, "%s", text);
}

int
dbuf__membind_nodes(const dbuf_topo_t *topo, const dbuf_membind_t *policy,
                    hwloc_const_cpuset_t binding, hwloc_nodeset_t nodes,
                    hwloc_membind_policy_t *hpol, char *note, size_t note_len,
                    dbuf_diag_t *diag)
{
  int rc = check_policy(policy, diag);
  if (rc != 0)
    return rc;
  set_note(note, note_len, "");
  hwloc_const_nodeset_t all = hwloc_topology_get_topology_nodeset(topo->h);

  switch (policy->kind) {
  case DBUF_MEMBIND_NONE:
    hwloc_bitmap_zero(nodes);
    *hpol = HWLOC_MEMBIND_DEFAULT;
    return 0;

  case DBUF_MEMBIND_NODE:
    if (hwloc_get_numanode_obj_by_os_index(topo->h, (unsigned)policy->node) == NULL) {
      char list[DBUF_MEM_LIST_LEN];
      hwloc_bitmap_list_snprintf(list, sizeof list, all);
      return dbuf__diag(diag, DBUF_ERANGE,
                        "NUMA node %d does not exist: %s has %d NUMA node(s), OS "
                        "indexes %s",
                        policy->node, topo->desc,
                        hwloc_get_nbobjs_by_type(topo->h, HWLOC_OBJ_NUMANODE), list);
    }
    if (hwloc_bitmap_only(nodes, (unsigned)policy->node) != 0)
      return dbuf__diag(diag, DBUF_ENOMEM, "cannot build a node set");
    *hpol = HWLOC_MEMBIND_BIND;
    return 0;

  case DBUF_MEMBIND_INTERLEAVE:
    if (hwloc_bitmap_copy(nodes, all) != 0)
      return dbuf__diag(diag, DBUF_ENOMEM, "cannot build a node set");
    *hpol = HWLOC_MEMBIND_INTERLEAVE;
    return 0;

  case DBUF_MEMBIND_LOCAL:
    break;
  }

  /* LOCAL: the nodes whose CPUs intersect the binding. */
  hwloc_cpuset_t own = NULL;
  if (binding == NULL) {
    own = hwloc_bitmap_alloc();
    if (own == NULL)
      return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a CPU set");
    if ((rc = dbuf__process_cpuset(topo, own, diag)) != 0)
      goto cleanup;
    binding = own;
  }
  if (hwloc_bitmap_iszero(binding)) {
    rc = dbuf__diag(diag, DBUF_EINVAL, "the CPU binding is empty");
    goto cleanup;
  }
  if (hwloc_cpuset_to_nodeset(topo->h, binding, nodes) != 0) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot convert a CPU set to NUMA nodes");
    goto cleanup;
  }
  char cl[DBUF_MEM_LIST_LEN], nl[DBUF_MEM_LIST_LEN], text[2 * DBUF_MEM_LIST_LEN + 160];
  hwloc_bitmap_list_snprintf(cl, sizeof cl, binding);
  hwloc_bitmap_list_snprintf(nl, sizeof nl, nodes);
  if (hwloc_bitmap_iszero(nodes)) {
    rc = dbuf__diag(diag, DBUF_ETOPO, "CPUs %s have no local NUMA node in %s", cl, topo->desc);
    goto cleanup;
  }
  *hpol = HWLOC_MEMBIND_BIND;
  if (hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(topo->h), binding)) {
    if (hwloc_bitmap_weight(nodes) > 1) {
      snprintf(text, sizeof text,
               "process not bound to CPUs (%s): \"local\" is every NUMA node with CPUs "
               "(%s); bind the process for a single local node",
               cl, nl);
      set_note(note, note_len, text);
    }
  } else if (hwloc_bitmap_weight(nodes) > 1) {
    snprintf(text, sizeof text,
             "CPU binding %s spans NUMA nodes %s: memory is bound to all of them", cl, nl);
    set_note(note, note_len, text);
  }

cleanup:
  hwloc_bitmap_free(own);
  return rc;
}

int
dbuf_membind_select(const dbuf_topo_t *topo, const dbuf_membind_t *policy,
                    const char *cpus_or_null, char *nodes, size_t nodes_len, char *note,
                    size_t note_len, dbuf_diag_t *diag)
{
  if (topo == NULL || policy == NULL || nodes == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "dbuf_membind_select: NULL argument");
  int rc = 0;
  hwloc_membind_policy_t hpol;
  char *note_tmp = NULL;
  hwloc_cpuset_t cpus = NULL;
  hwloc_nodeset_t ns = hwloc_bitmap_alloc();
  if (ns == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a node set");
  if (note != NULL && note_len > 0 && (note_tmp = malloc(note_len)) == NULL) {
    rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a note");
    goto cleanup;
  }
  if (cpus_or_null != NULL) {
    cpus = hwloc_bitmap_alloc();
    if (cpus == NULL) {
      rc = dbuf__diag(diag, DBUF_ENOMEM, "cannot allocate a CPU set");
      goto cleanup;
    }
    /* hwloc's list parser is lenient; demand digits, ',' and '-' only. */
    size_t n = strspn(cpus_or_null, "0123456789,-");
    if (cpus_or_null[0] == '\0' || cpus_or_null[n] != '\0' ||
        hwloc_bitmap_list_sscanf(cpus, cpus_or_null) != 0 || hwloc_bitmap_iszero(cpus)) {
      rc = dbuf__diag(diag, DBUF_EINVAL,
                      "invalid CPU list \"%.100s\" (expected e.g. \"0-3,8\")", cpus_or_null);
      goto cleanup;
    }
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(topo->h);
    if (!hwloc_bitmap_isincluded(cpus, all)) {
      char al[DBUF_MEM_LIST_LEN];
      hwloc_bitmap_list_snprintf(al, sizeof al, all);
      rc = dbuf__diag(diag, DBUF_ERANGE, "CPU list \"%.100s\" is not within the CPUs %s of %s",
                      cpus_or_null, al, topo->desc);
      goto cleanup;
    }
  }
  if ((rc = dbuf__membind_nodes(topo, policy, cpus, ns, &hpol, note_tmp, note_len, diag)) != 0)
    goto cleanup;
  if ((rc = dbuf__list_out(ns, nodes, nodes_len, "NUMA node", diag)) != 0)
    goto cleanup;
  if (note_tmp != NULL)
    memcpy(note, note_tmp, strlen(note_tmp) + 1);

cleanup:
  hwloc_bitmap_free(cpus);
  hwloc_bitmap_free(ns);
  free(note_tmp);
  return rc;
}
