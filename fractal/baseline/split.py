"""The data-parallel split of a program over the GPUs of a system (a DGX-1).

The batch is the leading dimension of the program's `input` tensors: B is the largest leading
dimension among them, and the inputs with that leading dimension start in slices of about
B / gpus rows on every GPU; params, and inputs without that dimension, start replicated on every
GPU (data-parallel inference: every GPU holds the weights).

Each tensor is then either *split* along one axis (its batch axis, which instructions carry along:
a transpose moves it, a reduction over another axis keeps it) or *whole*. An instruction runs
*split* when its rule says how its results follow from slices of its batched sources; every GPU
then runs it on its share (the slowest GPU has ceil(B / gpus) rows). The rule of every opcode
with an access map (every compute opcode and every extension instruction, `compiler.rules`) is
read off the map, the same one the compiler splits by:

- the batch dimensions of the batched sources must all read one iteration axis `a` directly
  (`plain`): a batch dimension read through a window (the H of a conv2d), whole (the C of an lrn,
  an extension size no split rule names) or broadcast, or batched sources on different axes (a
  matmul with A split on M and B on N), cannot split; nor can an axis that is unsplittable, whose
  reduction merges sorted runs (a sort or argsort along the batch), or whose least extent per
  part is more than a GPU's share (an extension's `min`: a topk of K needs K values per part);
- every other source that reads `a` (through one `plain` dimension) is read in slices along it
  (a whole column as long as the batch in an add, the weights of a matmul whose K is the
  batch); a source that does not read `a` (a bias row, the weights of a matmul on M) is read
  whole;
- when `a` is not a reduction axis, each destination's batch axis is its dimension on `a`;
- when `a` is a reduction axis (a sum, a max, an argmax over the batch, a matmul contracting it,
  the C of a conv2d, an extension's `reduce` split), every destination is whole and the GPUs'
  partial results are all-reduced (the all-reduce is charged the destinations' bytes: for an
  argmax or argmin, those of the indices).

The data-movement opcodes, which have no access map, keep rules of their own: a transpose moves
the axis, a reshape keeps it when each batch element's rows stay together (the axes before the
batch axis kept, the batch folded with the axes after it, as a transformer folds batch and tokens
into rows, or unfolded again), a slice or concat keeps it when they cut or join along another
axis, a copy keeps it, a gather keeps it off its last axis. A batch axis holds a multiple of the
batch, and a GPU its share of the batch's elements.

Whole sources that only GPU 0 holds are broadcast first. An instruction whose sources every GPU
holds whole (a transpose of a weight) runs *replicated*: every GPU runs it whole and holds its
results, with no transfer. Any other instruction runs *single*: its split sources are gathered to
GPU 0, which runs it whole and keeps its results.
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


def _shrink(t: TensorType, axis: int | None, batch: int, share: int) -> TensorType:
    """`t` as one GPU holds it: `share` of the `batch` elements along its batch axis, whose
    size is a multiple of the batch (the batch, or batch x tokens where a reshape folded them)."""
    if axis is None:
        return t
    return TensorType(t.dtype, t.shape[:axis] + (t.shape[axis] // batch * share,)
                      + t.shape[axis + 1:])


def _rule(task, axes, used: int, batch: int):
    """(batch axis of each destination, whether partial results are all-reduced, the batch axis
    of each source as the GPU reads it), or None when the instruction cannot run split; `axes`
    are the sources' batch axes (None: whole), `used` the GPUs sharing the batch."""
    # lazy: the compiler loads numpy (~0.2 s), and `fractal baseline gpus` needs none of it
    from compiler.rules import MERGES, DimKind, access_map
    amap = access_map(task)
    if amap is None:
        return _move_rule(task, axes, batch)
    outs = len(task.outputs)
    sources = amap.operands[outs:]
    got = {dims[b].axis if dims[b].kind == DimKind.PLAIN else None
           for dims, b in zip(sources, axes) if b is not None}
    if len(got) != 1 or None in got:
        return None                      # a window, whole or broadcast batch dim; or two axes
    a = got.pop()
    axis = amap.axes[a]
    if not axis.splittable or axis.reduce in MERGES or used * axis.least > axis.size:
        return None

    def on_a(dims) -> list[int]:
        return [i for i, d in enumerate(dims)
                if d.kind in (DimKind.PLAIN, DimKind.WINDOW) and d.axis == a]

    reads = []
    for dims, b in zip(sources, axes):
        found = on_a(dims)
        if b is not None and found != [b]:
            return None                  # the batch dim is not the only one reading the axis
        if b is None and found and (len(found) > 1 or dims[found[0]].kind != DimKind.PLAIN
                                    or dims[found[0]].size != axis.size):
            return None                  # a whole source read along the axis but not in slices
        reads.append(found[0] if found else None)
    dests = [on_a(dims) for dims in amap.operands[:outs]]
    if axis.reduce is not None:          # partial results, combined element-wise (or by the
        if any(dests):                   # extension's reduction instruction) across the GPUs
            return None
        return [None] * outs, True, reads
    if any(len(d) != 1 for d in dests):
        return None
    return [d[0] for d in dests], False, reads


def _move_rule(task, axes, batch: int):
    """The rule of a data-movement opcode (one without an access map)."""
    name, outs, ins, attrs = task.opcode, task.outputs, task.inputs, task.attr
    b = axes[0]
    if name == "transpose":
        return [list(attrs["perm"]).index(b)], False, axes
    if name == "reshape":                # each batch element's rows stay together: the axes
        src, dst = ins[0].shape, outs[0].shape      # before it are kept, and the axis that
        for c in range(len(dst)):                   # takes it holds a multiple of the batch
            if math.prod(dst[:c]) == math.prod(src[:b]) and dst[c] % batch == 0:
                return [c], False, axes
        return None
    if name == "slice":
        return None if normalize_axis(attrs["axis"], ins[0].rank) == b else ([b], False, axes)
    if name == "concat":
        if (b is None or any(a != b for a in axes)
                or normalize_axis(attrs["axis"], outs[0].rank) == b):
            return None
        return [b], False, axes
    if name == "copy":
        return [b], False, axes
    if name == "gather":                 # rows of the source and the indices go together
        got = {a for a in axes if a is not None}
        b = got.pop() if len(got) == 1 else None
        if b is None or b == ins[0].rank - 1:
            return None
        return [b], False, [b] * len(ins)    # a whole source is read in rows like the other
    raise AssertionError(f"no batch rule for the data-movement opcode {name}")


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
    # lazy: the compiler loads numpy (~0.2 s), and `fractal baseline gpus` needs none of it
    from compiler.rules import task_of
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
            rule = _rule(task_of(ins, types, table), s_axes, used, batch)
        if rule is not None:
            d_axes, combine, reads = rule
            bcast = {n for n, a in zip(srcs, s_axes) if a is None and n not in replicated}
            replicated |= bcast
            one = tuple(_shrink(t, a, batch, share)
                        for t, a in zip(d_types + s_types, list(d_axes) + list(reads)))
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
