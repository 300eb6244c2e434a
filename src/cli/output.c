/* Diagnostics, integer options and output files. */
#include "cli.h"

#include "dbuf/shapes_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_prog = "dbuf-shard";
int cli_quiet;

/* The last message, kept for the MPI run to hand rank 0's error to all ranks. */
static char last_err[512];

const char *
cli_err_last(void)
{
  return last_err;
}

void
cli_err(const char *fmt, ...)
{
  char raw[sizeof last_err];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* One printable line, whatever bytes an argument or input held. */
  dbuf_escape_ctl(last_err, sizeof last_err, raw);
  if (!cli_quiet)
    fprintf(stderr, "%s: %s\n", cli_prog, last_err);
}

int
cli_exit_code(int err)
{
  if (err == 0)
    return CLI_EXIT_OK;
  /* No default: -Wswitch (an error with --enable-werror) names a new code
   * of the table until it is placed on one side. */
  switch ((dbuf_errno_t)err) {
  case DBUF_EINVAL:
  case DBUF_EOVERFLOW:
  case DBUF_ESHAPE:
  case DBUF_EBLOCK:
  case DBUF_ENRANKS:
  case DBUF_EOWNER:
  case DBUF_ERANGE:
  case DBUF_ELAYOUT:
  case DBUF_EPARSE:
  case DBUF_EIO:
  case DBUF_EFORMAT:
  case DBUF_EDUP:
  case DBUF_ENOTFOUND:
  case DBUF_EMISMATCH:
  case DBUF_EUNSUPPORTED:
  case DBUF_EPARALLEL:
    return CLI_EXIT_USAGE;
  case DBUF_ENOMEM:
  case DBUF_ECHECKSUM:
  case DBUF_EVERSION:
  case DBUF_EMPI:
  case DBUF_ETOPO:
  case DBUF_EBIND:
  case DBUF_EMLOCK:
  case DBUF_EVERIFY:
  case DBUF_ENOBUFS:
  case DBUF_ECANCELED:
  case DBUF_ERRNO_MAX:
    break;
  }
  return CLI_EXIT_FAIL;
}

int
cli_parse_i64(const char *opt, const char *s, int64_t min, int64_t max,
              int64_t *out)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*s == '\0' || *end != '\0') {
    cli_err("--%s: '%s' is not an integer", opt, s);
    return CLI_EXIT_USAGE;
  }
  if (errno == ERANGE || v < min || v > max) {
    cli_err("--%s: %s is out of range [%lld, %lld]", opt, s, (long long)min,
            (long long)max);
    return CLI_EXIT_USAGE;
  }
  *out = v;
  return 0;
}

static int
write_all(int fd, const char *data, size_t len)
{
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    data += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Whether a failed write to stdout was reported: it is said once. */
static int stdout_said;

/* err 0: the reason is not known. */
static int
stdout_failed(int err)
{
  if (!stdout_said)
    cli_err("<stdout>: write failed%s%s", err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
  stdout_said = 1;
  return CLI_EXIT_FAIL;
}

int
cli_stdout_flush(void)
{
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout))
    return CLI_EXIT_OK;
  /* errno 0: an earlier write failed, and stdio dropped the text it held
   * then (glibc does), so nothing was left to write now, nor a reason. */
  return stdout_failed(errno);
}

/*
 * Open path to write it in place if it is a stream: an existing character
 * device or FIFO (a symlink counts as what it leads to).  Returns the
 * descriptor; -1 when path is a regular file, a new name or one stat()
 * cannot see (the temporary file's creation names that error); -2 with the
 * error printed as "WHAT: ..." and *code set.  Anything else (a folder, a
 * block device, a socket) is refused without being opened: renaming a
 * temporary over it would replace the node with a regular file.
 */
static int
open_stream(const char *path, const char *what, int *code)
{
  struct stat st, now;
  if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
    return -1;
  *code = CLI_EXIT_USAGE;
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    cli_err("%s: %s; give a regular file, a character device or a FIFO", what,
            dbuf_file_kind(st.st_mode));
    return -2;
  }
  /* O_NONBLOCK: a FIFO that nobody reads fails at once (ENXIO) where a
   * blocking open would wait for a reader for ever, before any output is
   * made.  It is cleared once open, so the writes wait for the reader. */
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO && S_ISFIFO(st.st_mode))
      cli_err("%s: a FIFO with no reader", what);
    else
      cli_err("%s: cannot open: %s", what, strerror(errno));
    return -2;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || fstat(fd, &now) != 0)
    cli_err("%s: cannot open: %s", what, strerror(errno));
  else if ((now.st_mode & S_IFMT) != (st.st_mode & S_IFMT))
    /* Not the node stat() saw: a regular file put there meanwhile would be
     * written over in place, not replaced. */
    cli_err("%s: replaced while it was opened", what);
  else
    return fd;
  close(fd);
  return -2;
}

/* Create the temporary file of an atomic write to path; *tmp is malloc'd.
 * Returns the descriptor, or -1 with the error printed as "WHAT: ...". */
static int
open_temp(const char *path, const char *what, char **tmp, int *code)
{
  size_t plen = strlen(path);
  *tmp = malloc(plen + 16);
  if (*tmp == NULL) {
    cli_err("%s: out of memory", what);
    *code = CLI_EXIT_FAIL;
    return -1;
  }
  snprintf(*tmp, plen + 16, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(*tmp);
  if (fd < 0) {
    cli_err("%s: cannot create: %s", what, strerror(errno));
    free(*tmp);
    *tmp = NULL;
    *code = CLI_EXIT_USAGE;
  }
  return fd;
}

/* An output being written: stdout, a stream written in place, or a
 * temporary file renamed at the end. */
struct cli_out {
  const char *path; /* NULL: stdout; else the name the output takes */
  char *real;       /* path when it is the file a symlink leads to, or NULL */
  char *what;       /* "OPT PATH", for messages */
  char *tmp;        /* the temporary file; NULL: written in place */
  int fd;
  int err; /* errno of the first failed write, 0 when none */
};

int
cli_output_check(const char *opt, const char *path, cli_out_t **held)
{
  cli_out_t *o = NULL;
  *held = NULL;
  if (path == NULL || strcmp(path, "-") == 0)
    return CLI_EXIT_OK;
  int code = cli_out_open(opt, path, &o);
  if (code != CLI_EXIT_OK)
    return code;
  if (o->tmp == NULL) { /* a stream: a FIFO's reader would see its end if closed */
    *held = o;
    return CLI_EXIT_OK;
  }
  return cli_out_close(o, 0); /* removes the temporary file */
}

static void
out_free(cli_out_t *o)
{
  free(o->what);
  free(o->tmp);
  free(o->real);
  free(o);
}

int
cli_out_open(const char *opt, const char *path, cli_out_t **out)
{
  cli_out_t *o = calloc(1, sizeof *o);
  int code = CLI_EXIT_OK;
  if (o == NULL) {
    cli_err("%s: out of memory", path != NULL ? path : "<stdout>");
    return CLI_EXIT_FAIL;
  }
  o->fd = -1;
  if (path != NULL && strcmp(path, "-") != 0) {
    size_t n = strlen(opt) + strlen(path) + 2;
    if ((o->what = malloc(n)) == NULL) {
      cli_err("%s: out of memory", path);
      free(o);
      return CLI_EXIT_FAIL;
    }
    snprintf(o->what, n, "%s %s", opt, path);
    o->path = path;
    if ((o->fd = open_stream(path, o->what, &code)) >= 0) {
      *out = o;
      return CLI_EXIT_OK;
    }
    /* A symlink to a regular file is written through: the file it leads
     * to is replaced, the link stays (/dev/stdout of a shell's redirection
     * is such a link, into /proc). */
    struct stat ln, st;
    if (o->fd == -1 && lstat(path, &ln) == 0 && S_ISLNK(ln.st_mode) && stat(path, &st) == 0) {
      if ((o->real = realpath(path, NULL)) == NULL) {
        cli_err("%s: cannot resolve the link: %s", o->what, strerror(errno));
        out_free(o);
        return CLI_EXIT_USAGE;
      }
      o->path = o->real;
    }
    if (o->fd == -2 || (o->fd = open_temp(o->path, o->what, &o->tmp, &code)) < 0) {
      out_free(o);
      return code;
    }
    /* mkstemp creates 0600; give the file the mode open(2) would, 0666
     * less the umask (umask(2) reads it only by setting it: set it back). */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(o->fd, 0666 & ~mask) != 0)
      o->err = errno;
  }
  *out = o;
  return CLI_EXIT_OK;
}

int
cli_out_write(void *out, const char *data, size_t len)
{
  cli_out_t *o = out;
  if (o->err != 0)
    return -1;
  if (o->path == NULL ? fwrite(data, 1, len, stdout) != len : write_all(o->fd, data, len) != 0)
    o->err = errno != 0 ? errno : EIO;
  return o->err != 0 ? -1 : 0;
}

int
cli_out_close(cli_out_t *o, int ok)
{
  int code = CLI_EXIT_OK;
  if (o == NULL)
    return CLI_EXIT_OK;
  if (o->path == NULL) {
    code = ok && o->err != 0 ? stdout_failed(o->err) : cli_stdout_flush();
    free(o);
    return code;
  }
  /* A temporary file is on disk before it takes the name; a stream written
   * in place has no name to take. */
  if (ok && o->err == 0 && o->tmp != NULL && fsync(o->fd) != 0)
    o->err = errno;
  if (!ok || o->err != 0 || o->tmp == NULL) {
    if (close(o->fd) != 0 && o->err == 0)
      o->err = errno;
    if (o->tmp != NULL)
      unlink(o->tmp);
    if (ok && o->err != 0) {
      cli_err("%s: write failed: %s", o->what, strerror(o->err));
      code = CLI_EXIT_FAIL;
    }
  } else if (close(o->fd) != 0 || rename(o->tmp, o->path) != 0) {
    int e = errno;
    unlink(o->tmp);
    cli_err("%s: cannot write: %s", o->what, strerror(e));
    code = CLI_EXIT_FAIL;
  }
  out_free(o);
  return code;
}

int
cli_write_output(const char *opt, const char *path, const char *data, size_t len)
{
  cli_out_t *o = NULL;
  int code = cli_out_open(opt, path, &o);
  if (code != CLI_EXIT_OK)
    return code;
  cli_out_write(o, data, len);
  return cli_out_close(o, 1);
}
