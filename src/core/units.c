/* FSDP units: which unit each tensor of a model belongs to (dbuf/plan.h). */
#include "dbuf/plan.h"
#include "dbuf/shapes_io.h"
#include "dbuf/wire.h"

#include "core_internal.h"
#include "strmap.h"

#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dbuf_units {
  dbuf__strmap_t names; /* unit name -> unit id, in order of first tensor */
  int64_t *unit_of;     /* [ntensors], or NULL: every tensor in unit 0 */
  int64_t ntensors;
};

void
dbuf_units_destroy(dbuf_units_t *u)
{
  if (u == NULL)
    return;
  dbuf__strmap_free(&u->names);
  free(u->unit_of);
  free(u);
}

/* Units of t's tensors, none set yet (with one, every tensor in unit 0:
 * no array). */
static int
units_new(const dbuf_tensors_t *t, int one, dbuf_units_t **out, dbuf_diag_t *diag)
{
  if (t == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "units: NULL argument");
  dbuf_units_t *u = calloc(1, sizeof *u);
  if (u == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "units: out of memory");
  u->ntensors = dbuf_tensors_count(t);
  if (one) {
    *out = u;
    return 0;
  }
  if ((u->unit_of = dbuf__mallocn(u->ntensors, sizeof *u->unit_of)) == NULL) {
    free(u);
    return dbuf__diag(diag, DBUF_ENOMEM, "units: out of memory");
  }
  for (int64_t i = 0; i < u->ntensors; i++)
    u->unit_of[i] = -1;
  *out = u;
  return 0;
}

int
dbuf__unit_name_check(const char *name, size_t len, char *why, size_t why_len)
{
  dbuf__name_fault_t f = DBUF__NAME_OK;
  if (len <= DBUF_WIRE_UNIT_MAX && (f = dbuf__name_check(name, len, NULL)) == DBUF__NAME_OK)
    return 0;
  if (why != NULL && f == DBUF__NAME_OK)
    snprintf(why, why_len, "unit name of %zu bytes (at most %d)", len, DBUF_WIRE_UNIT_MAX);
  else if (why != NULL)
    snprintf(why, why_len, "unit name '%.*s' %s", (int)len, name, dbuf__name_fault_str(f));
  return DBUF_EINVAL;
}

/* Tensor i belongs to the unit named by len bytes of name (checked: the
 * capture of a regular expression may end inside a character, and a
 * tensor name may be longer than a unit name can be); regex: the pattern
 * that captured it, or NULL. */
static int
units_set(dbuf_units_t *u, const dbuf_tensors_t *t, int64_t i, const char *name, size_t len,
          const char *regex, dbuf_diag_t *diag)
{
  char stack[256], *key, why[DBUF_DIAG_LEN];
  int64_t id;
  if (dbuf__unit_name_check(name, len, why, sizeof why) != 0)
    return dbuf__diag(diag, DBUF_EINVAL, "tensor %s: %s%s%s%s", dbuf_tensors_name(t, i), why,
                      regex ? " (the capture of '" : "", regex ? regex : "", regex ? "')" : "");
  if ((key = len < sizeof stack ? stack : malloc(len + 1)) == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "units: out of memory");
  memcpy(key, name, len);
  key[len] = '\0';
  int rc = dbuf__strmap_add(&u->names, key, &id);
  if (key != stack)
    free(key);
  if (rc != 0 && rc != DBUF_EDUP)
    return dbuf__diag(diag, rc, "units: %s", dbuf_strerror(rc));
  u->unit_of[i] = id;
  return 0;
}

int
dbuf_units_none(const dbuf_tensors_t *t, dbuf_units_t **out, dbuf_diag_t *diag)
{
  dbuf_units_t *u = NULL;
  int rc = units_new(t, 1, &u, diag);
  if (rc != 0)
    return rc;
  /* One unit, named once: no array of unit ids. */
  int64_t id;
  if (u->ntensors > 0 && (rc = dbuf__strmap_add(&u->names, DBUF_UNIT_ALL, &id)) != 0)
    rc = dbuf__diag(diag, rc, "units: %s", dbuf_strerror(rc));
  if (rc != 0) {
    dbuf_units_destroy(u);
    return rc;
  }
  *out = u;
  return 0;
}

/* The length of the prefix of name up to and including the first layer
 * index component ("layers.N", "layer.N", "h.N", "blocks.N" starting the
 * name or following a '.'), or 0. */
static size_t
layer_prefix(const char *name)
{
  static const char *const words[] = {"layers.", "layer.", "h.", "blocks."};
  for (const char *p = name; *p != '\0'; p = strchr(p, '.') ? strchr(p, '.') + 1 : "") {
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
      size_t n = strlen(words[w]);
      if (strncmp(p, words[w], n) != 0 || !isdigit((unsigned char)p[n]))
        continue;
      const char *q = p + n;
      while (isdigit((unsigned char)*q))
        q++;
      if (*q == '.' || *q == '\0')
        return (size_t)(q - name);
    }
  }
  return 0;
}

int
dbuf_units_layer(const dbuf_tensors_t *t, dbuf_units_t **out, dbuf_diag_t *diag)
{
  dbuf_units_t *u;
  int rc = units_new(t, 0, &u, diag);
  if (rc != 0)
    return rc;
  for (int64_t i = 0; rc == 0 && i < u->ntensors; i++) {
    const char *name = dbuf_tensors_name(t, i);
    size_t n = layer_prefix(name);
    rc = n > 0 ? units_set(u, t, i, name, n, NULL, diag)
               : units_set(u, t, i, DBUF_UNIT_ROOT, strlen(DBUF_UNIT_ROOT), NULL, diag);
  }
  if (rc != 0) {
    dbuf_units_destroy(u);
    return rc;
  }
  *out = u;
  return 0;
}

/* The pattern for messages: at most 60 bytes of it, then "...". */
static const char *
pattern_for_people(const char *regex, char *buf, size_t len)
{
  snprintf(buf, len, "%.60s%s", regex, strlen(regex) > 60 ? "..." : "");
  return buf;
}

/* Atom counts past this are not told apart. */
#define ATOMS_CAP (INT64_C(1) << 50)

/* Refuse a pattern whose compiling or matching cost has no small bound
 * (see regex_cost.c): 0, or DBUF_EINVAL with diag; who: the pattern for
 * people. */
static int
regex_bounded(const char *regex, const char *who, dbuf_diag_t *diag)
{
  size_t len = strlen(regex);
  dbuf__regex_cost_t c;
  if (len > DBUF_UNITS_REGEX_MAX_BYTES)
    return dbuf__diag(diag, DBUF_EINVAL, "regular expression '%s': %zu bytes long (at most %d)",
                      who, len, DBUF_UNITS_REGEX_MAX_BYTES);
  dbuf__regex_cost(regex, ATOMS_CAP, &c);
  if (c.depth > DBUF_UNITS_REGEX_MAX_DEPTH)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "regular expression '%s': nests repetitions %d deep (at most %d)", who,
                      c.depth, DBUF_UNITS_REGEX_MAX_DEPTH);
  if (c.atoms > DBUF_UNITS_REGEX_MAX_ATOMS)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "regular expression '%s': its repetitions expand it to %s%lld atoms "
                      "(at most %d)",
                      who, c.atoms > ATOMS_CAP ? "more than " : "",
                      (long long)(c.atoms > ATOMS_CAP ? ATOMS_CAP : c.atoms),
                      DBUF_UNITS_REGEX_MAX_ATOMS);
  if (c.empty_rep)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "regular expression '%s': repeats a part that can match the empty "
                      "string (as (a?)*, (a|b*)+ or (^|x)? do)",
                      who);
  if (c.backref)
    return dbuf__diag(diag, DBUF_EINVAL,
                      "regular expression '%s': back-references (\\1 to \\9) are not "
                      "taken (matching one can take time exponential in the name's length)",
                      who);
  return 0;
}

int
dbuf_units_regex(const dbuf_tensors_t *t, const char *regex, dbuf_units_t **out,
                 dbuf_diag_t *diag)
{
  regex_t re;
  dbuf_units_t *u;
  char who[80];
  if (regex == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "units: NULL argument");
  pattern_for_people(regex, who, sizeof who);
  int e = regex_bounded(regex, who, diag);
  if (e != 0)
    return e;
  if ((e = regcomp(&re, regex, REG_EXTENDED)) != 0) {
    char why[160];
    regerror(e, &re, why, sizeof why);
    return dbuf__diag(diag, DBUF_EINVAL, "regular expression '%s': %s", who, why);
  }
  if (re.re_nsub < 1) {
    regfree(&re);
    return dbuf__diag(diag, DBUF_EINVAL,
                      "regular expression '%s' has no capture group to name the unit "
                      "(e.g. 'layers\\.([0-9]+)\\.')",
                      who);
  }
  int rc = units_new(t, 0, &u, diag);
  if (rc != 0) {
    regfree(&re);
    return rc;
  }
  for (int64_t i = 0; rc == 0 && i < u->ntensors; i++) {
    const char *name = dbuf_tensors_name(t, i);
    regmatch_t m[2];
    if (regexec(&re, name, 2, m, 0) == 0 && m[1].rm_so >= 0 && m[1].rm_eo > m[1].rm_so)
      rc = units_set(u, t, i, name + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so), who, diag);
    else
      rc = units_set(u, t, i, DBUF_UNIT_ROOT, strlen(DBUF_UNIT_ROOT), NULL, diag);
  }
  regfree(&re);
  if (rc != 0) {
    dbuf_units_destroy(u);
    return rc;
  }
  *out = u;
  return 0;
}

int
dbuf_units_from_names(const dbuf_tensors_t *t, const char *const *unit_of,
                      dbuf_units_t **out, dbuf_diag_t *diag)
{
  dbuf_units_t *u;
  if (unit_of == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "units: NULL argument");
  int rc = units_new(t, 0, &u, diag);
  if (rc != 0)
    return rc;
  for (int64_t i = 0; rc == 0 && i < u->ntensors; i++) {
    if (unit_of[i] == NULL)
      rc = dbuf__diag(diag, DBUF_EINVAL, "tensor %s: no unit name", dbuf_tensors_name(t, i));
    else
      rc = units_set(u, t, i, unit_of[i], strlen(unit_of[i]), NULL, diag);
  }
  if (rc != 0) {
    dbuf_units_destroy(u);
    return rc;
  }
  *out = u;
  return 0;
}

/* The file's lines in model order: unit ids follow the model's order, not
 * the file's, so the file is read into a per-tensor name table first. */
static int
read_lines(const dbuf_tensors_t *t, const char *path, char *text, size_t len,
           const char **unit_of, dbuf_diag_t *diag)
{
  int64_t *line_of = dbuf__calloc(dbuf_tensors_count(t), sizeof *line_of);
  if (line_of == NULL)
    return dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
  char *p = text, *end = text + len;
  int64_t line = 0;
  int rc = 0;
  while (rc == 0 && p < end) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *le = nl ? nl : end, *save = NULL, why[DBUF_DIAG_LEN];
    line++;
    if (memchr(p, '\0', (size_t)(le - p)) != NULL) { /* strtok_r would end the line there */
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s:%lld: a NUL byte (binary file?)", path,
                      (long long)line);
      break;
    }
    *le = '\0';
    char *hash = strchr(p, '#');
    if (hash != NULL)
      *hash = '\0';
    char *tn = strtok_r(p, " \t\r\f\v", &save);
    char *un = tn ? strtok_r(NULL, " \t\r\f\v", &save) : NULL;
    char *extra = un ? strtok_r(NULL, " \t\r\f\v", &save) : NULL;
    int64_t id;
    p = nl ? nl + 1 : end;
    if (tn == NULL)
      continue;
    if (un == NULL || extra != NULL)
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s:%lld: expected 'TENSOR UNIT'%s%s%s", path,
                      (long long)line, extra ? ", got more: '" : "", extra ? extra : "",
                      extra ? "'" : "");
    else if (dbuf__unit_name_check(un, strlen(un), why, sizeof why) != 0)
      rc = dbuf__diag(diag, DBUF_EPARSE, "%s:%lld: %s", path, (long long)line, why);
    else if (dbuf_tensors_find(t, tn, &id) != 0)
      rc = dbuf__diag(diag, DBUF_ENOTFOUND, "%s:%lld: tensor %s is not a tensor of the model",
                      path, (long long)line, tn);
    else if (line_of[id] != 0)
      rc = dbuf__diag(diag, DBUF_EDUP, "%s:%lld: tensor %s is already given a unit on line %lld",
                      path, (long long)line, tn, (long long)line_of[id]);
    else {
      line_of[id] = line;
      unit_of[id] = un;
    }
  }
  for (int64_t i = 0; rc == 0 && i < dbuf_tensors_count(t); i++) {
    if (unit_of[i] == NULL)
      rc = dbuf__diag(diag, DBUF_ENOTFOUND, "%s: tensor %s has no unit (every tensor needs a "
                      "'TENSOR UNIT' line)",
                      path, dbuf_tensors_name(t, i));
  }
  free(line_of);
  return rc;
}

int
dbuf_units_read(const dbuf_tensors_t *t, const char *path, dbuf_units_t **out,
                dbuf_diag_t *diag)
{
  char *text = NULL;
  size_t len = 0;
  if (t == NULL || path == NULL || out == NULL)
    return dbuf__diag(diag, DBUF_EINVAL, "units: NULL argument");
  int rc = dbuf_file_read_all(path, &text, &len, diag);
  if (rc != 0)
    return rc;
  const char **unit_of = dbuf__calloc(dbuf_tensors_count(t), sizeof *unit_of);
  if (unit_of == NULL)
    rc = dbuf__diag(diag, DBUF_ENOMEM, "%s: out of memory", path);
  if (rc == 0)
    rc = read_lines(t, path, text, len, unit_of, diag);
  if (rc == 0)
    rc = dbuf_units_from_names(t, unit_of, out, diag);
  free(unit_of);
  free(text);
  return rc;
}

int64_t
dbuf_units_count(const dbuf_units_t *u)
{
  return u ? u->names.count : 0;
}

const char *
dbuf_units_name(const dbuf_units_t *u, int64_t unit)
{
  return u ? dbuf__strmap_key(&u->names, unit) : NULL;
}

int64_t
dbuf_units_of(const dbuf_units_t *u, int64_t tensor)
{
  if (u == NULL || tensor < 0 || tensor >= u->ntensors)
    return -1;
  return u->unit_of != NULL ? u->unit_of[tensor] : 0;
}
