/*
 * What a POSIX extended regular expression costs glibc's regcomp, read
 * from the pattern before it is compiled (dbuf__regex_cost()).
 *
 * regcomp builds a tree and copies subtrees for repetitions: X+ becomes
 * X X*, X{m,n} n copies of X (m + 1 for X{m,}).  Copies of copies multiply,
 * so k stacked or nested '+' make 2^k copies, and the closure sets of the
 * optional copies then grow with the square of their count (a{0,3000} takes
 * 70 MB, (((a{0,3}){0,3})...) eight deep 2.7 GB).  The scan counts the
 * atoms of the expanded tree that way and the deepest stack of repetition
 * operators over one atom; it parses the pattern as regcomp does (GNU ERE
 * syntax: brackets with their classes, '\' escapes, '{m,n}' bounds) and
 * errs on the side of more where regcomp would refuse the pattern anyway.
 */
#include "core_internal.h"

#include <ctype.h>
#include <string.h>

/* Bigger bounds than regcomp takes (RE_DUP_MAX, 32767): read as this. */
#define BOUND_CAP 100000

typedef struct {
  const char *p, *end;
  int64_t cap; /* counts saturate past this */
  int backref, empty_rep;
} scan_t;

/* One part of the pattern: its atoms, depth, and whether it can match the
 * empty string. */
typedef struct {
  int64_t atoms;
  int depth, empty;
} part_t;

static int64_t
capped(const scan_t *s, int64_t v)
{
  return v > s->cap ? s->cap + 1 : v;
}

/* a * b + c, saturating at the cap (every term is at most cap + 1 or a
 * bound of BOUND_CAP, so the checked product is there for form's sake). */
static int64_t
mul_add(const scan_t *s, int64_t a, int64_t b, int64_t c)
{
  int64_t v;
  if (dbuf__mul(a, b, &v) != 0 || dbuf__add(v, c, &v) != 0)
    return s->cap + 1;
  return capped(s, v);
}

/* A bracket expression from just after its '['; its end, or the end of
 * the pattern when it has no ']' (regcomp refuses that). */
static const char *
bracket_end(const char *p, const char *end)
{
  if (p < end && *p == '^')
    p++;
  if (p < end && *p == ']') /* a ']' first is a member */
    p++;
  while (p < end && *p != ']') {
    if (*p == '[' && p + 1 < end && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
      char close = p[1];
      const char *q = p + 2;
      while (q + 1 < end && !(q[0] == close && q[1] == ']'))
        q++;
      p = q + 1 < end ? q + 2 : end;
      continue;
    }
    p++;
  }
  return p < end ? p + 1 : end;
}

/* The digits at *pp (capped at BOUND_CAP), or -1 when there are none. */
static int64_t
number(const char **pp, const char *end)
{
  const char *p = *pp;
  int64_t v = -1;
  for (; p < end && isdigit((unsigned char)*p); p++) {
    v = (v < 0 ? 0 : v * 10) + (*p - '0');
    if (v > BOUND_CAP)
      v = BOUND_CAP;
  }
  *pp = p;
  return v;
}

/* A repetition operator: how many copies of its atom regcomp makes, and
 * the fewest times it matches. */
typedef struct {
  int64_t copies, least;
} rep_t;

/* A '{m}', '{m,}', '{m,n}' or '{,n}' bound at *pp (just after the '{'),
 * *pp then past the '}'; copies 0 when it is not a bound (regcomp refuses
 * such a '{' after an atom). */
static rep_t
bound(const char **pp, const char *end)
{
  const char *p = *pp;
  int64_t m = number(&p, end), n = m;
  rep_t r = {0, 0};
  if (p < end && *p == ',') {
    p++;
    n = number(&p, end);
    if (n < 0)
      n = (m < 0 ? 0 : m) + 1; /* {m,}: m copies and a starred one */
  }
  if (p >= end || *p != '}' || (m < 0 && n < 0))
    return (rep_t){0, 0};
  *pp = p + 1;
  r.least = m < 0 ? 0 : m;
  r.copies = n > r.least ? n : r.least > 0 ? r.least : 1;
  return r;
}

/* The repetition operator at *pp ('*', '+', '?' or a bound), *pp then past
 * it; copies 0 when there is none. */
static rep_t
repetition(const char **pp, const char *end)
{
  const char *p = *pp;
  if (p >= end)
    return (rep_t){0, 0};
  *pp = p + 1;
  switch (*p) {
  case '*':
    return (rep_t){1, 0};
  case '+':
    return (rep_t){2, 1};
  case '?':
    return (rep_t){1, 0};
  case '{':
    return bound(pp, end);
  default:
    return (rep_t){0, 0};
  }
}

static part_t alternatives(scan_t *s, int nested);

/* One atom and the repetition operators after it. */
static part_t
piece(scan_t *s)
{
  part_t a = {1, 0, 0};
  const char *q = s->p;
  if (repetition(&q, s->end).copies > 0) {
    /* An operator with no atom before it, which regcomp refuses: counted
     * on an atom of its own (its own message is regcomp's). */
  } else if (*s->p == '(') {
    s->p++;
    a = alternatives(s, 1);
    a.atoms = capped(s, a.atoms + 1);
  } else if (*s->p == '[') {
    s->p = bracket_end(s->p + 1, s->end);
  } else if (*s->p == '\\' && s->p + 1 < s->end) {
    int ref = s->p[1] >= '1' && s->p[1] <= '9';
    s->backref |= ref;
    a.empty = ref || strchr("bB<>`'", s->p[1]) != NULL; /* assertions match "" */
    s->p += 2;
  } else {
    a.empty = *s->p == '^' || *s->p == '$';
    s->p++;
  }
  for (;;) {
    q = s->p;
    rep_t r = repetition(&q, s->end);
    if (r.copies == 0) /* not an operator, or a '{' that is not a bound */
      break;
    s->p = q;
    s->empty_rep |= a.empty;
    a.atoms = mul_add(s, a.atoms, r.copies, 1);
    a.depth++;
    a.empty |= r.least == 0;
  }
  return a;
}

/* Branches separated by '|', up to the ')' that closes a group (nested)
 * or the end of the pattern. */
static part_t
alternatives(scan_t *s, int nested)
{
  part_t all = {0, 0, 0};
  int branch_empty = 1; /* every piece of the branch so far matches "" */
  while (s->p < s->end) {
    if (*s->p == ')' && nested) {
      s->p++;
      break;
    }
    if (*s->p == '|') { /* the alternation node */
      s->p++;
      all.atoms = capped(s, all.atoms + 1);
      all.empty |= branch_empty;
      branch_empty = 1;
      continue;
    }
    part_t x = piece(s);
    all.atoms = capped(s, all.atoms + x.atoms);
    if (x.depth > all.depth)
      all.depth = x.depth;
    branch_empty &= x.empty;
  }
  all.empty |= branch_empty;
  return all;
}

void
dbuf__regex_cost(const char *re, int64_t cap, dbuf__regex_cost_t *out)
{
  scan_t s = {re, re + strlen(re), cap, 0, 0};
  part_t all = alternatives(&s, 0);
  out->atoms = all.atoms;
  out->depth = all.depth;
  out->backref = s.backref;
  out->empty_rep = s.empty_rep;
}
