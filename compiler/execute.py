"""A numpy executor of a plan: proves a decomposition right, independently of any timing model.

Every node walks its serial pieces and, in each, its children's parts exactly as the plan cut
them: a child receives copies of its operand regions (with its own border padding), runs its own
plan, and the node combines what comes back, by placing it (regular splits) or by the reduction g
(add, max, argmax/argmin reading the node's copy of the source, merge of sorted runs). Leaves run
`leaf_fn`, the reference semantics unless a caller passes its own kernels.

A caller may also pass `batch`: per opcode, a function that runs all the leaf children of one node
in a single call, `batch[opcode](inputs, attrs, tiles, out)`. Row i of the int64 array `tiles`
holds the (start, stop) of every dimension of every input region of leaf call i, then those of its
output region, then 1 where the call brings the first partial of that region; the function computes
each call from its own regions, storing the first partial and adding the others (g=add) into
`out`. The rows of one output region are consecutive and in the plan's order; distinct regions
are disjoint, so they may be computed in parallel. It is used only where that is exactly what the node does.
A node whose split children are themselves such batches lists all the leaves below it, their
regions moved into its own coordinates, so that one call computes the whole subtree: a leaf brings
the first partial of its region when it does in its parent and its parent does here. The partials
of a region are then added one by one into the node's output, in the plan's order, where the
per-leaf path sums each child's partials before adding them (the same terms; float sums may differ
in the last place).
"""
from __future__ import annotations

import numpy as np

from compiler.plan import NodePlan, Plan, PlanKind
from compiler.rules import MERGES, Reduction, access_map, sub_task
from compiler.schedule import Schedule
from isa.errors import UserError
from isa.program import TensorType
from isa.reference import NP_DTYPES, SEMANTICS, dtype_name, semantics_of

__all__ = ["execute_plan", "run_node", "merge_runs", "child_calls", "position_axes"]


def _leaf(task, inputs, leaf_fn) -> list[np.ndarray]:
    out = semantics_of(task.spec, leaf_fn)(inputs, task.attr,
                                           list(task.outputs) if task.ext else task.outputs[0])
    return list(out) if isinstance(out, tuple) else [out]


def child_calls(plan: Plan, node: NodePlan) -> list:
    """Every child call of a split node, in the order of its piece schedule: (child plan, input
    slices, output slices, starts per axis, whether it brings the first partial of its output
    region)."""
    schedule = Schedule.of(node, plan.machine.levels[node.level].broadcast)
    n_out = node.task.spec.outputs
    calls = []
    for starts, extents, first in schedule.calls():
        child_task, regions = sub_task(node.task, schedule.amap, starts, extents)
        slices = [tuple(slice(lo, hi) for lo, hi in reg) for reg in regions]
        calls.append((plan.node(child_task, node.level + 1), slices[n_out:], slices[:n_out],
                      starts, first))
    return calls


def position_axes(task, amap) -> list:
    """Per output: the axis whose start a child's positions are relative to, or None."""
    return list(amap.positions) or [None] * task.spec.outputs


def _tiles(plan: Plan, node: NodePlan, calls: list, offsets: list, batch: dict | None,
           cache: dict) -> np.ndarray | None:
    """The tile table of a node whose leaves all run `batch[opcode]`, else None: one row per leaf
    below the node, in the node's coordinates, grouped by output region in plan order."""
    task = node.task
    if (not batch or task.opcode not in batch or task.ext or node.reduce not in (None, Reduction.ADD)
            or len(offsets) != 1 or offsets[0] is not None):
        return None
    n_out = 2 * len(calls[0][2][0])
    rows = []
    leaves_of = {}                          # a node-level output region -> its leaf regions
    for child, in_slices, out_slices, _, first in calls:
        bounds = [b for s in in_slices + out_slices for sl in s for b in (sl.start, sl.stop)]
        if child.kind != PlanKind.SPLIT:
            part = np.array([bounds + [first]], np.int64)
        else:
            below = _entry(plan, child, cache, batch)[3]
            if below is None:
                return None
            shift = [sl.start for s in in_slices + out_slices for sl in s for _ in (0, 1)]
            part = below[0] + np.array(shift + [0], np.int64)
            if not first:
                part[:, -1] = 0
        regions = {tuple(r) for r in part[:, -1 - n_out:-1].tolist()}
        # the partials of one region must be cut alike, or their leaf regions would overlap
        if leaves_of.setdefault(tuple(bounds[-n_out:]), regions) != regions:
            return None
        rows.append(part)
    region: dict = {}
    for row in np.concatenate(rows).tolist():   # grouped by output region, in plan order in each
        region.setdefault(tuple(row[-1 - n_out:-1]), []).append(row)
    return np.array([row for group in region.values() for row in group], np.int64)


def _entry(plan: Plan, node: NodePlan, cache: dict, batch: dict | None) -> tuple:
    """A split node's child calls, position offsets, reduction axis, and its batch tile tables
    (one placing the first partials, one adding every call to what is there), or None."""
    key = (node.task, node.level)
    if key not in cache:
        amap = access_map(node.task)
        red = [a for a, ax in enumerate(amap.axes) if ax.reduce]
        calls, offsets = child_calls(plan, node), position_axes(node.task, amap)
        tiles = _tiles(plan, node, calls, offsets, batch, cache)
        if tiles is not None:
            adding = tiles.copy()
            adding[:, -1] = 0
            tiles = (tiles, adding)
        cache[key] = (calls, offsets, red[0] if red else -1, tiles)
    return cache[key]


def run_node(plan: Plan, node: NodePlan, inputs: list[np.ndarray], leaf_fn=SEMANTICS,
             cache: dict | None = None, batch: dict | None = None) -> list[np.ndarray]:
    """The outputs of one node's task for the given input arrays. `cache` keeps each distinct
    node's child calls, which identical tasks at the same level share."""
    task = node.task
    if node.kind != PlanKind.SPLIT:
        return _leaf(task, inputs, leaf_fn)
    cache = {} if cache is None else cache
    calls, offsets, ax, tiles = _entry(plan, node, cache, batch)
    if tiles is not None:                   # the leaves' first partials cover the output
        out = np.empty(task.outputs[0].shape, NP_DTYPES[task.outputs[0].dtype])
        batch[task.opcode](inputs, task.attr, tiles[0], out)
        return [out]
    outs = [np.zeros(t.shape, NP_DTYPES[t.dtype]) for t in task.outputs]
    g = node.reduce
    run_bounds = set()
    for child, in_slices, out_slices, starts, first in calls:
        child_inputs = [x[s] for x, s in zip(inputs, in_slices)]
        if g in (None, Reduction.ADD) and child.kind == PlanKind.SPLIT and offsets == [None]:
            child_tiles = _entry(plan, child, cache, batch)[3]
            if child_tiles is not None:     # its leaves add into (or place in) this output
                batch[child.task.opcode](child_inputs, child.task.attr,
                                   child_tiles[0 if first or g is None else 1],
                                   outs[0][out_slices[0]])
                continue
        results = run_node(plan, child, child_inputs, leaf_fn, cache, batch)
        results = [r if a is None else r + np.int32(starts[a]) for r, a in zip(results, offsets)]
        where = out_slices[0]
        if first or g is None or g in MERGES:
            for o, s, r in zip(outs, out_slices, results):
                o[s] = r
            if g in MERGES:
                run_bounds.add(starts[ax])
        elif g == Reduction.ADD:
            outs[0][where] += results[0]
        elif g == Reduction.MAX:
            outs[0][where] = np.maximum(outs[0][where], results[0])
        elif g in (Reduction.ARGMAX, Reduction.ARGMIN):
            outs[0][where] = _pick(inputs[0], where, outs[0][where], results[0], ax, g)
        else:                                   # an extension's reduction instruction
            spec = task.spec.table[g.name]
            current = [o[s] for o, s in zip(outs, out_slices)]
            combined = semantics_of(spec, leaf_fn)(current + results, {},
                                                   [_type(c) for c in current])
            for o, s, r in zip(outs, out_slices, combined if isinstance(combined, tuple) else (combined,)):
                o[s] = r
    if g in MERGES and len(run_bounds) > 1:
        keys = np.take_along_axis(inputs[0], outs[0], -1) if g == Reduction.ARGMERGE else outs[0]
        outs[0] = merge_runs(outs[0], sorted(run_bounds), keys)
    return outs


def _type(x: np.ndarray) -> TensorType:
    return TensorType(dtype_name(x.dtype), tuple(x.shape))


def _pick(source, where, best, cand, axis, g):
    """Keep, per element, the index whose source value wins; ties keep the earlier position, so
    partials may be combined in any order (children keep theirs across serial pieces)."""
    src = source[where[:axis] + (slice(None),) + where[axis:]]
    bv = np.take_along_axis(src, np.expand_dims(best, axis), axis).squeeze(axis)
    cv = np.take_along_axis(src, np.expand_dims(cand, axis), axis).squeeze(axis)
    better = cv > bv if g == Reduction.ARGMAX else cv < bv
    better |= (cv == bv) & (cand < best)      # ties keep the earlier position, in any order
    return np.where(better, cand, best)


def _merge_two(a, b):
    """Stable merge of two runs, each (values, keys) sorted by key along the last axis; a's
    elements come first on equal keys."""
    (va, ka), (vb, kb) = a, b
    lead = ka.shape[:-1]
    ka2, kb2 = ka.reshape(-1, ka.shape[-1]), kb.reshape(-1, kb.shape[-1])
    va2, vb2 = va.reshape(ka2.shape), vb.reshape(kb2.shape)
    n = ka2.shape[1] + kb2.shape[1]
    values, keys = np.empty((ka2.shape[0], n), va.dtype), np.empty((ka2.shape[0], n), ka.dtype)
    ia, ib = np.arange(ka2.shape[1]), np.arange(kb2.shape[1])
    for r in range(ka2.shape[0]):
        pa = ia + np.searchsorted(kb2[r], ka2[r], side="left")
        pb = ib + np.searchsorted(ka2[r], kb2[r], side="right")
        values[r, pa], values[r, pb] = va2[r], vb2[r]
        keys[r, pa], keys[r, pb] = ka2[r], kb2[r]
    return values.reshape(lead + (n,)), keys.reshape(lead + (n,))


def merge_runs(x: np.ndarray, bounds: list[int], keys: np.ndarray | None = None) -> np.ndarray:
    """Merge the runs of x that start at `bounds` along the last axis, pairwise; each run is
    sorted by `keys` (x itself by default)."""
    keys = x if keys is None else keys
    edges = list(bounds) + [x.shape[-1]]
    runs = [(x[..., lo:hi], keys[..., lo:hi]) for lo, hi in zip(edges, edges[1:])]
    while len(runs) > 1:
        runs = [_merge_two(runs[i], runs[i + 1]) if i + 1 < len(runs) else runs[i]
                for i in range(0, len(runs), 2)]
    return runs[0][0]


def _own(value, inputs: list) -> np.ndarray:
    """An instruction's output as a C-contiguous array of its own: copied unless it is one
    already that shares no memory with the instruction's inputs (a node's fresh result)."""
    v = np.asarray(value)
    if v.flags.c_contiguous and v.flags.writeable and not any(
            np.may_share_memory(v, x) for x in inputs):
        return v
    return np.array(v, order="C")


def execute_plan(plan: Plan, feeds: dict[str, np.ndarray], leaf_fn=SEMANTICS,
                 batch: dict | None = None, cache: dict | None = None,
                 extension=None, watch=None) -> dict[str, np.ndarray]:
    """Run a whole program's plan; return its output tensors. `cache`, a dict passed again to
    later runs of the same plan with the same `batch`, keeps every node's child calls and tile
    tables between runs. `extension(plan, root, inputs, cache)`, if given, runs an extension
    instruction's root in its own way and returns its outputs, or None to leave it to
    `run_node`. `watch(instruction, values)`, if given, sees each instruction's results."""
    program = plan.program
    env = {k: np.asarray(v) for k, v in feeds.items()}
    env.update({t.name: np.zeros(t.type.shape, NP_DTYPES[t.type.dtype])
                for t in program.tensors if t.name not in env})
    cache = {} if cache is None else cache
    for ins, root in zip(program.instructions, plan.roots):
        n_out = root.task.spec.outputs
        inputs = [env[n] for n in ins.operands[n_out:]]
        try:
            values = (extension(plan, root, inputs, cache)
                      if extension is not None and root.task.ext else None)
            if values is None:
                values = run_node(plan, root, inputs, leaf_fn, cache, batch)
        except UserError as e:              # bad data (a gather index): say which instruction
            if e.where is None:
                e.where, e.source_line = ins.loc, program.source_line(ins.loc)
            raise
        for name, value in zip(ins.operands[:n_out], values):
            env[name] = _own(value, inputs)
        if watch is not None:
            watch(ins, [env[name] for name in ins.operands[:n_out]])
    return {t.name: env[t.name] for t in program.outputs}
