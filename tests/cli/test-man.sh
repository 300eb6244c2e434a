#!/bin/bash
# The man page and the help texts: every subcommand has --help (stdout,
# exit 0), every long option a --help lists is in dbuf-shard.1, every
# subcommand has a section there, and groff formats the page without a
# warning.
set -u
. "$(dirname "$0")/lib.sh"
MAN=${top_srcdir:?top_srcdir is not set}/dbuf-shard.1
[ -f "$MAN" ] || { echo "FAIL: $MAN not found"; exit 1; }

run --help
expect_code 0 "--help"
expect_out_has "Usage: dbuf-shard" "--help text"
[ -s "$T/stdout" ] && [ -z "$ERR" ] && pass "--help on stdout only" || fail "--help output"
run --version
expect_code 0 "--version"
grep -qE '^dbuf-shard [0-9]+\.[0-9]+\.[0-9]+$' "$T/stdout" && pass "--version text" || fail "--version: $(cat "$T/stdout")"

# The commands the top-level usage names, each with a --help and a man entry.
cmds=$("$DBUF" --help | grep -oE '^ *(Usage:)? *dbuf-shard \[?[a-z]+' | awk '{ print $NF }' | tr -d '[' | sort -u)
[ "$(echo "$cmds" | wc -w)" -ge 4 ] && pass "usage names $(echo $cmds)" || fail "usage names only: $cmds"
for c in $cmds; do
  run "$c" --help
  if [ "$CODE" -eq 0 ] && [ -s "$T/stdout" ] && [ -z "$ERR" ]; then
    pass "$c --help"
  else
    fail "$c --help: exit $CODE: $ERR"
    continue
  fi
  grep -q "^\.B $c\b" "$MAN" && pass "man: command $c" || fail "man: no entry for command $c"
  # Every long option of the help is documented (as \-\-name in roff).
  for o in $(grep -oE -- '--[a-z][a-z0-9-]*' "$T/stdout" | sort -u); do
    esc=$(sed 's/-/\\\\-/g' <<<"$o")
    if grep -q -- "$esc" "$MAN"; then
      pass "man: $c $o"
    else
      fail "man: $c $o is not documented"
    fi
  done
done

# Every format and layout kind the help offers is described.
for w in summary table diagram json csv svg padded unpadded tensor; do
  grep -q "^\.B $w\$" "$MAN" && pass "man: $w" || fail "man: $w not described"
done

if command -v groff >/dev/null; then
  warn=$(groff -man -Tutf8 -ww -z "$MAN" 2>&1)
  [ -z "$warn" ] && pass "groff: no warnings" || fail "groff: $warn"
else
  echo "SKIP: groff not installed: the man page's groff warnings are not checked"
fi

finish
