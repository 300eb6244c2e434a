/*
 * "Did you mean": the closest of a few candidate words to a misspelled one
 * (an option, a subcommand, a model name), and the one getopt error message
 * of every subcommand, which uses it.
 */
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Words longer than this are never close to anything we offer. */
#define SUGGEST_MAX_LEN 64

/*
 * Optimal string alignment distance (Levenshtein plus the transposition of
 * two neighbours), case-insensitive, over the first la / lb bytes.
 * O(la x lb) with both at most SUGGEST_MAX_LEN.
 */
static int
osa_distance(const char *a, size_t la, const char *b, size_t lb)
{
  int d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    for (size_t j = 1; j <= lb; j++) {
      int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
      int v = d[i - 1][j - 1] + (ca != cb);
      if (d[i - 1][j] + 1 < v)
        v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v)
        v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
          tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  }
  return d[la][lb];
}

void
cli_suggest_init(cli_suggest_t *s, const char *word, size_t len)
{
  memset(s, 0, sizeof *s);
  s->word = word;
  s->len = len;
  /* One edit in a short word, two in a medium one, three in a long one. */
  s->best = len <= 4 ? 1 : len <= 8 ? 2 : 3;
}

void
cli_suggest_add(cli_suggest_t *s, const char *cand)
{
  size_t lc = strlen(cand);
  if (s->len == 0 || s->len > SUGGEST_MAX_LEN || lc > SUGGEST_MAX_LEN)
    return;
  int dist = osa_distance(s->word, s->len, cand, lc);
  /* A word that starts another one (llama-3.1-8 for llama-3.1-8b) is as
   * close as one edit. */
  if (dist > 1 && s->len >= 3 && s->len < lc && strncasecmp(s->word, cand, s->len) == 0)
    dist = 1;
  if (dist > s->best)
    return;
  if (dist < s->best || s->n == 0) {
    s->best = dist;
    s->n = 0;
  }
  if (s->n < CLI_SUGGEST_MAX)
    s->cand[s->n++] = cand;
}

const char *
cli_suggest_text(const cli_suggest_t *s, const char *prefix, char *buf, size_t len)
{
  size_t used = 0;
  buf[0] = '\0';
  if (s->n == 0)
    return buf;
  for (int i = 0; i < s->n && used < len; i++) {
    int w = snprintf(buf + used, len - used, "%s'%s%s'",
                     i == 0 ? "; did you mean " : i == s->n - 1 ? " or " : ", ", prefix,
                     s->cand[i]);
    used += w > 0 ? (size_t)w : 0;
  }
  if (used < len)
    snprintf(buf + used, len - used, "?");
  return buf;
}

/* The name of a long option ("--nam=value" -> "nam"), its length in *len. */
static const char *
long_name(const char *arg, size_t *len)
{
  const char *name = arg + 2;
  *len = strcspn(name, "=");
  return name;
}

/* Whether arg is "--flag=value" for a flag of longopts that takes no value
 * and is the option getopt just refused (it sets optopt to the flag's code).
 * An unknown short option after such a word ("--format=json -model") also
 * leaves optopt set, so the name and the code must both match. */
static int
flag_given_value(const char *arg, const struct option *longopts)
{
  if (strncmp(arg, "--", 2) != 0 || strchr(arg, '=') == NULL)
    return 0;
  size_t len;
  const char *name = long_name(arg, &len);
  for (const struct option *o = longopts; o->name != NULL; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o->has_arg == no_argument && o->flag == NULL && o->val == optopt;
  return 0;
}

int
cli_bad_option(const char *cmd, int c, char **argv, const struct option *longopts)
{
  const char *arg = argv[optind - 1];
  char hint[256] = "";
  cli_suggest_t s;

  if (c == ':') {
    cli_err("%s: option '%s' needs a value (see 'dbuf-shard %s --help')", cmd, arg, cmd);
    return CLI_EXIT_USAGE;
  }
  if (optopt != 0 && flag_given_value(arg, longopts)) {
    size_t len;
    const char *name = long_name(arg, &len);
    cli_err("%s: option '--%.*s' takes no value (see 'dbuf-shard %s --help')", cmd, (int)len,
            name, cmd);
    return CLI_EXIT_USAGE;
  }
  if (optopt > 0 && optopt < 128 && isgraph(optopt)) {
    /* An unknown short option: getopt stays on a cluster ("-model") until
     * its last letter, so the word is the current one or the one before. */
    const char *word = argv[optind] != NULL && argv[optind][0] == '-' &&
                               argv[optind][1] != '-' &&
                               strchr(argv[optind] + 1, optopt) != NULL
                           ? argv[optind]
                           : arg;
    if (word[0] == '-' && word[1] != '-' && strlen(word) > 2) {
      /* "-model": the user meant a long option. */
      cli_suggest_init(&s, word + 1, strcspn(word + 1, "="));
      for (const struct option *o = longopts; o->name != NULL; o++)
        cli_suggest_add(&s, o->name);
      cli_suggest_text(&s, "--", hint, sizeof hint);
    }
    cli_err("%s: unknown option '-%c'%s (see 'dbuf-shard %s --help')", cmd, optopt, hint,
            cmd);
    return CLI_EXIT_USAGE;
  }
  if (strncmp(arg, "--", 2) == 0) {
    size_t len;
    const char *name = long_name(arg, &len);
    cli_suggest_init(&s, name, len);
    for (const struct option *o = longopts; o->name != NULL; o++)
      cli_suggest_add(&s, o->name);
    cli_suggest_text(&s, "--", hint, sizeof hint);
  }
  cli_err("%s: unknown option '%s'%s (see 'dbuf-shard %s --help')", cmd, arg, hint, cmd);
  return CLI_EXIT_USAGE;
}
