#!/bin/sh
# The two libraries' dependencies.  libdbuf (the core) must load neither MPI
# nor hwloc, at link time (readelf -d: its NEEDED entries) or at run time
# (ldd: everything it pulls in), and a program that only plans, linked
# against libdbuf alone (tests/plan_only), must run and find neither in its
# own memory map.  With MPI, libdbuf-mpi must need libdbuf, MPI and hwloc and
# resolve every symbol (ldd -r: an internal core function it calls that
# libdbuf does not export shows up here as undefined).
set -eu
libdir=${DBUF_LIBDIR:?DBUF_LIBDIR is not set}
plan_only=${DBUF_PLAN_ONLY:?DBUF_PLAN_ONLY is not set}
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
forbidden='libmpi|libopen-pal|libopen-rte|libpmix|libhwloc'

core=$libdir/libdbuf.so
if [ ! -e "$core" ]; then
  # configure --disable-shared (scripts/coverage.sh) builds no .so to look at.
  if grep -q '^build_libtool_libs=no' "$libdir/../libtool" 2>/dev/null; then
    echo "SKIP: shared libraries are disabled in this build"
    exit 77
  fi
  bad "$core not found"
  echo "$passed passed, $failed failed"
  exit 1
fi
needed=$(readelf -d "$core" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
# The check must see something: the core does need libc and jansson.
case $needed in
  *libc.so*libjansson* | *libjansson*libc.so*) ;;
  *) bad "readelf -d $core: NEEDED list not understood: $needed" ;;
esac
if printf '%s\n' "$needed" | grep -Eq "$forbidden"; then
  bad "libdbuf needs MPI or hwloc: $(printf '%s\n' "$needed" | grep -E "$forbidden" | tr '\n' ' ')"
else
  ok "libdbuf NEEDED: $(printf '%s\n' "$needed" | tr '\n' ' ')"
fi
loaded=$(LD_LIBRARY_PATH=$libdir ldd "$core")
if printf '%s\n' "$loaded" | grep -Eq "$forbidden"; then
  bad "ldd libdbuf loads MPI or hwloc: $(printf '%s\n' "$loaded" | grep -E "$forbidden" | tr '\n' ' ')"
else
  ok "ldd libdbuf: no MPI, no hwloc among $(printf '%s\n' "$loaded" | wc -l) libraries"
fi

out=$("$plan_only" 2>&1) && rc=0 || rc=$?
# 5 tensors, 60 elements over 5 ranks of one 12-element chunk (README example).
want='size 60 chunk 12 valid
no MPI, no hwloc'
if [ "$rc" -eq 0 ] && [ "$out" = "$want" ]; then
  ok "plan-only program linked against libdbuf runs without MPI or hwloc"
else
  bad "plan_only (exit $rc): $out"
fi

if [ "${DBUF_WITH_MPI:-yes}" = yes ]; then
  mpilib=$libdir/libdbuf-mpi.so
  needed=$(readelf -d "$mpilib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  case $needed in
    *libdbuf.so*) ok "libdbuf-mpi needs libdbuf" ;;
    *) bad "libdbuf-mpi does not need libdbuf: $needed" ;;
  esac
  for lib in libmpi libhwloc; do
    case $needed in
      *"$lib".so*) ok "libdbuf-mpi needs $lib" ;;
      *) bad "libdbuf-mpi does not need $lib: $needed" ;;
    esac
  done
  undef=$(LD_LIBRARY_PATH=$libdir ldd -r "$mpilib" 2>&1 | grep -i 'undefined symbol' || true)
  if [ -z "$undef" ]; then
    ok "libdbuf-mpi resolves every symbol (ldd -r)"
  else
    bad "libdbuf-mpi has undefined symbols: $undef"
  fi
else
  if [ -e "$libdir/libdbuf-mpi.so" ]; then
    bad "built --without-mpi but libdbuf-mpi.so exists"
  else
    ok "built --without-mpi: no libdbuf-mpi"
  fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
