#!/bin/bash
# Writes docs/cli.md, the command-line reference, to stdout from the --help
# texts of a built dbuf-shard: a short introduction, then one section per
# command with its --help verbatim.  The help texts are the one source of
# the option text; tests/cli/test-docs.sh regenerates the page and fails
# when the committed docs/cli.md differs.  Usage:
#   scripts/gen-cli-doc.sh BUILD_DIR > docs/cli.md
# (BUILD_DIR/dbuf-shard, or DBUF_SHARD, is the program; it must be built
# with MPI, since a --without-mpi build has a shorter 'run --help'.)
set -euo pipefail
export LC_ALL=C
build=${1:?usage: gen-cli-doc.sh BUILD_DIR > docs/cli.md}
prog=${DBUF_SHARD:-$build/dbuf-shard}
[ -x "$prog" ] || { echo "gen-cli-doc.sh: $prog: not an executable (build first)" >&2; exit 1; }
if "$prog" run --help | grep -q 'built without MPI'; then
  echo "gen-cli-doc.sh: $prog was built without MPI; docs/cli.md documents the MPI build" >&2
  exit 1
fi

# The commands the top-level usage names, in its order (as test-man.sh
# finds them).
cmds=$("$prog" --help | grep -oE '^ *(Usage:)? *dbuf-shard \[?[a-z]+' |
  awk '{ w = $NF; gsub(/\[/, "", w); if (!seen[w]++) print w }')

cat <<'EOF'
# Command-line reference

This page is the reference of every `dbuf-shard` command and option: the
text each command prints for `--help`, copied verbatim. It is generated from
the built program by `scripts/gen-cli-doc.sh BUILD_DIR > docs/cli.md`, and
`make check` fails when it is out of date, so it always matches the program
of this tree. The [task guide](guide.md) explains what the options do in
context, [formats](formats.md) the files they read and write, and
`man dbuf-shard` says the same as these texts in manual-page form.

Contents:

- [`dbuf-shard`](#dbuf-shard)
EOF
for c in $cmds; do
  echo "- [\`dbuf-shard $c\`](#dbuf-shard-$c)"
done

section() {
  echo
  echo "## \`$1\`"
  echo
  echo '```'
  shift
  "$prog" "$@"
  echo '```'
}
section "dbuf-shard" --help
for c in $cmds; do
  section "dbuf-shard $c" "$c" --help
done
