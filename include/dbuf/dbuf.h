/*
 * dbuf-shard: the umbrella header of the core library (no MPI, no hwloc).
 *
 * The MPI layer (dbuf/comm.h) and the hwloc memory layer (dbuf/mem.h) are
 * included separately, so a program that only plans layouts needs neither
 * mpi.h nor hwloc.h.  Link with `pkg-config --libs dbuf`.
 *
 * Thread safety, for the whole API: the library keeps no global state, so
 * calls on different objects may run in any threads at once; calls that only
 * read an object (take it const) may share it between threads; a call that
 * changes an object needs the caller to exclude every other call on it.  A
 * dbuf_diag_t is written by the call it is given to: one per thread.
 * Ownership, for the whole API: inputs are copied in (a caller may free what
 * it passed as soon as the call returns); handles are freed with their own
 * destroy function, which accepts NULL; buffers the library hands over are
 * freed with dbuf_free() (dbuf/error.h lists them); everything else a
 * function returns is borrowed, valid as its header says.  dbuf/version.h
 * (included here) gives the version, at compile time and at run time.
 */
#ifndef DBUF_DBUF_H
#define DBUF_DBUF_H

#include "dbuf/convert.h"
#include "dbuf/dtype.h"
#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/layout_facts.h"
#include "dbuf/layout_json.h"
#include "dbuf/load.h"
#include "dbuf/models.h"
#include "dbuf/nodes.h"
#include "dbuf/parallel.h"
#include "dbuf/pattern.h"
#include "dbuf/plan.h"
#include "dbuf/peers.h"
#include "dbuf/report.h"
#include "dbuf/safetensors.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"
#include "dbuf/version.h"
#include "dbuf/wire.h"

#endif /* DBUF_DBUF_H */
