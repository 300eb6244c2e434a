/* Shared by the Check suites that make the system fail on purpose: run a
 * check in a forked child, make chosen system calls fail there (seccomp),
 * and drop capabilities while staying the same user.  Everything a child
 * changes dies with it, so these behave the same under CK_FORK=no.
 * Include after <check.h>. */
#ifndef DBUF_TEST_SANDBOX_H
#define DBUF_TEST_SANDBOX_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* Run fn in a forked child; returns its exit status (0 = pass).  The child
 * explains a failure on stderr.  It ends with exit, not _exit: in a
 * --coverage build (scripts/coverage.sh) libgcov writes the child's counts
 * from an exit handler, and _exit would throw them away.  (A weak
 * __gcov_dump would not do: a weak reference does not pull it out of the
 * static libgcov.)  Nothing is left in stdio buffers to be written twice:
 * they are flushed before the fork.  Under AddressSanitizer (no coverage
 * there) it stays _exit, so LeakSanitizer does not judge the copy of the
 * parent's heap a seccomp-filtered child holds. */
static inline int
in_child(int (*fn)(void *), void *arg)
{
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
#ifdef __SANITIZE_ADDRESS__
    _exit(fn(arg));
#else
    exit(fn(arg));
#endif
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_msg(WIFEXITED(st), "child died (signal %d)", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return WEXITSTATUS(st);
}

/* In a child: fail with exit status code, saying why on stderr. */
#define CHILD_REQUIRE(cond, code, ...)                                                         \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "child check failed (%s:%d): %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                            \
      fputc('\n', stderr);                                                                     \
      return (code);                                                                           \
    }                                                                                          \
  } while (0)

/* One system call to fail: number nr, only when argument arg (0-5) equals
 * value (arg -1: always), returning -1 with errno err (err 0: returns 0
 * without doing anything). */
typedef struct {
  long nr;
  int arg;
  uint32_t value;
  int err;
} test_block_t;

/* Installs a seccomp filter that fails the n calls described, for the rest
 * of this process's life (use in a child).  0, or -1 with errno. */
static inline int
test_block_syscalls(const test_block_t *b, int n)
{
#if defined(TEST_AUDIT_ARCH) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  struct sock_filter f[4 + 5 * 8];
  int k = 0;
  if (n < 0 || n > 8) {
    errno = EINVAL;
    return -1;
  }
  f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TEST_AUDIT_ARCH, 1, 0);
  f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  for (int i = 0; i < n; i++) {
    uint32_t ret = SECCOMP_RET_ERRNO | ((uint32_t)b[i].err & SECCOMP_RET_DATA);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    if (b[i].arg < 0) {
      f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)b[i].nr, 0, 1);
    } else {
      f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)b[i].nr, 0, 3);
      /* The low 32 bits of the argument (little-endian). */
      f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                            offsetof(struct seccomp_data, args) +
                                                (uint32_t)b[i].arg * sizeof(uint64_t));
      f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, b[i].value, 0, 1);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret);
  }
  f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {(unsigned short)k, f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -1;
#else
  (void)b;
  (void)n;
  errno = ENOSYS;
  return -1;
#endif
}

/* 1 if capability cap is in the effective set, 0 if not, -1 if unknown. */
static inline int
test_has_cap(int cap)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int r = -1;
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "CapEff:", 7) == 0)
      r = (int)((strtoull(line + 7, NULL, 16) >> cap) & 1u);
  fclose(f);
  return r;
}

/* Removes the capabilities in mask (bits CAP_*, all below 32) from this
 * process's effective, permitted and inheritable sets, staying the same
 * user, so files the process owns stay writable (libgcov's counts too).
 * 0, or -1 with errno. */
static inline int
test_drop_caps(uint32_t mask)
{
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3];
  if (syscall(SYS_capget, &h, c) != 0)
    return -1;
  c[0].effective &= ~mask;
  c[0].permitted &= ~mask;
  c[0].inheritable &= ~mask;
  return syscall(SYS_capset, &h, c) == 0 ? 0 : -1;
}

#endif
