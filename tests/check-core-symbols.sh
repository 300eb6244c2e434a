#!/bin/sh
# shellcheck disable=SC2086 # NM may carry options, as libtool's "nm -B"
# The core library must not reference MPI or hwloc: it is built and tested
# with neither mpi.h nor hwloc.h on its include path.  Fails if any object of
# libdbuf_core references an MPI_* / PMPI_* / ompi_* or hwloc_* symbol.
set -eu
lib=${DBUF_CORE_LIB:?DBUF_CORE_LIB is not set}
nm=${NM:-nm}
[ -f "$lib" ] || { echo "FAIL: $lib not found"; exit 1; }
syms=$($nm -A "$lib" 2>/dev/null | grep -E ' [UTtDdBb] (P?MPI_|ompi_|hwloc_)' || true)
if [ -n "$syms" ]; then
  echo "FAIL: core objects reference MPI or hwloc symbols:"
  echo "$syms"
  exit 1
fi
# The check must see something: the core does define dbuf_ symbols.
count=$($nm "$lib" | grep -c ' T dbuf_' || true)
if [ "$count" -lt 20 ]; then
  echo "FAIL: only $count dbuf_ symbols in $lib: wrong library?"
  exit 1
fi
echo "PASS: $count public core symbols, none from MPI or hwloc"
