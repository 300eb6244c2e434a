#!/bin/bash
# The malformed-input corpus (issue 8): every case of
# tests/data/malformed/MANIFEST must end with its exit status, one line on
# stderr that names the file (or a tensor) and holds the expected fragment,
# no core dump, and no output file.  Then the inputs a folder cannot hold:
# named pipes and devices, a sparse file over the size limit, empty stdin,
# a symbolic link named by an index, allocation failure, the umask of the
# output files.
set -u
. "$(dirname "$0")/lib.sh"
M=$DATA/malformed
HELP=$DATA/malformed-helpers

# check_one NAME FILE EXIT STREAM FRAGMENT: the last run against its case.
check_one() {
  local name=$1 file=$2 want=$3 stream=$4 frag=$5 lines
  if [ "$CODE" -ge 128 ]; then
    fail "$name: killed by signal $((CODE - 128))"
    return
  fi
  if [ "$CODE" -ne "$want" ]; then
    fail "$name: exit $CODE, want $want: $ERR"
    return
  fi
  if [ -e "$T/out" ] || compgen -G "$T/out.tmp.*" >/dev/null; then
    fail "$name: an output file was left behind"
    rm -f "$T/out" "$T"/out.tmp.*
    return
  fi
  if [ "$stream" = out ]; then
    if [ -s "$T/stderr" ]; then fail "$name: stderr not empty: $ERR"; return; fi
    if grep -qF -- "$frag" "$T/stdout"; then pass "$name"; else
      fail "$name: stdout lacks '$frag': $(cat "$T/stdout")"
    fi
    return
  fi
  lines=$(wc -l <"$T/stderr")
  if [ "$lines" -ne 1 ]; then
    fail "$name: $lines lines on stderr: $ERR"
    return
  fi
  if ! grep -qF -- "$frag" "$T/stderr"; then
    fail "$name: stderr lacks '$frag': $ERR"
    return
  fi
  # Where: the file by name, or a tensor (a picture request names neither).
  if [ "$file" != - ] && ! grep -qF -- "$(basename "$file")" "$T/stderr" &&
    ! grep -q "tensor" "$T/stderr"; then
    fail "$name: the message names neither the file nor a tensor: $ERR"
    return
  fi
  if LC_ALL=C grep -q '[[:cntrl:]]' "$T/stderr"; then
    fail "$name: control bytes on stderr"
    return
  fi
  pass "$name"
}

ncases=0
while IFS='|' read -r file want stream args frag; do
  case "$file" in '#'* | '') continue ;; esac
  file=$(echo $file) want=$(echo $want) stream=$(echo $stream)
  frag=${frag# }
  path=$M/$file
  words=()
  for w in $args; do
    case "$w" in
      FILE) words+=("$path") ;;
      OUT) words+=("$T/out") ;;
      HELP/*) words+=("$HELP/${w#HELP/}") ;;
      *) words+=("$w") ;;
    esac
  done
  timeout 60 "$DBUF" "${words[@]}" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
  check_one "$file: $args" "$file" "$want" "$stream" "$frag"
  ncases=$((ncases + 1))
done <"$M/MANIFEST"
[ "$ncases" -ge 60 ] && pass "corpus has $ncases cases" || fail "corpus has only $ncases cases"
# Every file of the folder is a case (or the one valid shard the index
# cases name), so the fuzz seeds and the manifest cannot drift apart.
for f in "$M"/*; do
  b=$(basename "$f")
  [ "$b" = MANIFEST ] || [ "$b" = shard-ok.safetensors ] && continue
  grep -q "^$b |" "$M/MANIFEST" || fail "$b is not in the MANIFEST"
done

# runc NAME EXIT FRAGMENT ARGS...: one bounded run checked like a case.
runc() {
  local name=$1 want=$2 frag=$3
  shift 3
  timeout 20 "$DBUF" "$@" >"$T/stdout" 2>"$T/stderr"
  CODE=$?
  ERR=$(cat "$T/stderr")
  [ "$CODE" -eq 124 ] && { fail "$name: hung (killed after 20 s)"; return; }
  check_one "$name" - "$want" err "$frag"
}

# ---- named pipes and devices: refused before they are opened ----
mkfifo "$T/fifo"
runc "--shapes FIFO" 2 "$T/fifo: not a regular file (a named pipe)" plan --shapes "$T/fifo" -o "$T/out"
runc "verify FIFO" 2 "$T/fifo: not a regular file (a named pipe)" verify "$T/fifo"
runc "--owners FIFO" 2 "$T/fifo: not a regular file (a named pipe)" \
  plan --shapes "$HELP/two.shapes" --layout tensor --dp 2 --owners "$T/fifo" -o "$T/out"
mkdir -p "$T/ck"
cp "$M/shard-ok.safetensors" "$T/ck/good.safetensors"
runc "--order FIFO" 2 "$T/fifo: not a regular file (a named pipe)" \
  plan --safetensors "$T/ck/good.safetensors" --order "$T/fifo" -o "$T/out"
mkfifo "$T/ck/pipe.safetensors"
runc "--safetensors FIFO" 2 "pipe.safetensors: not a regular file (a named pipe)" \
  plan --safetensors "$T/ck/pipe.safetensors" -o "$T/out"
printf '{"weight_map": {"a": "pipe.safetensors"}}' >"$T/ck/pipe.index.json"
runc "index naming a FIFO" 2 "pipe.safetensors (named in $T/ck/pipe.index.json): not a regular file (a named pipe)" \
  plan --safetensors "$T/ck/pipe.index.json" -o "$T/out"
mkfifo "$T/ck/fifo.index.json"
runc "index FIFO" 2 "fifo.index.json: not a regular file (a named pipe)" \
  plan --safetensors "$T/ck/fifo.index.json" -o "$T/out"
runc "--shapes /dev/zero" 2 "/dev/zero: not a regular file (a character device)" plan --shapes /dev/zero -o "$T/out"
runc "--shapes /dev/null" 2 "/dev/null: not a regular file (a character device)" plan --shapes /dev/null -o "$T/out"
runc "--shapes DIR" 2 "$T/ck: not a regular file (a directory)" plan --shapes "$T/ck" -o "$T/out"

# ---- size limits and stdin ----
truncate -s $(((1 << 30) + 1)) "$T/sparse.shapes"
start=$(date +%s%N)
runc "--shapes over 1 GiB (sparse)" 2 "$T/sparse.shapes: file is 1073741825 bytes, over the limit of 1073741824 bytes" \
  plan --shapes "$T/sparse.shapes" -o "$T/out"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt $((2000 * TIME_SCALE)) ] && pass "over-limit file refused before reading ($ms ms)" || fail "over-limit file took $ms ms"
rm -f "$T/sparse.shapes"
# (stdin past the limit ends the same way, "<stdin>: more than 1073741824
# bytes, over the input limit", after reading 1 GiB: 24 s here, not run.)
runc "--shapes - from /dev/null" 2 "<stdin>: no tensors" plan --shapes - -o "$T/out" </dev/null
runc "--shapes - with a NUL byte" 2 "<stdin>:3: contains a NUL byte" plan --shapes - -o "$T/out" \
  <"$M/shapes-nul-line3.bin"

# ---- a symbolic link named by an index: its bytes are never quoted ----
printf 'SECRET-BYTES-1234 do not show\n' >"$T/secret.txt"
ln -s "$T/secret.txt" "$T/ck/link.safetensors"
printf '{"weight_map": {"a": "link.safetensors"}}' >"$T/ck/link.index.json"
runc "index naming a symlink to a text file" 2 "link.safetensors (named in $T/ck/link.index.json): not a safetensors file" \
  plan --safetensors "$T/ck/link.index.json" -o "$T/out"
grep -q "SECRET\|1234\|show" "$T/stderr" && fail "symlink target bytes echoed: $ERR" || pass "symlink target bytes not echoed"
# A header-sized prefix that parses as a length, then bytes that are not JSON.
{ printf '\x20\x00\x00\x00\x00\x00\x00\x00'; printf 'SECRET-JSON-TEXT-9876 0123456789ab'; } >"$T/secret.bin"
ln -s "$T/secret.bin" "$T/ck/link2.safetensors"
printf '{"weight_map": {"a": "link2.safetensors"}}' >"$T/ck/link2.index.json"
runc "index naming a symlink to non-JSON" 2 "link2.safetensors (named in $T/ck/link2.index.json): header is not valid JSON (line 1, column" \
  plan --safetensors "$T/ck/link2.index.json" -o "$T/out"
grep -q "SECRET" "$T/stderr" && fail "symlink JSON bytes echoed: $ERR" || pass "symlink JSON bytes not echoed"
# A symlink to a real shard is followed (checkpoint caches are symlinks).
ln -s "$T/ck/good.safetensors" "$T/ck/link3.safetensors"
printf '{"weight_map": {"a": "link3.safetensors"}}' >"$T/ck/link3.index.json"
run plan --safetensors "$T/ck/link3.index.json" --format json
expect_json '[.tensors[] | [.name, .shape]]' '[["a", [2]]]' "index naming a symlink to a shard reads it"

# ---- control bytes in arguments are escaped too ----
runc "control bytes in --format" 2 "--format: 'x\\x1b[2Jy' is not a known format" plan --format "$(printf 'x\033[2Jy')"

# ---- allocation failure: ENOMEM, exit 1, never "overflows 64 bits" ----
# 2^24 ranks (the most --dp takes) need a 128 MiB rank-offset array; 100 MB
# of address space refuses it.
(ulimit -v 100000; exec "$DBUF" plan --dp 16777216 -o "$T/out") >"$T/stdout" 2>"$T/stderr"
CODE=$?
ERR=$(cat "$T/stderr")
if grep -q Sanitizer "$T/stderr"; then
  echo "SKIP: ulimit -v under a sanitizer build (its shadow memory needs the address space)"
else
  check_one "plan --dp 2^24 under ulimit -v" - 1 err "out of memory for the offsets of 16777216 ranks"
  grep -q "overflow" "$T/stderr" && fail "ENOMEM reported as an overflow: $ERR" || pass "ENOMEM is not an overflow"
fi

# ---- output files honour the umask ----
for m in 022:644 077:600 002:664; do
  (umask "${m%%:*}"; exec "$DBUF" plan --format json -o "$T/mode.json")
  got=$(stat -c %a "$T/mode.json")
  [ "$got" = "${m#*:}" ] && pass "umask ${m%%:*}: output mode $got" || fail "umask ${m%%:*}: output mode $got, want ${m#*:}"
  rm -f "$T/mode.json"
done

finish
