#!/bin/bash
# Golden outputs of the reports for people: every case of
# tests/data/golden-out/cases is run (`dbuf-shard plan ARGS` from that
# folder) and its stdout compared byte for byte with the committed file of
# the same name.  A difference prints a unified diff.  To regenerate after
# a deliberate change of the text: DBUF_GOLDEN_UPDATE=1 (writes the files
# in the source tree; review every changed number before committing).
set -u
. "$(dirname "$0")/lib.sh"
G="$DATA/golden-out"
n=0
while read -r name args; do
  case $name in '' | '#'*) continue ;; esac
  n=$((n + 1))
  # shellcheck disable=SC2086 # args is a list of words
  (cd "$G" && "$DBUF" plan $args) >"$T/stdout" 2>"$T/stderr"
  code=$?
  if [ "$code" -ne 0 ]; then
    fail "$name: exit $code: $(cat "$T/stderr")"
  elif [ -n "${DBUF_GOLDEN_UPDATE:-}" ]; then
    cp "$T/stdout" "$G/$name"
    pass "$name: written"
  elif [ ! -f "$G/$name" ]; then
    fail "$name: no golden file $G/$name"
  elif diff -u "$G/$name" "$T/stdout" >"$T/diff"; then
    pass "$name"
  else
    fail "$name differs from the golden file:"
    cat "$T/diff"
  fi
done <"$G/cases"
[ "$n" -ge 8 ] || fail "only $n golden cases read"
finish
