"""Decomposition rules: how each opcode's iteration space splits, and how partial results combine.

Every decomposable opcode is described by one general mechanism, an *access map*:

- its iteration space, a list of axes (name, size, and the reduction g needed when the axis is
  split across pieces or children, or None when sub-results simply concatenate);
- for every operand (destinations first), what each of its dimensions reads: an axis directly
  (`plain`), an axis through a sliding window with kernel, stride and padding (`window`, the input
  of conv2d and pooling: a piece needs a halo of kernel - stride and clips its padding), the whole
  dimension (`whole`, never split: conv2d kernel taps, the channels an LRN window spans), or a
  size-1 dimension that broadcasts (`bcast`).

From the map alone the compiler derives, for any box of the iteration space, each operand's region
and bytes, the sub-instruction a child receives (with its own padding at the borders), and which
operands are the same for every child (sent once, by broadcast). Data-movement opcodes (copy,
reshape, transpose, slice, concat) have no map: the node that receives them runs them with its own
DMA in local memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from isa.checker import extension_spec, leaf_work
from isa.extensions import bind_sizes, eval_dim
from isa.opcodes import OPCODES, normalize_axis, pads
from isa.program import DTYPES, TensorType, format_value

__all__ = ["Axis", "Dim", "AccessMap", "Task", "access_map", "sub_task", "task_of", "split_ranges",
           "ceil_div", "combine_ops", "merge_ops", "Reduction", "ExtensionReduction", "MERGES",
           "DimKind", "ACCESS_MAPS", "box_types", "ceil_cycles"]

class Reduction(StrEnum):
    """A built-in reduction g, run on a node's local functional unit."""
    ADD = "add"             # element-wise sum of partial results
    MAX = "max"             # element-wise maximum of partial results
    ARGMAX = "argmax"       # index of the larger value, read from the node's copy of the source;
    ARGMIN = "argmin"       # ... of the smaller value; ties keep the first position
    MERGE = "merge"         # merge of sorted runs along the axis
    ARGMERGE = "argmerge"   # merge of runs of sorted positions, comparing the node's copy of the source


@dataclass(frozen=True)
class ExtensionReduction:
    """An extension's reduction instruction, run as an instruction on pairs of partial results."""
    name: str

    def __str__(self) -> str:
        return self.name


#: the reductions that merge sorted runs: every run must come back before they are merged
MERGES = (Reduction.MERGE, Reduction.ARGMERGE)


class DimKind(StrEnum):
    """What one dimension of an operand reads of the iteration space."""
    PLAIN = "plain"         # an axis directly
    WINDOW = "window"       # an axis through a sliding window (kernel, stride, padding)
    WHOLE = "whole"         # the whole dimension, never split
    BCAST = "bcast"         # a size-1 dimension that broadcasts


@dataclass(frozen=True)
class Task:
    """What a node receives: an opcode applied to operands of these types (destinations first)."""
    opcode: str
    types: tuple[TensorType, ...]
    attrs: tuple[tuple[str, object], ...]
    ext: tuple | None = None        # an extension's (declaration, earlier declarations)
    pin: tuple = ()                 # a pinned mapping's constraints on this task's subtree
                                    # (`compiler.mapping.Pin`s): planned apart from unpinned ones

    @property
    def attr(self) -> dict:
        return dict(self.attrs)

    @property
    def spec(self):
        return extension_spec(*self.ext) if self.ext else OPCODES[self.opcode]

    @property
    def work(self) -> list[tuple[str, int]]:
        """(op class, ops) of what a leaf runs for this task (an extension: its whole body)."""
        return leaf_work(self.spec, self.outputs, self.inputs, self.attr)

    @property
    def outputs(self) -> tuple[TensorType, ...]:
        return self.types[:self.spec.outputs]

    @property
    def inputs(self) -> tuple[TensorType, ...]:
        return self.types[self.spec.outputs:]

    @property
    def ops(self) -> int:
        s = self.spec
        return int(s.ops(self.outputs, self.inputs, self.attr))

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.types)

    @property
    def working_set(self) -> int:
        """Bytes a node holds to run this task: its operands, and an extension's temporaries."""
        if not self.ext:
            return self.nbytes
        amap = access_map(self)
        return self.nbytes + amap.temp_bytes([a.size for a in amap.axes])

    def text(self, names: tuple[str, ...] | None = None) -> str:
        """Canonical instruction text, with operand types in a trailing comment."""
        names = names or tuple(f"t{i}" for i in range(len(self.types)))
        defaults = {k: s.default for k, s in self.spec.attrs.items()}
        args = list(names) + [f"{k}={format_value(v)}" for k, v in self.attrs if defaults.get(k) != v]
        types = ", ".join(f"{n}: {t}" for n, t in zip(names, self.types))
        return f"{self.opcode} {', '.join(args)}  # {types}"


@dataclass(frozen=True)
class Axis:
    name: str
    size: int
    reduce: Reduction | ExtensionReduction | None = None   # g when this axis is split; None: concatenate
    splittable: bool = True
    leaf: int | None = None        # the most a leaf may receive along this axis
    least: int = 1                 # the least any child may receive along this axis


@dataclass(frozen=True)
class Dim:
    kind: DimKind
    axis: int = -1                 # index into AccessMap.axes (plain and window)
    size: int = 1                  # the operand's full length along this dimension
    kernel: int = 1                # window only
    stride: int = 1
    pad_lo: int = 0

    def region(self, start: int, extent: int) -> tuple[int, int, int, int]:
        """(lo, hi, pad_lo, pad_hi) of this dimension for an axis range [start, start+extent)."""
        if self.kind == DimKind.PLAIN:
            return start, start + extent, 0, 0
        if self.kind == DimKind.WINDOW:
            lo = start * self.stride - self.pad_lo
            hi = (start + extent - 1) * self.stride - self.pad_lo + self.kernel
            clo, chi = max(lo, 0), min(hi, self.size)
            return clo, chi, clo - lo, hi - chi
        if self.kind == DimKind.WHOLE:
            return 0, self.size, 0, 0
        return 0, 1, 0, 0

    def touched(self, axis_size: int) -> int:
        """How many positions of this dimension the whole task reads (windows may skip some)."""
        if self.kind != DimKind.WINDOW:
            return self.extent(axis_size)
        hit = [False] * self.size
        for o in range(axis_size):
            lo = o * self.stride - self.pad_lo
            for i in range(max(lo, 0), min(lo + self.kernel, self.size)):
                hit[i] = True
        return sum(hit)

    def extent(self, extent: int) -> int:
        """Largest length of this dimension for an axis extent (interior window, full halo)."""
        if self.kind == DimKind.PLAIN:
            return extent
        if self.kind == DimKind.WINDOW:
            return min((extent - 1) * self.stride + self.kernel, self.size)
        return self.size if self.kind == DimKind.WHOLE else 1


@dataclass(frozen=True)
class AccessMap:
    axes: tuple[Axis, ...]
    operands: tuple[tuple[Dim, ...], ...]      # per operand, destinations first
    dtype_bytes: tuple[int, ...]
    temps: tuple = ()                          # an extension's temporaries: (bytes, dims)
    sizes: tuple = ()                          # and its size symbols: (name, size, axis, halo)
    positions: tuple = ()                      # per output: the axis whose positions it holds
                                               # (a child's are offset by its start), or None

    def footprint(self, extents) -> int:
        """Bytes of all operands of a piece with these axis extents (the largest such piece),
        and of an extension body's temporaries."""
        total = self.temp_bytes(extents) if self.temps else 0
        for dims, nb in zip(self.operands, self.dtype_bytes):
            n = nb
            for d in dims:
                n *= d.extent(extents[d.axis] if d.axis >= 0 else 0)
            total += n
        return total

    def temp_bytes(self, extents) -> int:
        sizes = {name: (n if axis < 0 else min(n, extents[axis] + halo))
                 for name, n, axis, halo in self.sizes}
        return sum(nb * math.prod(eval_dim(d, sizes) for d in dims) for nb, dims in self.temps)

    def operand_bytes(self, i: int, extents) -> int:
        n = self.dtype_bytes[i]
        for d in self.operands[i]:
            n *= d.extent(extents[d.axis] if d.axis >= 0 else 0)
        return n

    def touched_bytes(self, i: int) -> int:
        """Bytes of operand i the whole task reads or writes: its compulsory traffic."""
        n = self.dtype_bytes[i]
        for d in self.operands[i]:
            n *= d.touched(self.axes[d.axis].size if d.axis >= 0 else 0)
        return n

    def depends(self, i: int) -> frozenset[int]:
        """The axes operand i varies with: children that differ only elsewhere share its data."""
        return frozenset(d.axis for d in self.operands[i] if d.kind in (DimKind.PLAIN, DimKind.WINDOW))


def _plain(axes: list[int], sizes) -> tuple[Dim, ...]:
    return tuple(Dim(DimKind.PLAIN, a, s) for a, s in zip(axes, sizes))


def _broadcast_dims(t: TensorType, out: TensorType) -> tuple[Dim, ...]:
    """Dimensions of a broadcast source: aligned right; size-1 dimensions against larger ones broadcast."""
    off = out.rank - t.rank
    return tuple(Dim(DimKind.BCAST, -1, 1) if s == 1 and out.shape[off + i] != 1
                 else Dim(DimKind.PLAIN, off + i, s) for i, s in enumerate(t.shape))


def _matmul(ts, a, nb):
    """C[..., M, N] = A[..., M, K] B[..., K, N]: one axis per batch dimension of C (a source's
    batch dimension of size 1, or one it lacks, broadcasts), then M, N and K (g = add)."""
    c, x, w = ts
    batch = c.shape[:-2]
    nbatch = len(batch)
    m, n, k = c.shape[-2], c.shape[-1], x.shape[-1]
    axes = tuple(Axis(f"B{i}", s) for i, s in enumerate(batch)) + (
        Axis("M", m), Axis("N", n), Axis("K", k, Reduction.ADD))
    im, i_n, ik = nbatch, nbatch + 1, nbatch + 2

    def lead(t):
        """A source's batch dimensions against C's (aligned right, as numpy broadcasts)."""
        off = nbatch - (t.rank - 2)
        return tuple(Dim(DimKind.BCAST, -1, 1) if s == 1 and batch[off + i] != 1
                     else Dim(DimKind.PLAIN, off + i, s) for i, s in enumerate(t.shape[:-2]))
    return AccessMap(axes, (_plain(range(nbatch), batch) + _plain([im, i_n], (m, n)),
                            lead(x) + _plain([im, ik], (m, k)),
                            lead(w) + _plain([ik, i_n], (k, n))), nb)


def _eucdist(ts, a, nb):
    (m, k) = ts[1].shape
    n = ts[0].shape[1]
    axes = (Axis("M", m), Axis("N", n), Axis("K", k, Reduction.ADD))
    return AccessMap(axes, (_plain([0, 1], (m, n)), _plain([0, 2], (m, k)), _plain([1, 2], (n, k))), nb)


def _conv2d(ts, a, nb):
    y, x, w = ts
    top, left, _, _ = pads(a)
    n, o, ho, wo = y.shape
    c, kh, kw = x.shape[1], w.shape[2], w.shape[3]
    axes = (Axis("N", n), Axis("O", o), Axis("Ho", ho), Axis("Wo", wo), Axis("C", c, Reduction.ADD))
    xd = (Dim(DimKind.PLAIN, 0, n), Dim(DimKind.PLAIN, 4, c),
          Dim(DimKind.WINDOW, 2, x.shape[2], kh, a["stride"], top),
          Dim(DimKind.WINDOW, 3, x.shape[3], kw, a["stride"], left))
    wd = (Dim(DimKind.PLAIN, 1, o), Dim(DimKind.PLAIN, 4, c), Dim(DimKind.WHOLE, -1, kh),
          Dim(DimKind.WHOLE, -1, kw))
    return AccessMap(axes, (_plain([0, 1, 2, 3], y.shape), xd, wd), nb)


def _pool(ts, a, nb):
    y, x = ts
    top, left, _, _ = pads(a)
    k, s = a["kernel"], a["stride"]
    axes = tuple(Axis(nm, sz) for nm, sz in zip(("N", "C", "Ho", "Wo"), y.shape))
    xd = (Dim(DimKind.PLAIN, 0, x.shape[0]), Dim(DimKind.PLAIN, 1, x.shape[1]),
          Dim(DimKind.WINDOW, 2, x.shape[2], k, s, top), Dim(DimKind.WINDOW, 3, x.shape[3], k, s, left))
    return AccessMap(axes, (_plain([0, 1, 2, 3], y.shape), xd), nb)


def _lrn(ts, a, nb):
    y = ts[0]
    axes = (Axis("N", y.shape[0]), Axis("C", y.shape[1], splittable=False),
            Axis("H", y.shape[2]), Axis("W", y.shape[3]))
    dims = (Dim(DimKind.PLAIN, 0, y.shape[0]), Dim(DimKind.WHOLE, -1, y.shape[1]),
            Dim(DimKind.PLAIN, 2, y.shape[2]), Dim(DimKind.PLAIN, 3, y.shape[3]))
    return AccessMap(axes, (dims, dims), nb)


def _binary(ts, a, nb):
    """Element-wise over the destination's axes; every source broadcasts (add ... where)."""
    z = ts[0]
    axes = tuple(Axis(f"d{i}", s) for i, s in enumerate(z.shape))
    return AccessMap(axes, (_plain(range(z.rank), z.shape),)
                     + tuple(_broadcast_dims(t, z) for t in ts[1:]), nb)


def _causal_mask(ts, a, nb):
    """M[Sq, Tk] from query positions QP[Sq] and key positions KP[Tk]: both axes cut freely,
    each piece with its own positions."""
    m, qp, kp = ts
    axes = (Axis("Sq", m.shape[0]), Axis("Tk", m.shape[1]))
    return AccessMap(axes, (_plain([0, 1], m.shape), _plain([0], qp.shape), _plain([1], kp.shape)), nb)


def _unary(ts, a, nb):
    y = ts[0]
    axes = tuple(Axis(f"d{i}", s) for i, s in enumerate(y.shape))
    dims = _plain(range(y.rank), y.shape)
    return AccessMap(axes, (dims, dims), nb)


def _mergepos(ts, a, nb):
    """Rows split; each row's two runs are merged whole."""
    x = ts[1]
    axes = tuple(Axis(f"d{i}", s) for i, s in enumerate(x.shape[:-1]))
    lead = list(range(x.rank - 1))
    return AccessMap(axes, tuple(_plain(lead, t.shape[:-1]) + (Dim(DimKind.WHOLE, -1, t.shape[-1]),)
                                 for t in ts), nb)


def _reduction(g: Reduction, last: bool = False, keeps_axis: bool = False, positions: bool = False):
    """An opcode that reduces one axis of X with g (the last axis, or its `axis` attribute);
    `keeps_axis`: Y has that axis too (a sort); `positions`: Y holds positions along it."""
    def build(ts, a, nb):
        x = ts[1]
        ax = x.rank - 1 if last else normalize_axis(a["axis"], x.rank)
        axes = tuple(Axis("n" if i == ax else f"d{i}", s, g if i == ax else None)
                     for i, s in enumerate(x.shape))
        keep = [i for i in range(x.rank) if keeps_axis or i != ax]
        return AccessMap(axes, (_plain(keep, [x.shape[i] for i in keep]),
                                _plain(range(x.rank), x.shape)), nb,
                         positions=(ax if positions else None,))
    return build


#: the access map of every core opcode that computes (data movement has none), from its
#: operand types, its attributes and the byte size of each operand's elements
ACCESS_MAPS = {
    "matmul": _matmul, "eucdist": _eucdist, "conv2d": _conv2d,
    "maxpool": _pool, "avgpool": _pool, "lrn": _lrn,
    **dict.fromkeys(("add", "sub", "mul", "div", "pow", "min", "max", "where"), _binary),
    **dict.fromkeys(("relu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf", "log", "abs",
                     "neg"), _unary),
    # a mean's pieces divide by the whole axis length (its count, bound at the root): they add
    "reduce_mean": _reduction(Reduction.ADD),
    "causal_mask": _causal_mask,
    "cast": _unary,
    "mergepos": _mergepos,
    "reduce_sum": _reduction(Reduction.ADD), "reduce_max": _reduction(Reduction.MAX),
    "argmax": _reduction(Reduction.ARGMAX, positions=True),
    "argmin": _reduction(Reduction.ARGMIN, positions=True),
    "count": _reduction(Reduction.ADD, last=True),
    "sort": _reduction(Reduction.MERGE, last=True, keeps_axis=True),
    "argsort": _reduction(Reduction.ARGMERGE, last=True, keeps_axis=True, positions=True),
}


def moved_bytes(task: Task) -> int:
    """Bytes a DMA reads and writes for a data-movement task: each destination element is read
    once and written once (a gather also reads its indices; a fill only writes)."""
    out = sum(t.nbytes for t in task.outputs)
    if not task.inputs:                 # fill: written, nothing read
        return out
    return 2 * out + (task.inputs[1].nbytes if task.opcode == "gather" else 0)


def access_map(task: Task) -> AccessMap | None:
    """The access map of a task, or None for data-movement opcodes (run by the node's DMA)."""
    nb = tuple(DTYPES[t.dtype] for t in task.types)
    if task.ext:
        return _extension_map(task, nb)
    build = ACCESS_MAPS.get(task.opcode)
    return None if build is None else build(task.types, task.attr, nb)


def _extension_map(task: Task, nb) -> AccessMap:
    """An extension's map, from its split rules: split sizes are axes (with the declared
    reduction, window and leaf cap); every other size is a whole dimension."""
    decl = task.ext[0]
    sizes = bind_sizes(decl, task.types)
    axes = tuple(Axis(s.axis, sizes[s.axis], _reduction_name(s.reduce), leaf=s.leaf,
                      least=max(1, sizes.get(s.least, s.least) if s.least is not None else 1))
                 for s in decl.splits)
    index = {s.axis: i for i, s in enumerate(decl.splits)}
    windows = {s.window[0]: (index[s.axis], sizes[s.window[1]]) for s in decl.splits if s.window}
    operands = []
    for o in decl.operands:
        dims = []
        for d, n in zip(o.dims, (sizes.get(d, d) if isinstance(d, str) else d for d in o.dims)):
            if isinstance(d, str) and d in index:
                dims.append(Dim(DimKind.PLAIN, index[d], n))
            elif isinstance(d, str) and d in windows:
                dims.append(Dim(DimKind.WINDOW, windows[d][0], n, windows[d][1], 1, 0))
            else:
                dims.append(Dim(DimKind.WHOLE, -1, n))
        operands.append(tuple(dims))
    halos = {src: (index[axis], sizes[k] - 1) for src, (axis, k) in
             ((s.window[0], (s.axis, s.window[1])) for s in decl.splits if s.window)}
    symbols = tuple((name, n, index.get(name, halos.get(name, (-1, 0))[0]),
                     halos.get(name, (-1, 0))[1]) for name, n in sizes.items())
    temps = tuple((DTYPES[t.dtype], t.dims) for t in decl.temps)
    positions = tuple(index.get(o.index) for o in decl.outputs)
    return AccessMap(axes, tuple(operands), nb, temps, symbols, positions)


def _reduction_name(name: str | None) -> Reduction | ExtensionReduction | None:
    """An extension's reduction as a g: `add` is the built-in sum; any other is its reduction
    instruction, run on pairs of partial results."""
    return None if name is None else Reduction.ADD if name == "add" else ExtensionReduction(name)


def box_types(task: Task, amap: AccessMap, starts, extents) -> tuple[TensorType, ...]:
    """The operand types of the task a child receives for a box of the iteration space."""
    out = []
    for t, dims in zip(task.types, amap.operands):
        shape = []
        for d in dims:
            lo, hi, _, _ = d.region(starts[d.axis] if d.axis >= 0 else 0,
                                    extents[d.axis] if d.axis >= 0 else 0)
            shape.append(hi - lo)
        out.append(TensorType(t.dtype, tuple(shape)))
    return tuple(out)


def sub_task(task: Task, amap: AccessMap, starts, extents) -> tuple[Task, tuple]:
    """The task a child receives for the box [starts, starts+extents) of the iteration space,
    and each operand's region as a tuple of (lo, hi) per dimension."""
    types, regions, window_pads = [], [], []
    for t, dims in zip(task.types, amap.operands):
        reg = []
        for d in dims:
            lo, hi, plo, phi = d.region(starts[d.axis] if d.axis >= 0 else 0,
                                        extents[d.axis] if d.axis >= 0 else 0)
            reg.append((lo, hi))
            if d.kind == DimKind.WINDOW:
                window_pads.append((plo, phi))
        regions.append(tuple(reg))
        types.append(TensorType(t.dtype, tuple(hi - lo for lo, hi in reg)))
    attrs = task.attrs
    if window_pads and not task.ext:     # conv2d and pooling: (top, left, bottom, right)
        (pt, pb), (pl, pr) = window_pads[:2]
        pad = pt if pt == pl == pb == pr else (pt, pl, pb, pr)
        attrs = tuple((k, pad if k == "pad" else v) for k, v in attrs)
    return Task(task.opcode, tuple(types), attrs, task.ext, task.pin), tuple(regions)


def task_of(instruction, types: dict, table: dict | None = None) -> Task:
    """The Task of a checked program instruction (attributes with defaults filled in, in table
    order); `table` is the program's opcode table when it declares extensions."""
    spec = (table or OPCODES)[instruction.opcode]
    full = spec.full_attrs(instruction.attr)
    ts = tuple(types[n] for n in instruction.operands)
    if spec.bind is not None:           # defaults that follow from the whole instruction's operands
        full = spec.bind(ts[:spec.outputs], ts[spec.outputs:], full)
    attrs = tuple((k, full[k]) for k in spec.attrs if k in full)
    return Task(instruction.opcode, ts, attrs, spec.ext_key)


def split_ranges(size: int, parts: int) -> list[tuple[int, int]]:
    """[start, extent) of `parts` balanced ranges covering `size` (the first ones one longer)."""
    q, r = divmod(size, parts)
    out, start = [], 0
    for i in range(parts):
        ext = q + (1 if i < r else 0)
        if ext:
            out.append((start, ext))
        start += ext
    return out


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def ceil_cycles(x: float) -> int:
    """Whole cycles for a fractional time (a hair of floating-point error is not a cycle)."""
    return int(math.ceil(x - 1e-9))


def combine_ops(task: Task, reduce: str, outputs, applications: int) -> int:
    """LFU ops of `applications` pairwise combinations of partial results of these output types
    (element-wise for add/max/argmax/argmin; an extension's reduction instruction runs whole)."""
    if applications <= 0:
        return 0
    if isinstance(reduce, ExtensionReduction):
        g = task.spec.table[reduce.name]
        return applications * int(g.ops(list(outputs), list(outputs) * 2, g.full_attrs({})))
    return applications * outputs[0].size


def merge_ops(rows: int, length: int, runs: int) -> int:
    """Compares to merge `runs` sorted runs making rows of `length`: length * ceil(log2 runs)."""
    return rows * length * math.ceil(math.log2(runs)) if runs > 1 else 0
