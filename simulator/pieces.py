"""The serial pieces of a split node, grouped into kinds, with the stage work of each kind.

Along every axis a node's pieces are balanced ranges, and so are each piece's parts for the
children; pieces differ only at remainders and at the borders of windows. A piece's *kind* is the
tuple of its per-axis range signatures, so a node with thousands of pieces has a handful of kinds,
and the stage work (bytes to load, children's tasks, reduction ops, bytes to store) is computed
once per kind.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from compiler.plan import NodePlan
from isa.program import TensorType
from compiler.rules import (MERGES, access_map, combine_ops, merge_ops, piece_order, split_ranges,
                            stationary, sub_task, transfer_bytes)

__all__ = ["PieceWork", "NodePieces"]


@dataclass(frozen=True)
class PieceWork:
    """What one serial piece moves and runs."""
    load_bytes: int                 # through the node's memory port (shared operands once if broadcast)
    load_link_bytes: int            # over the busiest child's link
    children: tuple                 # ((child task, how many children run it), ...)
    reduce_ops: int                 # g work on the node's LFU for this piece
    store_bytes: int
    store_link_bytes: int
    child_reduce_ops: int = 0       # g work on the children's LFUs (adding to the partials they keep)
    child_reduce_max: int = 0       # the most of it one child does


class NodePieces:
    """Piece kinds of one split NodePlan, in execution order (a reduction axis varies fastest)."""

    def __init__(self, node: NodePlan, broadcast: bool):
        self.node = node
        self.task = node.task
        self.amap = access_map(node.task)
        self.broadcast = broadcast
        self.red_axes = [a for a, ax in enumerate(self.amap.axes) if ax.reduce]
        cut = [a for a in self.red_axes if _parts(node.splits[a]) > 1]
        # partials kept in the children across the serial pieces of one output region
        self.kept = cut[0] if stationary(node.reduce) and len(cut) == 1 else None
        self.axis_kinds = []        # per axis: list of kind ids, one per piece, in order
        self.kind_parts = []        # per axis: kind id -> (child ranges, first piece, last piece)
        for a, split in enumerate(node.splits):
            dims = [d for ds in self.amap.operands for d in ds if d.axis == a]
            ids, parts, seen = [], [], {}
            for ps, pe in split_ranges(split.size, split.pieces):
                ranges = [(ps + s, e) for s, e in split_ranges(pe, split.ways)]
                ends = (ps == 0, ps + pe == split.size)
                sig = ends + tuple((e,) + tuple(d.region(s, e)[1:] if d.kind == "window" else ()
                                                for d in dims) for s, e in ranges)
                if sig not in seen:
                    seen[sig] = len(parts)
                    parts.append((ranges,) + ends)
                ids.append(seen[sig])
            self.axis_kinds.append(ids)
            self.kind_parts.append(parts)
        if self.kept is not None:
            self.slots = max(len(p[0]) for p in self.kind_parts[self.kept])
        self._work: dict = {}
        self.final_reduce_ops = self._final_merge()

    def sequence(self):
        """The kind of every piece, in order."""
        order = piece_order(self.node)
        for combo in itertools.product(*[self.axis_kinds[a] for a in order]):
            kind = [0] * len(order)
            for a, k in zip(order, combo):
                kind[a] = k
            yield tuple(kind)

    def counts(self) -> dict:
        """How many pieces of each kind."""
        per_axis = []
        for ids in self.axis_kinds:
            c: dict = {}
            for i in ids:
                c[i] = c.get(i, 0) + 1
            per_axis.append(list(c.items()))
        return {tuple(k for k, _ in combo): math.prod(n for _, n in combo)
                for combo in itertools.product(*per_axis)}

    def work(self, kind: tuple) -> PieceWork:
        w = self._work.get(kind)
        if w is None:
            w = self._work[kind] = self._compute(kind)
        return w

    def _compute(self, kind: tuple) -> PieceWork:
        task, amap = self.task, self.amap
        per_axis = [self.kind_parts[a][k][0] for a, k in enumerate(kind)]
        children: dict = {}
        for combo in itertools.product(*per_axis):
            child, _ = sub_task(task, amap, [s for s, _ in combo], [e for _, e in combo])
            children[child] = children.get(child, 0) + 1
        n_out = task.spec.outputs
        per_child = [len(rs) for rs in per_axis]
        shared = [1] * len(per_axis) if self.broadcast else per_child
        load = sum(transfer_bytes(amap, i, per_axis, shared) for i in range(n_out, len(task.types)))
        reduce_ops = child_ops = child_max = 0
        store_copies = per_child
        g = self.node.reduce
        if self.kept is not None:
            _, first, last = self.kind_parts[self.kept][kind[self.kept]]
            store_copies = [self.slots if a == self.kept else n for a, n in enumerate(per_child)]
            if not last:
                store_copies = None
            else:
                reduce_ops = combine_ops(task, g, self._piece_outputs(per_axis), self.slots - 1)
            if not first:
                each = {c: combine_ops(task, g, c.outputs, 1) for c in children}
                child_ops = sum(n * each[c] for c, n in children.items())
                child_max = max(each.values())
        elif g and g not in MERGES:
            runs = math.prod(len(per_axis[a]) for a in self.red_axes)
            first = all(self.kind_parts[a][kind[a]][1] for a in self.red_axes)
            reduce_ops = combine_ops(task, g, self._piece_outputs(per_axis),
                                     runs - 1 if first else runs)
        store = 0 if store_copies is None else sum(
            transfer_bytes(amap, i, per_axis, store_copies) for i in range(n_out))
        link_out = 0 if store_copies is None else max(sum(t.nbytes for t in c.outputs)
                                                     for c in children)
        return PieceWork(load, max(sum(t.nbytes for t in c.inputs) for c in children),
                         tuple(children.items()), reduce_ops, store, link_out, child_ops, child_max)

    def _piece_outputs(self, per_axis) -> list:
        """Types of the piece's output regions (reduction axes do not appear in them)."""
        out = []
        for t, dims in zip(self.task.outputs, self.amap.operands):
            shape = tuple(d.extent(0) if d.axis < 0 else
                          per_axis[d.axis][-1][0] + per_axis[d.axis][-1][1] - per_axis[d.axis][0][0]
                          for d in dims)
            out.append(TensorType(t.dtype, shape))
        return out

    def _final_merge(self) -> int:
        if self.node.reduce not in MERGES:
            return 0
        out = self.task.outputs[0]
        runs = math.prod(_parts(s) for s in self.node.splits if s.reduce)
        return merge_ops(out.size // out.shape[-1], out.shape[-1], runs)


def _parts(split) -> int:
    """Number of non-empty child ranges along an axis over all pieces."""
    return sum(len(split_ranges(e, split.ways)) for _, e in split_ranges(split.size, split.pieces))
