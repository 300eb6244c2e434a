/* Input files: only regular files are opened, without ever blocking. */
#include "core_internal.h"

#include "dbuf/shapes_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *
dbuf_file_kind(mode_t m)
{
  if (S_ISREG(m))
    return "a regular file";
  if (S_ISLNK(m))
    return "a symbolic link";
  if (S_ISFIFO(m))
    return "a named pipe";
  if (S_ISCHR(m))
    return "a character device";
  if (S_ISBLK(m))
    return "a block device";
  if (S_ISDIR(m))
    return "a directory";
  if (S_ISSOCK(m))
    return "a socket";
  return "an unknown kind of file";
}

static int
open_error(int err, char *why, size_t why_len)
{
  snprintf(why, why_len, "cannot open: %s", strerror(err));
  return err == ENOENT ? DBUF_ENOTFOUND : DBUF_EIO;
}

int
dbuf__input_open(const char *path, int64_t max_bytes, int *fd_out,
                 int64_t *size_out, char *why, size_t why_len)
{
  struct stat sb;
  int fd, flags;

  /* Checked before opening: opening a FIFO for reading blocks until a
   * writer comes, and opening a device may have side effects. */
  if (stat(path, &sb) != 0)
    return open_error(errno, why, why_len);
  if (!S_ISREG(sb.st_mode)) {
    snprintf(why, why_len, "not a regular file (%s)", dbuf_file_kind(sb.st_mode));
    return DBUF_EIO;
  }
  /* O_NONBLOCK: the path may have been replaced by a FIFO since stat. */
  fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return open_error(errno, why, why_len);
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    snprintf(why, why_len, "cannot stat: %s", strerror(e));
    return DBUF_EIO;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    snprintf(why, why_len, "not a regular file (%s)", dbuf_file_kind(sb.st_mode));
    return DBUF_EIO;
  }
  if (max_bytes >= 0 && (int64_t)sb.st_size > max_bytes) {
    close(fd);
    snprintf(why, why_len, "file is %lld bytes, over the limit of %lld bytes",
             (long long)sb.st_size, (long long)max_bytes);
    return DBUF_EFORMAT;
  }
  if ((flags = fcntl(fd, F_GETFL)) == -1 ||
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
    int e = errno;
    close(fd);
    snprintf(why, why_len, "cannot read: %s", strerror(e));
    return DBUF_EIO;
  }
  *fd_out = fd;
  *size_out = (int64_t)sb.st_size;
  return 0;
}
