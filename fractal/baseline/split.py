"""The data-parallel split of a program over the GPUs of a system (a DGX-1).

The batch is the leading dimension of the program's `input` tensors: B is the largest leading
dimension among them, and the inputs with that leading dimension start in slices of about
B / gpus rows on every GPU; params, and inputs without that dimension, start replicated on every
GPU (data-parallel inference: every GPU holds the weights).

Each tensor is then either *split* along one axis (its batch axis, which instructions carry along:
a transpose moves it, a reduction over another axis keeps it) or *whole*. An instruction runs
*split* when the rule of its opcode says how its results follow from slices of its batched
sources; every GPU then runs it on its share (the slowest GPU has ceil(B / gpus) rows). Whole
sources it needs are broadcast first if only GPU 0 holds them; an instruction that reduces the
batch axis itself (a sum over the batch, a matmul whose K is the batch) all-reduces its partial
results. An instruction whose sources every GPU holds whole (a transpose of a weight) runs
*replicated*: every GPU runs it whole and holds its results, with no transfer. Any other
instruction runs *single*: its split sources are gathered to GPU 0, which runs it whole and keeps
its results.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from isa.opcodes import normalize_axis
from isa.program import Program, TensorType

__all__ = ["Step", "batch_size", "split_program"]


@dataclass(frozen=True)
class Step:
    """How one instruction runs on the system."""
    mode: str                       # "split": every used GPU runs a share of the batch;
                                    # "replicated": every used GPU runs it whole on sources all
                                    # of them hold (no transfers); "single": GPU 0 alone
    types: tuple[TensorType, ...]   # operand types (destinations first) one GPU works on
    gather_bytes: int = 0           # split sources sent to GPU 0 before a single instruction
    broadcast_bytes: int = 0        # whole tensors sent from GPU 0 to every GPU before it runs
    allreduce_bytes: int = 0        # partial results combined across the GPUs after it


def batch_size(program: Program) -> int | None:
    """The largest leading dimension of the program's input tensors (None without inputs)."""
    dims = [t.type.shape[0] for t in program.inputs if t.type.rank >= 1]
    return max(dims) if dims else None


def _shrink(t: TensorType, axis: int | None, share: int) -> TensorType:
    if axis is None:
        return t
    return TensorType(t.dtype, t.shape[:axis] + (share,) + t.shape[axis + 1:])


def _same(axes) -> int | None:
    """The one axis all batched sources share, or None (they disagree, or none is batched)."""
    got = {a for a in axes if a is not None}
    return got.pop() if len(got) == 1 else None


def _rule(spec, outs, ins, attrs, axes, batch):
    """(batch axis of each destination, whether partial results are all-reduced, the batch axis
    of each source as the GPU reads it), or None when the instruction cannot run split."""
    name = spec.name
    if spec.decl is not None:
        return _extension_rule(spec.decl, outs, ins, axes)
    if name in ("matmul", "conv2d", "eucdist"):
        x, w = axes
        keep_w = 1 if name == "matmul" else 0          # the axis of the second operand kept in the result
        if x == 0 and w is None:
            return [0], False, axes
        if x is None and w == keep_w:
            return [1], False, axes
        if name != "conv2d" and x == 1 and w == (0 if name == "matmul" else 1):
            return [None], True, axes                  # the contracted axis: partial sums
        return None
    if name in ("reduce_sum", "reduce_max", "argmax", "argmin", "count"):
        b = axes[0]
        ax = ins[0].rank - 1 if name == "count" else normalize_axis(attrs["axis"], ins[0].rank)
        if b == ax:
            return [None], True, axes
        return [b if b < ax else b - 1], False, axes
    if name in ("sort", "argsort", "mergepos", "gather"):
        b = _same(axes)
        if b is None or b == ins[0].rank - 1 or any(a not in (None, b) for a in axes):
            return None
        return [b], False, [b] * len(ins)        # whole sources are read in rows like the rest
    if name in ("maxpool", "avgpool", "lrn"):
        b = axes[0]
        ok = (0, 1) if name != "lrn" else (0, 2, 3)     # windows cross H, W (pooling) or C (lrn)
        return ([b], False, axes) if b in ok else None
    if name == "transpose":
        return [list(attrs["perm"]).index(axes[0])], False, axes
    if name == "reshape":
        b, src, dst = axes[0], ins[0].shape, outs[0].shape
        for c in range(len(dst)):
            if dst[c] == src[b] and math.prod(dst[:c]) == math.prod(src[:b]):
                return [c], False, axes
        return None
    if name == "slice":
        b = axes[0]
        return None if normalize_axis(attrs["axis"], ins[0].rank) == b else ([b], False, axes)
    if name == "concat":
        b = axes[0]
        if b is None or any(a != b for a in axes) or normalize_axis(attrs["axis"], outs[0].rank) == b:
            return None
        return [b], False, axes
    # element-wise with numpy broadcasting (and copy): align each source to the result's axes
    rank = outs[0].rank
    aligned = [None if a is None else a + rank - t.rank for a, t in zip(axes, ins)]
    c = _same(aligned)
    if c is None or any(a not in (None, c) for a in aligned):
        return None
    # a whole source that is full-size on the batch axis is read in slices too
    reads = [c - (rank - t.rank) if a is None and c - (rank - t.rank) >= 0
             and t.shape[c - (rank - t.rank)] == batch else a for a, t in zip(axes, ins)]
    return [c], False, reads


def _extension_rule(decl, outs, ins, axes):
    """An extension splits along a size symbol that all its batched sources carry on their batch
    axis and that one of its split rules names: concatenated, or combined by its reduction (no
    window halos)."""
    sources = decl.inputs
    symbols = {sources[i].dims[a] for i, a in enumerate(axes) if a is not None}
    if len(symbols) != 1:
        return None
    sym = symbols.pop()
    rule = next((s for s in decl.splits if s.axis == sym), None)
    if not isinstance(sym, str) or rule is None or rule.window:
        return None
    for o, a in zip(sources, axes):
        if (a is None) == (sym in o.dims) or (a is not None and o.dims.count(sym) != 1):
            return None                        # a whole source would need this axis sliced
    if rule.reduce:
        return [None] * len(outs), True, axes
    dests = [o.dims.index(sym) if sym in o.dims else None for o in decl.outputs]
    if None in dests:
        return None
    return dests, False, axes


def split_program(program: Program, table: dict, gpus: int, element_bytes) -> tuple[int | None, int, list[Step]]:
    """(batch size, GPUs used, one Step per instruction). `element_bytes(dtype)` sizes the data
    the interconnect moves. With one GPU (or no batch to split) every step is single."""
    types = program.types
    batch = batch_size(program)
    used = min(gpus, batch or 1)

    def nbytes(t: TensorType) -> int:
        return t.size * element_bytes(t.dtype)

    if used < 2:
        steps = [Step("single", tuple(types[n] for n in i.operands)) for i in program.instructions]
        return batch, 1, steps
    share = math.ceil(batch / used)
    axis: dict[str, int | None] = {t.name: None for t in program.tensors}
    for t in program.inputs:
        if t.type.rank >= 1 and t.type.shape[0] == batch:
            axis[t.name] = 0
    replicated = {t.name for t in program.tensors
                  if t.role in ("input", "param") and axis[t.name] is None}
    on_gpu0 = {n for n, a in axis.items() if a is None}   # tensors GPU 0 holds whole
    steps = []
    for ins in program.instructions:
        spec = table[ins.opcode]
        dsts, srcs = ins.operands[:spec.outputs], ins.operands[spec.outputs:]
        d_types, s_types = [types[n] for n in dsts], [types[n] for n in srcs]
        s_axes = [axis[n] for n in srcs]
        rule = None
        if any(a is not None for a in s_axes):
            rule = _rule(spec, d_types, s_types, spec.full_attrs(ins.attr), s_axes, batch)
        if rule is not None:
            d_axes, combine, reads = rule
            bcast = {n for n, a in zip(srcs, s_axes) if a is None and n not in replicated}
            replicated |= bcast
            one = tuple(_shrink(t, a, share) for t, a in zip(d_types + s_types, list(d_axes) + list(reads)))
            steps.append(Step("split", one, broadcast_bytes=sum(nbytes(types[n]) for n in bcast),
                              allreduce_bytes=sum(nbytes(t) for t in d_types) if combine else 0))
            for n, a in zip(dsts, d_axes):
                axis[n] = a
                (replicated.add if combine else replicated.discard)(n)
                (on_gpu0.add if combine else on_gpu0.discard)(n)
            continue
        if all(n in replicated for n in srcs):         # every GPU holds every source whole
            steps.append(Step("replicated", tuple(d_types + s_types)))
            for n in dsts:
                axis[n] = None
                replicated.add(n)
                on_gpu0.add(n)
            continue
        gather = {n for n, a in zip(srcs, s_axes) if a is not None and n not in on_gpu0}
        on_gpu0 |= gather
        steps.append(Step("single", tuple(d_types + s_types),
                          gather_bytes=sum(nbytes(types[n]) * (used - 1) // used for n in gather)))
        for n in dsts:
            axis[n] = None
            replicated.discard(n)
            on_gpu0.add(n)
    return batch, used, steps
