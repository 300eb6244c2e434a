/*
 * Shared by the test programs that write files: a fresh mkdtemp directory
 * per forked test (Check fixture), removed with everything in it afterwards,
 * so nothing is shared between tests and srcdir is never assumed.
 * Needs _XOPEN_SOURCE 700 (mkdtemp, nftw) before the first include.
 */
#ifndef DBUF_TMPDIR_H
#define DBUF_TMPDIR_H

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Test-only state: the fixture's directory (one per forked test). */
static char tmpdir[1024];

/* Creates tmpdir as $TMPDIR/PREFIX.XXXXXX (or under /tmp). */
static inline void
tmpdir_setup(const char *prefix)
{
  const char *base = getenv("TMPDIR");
  int w = snprintf(tmpdir, sizeof tmpdir, "%s/%s.XXXXXX", base && base[0] ? base : "/tmp", prefix);
  ck_assert(w > 0 && (size_t)w < sizeof tmpdir);
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static inline int
tmpdir_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void
tmpdir_teardown(void)
{
  nftw(tmpdir, tmpdir_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Full path of rel in tmpdir; returns a static buffer (one of 8). */
static inline const char *
tpath(const char *rel)
{
  static char bufs[8][4096];
  static int next;
  char *b = bufs[next++ % 8];
  int w = snprintf(b, 4096, "%s/%.2048s", tmpdir, rel);
  ck_assert(w > 0 && w < 4096);
  return b;
}

#endif
