#!/bin/bash
# Where the output options (-o, --output of plan and compare) write: a
# regular file or a new name is replaced atomically (a temporary file
# renamed into place); a FIFO is written in place, and one that nobody reads
# is refused at once (exit 2) instead of waited on; a folder or a socket is
# refused (exit 2) and left as it was; a symlink to a FIFO is the FIFO, a
# symlink to a regular file is written through (its target replaced, the
# link kept: /dev/stdout of a redirection is one).  And a failed write
# to stdout, of every command: exit 1 and one line.  Device nodes (mknod,
# root only) are test-output-dev.sh's.
set -u
# shellcheck source=tests/cli/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/cli/output-lib.sh
. "$(dirname "$0")/output-lib.sh"

# fresh_nodes: a FIFO, a symlink to it, a folder and a Unix socket (bound by
# a process that then ends: the node stays), made again for every writer so
# that one writer's damage does not hide another's.
fresh_nodes() {
  rm -rf "$T/fifo" "$T/lnfifo" "$T/dir" "$T/sock"
  mkfifo "$T/fifo"
  ln -s fifo "$T/lnfifo"
  mkdir "$T/dir"
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/sock" \
    2>/dev/null
}

# read_fifo: reads $T/fifo into $T/got in the background (bounded, so a
# writer that never opens the FIFO cannot hang the test).
read_fifo() {
  rm -f "$T/got"
  timeout "$OUT_TIMEOUT" cat "$T/fifo" >"$T/got" &
  READER=$!
}
# expect_got FILE what: FILE holds exactly what the writer prints.
expect_got() {
  if cmp -s "$WANT" "$1"; then pass "$2"; else fail "$2: $1 is not the output"; fi
}

while read -r w <&3; do
  fresh_nodes
  # A regular file: replaced whole.
  echo old >"$T/reg"
  write_to "$w" "$T/reg"
  expect_code 0 "$w a regular file"
  expect_got "$T/reg" "$w a regular file: the output"
  expect_no_temp "$T/reg" "$w a regular file: no temporary"
  rm -f "$T/new"
  write_to "$w" "$T/new"
  expect_code 0 "$w a new name"
  expect_got "$T/new" "$w a new name: the output"

  # A FIFO with a reader: the output goes through it.
  read_fifo
  write_to "$w" "$T/fifo"
  wait "$READER"
  expect_code 0 "$w a FIFO with a reader"
  expect_err "" "$w a FIFO with a reader: no message"
  expect_got "$T/got" "$w a FIFO with a reader: the reader got the output"
  expect_node -p "$T/fifo" "$w a FIFO with a reader: still a FIFO"
  # No reader: refused at once, not waited on.
  write_to "$w" "$T/fifo"
  expect_code 2 "$w a FIFO with no reader"
  expect_err "dbuf-shard: -o $T/fifo: a FIFO with no reader" "$w a FIFO with no reader: message"
  expect_node -p "$T/fifo" "$w a FIFO with no reader: still a FIFO"
  expect_no_temp "$T/fifo" "$w a FIFO with no reader: no temporary"
  # A symlink to the FIFO: the FIFO.
  read_fifo
  write_to "$w" "$T/lnfifo"
  wait "$READER"
  expect_code 0 "$w a symlink to a FIFO"
  expect_got "$T/got" "$w a symlink to a FIFO: the reader got the output"
  expect_node -L "$T/lnfifo" "$w a symlink to a FIFO: still a symlink"
  expect_node -p "$T/fifo" "$w a symlink to a FIFO: the FIFO stays"

  # A symlink to a regular file is written through: the file it leads to
  # is replaced atomically, the link stays a link.
  echo old >"$T/target"
  ln -sfn target "$T/lnreg"
  write_to "$w" "$T/lnreg"
  expect_code 0 "$w a symlink to a regular file"
  expect_node -L "$T/lnreg" "$w a symlink to a regular file: still a symlink"
  expect_got "$T/target" "$w a symlink to a regular file: the output in its target"
  # A link to /proc/self/fd/1, as /dev/stdout is (never the system's own
  # here), with stdout redirected to a file (write_to sends it to
  # $T/stdout): the file gets the output, the link is not touched.
  ln -sfn /proc/self/fd/1 "$T/stdout-link"
  write_to "$w" "$T/stdout-link"
  expect_code 0 "$w a link to /proc/self/fd/1, stdout a file"
  expect_got "$T/stdout" "$w a link to /proc/self/fd/1, stdout a file: the output in the file"
  expect_node -L "$T/stdout-link" "$w a link to /proc/self/fd/1: still a symlink"

  refused "$w" "$T/dir" "a directory" -d
  if [ -S "$T/sock" ]; then
    refused "$w" "$T/sock" "a socket" -S
  fi
done 3<<<"$WRITERS"

# A failed write to stdout: exit 1 and one line naming it, for every
# command and its --help (GNU tools do the same for theirs).
"$DBUF" plan --shapes "$T/out.shapes" --dp 2 --format json -o "$T/layout.json"
for args in models --help --version "plan --help" "verify --help" "compare --help" \
  "models --help" "run --help" "verify $T/layout.json" \
  "compare --shapes $T/out.shapes --dp 2"; do
  # shellcheck disable=SC2086 # the words of args are the arguments
  "$DBUF" $args >/dev/full 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
  expect_code 1 "$args on a full stdout"
  # The reason, unless stdio dropped it with the text of an earlier write.
  case $ERR in
  "dbuf-shard: <stdout>: write failed: No space left on device" | \
    "dbuf-shard: <stdout>: write failed") pass "$args on a full stdout: message" ;;
  *) fail "$args on a full stdout: message '$ERR'" ;;
  esac
done

if [ ! -S "$T/sock" ]; then
  finish || exit 1
  echo "SKIP: no Unix socket could be made (python3): the socket cases did not run"
  exit 77
fi
finish
