/*
 * dbuf-shard: the umbrella header of the core library (no MPI, no hwloc).
 *
 * The MPI layer (dbuf/comm.h) and the hwloc memory layer (dbuf/mem.h) are
 * included separately, so a program that only plans layouts needs neither
 * mpi.h nor hwloc.h.  Link with `pkg-config --libs dbuf`.
 */
#ifndef DBUF_DBUF_H
#define DBUF_DBUF_H

#include "dbuf/error.h"
#include "dbuf/layout.h"
#include "dbuf/layout_json.h"
#include "dbuf/models.h"
#include "dbuf/nodes.h"
#include "dbuf/parallel.h"
#include "dbuf/pattern.h"
#include "dbuf/peers.h"
#include "dbuf/report.h"
#include "dbuf/safetensors.h"
#include "dbuf/shapes_io.h"
#include "dbuf/tensors.h"
#include "dbuf/version.h"
#include "dbuf/wire.h"

#endif /* DBUF_DBUF_H */
