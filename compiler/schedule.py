"""The piece schedule of a split node: the one statement of what a node emits and moves.

A node that splits a task cuts every axis `a` of its iteration space into `pieces[a]` balanced
serial ranges and each of those into `ways[a]` balanced parts for its children. The node runs the
serial pieces one after another, in row-major order of the axes with a reduction axis innermost,
so that the pieces adding up to one region of the output follow each other.

Pieces differ only at remainders and at the borders of windows, so they fall into a handful of
*kinds*: a piece's kind is, per axis, the signature of its child ranges (their extents and window
clipping), plus, along a reduction axis, whether it is the first or last piece of that axis. What a
piece moves and runs (`PieceWork`) is computed once per kind; everything else sums kinds times
their counts:

- the plan builder (`compiler.decompose`) takes a split's totals and distinct child tasks;
- the compiler's cost model ranks candidate splits by `Schedule.estimate`, the pipeline of the
  same stage times the simulator runs;
- the simulator (`simulator.engine`) steps through `Schedule.sequence`, one piece at a time;
- the numpy plan executor (`compiler.execute`) walks `Schedule.calls`, every child call in order.

**Kept partial results** (`kept_axis`, the only place this rule is written): when exactly one
reduction axis is cut and its reduction is not a merge of sorted runs, every child keeps its
partial result across the serial pieces of one output region, adds each later partial into it on
its own LFU, and writes it back once, after the last piece of that region; the node's LFU then
combines only the partials of its parallel ways. Otherwise every child part's result comes back
and the node combines them all (a merge waits for every run and merges them at the end).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import NamedTuple

from compiler.rules import (MERGES, AccessMap, DimKind, Reduction, Task, access_map, box_types,
                            ceil_cycles, combine_ops, merge_ops, split_ranges, sub_task)
from isa.program import TensorType

__all__ = ["PieceWork", "StageTimes", "Schedule", "check_order", "default_order", "kept_axis",
           "operand_loads", "stage_times"]


class PieceWork(NamedTuple):
    """What one serial piece of a kind moves and runs (a named tuple: a compile builds tens of
    thousands)."""
    load_bytes: int             # read through the node's memory port (a shared operand once if broadcast)
    load_link_bytes: int        # over the busiest child's link
    groups: tuple               # per axis, the child ranges grouped: ((start, extent, count), ...)
    widest: tuple               # the child boxes that may take a child longest:
                                # ((starts, extents, how many children), ...)
    largest: int                # points of the iteration space in the largest child box
    reduce_ops: int             # g work on the node's LFU for this piece
    store_bytes: int            # written back through the port (0 while children keep partials)
    store_link_bytes: int       # over the busiest child's link
    busy: int                   # how many children the piece gives work to
    child_reduce_ops: int = 0   # g work on the children's LFUs, adding to the partials they keep
    child_reduce_max: int = 0   # the most of it one child does

    @property
    def boxes(self) -> tuple:
        """The distinct child boxes: ((starts, extents, how many children), ...)."""
        return _boxes(self.groups, itertools.product(*[range(len(gs)) for gs in self.groups]))


def _boxes(groups, combos) -> tuple:
    """((starts, extents, how many children), ...) of these combinations of per-axis groups."""
    if not groups:                  # a task without axes (a scalar's): one box
        return tuple(((), (), 1) for _ in combos)
    out = []
    for c in combos:
        starts, extents, counts = zip(*[gs[g] for gs, g in zip(groups, c)])
        out.append((starts, extents, math.prod(counts)))
    return tuple(out)


class StageTimes(NamedTuple):
    """Cycles of one piece's stages (docs/simulator.md): a transfer holds the parent's memory
    port for its port cycles; its link cycles beyond those and the link latency overlap other
    work. `execute` is the slowest child plus the children's adding into kept partials."""
    load_port: int
    load_link: int
    store_port: int
    store_link: int
    latency: int                # link latency, paid by a load and by a store
    child_reduce: int           # a child adding this partial into the one it keeps
    reduce: int                 # the node's LFU combining the children's results

    @property
    def load(self) -> int:
        return max(self.load_port, self.load_link) + self.latency

    @property
    def store(self) -> int:
        return max(self.store_port, self.store_link) + self.latency if self.store_port else 0


def stage_times(work: PieceWork, node, child) -> StageTimes:
    """The stage cycles of a piece between a node's level and its children's level (of the bytes
    a child moves, the node's `link_fraction` crosses its link)."""
    remote = node.link_fraction
    return StageTimes(
        ceil_cycles(work.load_bytes / node.memory_bandwidth),
        ceil_cycles(work.load_link_bytes * remote / child.link_bandwidth),
        ceil_cycles(work.store_bytes / node.memory_bandwidth),
        ceil_cycles(work.store_link_bytes * remote / child.link_bandwidth) if work.store_bytes else 0,
        child.link_latency,
        ceil_cycles(work.child_reduce_max / child.lfu_ops_per_cycle),
        ceil_cycles(work.reduce_ops / node.lfu_ops_per_cycle))


def default_order(amap: AccessMap) -> tuple:
    """The axes in their order, reduction axes innermost."""
    return tuple(sorted(range(len(amap.axes)), key=lambda a: amap.axes[a].reduce is not None))


def check_order(amap: AccessMap, order: tuple, serial: list[int]):
    """A loop order is every axis once, with the serially cut reduction axes inside every
    serially cut axis that is not one (the pieces adding up to one output region follow each
    other)."""
    if sorted(order) != list(range(len(amap.axes))):
        raise ValueError(f"loop order {order} is not a permutation of the {len(amap.axes)} axes")
    cut = [a for a in order if serial[a] > 1]
    red = [i for i, a in enumerate(cut) if amap.axes[a].reduce]
    if red and red[0] < len(cut) - len(red):
        raise ValueError(f"loop order {order}: a cut reduction axis is outside a cut axis "
                         f"that is not a reduction")


def operand_loads(order: tuple, deps, pieces, first) -> bool:
    """Whether a piece loads an input operand, its children keeping it otherwise. Consecutive
    pieces in the loop order give every child the same region of an operand until an axis it
    depends on moves: the operand loads in a piece iff every axis inside its innermost cut
    dependency is at its first piece (`first[a]`). Which operand stays resident (the
    stationarity of weights or inputs; the kept partial results are the outputs') thus follows
    from the loop order."""
    inner = -1
    for j, a in enumerate(order):
        if a in deps and pieces[a] > 1:
            inner = j
    return all(first[a] for a in order[inner + 1:])


def kept_axis(amap: AccessMap, parts: list[int]) -> int | None:
    """The reduction axis whose partial results the children keep across serial pieces, or None.
    `parts[a]` is how many child ranges axis a is cut into over all pieces."""
    cut = [a for a, ax in enumerate(amap.axes) if ax.reduce and parts[a] > 1]
    if len(cut) == 1 and amap.axes[cut[0]].reduce not in MERGES:
        return cut[0]
    return None


@dataclass(frozen=True)
class _AxisKind:
    extent: int                 # the length of its pieces
    groups: tuple               # its child ranges grouped by signature: ((start, extent, count), ...)
    first: bool                 # the axis's first piece
    last: bool                  # the axis's last piece (tracked along reduction axes only)
    sig: tuple                  # what the work of a piece depends on: equal for equal work
    lengths: tuple              # per group, per operand: its region's length along this axis
    sums: tuple                 # per operand: the sum of those lengths over the child ranges
    count: int                  # child ranges
    widest: tuple               # the groups whose boxes may be the largest (the first suffices
                                # when no window is clipped: the longest range)


class _Axis:
    """The serial pieces of one axis, as runs of pieces of one kind, in order."""

    def __init__(self, amap: AccessMap, a: int, pieces: int, ways: int):
        axis = amap.axes[a]
        self.windows = [d for ds in amap.operands for d in ds if d.axis == a and d.kind == DimKind.WINDOW]
        self.operands = [[d for d in ds if d.axis == a] for ds in amap.operands]
        self.ways = ways
        q, r = divmod(axis.size, pieces)
        n = r + (pieces - r if q else 0)            # the non-empty pieces
        self.kinds: list[_AxisKind] = []
        self.runs: list[tuple[int, int]] = []       # (kind id, how many consecutive pieces)
        self._seen: dict = {}
        self._q, self._r = q, r
        ends = axis.reduce is not None              # first and last pieces matter to a reduction
        lo = 0                                      # pieces clipped by a window's border ...
        while lo < n and (lo == 0 or not self._interior(*self._range(lo))):
            lo += 1
        hi = n
        while hi > lo and (hi == n or not self._interior(*self._range(hi - 1))):
            hi -= 1
        for i in range(lo):                         # ... each get their own signature (the
            # first piece always: an operand that does not depend on the axes inside it loads then)
            self._add(i, 1, (i == 0, i == n - 1 and ends))
        for i, j in ((lo, min(r, hi)), (max(r, lo), hi)):   # unclipped, of one extent each
            if j > i:
                self._add(i, j - i, (False, False))
        for i in range(hi, n):
            self._add(i, 1, (False, i == n - 1) if ends else (False, False))
        self.parts = r * min(ways, q + 1) + (n - r) * min(ways, q)
        self.slots = min(ways, q + 1 if r else q)   # child ranges of the longest piece
        self.pieces = n
        per_kind: dict = {}
        for k, count in self.runs:
            per_kind[k] = per_kind.get(k, 0) + count
        self.per_kind = tuple(per_kind.items())     # (kind id, how many pieces of it)

    def _range(self, i: int) -> tuple[int, int]:
        q, r = self._q, self._r
        return (i * (q + 1), q + 1) if i < r else (r * (q + 1) + (i - r) * q, q)

    def _add(self, i: int, count: int, flags: tuple):
        ps, pe = self._range(i)
        interior = self._interior(ps, pe)
        groups = None
        key = (pe, flags)
        if not interior:
            groups = self._groups(ps, pe, interior)
            key = (tuple((e, n) + self._shape(s, e) for s, e, n in groups), flags)
        k = self._seen.get(key)
        if k is None:
            k = self._seen[key] = len(self.kinds)
            groups = groups or self._groups(ps, pe, interior)
            sig = (pe, flags, tuple((e, n) + self._shape(s, e) for s, e, n in groups))
            lengths = tuple(tuple(self._length(dims, s, e) for dims in self.operands)
                            for s, e, _ in groups)
            sums = tuple(sum(n * ln[i] for (_, _, n), ln in zip(groups, lengths))
                         for i in range(len(self.operands)))
            widest = (0,) if interior else tuple(range(len(groups)))
            self.kinds.append(_AxisKind(pe, groups, *flags, sig, lengths, sums,
                                        sum(g[2] for g in groups), widest))
        if self.runs and self.runs[-1][0] == k:
            self.runs[-1] = (k, self.runs[-1][1] + count)
        else:
            self.runs.append((k, count))

    @property
    def ids(self) -> list[int]:
        """The kind of every piece, in order."""
        return [k for k, n in self.runs for _ in range(n)]

    @staticmethod
    def _length(dims, start: int, extent: int) -> int:
        n = 1
        for d in dims:
            lo, hi, _, _ = d.region(start, extent)
            n *= hi - lo
        return n

    def _interior(self, start: int, extent: int) -> bool:
        """Whether no window of this axis is clipped by a tensor border in this piece."""
        return all(start * d.stride >= d.pad_lo and
                   (start + extent - 1) * d.stride - d.pad_lo + d.kernel <= d.size
                   for d in self.windows)

    def _shape(self, start: int, extent: int) -> tuple:
        return tuple((lambda r: (r[1] - r[0], r[2], r[3]))(d.region(start, extent))
                     for d in self.windows)

    def _groups(self, ps: int, pe: int, interior: bool) -> tuple:
        """The piece's child ranges grouped by signature: ((start, extent, count), ...)."""
        if interior:        # balanced parts: at most two extents, none clipped
            q, r = divmod(pe, self.ways)
            return tuple(g for g in ((ps, q + 1, r), (ps + r * (q + 1), q, self.ways - r))
                         if g[1] and g[2])
        groups: dict = {}
        for s, e in split_ranges(pe, self.ways):
            sig = (e,) + self._shape(ps + s, e)
            if sig in groups:
                groups[sig][2] += 1
            else:
                groups[sig] = [ps + s, e, 1]
        return tuple(tuple(g) for g in groups.values())


class Schedule:
    """The serial pieces of a task split `pieces` x `ways` per axis, grouped into kinds."""

    def __init__(self, task: Task, amap: AccessMap, pieces, ways, broadcast: bool, axes=None,
                 memo: dict | None = None, order: tuple | None = None):
        """`order` is the loop order, outermost axis first (default: the axes in their order,
        reduction axes innermost); `axes` and `memo` let schedules of one task share per-axis kinds
        and piece work (the compiler's search builds many)."""
        self.task, self.amap, self.broadcast = task, amap, broadcast
        self.memo = {} if memo is None else memo
        self.pieces, self.ways = tuple(pieces), tuple(ways)
        self.axes = axes or [_Axis(amap, a, n, p) for a, (n, p) in enumerate(zip(pieces, ways))]
        self.n_out = task.spec.outputs
        self.red_axes = [a for a, ax in enumerate(amap.axes) if ax.reduce]
        parts = [ax.parts for ax in self.axes]
        cut = [a for a in self.red_axes if parts[a] > 1]
        self.reduce = amap.axes[cut[0]].reduce if cut else None     # the g this split needs
        self.kept = kept_axis(amap, parts)
        self.serial = [ax.pieces for ax in self.axes]       # pieces per axis
        if order:
            self.order = tuple(order)
            check_order(amap, self.order, self.serial)
        else:                           # reduction axes innermost: always a valid order
            self.order = default_order(amap)
        self._work: dict = {}
        self._children: dict = {}       # per kind: its child tasks
        # which inputs a piece loads, by its axes' first flags (`operand_loads` reads the piece
        # counts only as cut or not: schedules of one task with the same order and cut axes share)
        self._first_loads: dict = self.memo.setdefault(
            ("loads", self.order, tuple(n > 1 for n in self.serial)), {})
        if "operands" not in self.memo:
            # per operand: bytes of one element times its whole and broadcast dimensions, and
            # the axes it depends on
            self.memo["operands"] = (
                [amap.dtype_bytes[i] * math.prod(d.extent(0) for d in dims
                                                 if d.kind in (DimKind.WHOLE, DimKind.BCAST))
                 for i, dims in enumerate(amap.operands)],
                [amap.depends(i) for i in range(len(amap.operands))])
        self._operands = self.memo["operands"]
        self.final_reduce_ops = 0
        if self.reduce in MERGES:       # all runs come back, and are merged once at the end
            out = task.outputs[0]
            runs = math.prod(parts[a] for a in self.red_axes)
            self.final_reduce_ops = merge_ops(out.size // out.shape[-1], out.shape[-1], runs)

    @classmethod
    def of(cls, node, broadcast: bool) -> "Schedule":
        """The schedule of a split NodePlan."""
        return cls(node.task, access_map(node.task), [s.pieces for s in node.splits],
                   [s.ways for s in node.splits], broadcast, order=node.order or None)

    # ------------------------------------------------------------ pieces
    @property
    def count(self) -> int:
        return math.prod(self.serial)

    def sequence(self):
        """The kind of every piece, in execution order."""
        for combo in itertools.product(*[self.axes[a].ids for a in self.order]):
            kind = [0] * len(self.order)
            for a, k in zip(self.order, combo):
                kind[a] = k
            yield tuple(kind)

    def first(self) -> tuple:
        return tuple(ax.runs[0][0] for ax in self.axes)

    def counts(self) -> dict:
        """How many pieces of each kind."""
        out = {(): 1}
        for ax in self.axes:
            out = {kind + (k,): n * m for kind, n in out.items() for k, m in ax.per_kind}
        return out

    def calls(self):
        """Every child call in execution order: (starts, extents, brings the first partial of
        its output region)."""
        for combo in itertools.product(*[split_ranges(self.amap.axes[a].size, self.pieces[a])
                                         for a in self.order]):
            piece = [None] * len(self.order)
            for a, r in zip(self.order, combo):
                piece[a] = r
            parts = [[(ps + s, e) for s, e in split_ranges(pe, p)]
                     for (ps, pe), p in zip(piece, self.ways)]
            for part in itertools.product(*parts):
                starts = tuple(s for s, _ in part)
                yield starts, tuple(e for _, e in part), all(starts[a] == 0 for a in self.red_axes)

    # ------------------------------------------------------------ work of a kind
    def work(self, kind: tuple) -> PieceWork:
        w = self._work.get(kind)
        if w is None:
            ak = tuple(self.axes[a].kinds[k] for a, k in enumerate(kind))
            slots = self.axes[self.kept].slots if self.kept is not None else 0
            loads = self._loads(ak)
            key = ("work", tuple(k.sig for k in ak), self.kept, slots, self.reduce, loads)
            w = self.memo.get(key)
            if w is None:
                w = self.memo[key] = self._compute(ak, loads)
            self._work[kind] = w
        return w

    def loads(self, kind: tuple) -> tuple:
        """Per input operand, whether a piece of this kind sends it (the children keep it
        otherwise)."""
        return self._loads(tuple(self.axes[a].kinds[k] for a, k in enumerate(kind)))

    def _outer(self):
        """The outermost serially cut axis in the loop order, how many pieces each of its slices
        holds, and its slices' ends: (axis, pieces per slice, ends), or None when no axis is cut."""
        cut = [a for a in self.order if self.serial[a] > 1]
        if not cut:
            return None
        o = cut[0]
        inner = math.prod(self.serial[a] for a in self.order[self.order.index(o) + 1:])
        ends = [sum(self.axes[o]._range(s)) for s in range(self.serial[o])]
        return o, inner, ends

    def _read(self, operands, o: int, end: int) -> tuple:
        """Per operand (by index), its bytes over the axis range [0, end) of axis o, whole along
        every other axis (a window's halo included); None for an operand not varying along o."""
        size = self.amap.axes[o].size
        out = []
        for i in operands:
            whole = self.task.types[i].size * self.amap.dtype_bytes[i]
            dims = [d for d in self.amap.operands[i] if d.axis == o]
            out.append(whole * _Axis._length(dims, 0, end) // _Axis._length(dims, 0, size)
                       if dims else None)
        return tuple(out)

    def slices(self) -> tuple:
        """The task's input as its pieces read it: per slice of the outermost serially cut axis
        in the loop order, (the index in `sequence()` of the slice's first piece, per input
        operand the bytes that this slice and those before it read). A slice's pieces read
        nothing of an operand beyond that: along the cut axis its region ends where the slice
        ends (a window's halo included), and along every other axis it is whole. One slice,
        reading everything, when no axis is cut."""
        inputs = range(self.n_out, len(self.task.types))
        whole = tuple(self.task.types[i].size * self.amap.dtype_bytes[i] for i in inputs)
        outer = self._outer()
        if outer is None:
            return ((0, whole),)
        o, inner, ends = outer
        return tuple((s * inner, tuple(w if b is None else b
                                       for w, b in zip(whole, self._read(inputs, o, end))))
                     for s, end in enumerate(ends))

    def results(self) -> tuple:
        """The task's outputs as its pieces finish them: per slice of the outermost serially cut
        axis, (the index in `sequence()` of the slice's last piece, per output operand the bytes
        final once it and the pieces before it are done). An output that does not vary along
        that axis (the axis is a reduction's), or any output of a task that merges sorted runs
        at its end, is final only after the last piece."""
        outputs = range(self.n_out)
        whole = tuple(self.task.types[i].size * self.amap.dtype_bytes[i] for i in outputs)
        outer = self._outer()
        if outer is None or self.final_reduce_ops:
            return ((self.count - 1, whole),)
        o, inner, ends = outer
        out = [((s + 1) * inner - 1, tuple(0 if b is None else b
                                           for b in self._read(outputs, o, end)))
               for s, end in enumerate(ends)]
        out[-1] = (out[-1][0], whole)
        return tuple(out)

    def children(self, kind: tuple) -> tuple:
        """((child task, how many children run it), ...) of a piece of this kind."""
        out = self._children.get(kind)
        if out is None:
            tasks: dict = {}
            for starts, extents, n in self.work(kind).boxes:
                t, _ = sub_task(self.task, self.amap, starts, extents)
                tasks[t] = tasks.get(t, 0) + n
            out = self._children[kind] = tuple(tasks.items())
        return out

    def _loads(self, ak: tuple) -> tuple:
        """Per input operand, whether a piece of these axis kinds loads it (`operand_loads`)."""
        first = tuple(k.first for k in ak)
        out = self._first_loads.get(first)
        if out is None:
            deps = self._operands[1]
            out = self._first_loads[first] = tuple(
                operand_loads(self.order, deps[i], self.serial, first)
                for i in range(self.n_out, len(self.task.types)))
        return out

    def _compute(self, ak: tuple, loads: tuple) -> PieceWork:
        task = self.task
        base, deps = self._operands
        per_child = [k.count for k in ak]
        groups = tuple(k.groups for k in ak)
        combos = list(itertools.product(*[k.widest for k in ak]))
        # per box that may be the largest, per operand: the bytes of its region in that box
        regions = []
        for c in combos:
            lengths = [k.lengths[g] for k, g in zip(ak, c)]
            row = []
            for i, b in enumerate(base):
                for ln in lengths:
                    b *= ln[i]
                row.append(b)
            regions.append(row)

        def sent(i, copies) -> int:
            """Bytes of operand i sent for the piece: along an axis it depends on, the sum of its
            child regions; along any other axis a, `copies[a]` copies (1 when one broadcast
            serves every child)."""
            b = base[i]
            for a, k in enumerate(ak):
                b *= k.sums[i] if a in deps[i] else copies[a]
            return b

        def sent_once(i) -> int:
            """`sent(i, copies)` with one copy along every axis (a broadcast)."""
            b = base[i]
            for a in deps[i]:
                b *= ak[a].sums[i]
            return b

        def busiest(operands) -> int:
            """The most bytes of these operands one child receives or returns."""
            return max(sum(row[i] for i in operands) for row in regions)

        inputs = [i for i, fresh in enumerate(loads, self.n_out) if fresh]
        outputs = range(self.n_out)
        load = sum(sent_once(i) if self.broadcast else sent(i, per_child) for i in inputs)
        reduce_ops = child_ops = child_max = 0
        stores = per_child
        g = self.reduce
        if self.kept is not None:
            k = ak[self.kept]
            stores = [self.axes[a].slots if a == self.kept else n for a, n in enumerate(per_child)]
            if not k.last:
                stores = None
            else:
                reduce_ops = combine_ops(task, g, self._piece_outputs(ak), self.axes[self.kept].slots - 1)
            if not k.first and isinstance(g, Reduction):    # element-wise: one op per element
                size = self.amap.dtype_bytes[0]
                child_ops, child_max = sent(0, per_child) // size, busiest([0]) // size
            elif not k.first:               # an extension's reduction instruction, per child
                boxes = _boxes(groups, itertools.product(*[range(len(gs)) for gs in groups]))
                each = [combine_ops(task, g, box_types(task, self.amap, s, e)[:self.n_out], 1)
                        for s, e, _ in boxes]
                child_ops = sum(n * c for (_, _, n), c in zip(boxes, each))
                child_max = max(each)
        elif g and g not in MERGES:
            runs = math.prod(per_child[a] for a in self.red_axes)
            first = all(ak[a].first for a in self.red_axes)
            reduce_ops = combine_ops(task, g, self._piece_outputs(ak), runs - 1 if first else runs)
        store = store_link = 0
        if stores is not None:
            store = sum(sent(i, stores) for i in outputs)
            store_link = busiest(outputs)
        widest = _boxes(groups, combos)
        return PieceWork(load, busiest(inputs), groups, widest,
                         max(math.prod(e) for _, e, _ in widest), reduce_ops, store, store_link,
                         math.prod(per_child), child_ops, child_max)

    def _piece_outputs(self, ak) -> tuple:
        """Types of a piece's output regions (reduction axes do not appear in them)."""
        key = ("outputs", tuple(k.extent for k in ak))
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = tuple(
                TensorType(t.dtype, tuple(d.extent(0) if d.axis < 0 else ak[d.axis].extent
                                          for d in dims))
                for t, dims in zip(self.task.outputs, self.amap.operands))
        return out

    # ------------------------------------------------------------ the whole split
    def totals(self) -> dict:
        """What the split moves and combines over all its pieces, and its distinct child tasks
        (most frequent first)."""
        down = up = red = kept = 0
        children: dict = {}
        for kind, n in self.counts().items():
            w = self.work(kind)
            down += n * w.load_bytes
            up += n * w.store_bytes
            red += n * w.reduce_ops
            kept += n * w.child_reduce_ops
            for t, c in self.children(kind):
                children[t] = children.get(t, 0) + n * c
        return {"bytes_down": down, "bytes_up": up, "reduction_ops": red + self.final_reduce_ops,
                "child_reduction_ops": kept,
                "children": tuple(sorted(children.items(), key=lambda kv: -kv[1]))}

    def busy(self) -> int:
        """Children given work in the first (a full) piece."""
        return self.work(self.first()).busy

    def estimate(self, node, child, child_cycles) -> tuple:
        """The node's cycles for the whole task under the pipeline of these stage times, with
        `child_cycles(starts, extents)` the estimated time of a child given that box; and, to break ties,
        the bytes moved plus reduction ops, and the load imbalance.

            cycles = decode + sum over pieces of per_piece + the final merge
                     + max over kinds of (journey - per_piece): pipeline fill and drain
            per_piece = max(port, link in, link out, execute, reduce, held / buffering)

        with `buffering` the pieces in flight in a child's memory (the child level's).

        where a piece's journey is its load, execute, store and reduce one after another, `held`
        the same without the reduce (a piece's buffer is free once it has written back), port
        is its loads' and stores' port cycles together (one port serves both), and the links
        carry loads and write-backs each at their bandwidth (full duplex) or one after the other
        (half duplex: link in + link out).
        """
        cycles = moved = imbalance = fill = 0
        for kind, n in self.counts().items():
            w = self.work(kind)
            st = stage_times(w, node, child)
            execute = max([child_cycles(s, e) for s, e, _ in w.widest])
            held = st.load + execute + st.child_reduce + st.store   # a buffer, LD to WB
            journey = held + st.reduce
            links = ((st.load_link + st.store_link,) if child.duplex == "half"
                     else (st.load_link, st.store_link))
            per_piece = max(st.load_port + st.store_port, *links, execute, st.child_reduce,
                            st.reduce, held / child.buffering)
            cycles += n * per_piece
            fill = max(fill, journey - per_piece)
            moved += n * (w.load_bytes + w.store_bytes + w.reduce_ops)
            imbalance += n * w.largest * w.busy
        final = ceil_cycles(self.final_reduce_ops / node.lfu_ops_per_cycle)
        points = math.prod(ax.size for ax in self.amap.axes)
        return (node.decode_cycles + cycles + fill + final, moved + self.final_reduce_ops,
                imbalance / points)

