#!/bin/bash
# Installs the build into a staging folder (make install DESTDIR=...), checks
# that every promised file is there, then builds the C examples of docs/library.md
# against the installed libraries and runs them: the planning example with
# `pkg-config --cflags --libs dbuf` (libdbuf alone: it must load neither MPI
# nor hwloc), and, in a build with MPI, the MPI example with `pkg-config
# --cflags --libs dbuf-mpi` under mpirun -np 2.  Usage:
# scripts/test-install.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: test-install.sh BUILD_DIR}
stage=$(mktemp -d "${TMPDIR:-/tmp}/dbuf-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
with_mpi=no
grep -q '^#define DBUF_WITH_MPI 1' "$build/config.h" && with_mpi=yes

make -C "$build" install DESTDIR="$stage" >"$stage/install.log" 2>&1 ||
  { tail -20 "$stage/install.log"; bad "make install"; echo "$passed passed, $failed failed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$build/dbuf.pc")
root="$stage$prefix"
files="bin/dbuf-shard lib/libdbuf.so lib/pkgconfig/dbuf.pc include/dbuf/dbuf.h
  include/dbuf/layout.h include/dbuf/tensors.h include/dbuf/error.h include/dbuf/version.h
  share/man/man1/dbuf-shard.1 share/dbuf-shard/dbuf-shard.sbatch"
[ "$with_mpi" = yes ] &&
  files="$files lib/libdbuf-mpi.so lib/pkgconfig/dbuf-mpi.pc include/dbuf/comm.h include/dbuf/mem.h"
for f in $files; do
  if [ -e "$root/$f" ]; then ok "installed $f"; else bad "installed $f"; fi
done

# The fake-node launcher of the README's two-node example, executable.
f=libexec/dbuf-shard/dbuf-fake-rsh
if [ -x "$root/$f" ]; then ok "installed $f, executable"; else bad "installed $f, executable"; fi

# The staged .pc files with their prefix moved into the stage.  (Not
# PKG_CONFIG_SYSROOT_DIR: it would move Open MPI's include path too.)
mkdir -p "$stage/pc"
for pc in "$root"/lib/pkgconfig/*.pc; do
  sed "s|^prefix=.*|prefix=$root|" "$pc" >"$stage/pc/$(basename "$pc")"
done
export PKG_CONFIG_PATH="$stage/pc"

# example NAME MARKER PKG: the C program between <!-- MARKER:begin --> and
# <!-- MARKER:end --> in docs/library.md, built with pkg-config PKG into
# $stage/NAME.  Returns 1 (with the failure counted) when it cannot.
example() {
  local name=$1 marker=$2 pkg=$3
  sed -n "/^<!-- $marker:begin -->\$/,/^<!-- $marker:end -->\$/p" "$top/docs/library.md" |
    sed '1,2d;$d' | sed '$d' >"$stage/$name.c"
  if [ "$(wc -l <"$stage/$name.c")" -lt 10 ]; then
    bad "docs/library.md $marker not found"
    return 1
  fi
  # shellcheck disable=SC2046 # pkg-config prints several words
  if cc -std=c11 -Wall -Werror -o "$stage/$name" "$stage/$name.c" \
       $(pkg-config --cflags --libs "$pkg") 2>"$stage/cc.log"; then
    ok "docs/library.md $marker builds with pkg-config --cflags --libs $pkg"
  else
    cat "$stage/cc.log"; bad "docs/library.md $marker build"
    return 1
  fi
}

if example plan example dbuf; then
  out=$(LD_LIBRARY_PATH="$root/lib" "$stage/plan" 2>&1) || true
  # Expected output derived by hand from the seed example (docs/library.md).
  want='size 60, chunk 12
rank 0 [0, 12): P0 rows 0..1
rank 1 [12, 24): P1 rows 0..2
rank 2 [24, 36): P1 rows 3..3 P3 rows 0..0 P2 rows 0..0
rank 3 [36, 48): P2 rows 1..3
rank 4 [48, 60): P4 rows 0..0
valid'
  if [ "$out" = "$want" ]; then ok "docs/library.md example output"; else bad "docs/library.md example output: $out"; fi
  if LD_LIBRARY_PATH="$root/lib" ldd "$stage/plan" | grep -Eq 'libmpi|libhwloc|libopen-pal'; then
    bad "the planning example loads MPI or hwloc: $(LD_LIBRARY_PATH="$root/lib" ldd "$stage/plan" | tr '\n' ' ')"
  else
    ok "the planning example loads neither MPI nor hwloc"
  fi
fi

if [ "$with_mpi" = yes ] && example mpi example-mpi dbuf-mpi; then
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  out=$(LD_LIBRARY_PATH="$root/lib" timeout 120 mpirun --oversubscribe -np 2 \
          "$stage/mpi" 2>&1) || true
  # The seed's 52 elements in chunks of lcm(6, 4, 4, 2, 6) = 12, padded to
  # 3 chunks on each of 2 ranks; "pack:2 numa:2" has 4 NUMA nodes.
  want='2 ranks, 72 elements, verified; 4 NUMA nodes'
  if [ "$out" = "$want" ]; then ok "docs/library.md MPI example output"; else bad "docs/library.md MPI example output: $out"; fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
