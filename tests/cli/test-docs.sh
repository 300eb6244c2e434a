#!/bin/bash
# The documentation: docs/cli.md is what scripts/gen-cli-doc.sh makes from
# this build's --help texts (a diff when it is stale); every relative link
# of README.md and docs/*.md leads to a file that exists, and every #anchor
# to a heading of that file (GitHub's slugs); and the user's pages say
# nothing of how the project was developed (stop or issue numbers, reviews,
# branch names).
set -u
. "$(dirname "$0")/lib.sh"
SRC=${top_srcdir:?top_srcdir is not set}
export LC_ALL=C

# ---- docs/cli.md against the help texts ----
if "$DBUF" run --help | grep -q 'built without MPI'; then
  echo "SKIP: docs/cli.md documents the MPI build; this one is --without-mpi"
elif DBUF_SHARD=$DBUF "$SRC/scripts/gen-cli-doc.sh" "$(dirname "$DBUF")" >"$T/cli.md" 2>"$T/gen.err"; then
  if diff -u "$SRC/docs/cli.md" "$T/cli.md" >"$T/cli.diff"; then
    pass "docs/cli.md matches the --help texts"
  else
    cat "$T/cli.diff"
    fail "docs/cli.md is stale: run scripts/gen-cli-doc.sh BUILD_DIR > docs/cli.md (diff above)"
  fi
else
  fail "scripts/gen-cli-doc.sh: $(cat "$T/gen.err")"
fi

# ---- links and anchors ----
# slugs FILE: the anchor of every heading of a Markdown file, one a line,
# as GitHub makes them: lower case, every character but letters, digits,
# spaces, '-' and '_' dropped, spaces to '-', and '-N' added to the Nth
# repeat of a slug.  Lines inside ``` fences are not headings.
slugs() {
  awk '
    /^```/ { fence = !fence; next }
    fence { next }
    /^#+ / {
      s = $0
      sub(/^#+ +/, "", s); sub(/ +#* *$/, "", s)
      s = tolower(s)
      gsub(/[^a-z0-9 _-]/, "", s)
      gsub(/ /, "-", s)
      if (s in seen) { n = ++seen[s]; print s "-" n } else { seen[s] = 0; print s }
    }' "$1"
}
# links FILE: "LINE TARGET" for every inline link [text](target) outside
# code fences and code spans.
links() {
  awk '
    /^```/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      while (match(line, /\]\([^) ]+\)/)) {
        print NR, substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}
nlinks=0
for f in "$SRC/README.md" "$SRC"/docs/*.md; do
  rel=${f#"$SRC"/}
  dir=$(dirname "$f")
  while read -r ln target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    nlinks=$((nlinks + 1))
    path=${target%%#*}
    anchor=
    case $target in *'#'*) anchor=${target#*#} ;; esac
    if [ -z "$path" ]; then dest=$f; else dest=$dir/$path; fi
    if [ ! -e "$dest" ]; then
      fail "$rel:$ln: link to $target: no file $path"
      continue
    fi
    if [ -n "$anchor" ]; then
      if [ "${dest%.md}" = "$dest" ]; then
        fail "$rel:$ln: link to $target: an anchor in a file that is not Markdown"
      elif ! slugs "$dest" | grep -qxF -- "$anchor"; then
        fail "$rel:$ln: link to $target: no heading with the anchor #$anchor in ${path:-$rel}"
      fi
    fi
  done < <(links "$f")
done
[ "$nlinks" -ge 20 ] && pass "$nlinks relative links checked" || fail "only $nlinks relative links found"

# ---- no development history in the user's pages ----
hist='\bstop [0-9]+\b|\bissue[ -][0-9]+\b|outside review|review finding|\bbranch [a-z`]|last session'
if grep -n -I -i -E "$hist" "$SRC/README.md" "$SRC"/docs/*.md "$SRC/dbuf-shard.1" \
     "$SRC/CONTRIBUTING.md" >"$T/hist"; then
  sed "s|^$SRC/||" "$T/hist"
  fail "development history in the documentation (lines above)"
else
  pass "no stop, issue, review or branch words in README.md, docs/, dbuf-shard.1, CONTRIBUTING.md"
fi

finish
