/* What the other suites leave of the core's smallest files.
 *
 * error.c: every code's name and message against a table written out by hand
 * (not generated from DBUF_ERRNO_MAP, so a change to the table shows here),
 * unknown codes, the diagnostic helpers and control-byte escaping with
 * truncation.  input.c: every way opening an input can fail, the system
 * calls made to fail in a forked child (tests/test_sandbox.h), and the word
 * for every kind of file. */
#include "core_internal.h"
#include "dbuf/error.h"
#include "dbuf/shapes_io.h"

#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "test_sandbox.h"

static const struct {
  int code;
  const char *name;
  const char *msg;
} codes[] = {
    {-1, "DBUF_EINVAL", "invalid argument"},
    {-2, "DBUF_ENOMEM", "out of memory"},
    {-3, "DBUF_EOVERFLOW", "64-bit count overflow"},
    {-4, "DBUF_ESHAPE", "invalid tensor shape"},
    {-5, "DBUF_EBLOCK", "dim 0 not divisible by the block size"},
    {-6, "DBUF_ENRANKS", "invalid rank count"},
    {-7, "DBUF_EOWNER", "invalid tensor owner"},
    {-8, "DBUF_ERANGE", "index out of range"},
    {-9, "DBUF_ELAYOUT", "layout violates an invariant"},
    {-10, "DBUF_EPARSE", "input does not parse"},
    {-11, "DBUF_EIO", "input/output error"},
    {-12, "DBUF_EFORMAT", "malformed file format"},
    {-13, "DBUF_ECHECKSUM", "checksum mismatch"},
    {-14, "DBUF_EVERSION", "unsupported format version"},
    {-15, "DBUF_EDUP", "duplicate name"},
    {-16, "DBUF_ENOTFOUND", "not found"},
    {-17, "DBUF_EMPI", "MPI call failed"},
    {-18, "DBUF_ETOPO", "hardware topology error"},
    {-19, "DBUF_EBIND", "memory or CPU binding failed"},
    {-20, "DBUF_EMLOCK", "memory locking not permitted"},
    {-21, "DBUF_EMISMATCH", "ranks disagree"},
    {-22, "DBUF_EVERIFY", "verification failed"},
    {-23, "DBUF_EUNSUPPORTED", "not supported"},
    {-24, "DBUF_EPARALLEL", "model not divisible by the parallel degree"},
    {-25, "DBUF_ENOBUFS", "output buffer too small"},
    {-26, "DBUF_ECANCELED", "stopped by the caller's callback"},
};
#define NCODES ((int)(sizeof codes / sizeof codes[0]))

START_TEST(test_every_code)
{
  ck_assert_str_eq(dbuf_err_name(codes[_i].code), codes[_i].name);
  ck_assert_str_eq(dbuf_strerror(codes[_i].code), codes[_i].msg);
}
END_TEST

/* The enum values are the table's, and the table ends where DBUF_ERRNO_MAX says. */
START_TEST(test_code_values)
{
  ck_assert_int_eq(DBUF_EINVAL, -1);
  ck_assert_int_eq(DBUF_EVERIFY, -22);
  ck_assert_int_eq(DBUF_EPARALLEL, -24);
  ck_assert_int_eq(DBUF_ECANCELED, -26);
  ck_assert_int_eq(DBUF_ERRNO_MAX, -NCODES - 1);
  ck_assert_str_eq(dbuf_err_name(DBUF_ERRNO_MAX + 1), codes[NCODES - 1].name);
}
END_TEST

static const int unknown[] = {1, 2, DBUF_ERRNO_MAX, DBUF_ERRNO_MAX - 1, INT_MIN, INT_MAX};

START_TEST(test_unknown_codes)
{
  ck_assert_str_eq(dbuf_strerror(0), "success");
  ck_assert_str_eq(dbuf_err_name(0), "0");
  ck_assert_msg(strcmp(dbuf_strerror(unknown[_i]), "unknown error") == 0, "code %d: %s",
                unknown[_i], dbuf_strerror(unknown[_i]));
  ck_assert_msg(strcmp(dbuf_err_name(unknown[_i]), "DBUF_UNKNOWN") == 0, "code %d: %s",
                unknown[_i], dbuf_err_name(unknown[_i]));
}
END_TEST

START_TEST(test_diag_clear)
{
  dbuf_diag_t d;
  d.code = DBUF_EIO;
  strcpy(d.msg, "old");
  dbuf_diag_clear(&d);
  ck_assert_int_eq(d.code, 0);
  ck_assert_str_eq(d.msg, "");
  dbuf_diag_clear(NULL); /* accepted */
}
END_TEST

struct escape_case {
  const char *src;
  size_t len;       /* room given (0: dst NULL) */
  const char *want; /* what dst holds */
  size_t need;      /* the return value: the escaped length */
};

static const struct escape_case escape_cases[] = {
    {"plain", 16, "plain", 5},
    {"", 4, "", 0},
    {"a\tb", 16, "a\\x09b", 6},
    {"\n", 16, "\\x0a", 4},
    {"del\x7f", 16, "del\\x7f", 7},
    {"\x1f\x01", 16, "\\x1f\\x01", 8},
    {"high \xc3\xa9 bytes", 32, "high \xc3\xa9 bytes", 13}, /* UTF-8 passes */
    {"abcdef", 4, "abc", 6},                                /* cut, length counted */
    {"ab\tcd", 5, "ab", 8},      /* an escape never split: stops before it */
    {"ab\tcd", 7, "ab\\x09", 8}, /* room for exactly the escape */
    {"abc", 1, "", 3},
    {"abc", 0, NULL, 3}, /* dst NULL: only the length */
};

START_TEST(test_escape_ctl)
{
  const struct escape_case *c = &escape_cases[_i];
  char buf[64];
  memset(buf, '#', sizeof buf);
  size_t need = dbuf_escape_ctl(c->len ? buf : NULL, c->len, c->src);
  ck_assert_uint_eq(need, c->need);
  if (c->want != NULL) {
    ck_assert_str_eq(buf, c->want);
    ck_assert_msg(buf[c->len] == '#', "case %d: wrote past %zu bytes", _i, c->len);
  }
}
END_TEST

START_TEST(test_escape_null_src)
{
  char buf[4] = "xyz";
  ck_assert_uint_eq(dbuf_escape_ctl(buf, sizeof buf, NULL), 0);
  ck_assert_str_eq(buf, "");
}
END_TEST

/* The library's one diagnostic writer: formats, escapes, cuts, and returns the code. */
START_TEST(test_diag_writer)
{
  dbuf_diag_t d;
  dbuf_diag_clear(&d);
  ck_assert_int_eq(dbuf__diag(&d, DBUF_EPARSE, "%s:%d: bad '%s'", "f.shapes", 3, "a\nb"),
                   DBUF_EPARSE);
  ck_assert_int_eq(d.code, DBUF_EPARSE);
  ck_assert_str_eq(d.msg, "f.shapes:3: bad 'a\\x0ab'");
  ck_assert_int_eq(dbuf__diag(NULL, DBUF_EIO, "%s", "nobody reads this"), DBUF_EIO);

  /* 600 characters: cut to the DBUF_DIAG_LEN - 1 that fit. */
  char long_text[601];
  memset(long_text, 'x', 600);
  long_text[600] = '\0';
  ck_assert_int_eq(dbuf__diag(&d, DBUF_ERANGE, "%s", long_text), DBUF_ERANGE);
  ck_assert_uint_eq(strlen(d.msg), DBUF_DIAG_LEN - 1);
  ck_assert_int_eq(d.code, DBUF_ERANGE);
}
END_TEST

/* ---- input.c ------------------------------------------------------------- */

/* A folder of its own under TMPDIR for the input files. */
static char tmp_dir[256];

static void
make_tmp_dir(void)
{
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/check_cov_extra.XXXXXX", base && *base ? base : "/tmp");
  ck_assert_msg(mkdtemp(tmp_dir) != NULL, "mkdtemp %s: %s", tmp_dir, strerror(errno));
}

/* The lowest free file descriptor: the same before and after a call that
 * leaks none. */
static int
lowest_free_fd(void)
{
  int fd = dup(2);
  ck_assert_int_ge(fd, 0);
  close(fd);
  return fd;
}

/* tmp_dir/name, in a static buffer the next call overwrites. */
static const char *
tmp_path(const char *name)
{
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  return path;
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
  FILE *f = fopen(path, "w");
  ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
  ck_assert_int_eq(chmod(path, mode), 0);
}

/* Opens path (at most max_bytes, -1: any size); 0 if it fails with code
 * want_rc and the reason want_why, leaving no descriptor open and no output
 * written; else 1, saying why on stderr. */
static int
open_fails(const char *path, int64_t max_bytes, int want_rc, const char *want_why)
{
  char why[256] = "";
  int fd = -7, free_fd = lowest_free_fd();
  int64_t size = -7;
  int rc = dbuf__input_open(path, max_bytes, &fd, &size, why, sizeof why);
  if (rc != want_rc || strcmp(why, want_why) != 0) {
    fprintf(stderr, "%s: rc %s why '%s', want %s '%s'\n", path, dbuf_err_name(rc), why,
            dbuf_err_name(want_rc), want_why);
    return 1;
  }
  if (fd != -7 || size != -7) {
    fprintf(stderr, "%s: outputs written on failure (fd %d, size %lld)\n", path, fd,
            (long long)size);
    return 1;
  }
  if (lowest_free_fd() != free_fd) {
    fprintf(stderr, "%s: a descriptor was left open\n", path);
    return 1;
  }
  return 0;
}

START_TEST(test_input_ok_and_limit)
{
  make_tmp_dir();
  char path[512];
  snprintf(path, sizeof path, "%s", tmp_path("ok.shapes"));
  write_file(path, "a 2x3\n", 0644);
  char why[256] = "";
  int fd = -1;
  int64_t size = -1;
  ck_assert_int_eq(dbuf__input_open(path, 6, &fd, &size, why, sizeof why), 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(size, 6);
  /* Blocking again: the descriptor reads like any other. */
  ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  close(fd);
  ck_assert_int_eq(open_fails(path, 5, DBUF_EFORMAT, "file is 6 bytes, over the limit of 5 bytes"),
                   0);
  ck_assert_int_eq(open_fails(tmp_path("none"), -1, DBUF_ENOTFOUND,
                              "cannot open: No such file or directory"),
                   0);
  ck_assert_int_eq(open_fails(tmp_dir, -1, DBUF_EIO, "not a regular file (a directory)"), 0);
  unlink(path);
  rmdir(tmp_dir);
}
END_TEST

START_TEST(test_input_socket)
{
  make_tmp_dir();
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  const char *path = tmp_path("sock");
  ck_assert_uint_lt(strlen(path), sizeof a.sun_path);
  strcpy(a.sun_path, path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(s, 0);
  ck_assert_msg(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", path,
                strerror(errno));
  ck_assert_int_eq(open_fails(path, -1, DBUF_EIO, "not a regular file (a socket)"), 0);
  close(s);
  unlink(path);
  rmdir(tmp_dir);
}
END_TEST

/* Every kind of file has its word; only the S_IFMT bits count. */
static const struct {
  mode_t mode;
  const char *want;
} kinds[] = {
    {S_IFREG | 0644, "a regular file"},  {S_IFDIR | 0755, "a directory"},
    {S_IFIFO | 0600, "a named pipe"},    {S_IFCHR | 0666, "a character device"},
    {S_IFBLK | 0660, "a block device"},  {S_IFSOCK | 0755, "a socket"},
    {S_IFLNK | 0777, "a symbolic link"}, {0644, "an unknown kind of file"},
};

START_TEST(test_file_kind)
{
  ck_assert_str_eq(dbuf_file_kind(kinds[_i].mode), kinds[_i].want);
}
END_TEST

/* The failures below happen between the checks: the file is regular, but
 * open, fstat or fcntl fails. */
static int
child_input(void *arg)
{
  int which = *(const int *)arg;
  const char *path = tmp_path("in.shapes");
  test_block_t b[2];
  int n = 0;
  switch (which) {
  case 0: /* unreadable: mode 000, and no capability to override it */
    CHILD_REQUIRE(chmod(path, 0) == 0, 2, "chmod: %s", strerror(errno));
    CHILD_REQUIRE(test_drop_caps((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH)) == 0,
                  3, "capset: %s", strerror(errno));
    return open_fails(path, -1, DBUF_EIO, "cannot open: Permission denied") ? 4 : 0;
  case 1: /* fstat of the open descriptor fails (fstat is newfstatat(fd, "", AT_EMPTY_PATH)) */
    b[n++] = (test_block_t){SYS_newfstatat, 3, AT_EMPTY_PATH, EIO};
#ifdef SYS_fstat
    b[n++] = (test_block_t){SYS_fstat, -1, 0, EIO};
#endif
    CHILD_REQUIRE(test_block_syscalls(b, n) == 0, 2, "seccomp: %s", strerror(errno));
    return open_fails(path, -1, DBUF_EIO, "cannot stat: Input/output error") ? 3 : 0;
  case 2: /* clearing O_NONBLOCK fails */
    b[n++] = (test_block_t){SYS_fcntl, 1, F_SETFL, EBADF};
    CHILD_REQUIRE(test_block_syscalls(b, n) == 0, 2, "seccomp: %s", strerror(errno));
    return open_fails(path, -1, DBUF_EIO, "cannot read: Bad file descriptor") ? 3 : 0;
  default:
    return 99;
  }
}

START_TEST(test_input_syscall_fails)
{
  make_tmp_dir();
  write_file(tmp_path("in.shapes"), "a 4\n", 0644);
  ck_assert_int_eq(in_child(child_input, &_i), 0);
  unlink(tmp_path("in.shapes"));
  rmdir(tmp_dir);
}
END_TEST

int
main(void)
{
  Suite *s = suite_create("core extra");
  TCase *tc = tcase_create("error");
  tcase_add_loop_test(tc, test_every_code, 0, NCODES);
  tcase_add_test(tc, test_code_values);
  tcase_add_loop_test(tc, test_unknown_codes, 0, (int)(sizeof unknown / sizeof unknown[0]));
  tcase_add_test(tc, test_diag_clear);
  tcase_add_loop_test(tc, test_escape_ctl, 0, (int)(sizeof escape_cases / sizeof escape_cases[0]));
  tcase_add_test(tc, test_escape_null_src);
  tcase_add_test(tc, test_diag_writer);
  suite_add_tcase(s, tc);
  tc = tcase_create("input");
  tcase_add_test(tc, test_input_ok_and_limit);
  tcase_add_test(tc, test_input_socket);
  tcase_add_loop_test(tc, test_input_syscall_fails, 0, 3);
  tcase_add_loop_test(tc, test_file_kind, 0, (int)(sizeof kinds / sizeof kinds[0]));
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
