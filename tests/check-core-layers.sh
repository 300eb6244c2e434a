#!/bin/sh
# shellcheck disable=SC2086 # NM may carry options, as libtool's "nm -B"
# One-way layers inside the core, checked on the built objects: a file
# never calls a file above it.
#   reports:     report_common <- the writers (report_text, report_csv,
#                report_svg*) <- report
#   safetensors: safetensors_file <- safetensors_header, safetensors_index
#                <- safetensors
set -eu
lib=${DBUF_CORE_LIB:?DBUF_CORE_LIB is not set}
nm=${NM:-nm}
[ -f "$lib" ] || { echo "FAIL: $lib not found"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dbuf-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# member:TYPE:symbol, one a line ("lib.a:libdbuf_core_la-x.o:addr T sym").
$nm -A "$lib" 2>/dev/null |
  sed -n 's/^.*libdbuf_core_la-\([a-z_]*\)\.o:[0-9a-f ]* \([A-Za-z]\) \(.*\)$/\1 \2 \3/p' >"$tmp/syms"
defined() { awk -v f="$1" '$1 == f && $2 ~ /[TDBR]/ {print $3}' "$tmp/syms" | sort -u; }
used() { awk -v f="$1" '$1 == f && $2 == "U" {print $3}' "$tmp/syms" | sort -u; }
fails=0
checks=0
# below LOW HIGH: LOW uses nothing that HIGH defines.
below() {
  checks=$((checks + 1))
  [ -n "$(defined "$2")" ] || { echo "FAIL: no symbols of $2 in $lib"; fails=$((fails + 1)); return; }
  used "$1" >"$tmp/used"
  defined "$2" >"$tmp/defined"
  bad=$(comm -12 "$tmp/used" "$tmp/defined")
  if [ -n "$bad" ]; then
    echo "FAIL: $1 calls $2 above it:" $bad
    fails=$((fails + 1))
  fi
}
# Every report_* object other than report_common is a writer (or a piece
# of one), so a writer split into several files stays covered.
writers=$(awk '$1 ~ /^report_/ && $1 != "report_common" {print $1}' "$tmp/syms" | sort -u)
[ -n "$writers" ] || { echo "FAIL: no report writers in $lib"; exit 1; }
for w in $writers; do
  below "$w" report
  below report_common "$w"
done
below report_common report
for w in safetensors_header safetensors_index; do
  below "$w" safetensors
  below safetensors_file "$w"
done
below safetensors_header safetensors_index
below safetensors_index safetensors_header
below safetensors_file safetensors
[ "$fails" -eq 0 ] || exit 1
echo "PASS: $checks layer checks in the reports and the safetensors reader"
