"""Serial and parallel decomposition at one node, recursively down to the leaves, memoized.

A node at level l receives a task whose operands sit in its local memory. It chooses, per axis of
the task's iteration space, a number of serial pieces n and parallel ways p (the product of the
ways is at most the fan-out), such that one child's share of a piece fits the child's memory with
room for BUFFERING pieces in flight (double buffering: the next piece loads while this one runs).

The choice minimises a stated cost, the node's estimated cycles for the whole task under the
per-level pipeline model (docs/compiler.md):

    cycles = decode + N * per_piece + (one piece's whole journey - per_piece: fill and drain)
    per_piece = max(port, execute, reduce, (load + execute + reduce + store) / BUFFERING)

where load/store are bytes over the parent's memory port and the child's link plus the link
latency (operands every child shares count once when the level broadcasts), port is the loads'
and stores' bytes together over the port (one memory port serves both), execute is the child's
ops over its subtree's peak rate, and reduce is g work over the LFU's rate. Ties go to fewer bytes
moved plus reduction ops, then to less load imbalance. Every maximal parallel split (no axis could
take one more way within the fan-out) is searched; serial cuts are found by halving the axis whose cut costs least, until
the piece fits, and, for the cheapest few, a few cuts more while they lower the cost (deeper
pipelining).
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict

from compiler.plan import AxisSplit, NodePlan, Plan
from compiler.rules import (MERGES, AccessMap, Task, access_map, ceil_div, combine_ops, merge_ops, split_ranges, sub_task,
                            task_of, transfer_bytes)
from fractal.machine import Machine
from isa.errors import UserError
from isa.extensions import opcode_table
from isa.limits import check_machine_shape, check_plan_pieces
from isa.program import Program

__all__ = ["BUFFERING", "CompileError", "compile_program", "Decomposer"]

BUFFERING = 2          # pieces in flight per child memory: one executing, one loading
EXTRA_CUTS = 4         # serial cuts tried beyond the fewest that fit, kept while they lower the cost
EXTRA_CUT_CANDIDATES = 4   # ... on this many of the cheapest parallel splits


class CompileError(UserError):
    """An instruction that cannot be fitted onto the machine."""


def moved_bytes(task: Task) -> int:
    """Bytes a DMA reads and writes for a data-movement task: each destination element is read
    once and written once (a gather also reads its indices)."""
    out = sum(t.nbytes for t in task.outputs)
    return 2 * out + (task.inputs[1].nbytes if task.opcode == "gather" else 0)


def _bytes(n: float) -> str:
    return f"{int(n):,} bytes"


class Decomposer:
    """Plans tasks for one machine; identical (task, level) sub-problems are planned once."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.table: dict = {}
        self.origin = None          # the program instruction being compiled, for error locations
        self.program = None

    # ------------------------------------------------------------ entry
    def plan(self, task: Task, level: int = 0) -> NodePlan:
        key = (task, level)
        node = self.table.get(key)
        if node is None:
            node = self._decompose(task, level)
            self.table[key] = node
            for child, _ in node.children:
                self.plan(child, level + 1)
        return node

    def _decompose(self, task: Task, level: int) -> NodePlan:
        if level == self.machine.depth:
            return NodePlan(task, level, "leaf")
        amap = access_map(task)
        if amap is None:
            return NodePlan(task, level, "local", local_bytes=moved_bytes(task),
                            why="data movement: run by this node's DMA in its local memory")
        return self._split(task, level, amap)

    # ------------------------------------------------------------ search
    def _split(self, task: Task, level: int, amap: AccessMap) -> NodePlan:
        m = self.machine
        node, child = m.levels[level], m.levels[level + 1]
        budget = child.memory_bytes // BUFFERING
        sizes = [a.size for a in amap.axes]
        least = [a.least for a in amap.axes]
        free = [i for i, a in enumerate(amap.axes) if a.splittable and a.size >= 2 * a.least]
        smallest = [least[i] if i in free else s for i, s in enumerate(sizes)]
        need = amap.footprint(smallest)
        if need > budget:
            self._too_big(task, level, need, budget)
        model = _CostModel(task, amap, m, level, least)
        candidates = 0
        best = None
        caps = [ax.leaf if level + 1 == m.depth else None for ax in amap.axes]
        fitted = []
        for ways in _parallel_candidates([s // m for s, m in zip(sizes, least)], free, node.fanout):
            candidates += 1
            # an axis a leaf may receive only so much of is cut that far from the start
            pieces = [1 if cap is None else ceil_div(s, cap * w) for s, cap, w in zip(sizes, caps, ways)]
            cost = model.cost(pieces, ways)
            while (need := model.footprint(model.child_extents(pieces, ways))) > budget:
                steps = [(p, model.cost(p, ways)) for p in model.halvings(pieces, ways, free)]
                if not steps:       # every axis is as small as its split rules allow
                    break
                pieces, cost = min(steps, key=lambda pc: pc[1])
            if need <= budget:
                fitted.append((cost, pieces, ways))
        best = None
        for cost, pieces, ways in sorted(fitted)[:EXTRA_CUT_CANDIDATES]:
            for _ in range(EXTRA_CUTS):      # a few more cuts while they pay (deeper pipelining)
                steps = [(p, model.cost(p, ways)) for p in model.halvings(pieces, ways, free)]
                if not steps:
                    break
                p, c = min(steps, key=lambda pc: pc[1])
                if c >= cost:
                    break
                pieces, cost = p, c
            if best is None or cost < best[0]:
                best = (cost, pieces, ways)
        if best is None:
            self._too_big(task, level, need, budget)
        cost, pieces, ways = best
        return self._build(task, level, amap, pieces, ways, cost, candidates, budget)

    def _too_big(self, task: Task, level: int, need: int, budget: int):
        m = self.machine
        child = m.levels[level + 1]
        ins = self.origin
        where = ins.loc if ins is not None else None
        line = self.program.source_line(where) if self.program is not None else None
        raise CompileError(
            f"{task.opcode} cannot be fitted on level {level + 1} ({child.name}) of machine "
            f"'{m.name}': its smallest piece needs {_bytes(need)}, a {child.name} has "
            f"{_bytes(child.memory_bytes)} ({_bytes(budget)} per piece with {BUFFERING} pieces in "
            f"flight)", where, line,
            hint="give that level more memory, or use smaller tensors")

    # ------------------------------------------------------------ the chosen split
    def _build(self, task, level, amap, pieces, ways, cost, candidates, budget) -> NodePlan:
        node = self.machine.levels[level]
        sizes = [a.size for a in amap.axes]
        where = self.origin.loc if self.origin is not None else None
        check_plan_pieces(math.prod(pieces), where or f"machine '{self.machine.name}'",
                          self.program.source_line(where) if self.program is not None else None)
        ranges, piece_counts = [], []
        for size, n, p in zip(sizes, pieces, ways):
            rs = []
            pcs = split_ranges(size, n)
            for ps, pe in pcs:
                rs.extend((ps + s, e) for s, e in split_ranges(pe, p))
            ranges.append(rs)
            piece_counts.append(len(pcs))
        children = self._distinct_children(task, amap, ranges)
        n_out = task.spec.outputs
        per_child = [len(rs) for rs in ranges]
        shared = piece_counts if node.broadcast else per_child
        bytes_down = sum(transfer_bytes(amap, i, ranges, shared) for i in range(n_out, len(task.types)))
        up_copies = per_child               # one write-back per child part, unless kept (below)
        red_axes = [a for a, ax in enumerate(amap.axes) if ax.reduce and len(ranges[a]) > 1]
        reduce = amap.axes[red_axes[0]].reduce if red_axes else None
        reduction_ops = child_reduction_ops = 0
        if red_axes:
            runs = math.prod(len(ranges[a]) for a in red_axes)
            if reduce in MERGES:
                out = task.outputs[0]
                reduction_ops = merge_ops(out.size // out.shape[-1], out.shape[-1], runs)
            elif len(red_axes) > 1:         # partials of several cut axes all come back
                reduction_ops = combine_ops(task, reduce, task.outputs, runs - 1)
            else:
                # the children keep their partials across serial pieces: each writes back once,
                # and this node's LFU combines only the parallel ways
                (a,) = red_axes
                slots = max(len(split_ranges(pe, ways[a])) for _, pe in split_ranges(sizes[a], pieces[a]))
                up_copies = [slots if i == a else n for i, n in enumerate(per_child)]
                reduction_ops = combine_ops(task, reduce, task.outputs, slots - 1)
                child_reduction_ops = combine_ops(task, reduce, task.outputs, runs - slots)
        bytes_up = sum(transfer_bytes(amap, i, ranges, up_copies) for i in range(n_out))
        splits = tuple(AxisSplit(ax.name, ax.size, piece_counts[a], ways[a], ax.reduce)
                       for a, ax in enumerate(amap.axes))
        busy = math.prod(min(w, ceil_div(ax.size, p)) for ax, w, p in zip(amap.axes, ways, pieces))
        cut = ", ".join(s.text() for s in splits if s.pieces * s.ways > 1) or "whole task to one child"
        why = (f"searched {candidates} parallel splits of fan-out {node.fanout}; a child's piece must "
               f"fit {budget:,} bytes ({BUFFERING} pieces in flight); chose {cut}: estimated "
               f"{cost[0]:,.0f} cycles, {cost[1]:,.0f} bytes + reduction ops")
        return NodePlan(task, level, "split", splits, children, math.prod(piece_counts), busy,
                        bytes_down, bytes_up, 0, reduction_ops, reduce, child_reduction_ops, cost[0],
                        why)

    def _distinct_children(self, task, amap, ranges):
        """Group the child ranges of each axis into kinds, then take the product across axes."""
        per_axis = []
        for a, rs in enumerate(ranges):
            dims = [d for dims in amap.operands for d in dims if d.axis == a]
            kinds: dict = {}
            for s, e in rs:
                sig = (e,) + tuple((lambda r: (r[1] - r[0], r[2], r[3]))(d.region(s, e))
                                   for d in dims if d.kind == "window")
                if sig in kinds:
                    kinds[sig][1] += 1
                else:
                    kinds[sig] = [s, 1, e]
            per_axis.append(list(kinds.values()))
        children: dict = defaultdict(int)
        for combo in itertools.product(*per_axis):
            starts = [c[0] for c in combo]
            extents = [c[2] for c in combo]
            t, _ = sub_task(task, amap, starts, extents)
            children[t] += math.prod(c[1] for c in combo)
        return tuple(sorted(children.items(), key=lambda kv: -kv[1]))


class _CostModel:
    """The per-level pipeline estimate used to rank candidate splits (module docstring)."""

    def __init__(self, task: Task, amap: AccessMap, machine: Machine, level: int, least):
        self.amap = amap
        self.least = least
        self.sizes = [a.size for a in amap.axes]
        self.node, self.child = machine.levels[level], machine.levels[level + 1]
        leaves_below = math.prod(machine.fanouts[level + 1:])
        # what a child spends on any task whatever its size: its decode, and a load's and a
        # store's latency to its own children
        below = machine.levels[level + 2].link_latency if level + 2 <= machine.depth else 0
        self.child_fixed = self.child.decode_cycles + 2 * below
        self.task = task
        # cycles the whole task would take on one leaf, then shared by the leaves below a child
        self.leaf_cycles = sum(ops / machine.compute.ops_per_cycle(c) for c, ops in task.work
                               if c != "move") / leaves_below
        self.points = math.prod(self.sizes)
        self.n_out = task.spec.outputs
        self.deps = [amap.depends(i) for i in range(len(task.types))]
        self.reduce_axes = [a for a, ax in enumerate(amap.axes) if ax.reduce]
        self.out_elems = task.outputs[0].size
        self.merge = any(amap.axes[a].reduce in MERGES for a in self.reduce_axes)
        self.row = task.outputs[0].shape[-1] if task.outputs[0].rank else 1
        self._footprints: dict = {}

    def footprint(self, ext) -> int:
        key = tuple(ext)
        n = self._footprints.get(key)
        if n is None:
            n = self._footprints[key] = self.amap.footprint(ext)
        return n

    def child_extents(self, pieces, ways):
        return [ceil_div(ceil_div(s, n), p) for s, n, p in zip(self.sizes, pieces, ways)]

    def halvings(self, pieces, ways, free):
        """Piece counts that halve one axis's child extent."""
        ext = self.child_extents(pieces, ways)
        for a in free:
            if ext[a] > 1:
                n = ceil_div(self.sizes[a], ceil_div(ext[a], 2) * ways[a])
                if n > pieces[a] and (self.least[a] == 1 or
                                      self.sizes[a] // n // ways[a] >= self.least[a]):
                    yield pieces[:a] + [n] + pieces[a + 1:]

    def cost(self, pieces, ways):
        ext = self.child_extents(pieces, ways)
        piece = [ceil_div(s, n) for s, n in zip(self.sizes, pieces)]
        busy_ways = [min(w, pe) for w, pe in zip(ways, piece)]
        busy = math.prod(busy_ways)
        n_pieces = math.prod(pieces)
        down = up = link_in = link_out = 0
        cut = [a for a in self.reduce_axes if pieces[a] * busy_ways[a] > 1]
        # partials stay in the children across the serial pieces of one output region when one
        # reduction axis is cut (not a merge): `kept` pieces share one write-back
        kept = pieces[cut[0]] if len(cut) == 1 and not self.merge else 1
        for i, dep in enumerate(self.deps):
            b = self.amap.operand_bytes(i, ext)
            if i < self.n_out:
                up += b * busy
                link_out += b
            else:
                fan = math.prod(busy_ways[a] for a in dep) if self.node.broadcast else busy
                down += b * fan
                link_in += b
        bw, lat = self.node.memory_bandwidth, self.child.link_latency
        load = max(down / bw, link_in / self.child.link_bandwidth) + lat
        up /= kept                  # kept partials are written back once per output region
        link_out /= kept
        store = max(up / bw, link_out / self.child.link_bandwidth) + lat
        # a child needs at least its compute, and at least to pass its operands once through its
        # own memory port (to its children, or to its compute units at a leaf)
        execute = self.child_fixed + max(self.leaf_cycles * math.prod(ext) / self.points,
                                         self.footprint(ext) / self.child.memory_bandwidth)
        if kept > 1:                # a child adds each later partial into the one it keeps
            out_elems = self.amap.operand_bytes(0, ext) / self.amap.dtype_bytes[0]
            execute += out_elems / self.child.lfu_ops_per_cycle * (1 - 1 / kept)
        runs = math.prod(pieces[a] * busy_ways[a] for a in self.reduce_axes) if self.reduce_axes else 1
        if self.merge:
            red = merge_ops(self.out_elems // self.row, self.row, runs)
        elif self.reduce_axes:      # this node's LFU combines the children's results
            g = self.amap.axes[self.reduce_axes[0]].reduce
            red = combine_ops(self.task, g, self.task.outputs,
                              (busy_ways[cut[0]] if kept > 1 else runs) - 1)
        else:
            red = 0
        reduce = red / n_pieces / self.node.lfu_ops_per_cycle
        # steady state per piece: the memory port carries loads and stores alike, and with
        # BUFFERING pieces in flight a piece's whole journey is shared by that many pieces
        journey = load + execute + reduce + store
        per_piece = max((down + up) / bw, execute, reduce, journey / BUFFERING)
        cycles = self.node.decode_cycles + n_pieces * per_piece + journey - per_piece
        moved = n_pieces * (down + up) + red
        imbalance = math.prod(ext) * n_pieces * busy / self.points
        return (cycles, moved, imbalance)


def _parallel_candidates(sizes, free, fanout):
    """Every maximal way to give each free axis p_a ways with prod(p) <= fanout and p_a <= size_a."""
    out = []

    def rec(i, ways, prod):
        if i == len(free):
            out.append(list(ways))
            return
        a = free[i]
        top = min(sizes[a], fanout // prod)
        # the last free axis of a maximal split takes every way left: enumerate only that one
        for p in range(top if i == len(free) - 1 else 1, top + 1):
            ways[a] = p
            rec(i + 1, ways, prod * p)
        ways[a] = 1

    rec(0, [1] * len(sizes), 1)
    maximal = []
    for w in out:
        prod = math.prod(w)
        if all(w[a] >= sizes[a] or prod // w[a] * (w[a] + 1) > fanout for a in free):
            maximal.append(w)
    return maximal or [[1] * len(sizes)]


def compile_program(program: Program, machine: Machine) -> Plan:
    """Decompose every instruction of a checked program for a machine."""
    check_machine_shape(machine.fanouts, f"machine '{machine.name}'", f"machine '{machine.name}'")
    dec = Decomposer(machine)
    dec.program = program
    root = machine.levels[0]
    total = sum(t.type.nbytes for t in program.tensors)
    if total > root.memory_bytes:
        raise CompileError(f"the program's tensors need {_bytes(total)}, more than the "
                           f"{_bytes(root.memory_bytes)} of the root ({root.name}) memory of "
                           f"machine '{machine.name}'", program.file)
    types = program.types
    table = opcode_table(program)
    roots = []
    for ins in program.instructions:
        dec.origin = ins
        roots.append(dec.plan(task_of(ins, types, table), 0))
    return Plan(program, machine, tuple(roots), dec.table)
