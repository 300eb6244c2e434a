#!/bin/bash
# The output options (-o, --output of plan and compare) on device nodes
# made with mknod (root only; skipped otherwise): a character device is
# written in place, so one like /dev/null (1,3) takes the output (exit 0)
# and one like /dev/full (1,7) fails the write (exit 1, one line); a block
# device is refused (exit 2) without being opened; a symlink leads to its
# device.  Every node is still what it was afterwards.  The other kinds of
# file are test-output.sh's.
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: mknod needs root"
  exit 77
fi
# shellcheck source=tests/cli/output-lib.sh
. "$(dirname "$0")/output-lib.sh"
# fresh_nodes: the nodes, made again for every writer so that one writer's
# damage does not hide another's.
fresh_nodes() {
  rm -f "$T/null" "$T/full" "$T/blk" "$T/lnnull"
  mknod "$T/null" c 1 3 && mknod "$T/full" c 1 7 && mknod "$T/blk" b 7 0 &&
    ln -s null "$T/lnnull"
}
if ! fresh_nodes; then
  echo "SKIP: mknod failed"
  exit 77
fi
if ! : >"$T/null"; then
  echo "SKIP: $T cannot hold device nodes (mounted nodev?)"
  exit 77
fi

while read -r w <&3; do
  fresh_nodes || fail "mknod"
  write_to "$w" "$T/null"
  expect_code 0 "$w (1,3)"
  expect_err "" "$w (1,3): no message"
  expect_node -c "$T/null" "$w (1,3): still a character device"
  expect_no_temp "$T/null" "$w (1,3): no temporary"

  write_to "$w" "$T/full"
  expect_code 1 "$w (1,7)"
  expect_err "dbuf-shard: -o $T/full: write failed: No space left on device" "$w (1,7): message"
  expect_node -c "$T/full" "$w (1,7): still a character device"
  expect_no_temp "$T/full" "$w (1,7): no temporary"

  refused "$w" "$T/blk" "a block device" -b

  write_to "$w" "$T/lnnull"
  expect_code 0 "$w a symlink to (1,3)"
  expect_node -L "$T/lnnull" "$w a symlink to (1,3): still a symlink"
  expect_node -c "$T/null" "$w a symlink to (1,3): still a character device"
done 3<<<"$WRITERS"

finish
