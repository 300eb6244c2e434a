"""Write dbuf-shard layout JSON from other frameworks' sharding.

Python 3, standard library only.  Each function returns the layout as a
dict in the schema `dbuf-shard plan --format json` writes and
`dbuf-shard verify` / `mpirun dbuf-shard --layout-file` read (version 1):

    {"format": "dbuf-shard-layout", "version": 1,
     "layout": "padded" | "unpadded" | "tensor",
     "dp_size": W, "block_size": B, ["chunk_size": C,]   # C: padded only
     "size": S, "logical_size": N,
     "rank_offsets": [start of rank 0, ..., start of rank W-1],
     "tensors": [{"name", "shape", "offset"[, "owner"]}, ...]}

Offsets and sizes count elements, not bytes.  Rank r holds the flat
elements [rank_offsets[r], rank_offsets[r+1]) (the last rank ends at size).

Sources of the sharding rules (read from the frameworks' own code):
  - Megatron-FSDP: the GlobalLayout of megatron_fsdp/experimental
    (tensor shapes, tensor offsets, rank segment offsets);
  - PyTorch FSDP1 (torch/distributed/fsdp/_flat_param.py): one flat
    parameter per wrapped unit, its parameters concatenated in registration
    order, padded to a multiple of the world size W and split in W equal
    chunks: element-granular, so rows are cut;
  - PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param.py):
    every parameter sharded on dim 0 by itself, ceil(d0 / W) rows per rank,
    each rank's piece padded to that many rows: rows are never cut.

Command line (prints the JSON):
    python3 dbuf_export.py fsdp1 SHAPES W [ALIGN]   # one unit: the whole file
    python3 dbuf_export.py fsdp2 SHAPES W NAME      # one parameter of the file
SHAPES has one 'NAME d0xd1x...' line per tensor (as dbuf-shard reads).
"""

import json
import math
import sys

FORMAT = "dbuf-shard-layout"
VERSION = 1


def numel(shape):
    """Elements of a shape (a list of ints; [] is one element)."""
    n = 1
    for d in shape:
        n *= d
    return n


def row_elems(shape):
    """Elements of one row: the product of dims 1.. (1 for a 1-D tensor)."""
    return numel(shape[1:])


def _check_shape(name, shape):
    if not isinstance(name, str) or not name:
        raise ValueError("tensor name must be a non-empty string: %r" % (name,))
    if len(shape) < 1 or any((not isinstance(d, int)) or d < 0 for d in shape) \
            or any(d == 0 for d in shape[1:]):
        raise ValueError("tensor %s: bad shape %r (1 or more dims, dims >= 0, "
                         "only dim 0 may be 0)" % (name, list(shape)))


def layout_json(kind, dp_size, size, rank_offsets, tensors, block_size=1,
                chunk_size=None):
    """The layout dict.

    kind: "padded", "unpadded" or "tensor"; tensors: a list of
    (name, shape, offset) or (name, shape, offset, owner); chunk_size is
    required for "padded" and left out otherwise.  Only the schema is
    checked here; `dbuf-shard verify` checks the invariants.
    """
    if kind not in ("padded", "unpadded", "tensor"):
        raise ValueError("kind must be padded, unpadded or tensor: %r" % (kind,))
    if dp_size < 1 or len(rank_offsets) != dp_size:
        raise ValueError("rank_offsets must have dp_size (%d) entries, has %d"
                         % (dp_size, len(rank_offsets)))
    if (kind == "padded") != (chunk_size is not None):
        raise ValueError("chunk_size is given for padded layouts, and only for them")
    out = {"format": FORMAT, "version": VERSION, "layout": kind,
           "dp_size": dp_size, "block_size": block_size}
    if chunk_size is not None:
        out["chunk_size"] = chunk_size
    logical = 0
    items = []
    for t in tensors:
        name, shape, offset = t[0], list(t[1]), t[2]
        _check_shape(name, shape)
        item = {"name": name, "shape": shape, "offset": offset}
        if len(t) > 3:
            item["owner"] = t[3]
        logical += numel(shape)
        items.append(item)
    out["size"] = size
    out["logical_size"] = logical
    out["rank_offsets"] = list(rank_offsets)
    out["tensors"] = items
    return out


def dumps(layout):
    """The layout as JSON text, one tensor a line, ending in a newline."""
    head = {k: v for k, v in layout.items() if k != "tensors"}
    text = json.dumps(head, indent=2)[:-2]
    lines = [json.dumps(t) for t in layout["tensors"]]
    return text + ',\n  "tensors": [\n    ' + ",\n    ".join(lines) + "\n  ]\n}\n"


def write(path, layout):
    """Write the layout JSON to path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(layout))


def _lcm(values):
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


def from_global_layout(names, shapes, tensor_offsets, rank_offsets, size,
                       kind="padded", block_size=1, owners=None):
    """A Megatron-FSDP GlobalLayout.

    Pass the layout's tensor shapes, tensor offsets, rank segment offsets
    (start of each rank; their number is dp_size) and total size as plain
    lists and ints, with the parameter names in tensor-id order.  kind is
    the builder used: "padded" (build_for_row_atomic), "unpadded"
    (build_for_row_atomic_unpadding) or "tensor" (build_for_tensor_atomic,
    with owners).  For "padded" the chunk size is the LCM of the row sizes
    times block_size, as the padded builder defines it.
    """
    if not len(names) == len(shapes) == len(tensor_offsets):
        raise ValueError("names, shapes and tensor_offsets differ in length "
                         "(%d, %d, %d)" % (len(names), len(shapes), len(tensor_offsets)))
    if (kind == "tensor") != (owners is not None):
        raise ValueError("owners are given for tensor layouts, and only for them")
    chunk = None
    if kind == "padded":
        chunk = _lcm(row_elems(list(s)) for s in shapes) * block_size
    tensors = []
    for i, name in enumerate(names):
        t = (name, list(shapes[i]), tensor_offsets[i])
        tensors.append(t + (owners[i],) if owners is not None else t)
    return layout_json(kind, len(rank_offsets), size, rank_offsets, tensors,
                       block_size=block_size, chunk_size=chunk)


def fsdp1_layout(params, world_size, align_elems=1):
    """One FSDP1 FlatParameter (one wrapped unit) on world_size ranks.

    params: [(name, shape), ...] in registration order.  align_elems: with
    use_orig_params=True FSDP1 starts each parameter at a multiple of
    16 bytes / element size (8 for bf16); 1 (the default) is no alignment.
    The flat parameter is padded to a multiple of world_size and rank r
    holds [r n / W, (r + 1) n / W).  Written as an "unpadded" layout: its
    rank cuts are checked on rows, and alignment or end padding shows up
    as "gap" problems.
    """
    if world_size < 1 or align_elems < 1:
        raise ValueError("world_size and align_elems must be >= 1")
    offset = 0
    tensors = []
    for name, shape in params:
        _check_shape(name, list(shape))
        offset = -(-offset // align_elems) * align_elems
        tensors.append((name, list(shape), offset))
        offset += numel(shape)
    size = -(-offset // world_size) * world_size
    per = size // world_size
    return layout_json("unpadded", world_size, size,
                       [r * per for r in range(world_size)], tensors)


def fsdp1_layouts(units, world_size, align_elems=1):
    """fsdp1_layout() of every unit: units is a list of param lists."""
    return [fsdp1_layout(u, world_size, align_elems) for u in units]


def fsdp2_layout(name, shape, world_size):
    """One FSDP2 parameter: dim 0 in world_size chunks of ceil(d0 / W) rows.

    Rank r holds rows [r c, min((r + 1) c, d0)), padded to c rows, so every
    rank's piece is c rows and trailing ranks may hold padding only.  A
    "padded" layout of one tensor at offset 0 with chunk = one row.
    """
    shape = list(shape)
    _check_shape(name, shape)
    if world_size < 1:
        raise ValueError("world_size must be >= 1")
    rows = -(-shape[0] // world_size)
    row = row_elems(shape)
    per = rows * row
    return layout_json("padded", world_size, world_size * per,
                       [r * per for r in range(world_size)], [(name, shape, 0)],
                       chunk_size=row)


def fsdp2_layouts(params, world_size):
    """fsdp2_layout() of every parameter: one layout each, in order."""
    return [fsdp2_layout(n, s, world_size) for n, s in params]


def read_shapes(path):
    """[(name, shape)] from a 'NAME d0xd1...' file ('#' starts a comment)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                if len(parts) != 2:
                    raise ValueError
                shape = [int(d) for d in parts[1].split("x")]
            except ValueError:
                raise ValueError("%s:%d: not 'NAME d0xd1...': %s" % (path, lineno, line))
            out.append((parts[0], shape))
    return out


def main(argv):
    """The command line (see the module doc); returns the exit status."""
    try:
        if len(argv) in (3, 4) and argv[0] == "fsdp1":
            align = int(argv[3]) if len(argv) == 4 else 1
            sys.stdout.write(dumps(fsdp1_layout(read_shapes(argv[1]), int(argv[2]), align)))
            return 0
        if len(argv) == 4 and argv[0] == "fsdp2":
            params = dict(read_shapes(argv[1]))
            if argv[3] not in params:
                raise ValueError("%s: no tensor %s" % (argv[1], argv[3]))
            sys.stdout.write(dumps(fsdp2_layout(argv[3], params[argv[3]], int(argv[2]))))
            return 0
    except (OSError, ValueError) as e:
        sys.stderr.write("dbuf_export: %s\n" % e)
        return 2
    sys.stderr.write("usage: dbuf_export.py fsdp1 SHAPES W [ALIGN] | fsdp2 SHAPES W NAME\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
