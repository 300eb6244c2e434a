#!/bin/bash
# Installs the build into a staging folder (make install DESTDIR=...), checks
# that every promised file is there, then builds the C example of the README
# against the installed library with `pkg-config --cflags --libs dbuf` and
# runs it.  Usage: scripts/test-install.sh BUILD_DIR
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: test-install.sh BUILD_DIR}
stage=$(mktemp -d "${TMPDIR:-/tmp}/dbuf-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }

make -C "$build" install DESTDIR="$stage" >"$stage/install.log" 2>&1 ||
  { tail -20 "$stage/install.log"; bad "make install"; echo "$passed passed, $failed failed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$build/dbuf.pc")
root="$stage$prefix"
for f in bin/dbuf-shard lib/libdbuf.so lib/pkgconfig/dbuf.pc include/dbuf/layout.h \
         include/dbuf/tensors.h include/dbuf/error.h share/man/man1/dbuf-shard.1 \
         share/dbuf-shard/dbuf-shard.sbatch; do
  if [ -e "$root/$f" ]; then ok "installed $f"; else bad "installed $f"; fi
done

# The fake-node launcher of the README's two-node example, executable.
f=libexec/dbuf-shard/dbuf-fake-rsh
if [ -x "$root/$f" ]; then ok "installed $f, executable"; else bad "installed $f, executable"; fi

# The README's C example, between its markers.
sed -n '/^<!-- example:begin -->$/,/^<!-- example:end -->$/p' "$top/README.md" |
  sed '1,2d;$d' | sed '$d' >"$stage/example.c"
if [ "$(wc -l <"$stage/example.c")" -lt 10 ]; then
  bad "README C example not found"
else
  export PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
  if cc -std=c11 -Wall -Werror -o "$stage/example" "$stage/example.c" \
       $(pkg-config --cflags --libs dbuf) 2>"$stage/cc.log"; then
    ok "README example builds with pkg-config --cflags --libs dbuf"
  else
    cat "$stage/cc.log"; bad "README example build"
  fi
  out=$(LD_LIBRARY_PATH="$root/lib" "$stage/example" 2>&1) || true
  # Expected output derived by hand from the seed example (README).
  want='size 60, chunk 12
rank 0 [0, 12): P0 rows 0..1
rank 1 [12, 24): P1 rows 0..2
rank 2 [24, 36): P1 rows 3..3 P3 rows 0..0 P2 rows 0..0
rank 3 [36, 48): P2 rows 1..3
rank 4 [48, 60): P4 rows 0..0
valid'
  if [ "$out" = "$want" ]; then ok "README example output"; else bad "README example output: $out"; fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
