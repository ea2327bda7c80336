"""Extension instructions in functional mode: all the leaves below a node run the extension's
body together, one call per body instruction, as the leaf batches of `simulator.batch_kernels`
run the leaves of a matmul or a conv2d.

`run_extension_node(plan, node, inputs, cache)` computes a split node's extension task as
`compiler.execute.run_node` does with the leaf kernels, call by call and leaf by leaf, and gives
the same values. It walks the node's child calls as the plan cut them; the calls that go to the
same child plan (the same task at the same level) run as one *stack*: each operand that differs
between them is copied into one array whose leading axis numbers the calls (and, below the
node, the calls of every node of the stack), and the child runs once on the stack. At the
leaves the body runs on the stack: an instruction whose operands all are the same in every
call (a `fill`, a weight every leaf reads whole) runs once; otherwise its leaf kernel runs on
the stack as on one larger operand, which gives every leaf the value its own call would (the
kernels are elementwise, or per row along an axis, or one BLAS product per matrix of a batch),
or, for the few opcodes with no such form, once per call. Each node then places or combines its
children's results exactly as the per-leaf path does: regions of one output in the plan's order
(the partials of the regions of one step combined in one call of the reduction instruction,
itself run on the stack), distinct regions apart.

An extension whose split rules all concatenate their pieces (no reduction, no window halo) is
run once on the node's whole operands instead: a piece's outputs depend on its own elements
only, so the body on the whole gives every leaf's values, without walking the calls.

Not every node can run so: a node whose reduction merges sorted runs or picks positions (argmax,
argmin, merge), or whose outputs are positions, is run by `run_node` (`run_extension_node`
returns None).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from compiler.execute import child_calls, position_axes
from compiler.plan import Plan, NodePlan, PlanKind
from compiler.rules import ExtensionReduction, Reduction, access_map
from isa.errors import InternalError, UserError
from isa.extensions import leaf_pieces
from isa.program import TensorType
from isa.reference import NP_DTYPES, dtype_name
from simulator.batch_kernels import ELEMENTWISE, F32_UFUNCS, LEAF_BATCH_KERNELS, _parallel
from simulator.erf32 import erf32_parts
from simulator.kernels import LEAF_KERNELS
from simulator.tile_kernels import unary_k

__all__ = ["run_extension_node", "run_stacked"]


class Operand(NamedTuple):
    """One operand of a stack of calls: `value` holds every call's (leading axis: the calls) when
    `stacked`, else the one value all the calls share."""
    value: np.ndarray
    stacked: bool

    def shape(self) -> tuple:
        """The operand's shape in one call."""
        return self.value.shape[1:] if self.stacked else self.value.shape

    def of(self, n: int) -> np.ndarray:
        """Every call's value, stacked."""
        if self.stacked:
            return self.value
        return np.broadcast_to(self.value, (n,) + self.value.shape)


# ---------------------------------------------------------------- the plan's nodes

class _Split(NamedTuple):
    calls: list            # (child plan, input slices, output slices, first) per call
    groups: list           # (child plan, call numbers) per distinct child plan
    steps: list            # per step, the calls that bring the step-th partial of their region
    reduce: object         # the node's g


_LEAF = "leaf"
_HERE = {None, Reduction.ADD, Reduction.MAX}


def _entry(plan: Plan, node: NodePlan, cache: dict):
    """A node's stacked form: _LEAF, a _Split, or None where its subtree cannot run stacked."""
    key = ("stacked", node.task, node.level)
    if key in cache:
        return cache[key]
    entry = None
    if node.kind != PlanKind.SPLIT:
        entry = _LEAF
    elif ((node.reduce in _HERE or isinstance(node.reduce, ExtensionReduction))
          and all(o is None for o in position_axes(node.task, access_map(node.task)))):
        calls = [(child, ins, outs, first) for child, ins, outs, _, first in child_calls(plan, node)]
        groups: dict = {}
        for i, (child, *_) in enumerate(calls):
            groups.setdefault((child.task, child.level), (child, []))[1].append(i)
        seen: dict = {}
        steps: list = []
        for i, (_, _, outs, _) in enumerate(calls):
            region = tuple((s.start, s.stop) for sl in outs for s in sl)
            k = seen[region] = seen.get(region, -1) + 1
            if k == len(steps):
                steps.append([])
            steps[k].append(i)
        if all(_entry(plan, child, cache) is not None for child, _ in groups.values()):
            entry = _Split(calls, list(groups.values()), steps, node.reduce)
    cache[key] = entry
    return entry


def run_extension_node(plan: Plan, node: NodePlan, inputs: list[np.ndarray],
                       cache: dict | None = None) -> list[np.ndarray] | None:
    """The outputs of a split node's extension task, its leaves run stacked; None where the node
    cannot run so. `cache` keeps each node's calls, as `compiler.execute.run_node`'s does."""
    cache = {} if cache is None else cache
    if node.kind != PlanKind.SPLIT or _entry(plan, node, cache) is None:
        return None
    task = node.task
    if _concatenates(task.spec):
        # every leaf's piece is independent of the others and the leaves' output regions
        # together are the node's outputs: the body run once on the node's operands gives every
        # leaf's values (each element from the same elements, by the same kernels)
        ins = [Operand(np.asarray(x)[None], True) for x in inputs]
        return [r.of(1)[0] for r in run_stacked(task.spec, ins, task.attr, list(task.outputs), 1)]
    outs = _run(plan, node, [Operand(np.asarray(x), False) for x in inputs], 1, cache)
    return [o[0] for o in outs]


def _concatenates(spec) -> bool:
    """Whether every split rule of an extension concatenates its pieces (no reduction, no
    window halo), so that a piece's outputs depend on its own elements only, and its body uses
    no BLAS product (whose float sums can differ in their last bits with the product's shape)."""
    decl = spec.decl
    return (decl is not None and all(s.reduce is None and s.window is None for s in decl.splits)
            and _without_blas(spec))


def _without_blas(spec) -> bool:
    return all(i.opcode not in ("matmul", "conv2d") and
               (spec.table[i.opcode].decl is None or _without_blas(spec.table[i.opcode]))
               for i in spec.decl.body)


def _run(plan: Plan, node: NodePlan, ins: list[Operand], n: int, cache: dict) -> list[np.ndarray]:
    """The outputs of n calls of `node`'s task, stacked."""
    entry = _entry(plan, node, cache)
    task = node.task
    if entry is _LEAF:
        results = run_stacked(task.spec, ins, task.attr, list(task.outputs), n)
        return [r.of(n) for r in results]
    outs = [np.zeros((n,) + t.shape, NP_DTYPES[t.dtype]) for t in task.outputs]
    results: list = [None] * len(entry.calls)
    for child, numbers in entry.groups:
        m = len(numbers)
        child_ins = []
        for k, x in enumerate(ins):
            slices = [entry.calls[i][1][k] for i in numbers]
            if not x.stacked and all(s == slices[0] for s in slices):
                child_ins.append(Operand(x.value[slices[0]], False))
            elif not x.stacked:                     # call-major: call j of instance i at j*n+i
                parts = np.stack([x.value[s] for s in slices])
                child_ins.append(Operand(np.repeat(parts, n, axis=0) if n > 1 else parts, True))
            else:
                parts = np.stack([x.value[(slice(None),) + s] for s in slices])
                child_ins.append(Operand(parts.reshape((m * n,) + parts.shape[2:]), True))
        got = _run(plan, child, child_ins, m * n, cache)
        got = [g.reshape((m, n) + g.shape[1:]) for g in got]
        for j, i in enumerate(numbers):
            results[i] = [g[j] for g in got]
    g = entry.reduce
    every = (slice(None),)
    for step in entry.steps:
        combine = []
        for i in step:
            _, _, out_slices, first = entry.calls[i]
            if first or g is None:
                for o, s, r in zip(outs, out_slices, results[i]):
                    o[every + s] = r
            elif g == Reduction.ADD:
                outs[0][every + out_slices[0]] += results[i][0]
            elif g == Reduction.MAX:
                where = every + out_slices[0]
                outs[0][where] = np.maximum(outs[0][where], results[i][0])
            else:
                combine.append(i)
        if combine:
            _combine(task.spec.table[g.name], outs, entry.calls, combine, results, n)
    return outs


def _combine(spec, outs: list, calls: list, numbers: list, results: list, n: int) -> None:
    """The reduction instruction `spec` run on what the output regions of `numbers` hold and
    those calls' results, stacked, per shape of region; the combined values put back."""
    every = (slice(None),)
    by_shape: dict = {}
    for i in numbers:
        shape = tuple(o[every + s].shape for o, s in zip(outs, calls[i][2]))
        by_shape.setdefault(shape, []).append(i)
    for numbers in by_shape.values():
        c = len(numbers)

        def stack(arrays):
            parts = np.stack(arrays)
            return Operand(parts.reshape((c * n,) + parts.shape[2:]), True)
        current = [stack([o[every + calls[i][2][k]] for i in numbers]) for k, o in enumerate(outs)]
        partial = [stack([results[i][k] for i in numbers]) for k in range(len(outs))]
        types = [TensorType(dtype_name(x.value.dtype), x.shape()) for x in current]
        combined = run_stacked(spec, current + partial, {}, types, c * n)
        for k, (o, r) in enumerate(zip(outs, combined)):
            r = r.of(c * n).reshape((c, n) + r.shape())
            for j, i in enumerate(numbers):
                o[every + calls[i][2][k]] = r[j]


# ---------------------------------------------------------------- a body on a stack of calls

def run_stacked(spec, ins: list[Operand], attrs: dict, out_types: list, n: int) -> list[Operand]:
    """One opcode-table entry (core or extension) run for n calls at once: per destination, the
    value each call's leaf kernel (or the extension's body on the leaf kernels) gives."""
    if spec.decl is None:
        return [_core(spec.name, ins, attrs, out_types[0], n)]
    decl, n_out = spec.decl, spec.outputs
    types = tuple(out_types) + tuple(TensorType(dtype_name(x.value.dtype), x.shape()) for x in ins)
    pieces = list(leaf_pieces(decl, types))
    if len(pieces) == 1:
        piece, _ = pieces[0]
        return _body(spec, piece, ins, attrs, n)
    outs = [np.zeros((n,) + t.shape, NP_DTYPES[t.dtype]) for t in out_types]
    every = (slice(None),)
    for piece, slices in pieces:
        feeds = [Operand(x.value[every + s], True) if x.stacked else Operand(x.value[s], False)
                 for x, s in zip(ins, slices[n_out:])]
        for out, s, r in zip(outs, slices, _body(spec, piece, feeds, attrs, n)):
            out[every + s] = r.value if r.stacked else r.value[None]
    return [Operand(o, True) for o in outs]


def _body(spec, piece: tuple, ins: list[Operand], attrs: dict, n: int) -> list[Operand]:
    """An extension's body instantiated for one piece, run on the stack (`run_program`'s steps)."""
    decl, n_out = spec.decl, spec.outputs
    program = spec.body(piece[:n_out], piece[n_out:], attrs)
    types = program.types
    env: dict[str, Operand] = {}
    fed = dict(zip((o.name for o in decl.inputs), ins))
    for t in program.tensors:
        dt = NP_DTYPES[t.type.dtype]
        if t.role in ("input", "param"):
            x = fed[t.name]
            env[t.name] = x if x.value.dtype == dt else Operand(x.value.astype(dt), x.stacked)
        else:
            env[t.name] = Operand(np.zeros(t.type.shape, dt), False)
    table = spec.table
    for instr in program.instructions:
        sub = table[instr.opcode]
        dsts, srcs = instr.operands[:sub.outputs], instr.operands[sub.outputs:]
        want = [types[d] for d in dsts]
        try:
            values = run_stacked(sub, [env[s] for s in srcs], sub.full_attrs(instr.attr), want, n)
        except UserError as e:
            if e.where is None:
                e.where = instr.loc or f"instruction '{instr.to_text()}'"
            if e.source_line is None and e.where == instr.loc:
                e.source_line = program.source_line(instr.loc)
            raise
        for dst, w, v in zip(dsts, want, values):
            if v.shape() != w.shape or v.value.dtype != NP_DTYPES[w.dtype]:
                raise InternalError("a stacked result matches the destination type",
                                    instr.to_text(), f"got {v.value.dtype}{list(v.shape())}, "
                                    f"destination is {w}")
            env[dst] = v
    return [env[o.name] for o in decl.outputs]


#: opcodes computed along one axis (attribute `axis`), row by row
_ALONG_AXIS = ("reduce_sum", "reduce_max", "reduce_mean", "argmax", "argmin")
#: opcodes computed along the last axis, row by row, from one source
_ALONG_LAST = ("sort", "argsort", "count")
#: elementwise opcodes of sources of any rank, broadcast
_BROADCAST = set(ELEMENTWISE) | {"where", "cast"}


def _core(op: str, ins: list[Operand], attrs: dict, t: TensorType, n: int) -> Operand:
    """A core opcode on a stack of n calls."""
    if not any(x.stacked for x in ins):
        return Operand(LEAF_KERNELS[op]([x.value for x in ins], attrs, t), False)
    rank = len(t.shape)
    stacked = TensorType(t.dtype, (n,) + t.shape)
    if op in _BROADCAST:
        aligned = [x.value.reshape((n,) + (1,) * (rank - x.value.ndim + 1) + x.shape())
                   if x.stacked else x.value for x in ins]
        if op in ELEMENTWISE:
            fast = _elementwise(op, aligned, stacked)
            if fast is not None:
                return Operand(fast, True)
        return Operand(LEAF_KERNELS[op](aligned, attrs, stacked), True)
    if op == "matmul":                              # A along the calls' axis too: a call's
        a, b = ins                                  # product never reaches into another's
        a = a.value.reshape((n,) + (1,) * (rank - len(a.shape())) + a.shape()) if a.stacked \
            else np.broadcast_to(a.value, (n,) + (1,) * (rank - a.value.ndim) + a.value.shape)
        b = b.value.reshape((n,) + (1,) * (rank - len(b.shape())) + b.shape()) if b.stacked else b.value
        return Operand(LEAF_KERNELS[op]([a, b], attrs, stacked), True)
    x = ins[0]
    if op in _ALONG_AXIS and len(ins) == 1:
        axis = attrs["axis"] % len(x.shape()) + 1
        return Operand(LEAF_KERNELS[op]([x.value], dict(attrs, axis=axis), stacked), True)
    if op in _ALONG_LAST:
        return Operand(LEAF_KERNELS[op]([x.value], attrs, stacked), True)
    if op in ("reshape", "copy"):
        return Operand(np.asarray(x.value, NP_DTYPES[t.dtype]).reshape(stacked.shape), True)
    if op == "transpose":
        perm = (0,) + tuple(p % len(x.shape()) + 1 for p in attrs["perm"])
        return Operand(np.asarray(np.transpose(x.value, perm), NP_DTYPES[t.dtype]), True)
    if op in ("slice", "concat") and all(v.stacked for v in ins):
        axis = attrs["axis"] % len(x.shape()) + 1
        return Operand(LEAF_KERNELS[op]([v.value for v in ins], dict(attrs, axis=axis), stacked), True)
    # no stacked form: each call's leaf kernel in turn
    return Operand(np.stack([LEAF_KERNELS[op]([v.value[i] if v.stacked else v.value for v in ins],
                                              attrs, t) for i in range(n)]), True)


#: the least elements of a one-source f32 opcode (exp, erf, ...: 5 to 13 ns an element on one
#: core) computed in parts on the host's threads, about 0.2 ms of work
PARALLEL_ELEMENTS = 1 << 15
_F32 = np.dtype(np.float32)


def _elementwise(op: str, aligned: list[np.ndarray], t: TensorType) -> np.ndarray | None:
    """An elementwise opcode on float data in one pass over the whole stack, the sources
    right-aligned against the destination: f32 arithmetic by numpy's ufuncs, an f32 opcode of
    one source by `unary_k` on the host's threads, others through the opcode's leaf batch; None
    where that batch does not take these shapes (more than 4 dimensions that cannot be merged)."""
    shape = t.shape
    if t.dtype == "f32" and all(x.dtype == _F32 for x in aligned):
        if op in F32_UFUNCS:
            out = np.empty(shape, _F32)
            with np.errstate(all="ignore"):
                F32_UFUNCS[op](*aligned, out=out)
            return out
        if op in ("min", "max"):                    # X on ties, NaN if either is: the kernels' rule
            x, y = aligned
            with np.errstate(invalid="ignore"):
                keep = (x <= y if op == "min" else x >= y) | (x != x)
            return np.ascontiguousarray(np.broadcast_to(np.where(keep, x, y), shape))
        if len(aligned) == 1 and aligned[0].shape == shape:
            x = np.ascontiguousarray(aligned[0]).reshape(-1)
            out = np.empty(shape, _F32)
            if op == "erf":                         # the same values, sooner (erf32)
                _parallel(erf32_parts, (x, out.reshape(-1)), x.size, PARALLEL_ELEMENTS)
            else:
                _parallel(unary_k, (ELEMENTWISE.index(op), x, out.reshape(-1)), x.size,
                          PARALLEL_ELEMENTS)
            return out
    full = [(1,) * (len(shape) - x.ndim) + x.shape for x in aligned]
    dims = _merged(shape, full)
    if dims is None:
        return None
    out_shape = tuple(int(np.prod(shape[lo:hi])) for lo, hi in dims)
    ins = [np.ascontiguousarray(x).reshape(tuple(int(np.prod(f[lo:hi])) for lo, hi in dims))
           for x, f in zip(aligned, full)]
    out = np.empty(out_shape, NP_DTYPES[t.dtype])
    row = [b for x in (*ins, out) for e in x.shape for b in (0, e)] + [1]
    LEAF_BATCH_KERNELS[op](ins, {}, np.array([row], np.int64), out)
    return out.reshape(shape)


def _merged(shape: tuple, full: list) -> list | None:
    """Runs of consecutive dimensions (lo, hi) that every source reads whole or broadcasts
    whole, at most 4 of them; None where more are needed."""
    dims: list = []
    for d, e in enumerate(shape):
        kinds = None if e == 1 else tuple(f[d] == e for f in full)
        if dims and kinds is None:                  # extent 1: joins any run
            dims[-1] = (dims[-1][0], d + 1, dims[-1][2])
        elif dims and dims[-1][2] is None:
            dims[-1] = (dims[-1][0], d + 1, kinds)
        elif dims and dims[-1][2] == kinds:
            dims[-1] = (dims[-1][0], d + 1, kinds)
        else:
            dims.append((d, d + 1, kinds))
    if len(dims) > 4:
        return None
    return [(lo, hi) for lo, hi, _ in dims]
