/* What memory a process can have: NUMA node free memory, MemAvailable and
 * its cgroup v2 room (dbuf/mem.h, "Available memory"). */
#include "mem_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_MAX 65536 /* meminfo files are about 1.5 KiB */

int
dbuf_mem_parse_meminfo(const char *text, const char *key, int64_t *bytes)
{
  if (text == NULL || key == NULL || bytes == NULL || key[0] == '\0')
    return DBUF_EINVAL;
  size_t kl = strlen(key);
  for (const char *line = text; *line != '\0';) {
    const char *eol = strchr(line, '\n'), *p = line;
    if (eol == NULL)
      eol = line + strlen(line);
    /* A node's file prefixes every line with "Node N ". */
    if (strncmp(p, "Node ", 5) == 0) {
      p += 5;
      while (p < eol && *p >= '0' && *p <= '9')
        p++;
      while (p < eol && *p == ' ')
        p++;
    }
    if ((size_t)(eol - p) > kl && strncmp(p, key, kl) == 0 && p[kl] == ':') {
      char *end;
      errno = 0;
      long long v = strtoll(p + kl + 1, &end, 10);
      while (end < eol && *end == ' ')
        end++;
      int kb = eol - end >= 2 && strncmp(end, "kB", 2) == 0;
      if (errno != 0 || end == p + kl + 1 || v < 0 || (kb && v > INT64_MAX / 1024))
        return DBUF_EPARSE;
      if (kb)
        end += 2;
      if (end != eol)
        return DBUF_EPARSE;
      *bytes = kb ? (int64_t)v * 1024 : (int64_t)v;
      return 0;
    }
    line = *eol ? eol + 1 : eol;
  }
  return DBUF_ENOTFOUND;
}

int
dbuf_mem_parse_cgroup_path(const char *text, char *path, size_t len)
{
  if (text == NULL || path == NULL || len == 0)
    return DBUF_EINVAL;
  for (const char *line = text; *line != '\0';) {
    const char *eol = strchr(line, '\n');
    if (eol == NULL)
      eol = line + strlen(line);
    if (strncmp(line, "0::", 3) == 0) { /* the v2 hierarchy */
      size_t n = (size_t)(eol - line - 3);
      if (n == 0 || line[3] != '/')
        return DBUF_EPARSE;
      if (n >= len)
        return DBUF_ENOBUFS;
      memcpy(path, line + 3, n);
      path[n] = '\0';
      return 0;
    }
    line = *eol ? eol + 1 : eol;
  }
  return DBUF_ENOTFOUND;
}

int
dbuf_mem_parse_cgroup_value(const char *text, int64_t *bytes)
{
  if (text == NULL || bytes == NULL)
    return DBUF_EINVAL;
  if (strcmp(text, "max") == 0 || strcmp(text, "max\n") == 0) {
    *bytes = -1;
    return 0;
  }
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || v < 0 || (*end != '\0' && strcmp(end, "\n") != 0))
    return DBUF_EPARSE;
  *bytes = (int64_t)v;
  return 0;
}

/* A small text file of root + path, NUL-terminated in buf; 0 or DBUF_EIO. */
static int
read_text(const char *root, const char *path, char *buf, size_t len)
{
  char full[PATH_MAX];
  if ((size_t)snprintf(full, sizeof full, "%s%s", root, path) >= sizeof full)
    return DBUF_EIO;
  FILE *f = fopen(full, "r");
  if (f == NULL)
    return DBUF_EIO;
  size_t n = fread(buf, 1, len - 1, f);
  int bad = ferror(f);
  fclose(f);
  buf[n] = '\0';
  return bad ? DBUF_EIO : 0;
}

/* The room left by memory.max over the cgroup and its ancestors: the least
 * max - current of those with a limit; -1 when none has one. */
static int64_t
cgroup_room(const char *root, const char *cg, char *text)
{
  char dir[PATH_MAX], file[PATH_MAX + 32];
  int64_t room = -1;
  snprintf(dir, sizeof dir, "%s", cg);
  for (;;) {
    int64_t max = -1, cur = 0;
    const char *sep = strcmp(dir, "/") == 0 ? "" : dir;
    snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.max", sep);
    if (read_text(root, file, text, TEXT_MAX) == 0 &&
        dbuf_mem_parse_cgroup_value(text, &max) == 0 && max >= 0) {
      snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.current", sep);
      if (read_text(root, file, text, TEXT_MAX) != 0 ||
          dbuf_mem_parse_cgroup_value(text, &cur) != 0 || cur < 0)
        cur = 0;
      int64_t left = max > cur ? max - cur : 0;
      if (room < 0 || left < room)
        room = left;
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL || strcmp(dir, "/") == 0)
      break;
    if (slash == dir)
      dir[1] = '\0';
    else
      *slash = '\0';
  }
  return room;
}

int
dbuf_mem_available(const dbuf_topo_t *topo, const char *nodes, const char *root,
                   dbuf_mem_avail_t *out, dbuf_diag_t *diag)
{
  if (topo == NULL || nodes == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "NULL argument");
  if (root == NULL)
    root = "";
  dbuf_mem_avail_t a;
  memset(&a, 0, sizeof a);
  a.numa_free = a.numa_total = a.mem_available = a.cgroup_room = -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  char *text = malloc(TEXT_MAX);
  if (set == NULL || text == NULL) {
    hwloc_bitmap_free(set);
    free(text);
    return dbuf__diag(diag, DBUF_ENOMEM, "out of memory");
  }
  int rc = 0;
  if (nodes[0] != '\0' && hwloc_bitmap_list_sscanf(set, nodes) != 0)
    rc = dbuf__diag(diag, DBUF_EINVAL, "NUMA node list '%s' is not a list", nodes);
  snprintf(a.nodes, sizeof a.nodes, "%s", nodes);
  /* Each node's MemFree from sysfs (hwloc knows only the total). */
  int idx, unknown = 0;
  int64_t free_sum = 0, total_sum = 0;
  hwloc_bitmap_foreach_begin(idx, set) {
    char file[96];
    int64_t v = 0;
    snprintf(file, sizeof file, "/sys/devices/system/node/node%d/meminfo", idx);
    if (rc == 0 && (read_text(root, file, text, TEXT_MAX) != 0 ||
                    dbuf_mem_parse_meminfo(text, "MemFree", &v) != 0 ||
                    __builtin_add_overflow(free_sum, v, &free_sum)))
      unknown = 1;
    hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(topo->h, (unsigned)idx);
    if (o != NULL && o->attr != NULL &&
        __builtin_add_overflow(total_sum, (int64_t)o->attr->numanode.local_memory, &total_sum))
      total_sum = INT64_MAX;
  }
  hwloc_bitmap_foreach_end();
  if (rc == 0 && nodes[0] != '\0') {
    a.numa_free = unknown ? -1 : free_sum;
    a.numa_total = total_sum > 0 ? total_sum : -1;
  }
  if (rc == 0 && (read_text(root, "/proc/meminfo", text, TEXT_MAX) != 0 ||
                  dbuf_mem_parse_meminfo(text, "MemAvailable", &a.mem_available) != 0))
    a.mem_available = -1;
  if (rc == 0 && read_text(root, "/proc/self/cgroup", text, TEXT_MAX) == 0 &&
      dbuf_mem_parse_cgroup_path(text, a.cgroup, sizeof a.cgroup) == 0)
    a.cgroup_room = cgroup_room(root, a.cgroup, text);
  hwloc_bitmap_free(set);
  free(text);
  if (rc == 0)
    *out = a;
  return rc;
}
