"""A numpy executor of a plan: proves a decomposition right, independently of any timing model.

Every node walks its serial pieces and, in each, its children's parts exactly as the plan cut
them: a child receives copies of its operand regions (with its own border padding), runs its own
plan, and the node combines what comes back, by placing it (regular splits) or by the reduction g
(add, max, argmax/argmin reading the node's copy of the source, merge of sorted runs). Leaves run
`leaf_fn`, the reference semantics unless a caller passes its own kernels.
"""
from __future__ import annotations

import itertools

import numpy as np

from compiler.plan import NodePlan, Plan
from compiler.rules import access_map, split_ranges, sub_task
from isa.reference import NP_DTYPES, SEMANTICS

__all__ = ["execute_plan", "run_node", "merge_runs"]


def _leaf(task, inputs, leaf_fn):
    return leaf_fn[task.opcode](inputs, task.attr, task.outputs[0])


def _child_calls(plan: Plan, node: NodePlan) -> list:
    """Every child call of a split node, in order: (child plan, input slices, output slice,
    start along the reduction axis, whether it is the first partial of its output region)."""
    task = node.task
    amap = access_map(task)
    red_axes = [a for a, ax in enumerate(amap.axes) if ax.reduce]
    calls = []
    for piece in itertools.product(*[split_ranges(s.size, s.pieces) for s in node.splits]):
        parts = [[(ps + s, e) for s, e in split_ranges(pe, sp.ways)]
                 for (ps, pe), sp in zip(piece, node.splits)]
        for part in itertools.product(*parts):
            starts = [s for s, _ in part]
            child_task, regions = sub_task(task, amap, starts, [e for _, e in part])
            slices = [tuple(slice(lo, hi) for lo, hi in reg) for reg in regions]
            calls.append((plan.node(child_task, node.level + 1), slices[1:], slices[0],
                          starts[red_axes[0]] if red_axes else 0,
                          all(starts[a] == 0 for a in red_axes), red_axes[0] if red_axes else -1))
    return calls


def run_node(plan: Plan, node: NodePlan, inputs: list[np.ndarray], leaf_fn=SEMANTICS,
             cache: dict | None = None) -> np.ndarray:
    """The output of one node's task for the given input arrays. `cache` keeps each distinct
    node's child calls, which identical tasks at the same level share."""
    task = node.task
    if node.kind != "split":
        return _leaf(task, inputs, leaf_fn)
    cache = {} if cache is None else cache
    key = (task, node.level)
    if key not in cache:
        cache[key] = _child_calls(plan, node)
    out_t = task.outputs[0]
    out = np.zeros(out_t.shape, NP_DTYPES[out_t.dtype])
    g = node.reduce
    run_bounds = set()
    for child, in_slices, where, red_start, first, ax in cache[key]:
        result = run_node(plan, child, [x[s] for x, s in zip(inputs, in_slices)], leaf_fn, cache)
        if g in ("argmax", "argmin"):
            result = result + np.int32(red_start)
            if not first:
                result = _pick(inputs[0], where, out[where], result, ax, g)
        if first or g is None or g == "merge":
            out[where] = result
            if g == "merge":
                run_bounds.add(red_start)
        elif g == "add":
            out[where] += result
        elif g == "max":
            out[where] = np.maximum(out[where], result)
        else:
            out[where] = result
    if g == "merge" and len(run_bounds) > 1:
        out = merge_runs(out, sorted(run_bounds))
    return out


def _pick(source, where, best, cand, axis, g):
    """Keep, per element, the index whose source value wins; ties keep the earlier index."""
    src = source[where[:axis] + (slice(None),) + where[axis:]]
    bv = np.take_along_axis(src, np.expand_dims(best, axis), axis).squeeze(axis)
    cv = np.take_along_axis(src, np.expand_dims(cand, axis), axis).squeeze(axis)
    better = cv > bv if g == "argmax" else cv < bv
    return np.where(better, cand, best)


def _merge_two(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Stable merge of two sorted arrays along the last axis (a's elements first on ties)."""
    rows_a = a.reshape(-1, a.shape[-1])
    rows_b = b.reshape(-1, b.shape[-1])
    out = np.empty((rows_a.shape[0], rows_a.shape[1] + rows_b.shape[1]), a.dtype)
    ia = np.arange(rows_a.shape[1])
    ib = np.arange(rows_b.shape[1])
    for r in range(rows_a.shape[0]):
        out[r, ia + np.searchsorted(rows_b[r], rows_a[r], side="left")] = rows_a[r]
        out[r, ib + np.searchsorted(rows_a[r], rows_b[r], side="right")] = rows_b[r]
    return out.reshape(a.shape[:-1] + (out.shape[-1],))


def merge_runs(x: np.ndarray, bounds: list[int]) -> np.ndarray:
    """Merge the sorted runs of x that start at `bounds` along the last axis, pairwise."""
    edges = list(bounds) + [x.shape[-1]]
    runs = [x[..., lo:hi] for lo, hi in zip(edges, edges[1:])]
    while len(runs) > 1:
        runs = [_merge_two(runs[i], runs[i + 1]) if i + 1 < len(runs) else runs[i]
                for i in range(0, len(runs), 2)]
    return runs[0]


def execute_plan(plan: Plan, feeds: dict[str, np.ndarray], leaf_fn=SEMANTICS) -> dict[str, np.ndarray]:
    """Run a whole program's plan; return its output tensors."""
    program = plan.program
    env = {t.name: np.zeros(t.type.shape, NP_DTYPES[t.type.dtype]) for t in program.tensors}
    env.update({k: np.asarray(v) for k, v in feeds.items()})
    cache: dict = {}
    for ins, root in zip(program.instructions, plan.roots):
        n_out = root.task.spec.outputs
        inputs = [env[n] for n in ins.operands[n_out:]]
        env[ins.operands[0]] = np.array(run_node(plan, root, inputs, leaf_fn, cache), order="C")
    return {t.name: env[t.name] for t in program.outputs}
