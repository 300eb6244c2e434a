"""Unit tests of scripts/export/dbuf_export.py on hand-built inputs.

Every expected layout below is worked out by hand in the comment above it
from the framework's sharding rule, not produced by the module.
"""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

import dbuf_export as dx

HEAD = {"format": "dbuf-shard-layout", "version": 1}


def layout(kind, dp, size, logical, ranks, tensors, chunk=None, block=1):
    out = dict(HEAD, layout=kind, dp_size=dp, block_size=block)
    if chunk is not None:
        out["chunk_size"] = chunk
    out.update(size=size, logical_size=logical, rank_offsets=ranks,
               tensors=[dict(zip(("name", "shape", "offset", "owner"), t)) for t in tensors])
    return out


class GlobalLayoutTest(unittest.TestCase):
    def test_row_atomic_example(self):
        # build_for_row_atomic's documented example: P0 (2,6), P1 (4,4),
        # P2 (4,4), P3 (1,2), P4 (1,6) on 5 ranks; chunk = LCM(6,4,4,2,6) = 12.
        # P0 [0,12), P1 [12,28), P3 [28,30), gap [30,32), P2 [32,48),
        # P4 [48,54), pad to 60 = 5 x 12; ranks start at 0, 12, 24, 36, 48.
        names = ["P0", "P1", "P2", "P3", "P4"]
        shapes = [(2, 6), (4, 4), (4, 4), (1, 2), (1, 6)]
        got = dx.from_global_layout(names, shapes, [0, 12, 32, 28, 48], [0, 12, 24, 36, 48], 60)
        want = layout("padded", 5, 60, 12 + 16 + 16 + 2 + 6, [0, 12, 24, 36, 48],
                      [("P0", [2, 6], 0), ("P1", [4, 4], 12), ("P2", [4, 4], 32),
                       ("P3", [1, 2], 28), ("P4", [1, 6], 48)], chunk=12)
        self.assertEqual(got, want)

    def test_block_atomic_chunk(self):
        # Block size 2 doubles the chunk: LCM(3, 2) x 2 = 12.
        got = dx.from_global_layout(["a", "b"], [(4, 3), (2, 2)], [0, 12], [0, 12], 24,
                                    block_size=2)
        self.assertEqual((got["chunk_size"], got["block_size"]), (12, 2))

    def test_unpadded_example(self):
        # build_for_row_atomic_unpadding's example: P0 (2,6), P1 (4,4),
        # P2 (1,2) on 2 ranks, packed back to back (0, 12, 28), size 30;
        # the even split 15 rounds to P1's row boundary 16.
        got = dx.from_global_layout(["P0", "P1", "P2"], [(2, 6), (4, 4), (1, 2)], [0, 12, 28],
                                    [0, 16], 30, kind="unpadded")
        want = layout("unpadded", 2, 30, 30, [0, 16],
                      [("P0", [2, 6], 0), ("P1", [4, 4], 12), ("P2", [1, 2], 28)])
        self.assertEqual(got, want)

    def test_tensor_atomic_example(self):
        # build_for_tensor_atomic's example: P0 (4,4) -> rank 0, P1 (2,6) and
        # P2 (1,2) -> rank 1: offsets 0, 16, 28; rank 1 starts at 16; size 30.
        got = dx.from_global_layout(["P0", "P1", "P2"], [(4, 4), (2, 6), (1, 2)], [0, 16, 28],
                                    [0, 16], 30, kind="tensor", owners=[0, 1, 1])
        want = layout("tensor", 2, 30, 30, [0, 16],
                      [("P0", [4, 4], 0, 0), ("P1", [2, 6], 16, 1), ("P2", [1, 2], 28, 1)])
        self.assertEqual(got, want)

    def test_errors(self):
        with self.assertRaises(ValueError):
            dx.from_global_layout(["a"], [(2, 2), (1,)], [0], [0], 4)
        with self.assertRaises(ValueError):
            dx.from_global_layout(["a"], [(2, 2)], [0], [0], 4, kind="tensor")
        with self.assertRaises(ValueError):
            dx.from_global_layout(["a"], [(2, 2)], [0], [0], 4, owners=[0])
        with self.assertRaises(ValueError):
            dx.from_global_layout(["a"], [(2, 0)], [0], [0], 4)
        with self.assertRaises(ValueError):
            dx.layout_json("rows", 1, 4, [0], [("a", [4], 0)])
        with self.assertRaises(ValueError):
            dx.layout_json("unpadded", 2, 4, [0], [("a", [4], 0)])
        with self.assertRaises(ValueError):
            dx.layout_json("unpadded", 1, 4, [0], [("a", [4], 0)], chunk_size=1)


class Fsdp1Test(unittest.TestCase):
    PARAMS = [("a", (3, 4)), ("b", (5,)), ("c", (2, 3))]

    def test_no_alignment(self):
        # 12 + 5 + 6 = 23 elements at 0, 12, 17; padded to 24 = 4 x 6;
        # ranks start at 0, 6, 12, 18 (6 cuts a's row 1 in the middle).
        got = dx.fsdp1_layout(self.PARAMS, 4)
        want = layout("unpadded", 4, 24, 23, [0, 6, 12, 18],
                      [("a", [3, 4], 0), ("b", [5], 12), ("c", [2, 3], 17)])
        self.assertEqual(got, want)

    def test_use_orig_params_alignment(self):
        # bf16 with use_orig_params: starts at multiples of 8 elements:
        # a at 0 (ends 12), b at 16 (ends 21), c at 24 (ends 30); padded to
        # 32 = 4 x 8.
        got = dx.fsdp1_layout(self.PARAMS, 4, align_elems=8)
        self.assertEqual([t["offset"] for t in got["tensors"]], [0, 16, 24])
        self.assertEqual((got["size"], got["rank_offsets"], got["logical_size"]),
                         (32, [0, 8, 16, 24], 23))

    def test_units(self):
        got = dx.fsdp1_layouts([self.PARAMS[:1], self.PARAMS[1:]], 2)
        # unit 1: 12 elements, 0 and 6; unit 2: 5 + 6 = 11 -> 12, 0 and 6.
        self.assertEqual([(g["size"], g["rank_offsets"]) for g in got],
                         [(12, [0, 6]), (12, [0, 6])])

    def test_errors(self):
        with self.assertRaises(ValueError):
            dx.fsdp1_layout(self.PARAMS, 0)
        with self.assertRaises(ValueError):
            dx.fsdp1_layout([("", (2,))], 2)


class Fsdp2Test(unittest.TestCase):
    def test_rows_per_rank(self):
        # 18 rows on 8 ranks: ceil(18/8) = 3 rows of 4 each = 12 per rank,
        # size 8 x 12 = 96 (ranks 6 and 7 hold padding only).
        got = dx.fsdp2_layout("w", (18, 4), 8)
        want = layout("padded", 8, 96, 72, [12 * r for r in range(8)], [("w", [18, 4], 0)],
                      chunk=4)
        self.assertEqual(got, want)

    def test_small_and_1d(self):
        # (2, 3) on 8 ranks: 1 row each, size 24; (5,) on 2 ranks: 3 rows of
        # 1, size 6; (0, 4) on 2 ranks: nothing.
        self.assertEqual((dx.fsdp2_layout("b", (2, 3), 8)["size"],
                          dx.fsdp2_layout("b", (2, 3), 8)["rank_offsets"][-1]), (24, 21))
        one = dx.fsdp2_layout("n", (5,), 2)
        self.assertEqual((one["size"], one["rank_offsets"], one["chunk_size"]), (6, [0, 3], 1))
        self.assertEqual(dx.fsdp2_layout("e", (0, 4), 2)["size"], 0)
        self.assertEqual([g["size"] for g in dx.fsdp2_layouts([("a", (4,)), ("b", (3, 2))], 2)],
                         [4, 8])

    def test_errors(self):
        with self.assertRaises(ValueError):
            dx.fsdp2_layout("s", (), 2)
        with self.assertRaises(ValueError):
            dx.fsdp2_layout("s", (2,), 0)


class TextTest(unittest.TestCase):
    def test_dumps_round_trip(self):
        lay = dx.fsdp1_layout(Fsdp1Test.PARAMS, 4)
        text = dx.dumps(lay)
        self.assertTrue(text.endswith("}\n"))
        self.assertEqual(json.loads(text), lay)
        self.assertIn('\n    {"name": "b", "shape": [5], "offset": 12},\n', text)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s")
            with open(path, "w") as f:
                f.write("# two tensors\na 3x4\nb 5\n\nc 2x3\n")
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(dx.main(["fsdp1", path, "4"]), 0)
            self.assertEqual(json.loads(out.getvalue()), dx.fsdp1_layout(Fsdp1Test.PARAMS, 4))
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(dx.main(["fsdp2", path, "2", "c"]), 0)
            self.assertEqual(json.loads(out.getvalue())["size"], 6)
            with open(path, "a") as f:
                f.write("bad 3y4\n")
            err = io.StringIO()
            with redirect_stderr(err):
                self.assertEqual(dx.main(["fsdp1", path, "4"]), 2)
                self.assertEqual(dx.main(["fsdp3"]), 2)
            self.assertIn(":6: not 'NAME d0xd1...': bad 3y4", err.getvalue())


if __name__ == "__main__":
    unittest.main()
