"""Attainable bounds: the least time an instruction can take on a machine, whatever its plan.

The bound of an instruction is the largest of its floors (docs/compiler.md, "Attainable
bounds"), each a lower bound on the simulated cycles of any plan the compiler could choose:

- **compute**: its ops spread evenly over all leaves, each class at the leaf's rate for the
  task's data type, times the best fill of the leaf's MAC array or vector lanes that any tile of
  the task can reach (a tile's dimension is never longer than the task's). A sort, or an
  extension whose body sorts, has none: cut into pieces its leaf work shrinks (n log n);
- **one per level below the root**, named after the level: the traffic that crosses into that
  level's nodes, through their links (over the nodes' count) and through their parents' ports,
  and, at the leaves, through the leaves' own memory ports. The traffic is at least the
  compulsory one (every element a leaf reads arrives once, every output leaves once), and, for
  a matmul or a conv2d, at least the capacity-aware pebbling bound of Irony, Toledo and Tiskin
  for a subtree whose memories hold S words while it runs its share G of the multiply-adds:
  G / (2 sqrt(2) sqrt(R S)) - S words (R = 1 for a matmul; for a conv2d, the most window
  positions that reuse one input element, ceil(kh / stride) x ceil(kw / stride));
- **latency**: the decode of one task per level and one load's and one store's link latency
  per level below the root, one after another (and a MAC array's fill).

The bound depends on the instruction and the machine only, never on a plan or a simulation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.rules import Task, access_map, moved_bytes
from isa.opcodes import OpClass, pads
from machine import Machine

__all__ = ["Bound", "instruction_bound", "plan_bounds", "program_bound", "pebbling_words"]

#: (operand, dim) of the array's rows and columns, as compiler/leaf.py (-1: the last dimension,
#: K of a batched matmul's A[..., M, K] and N of its C[..., M, N])
_FILL_DIMS = {"matmul": ((1, -1), (0, -1)), "eucdist": ((1, 1), (0, 1)), "conv2d": ((1, 1), (0, 1))}


@dataclass(frozen=True)
class Bound:
    """The floors of one instruction (or, summed, of a program), in cycles."""
    floors: tuple           # ((name, cycles), ...): compute, one per level below the root, latency

    @property
    def cycles(self) -> float:
        return max(c for _, c in self.floors)

    @property
    def bound(self) -> str:
        """The floor that sets the bound: `compute`, a level's name, or `latency`."""
        return max(self.floors, key=lambda f: f[1])[0]

    def seconds(self, machine: Machine) -> float:
        return self.cycles / machine.frequency_hz

    def to_json(self, machine: Machine) -> dict:
        return {"bound": self.bound, "bound_cycles": self.cycles,
                "bound_seconds": self.seconds(machine), "floors_cycles": dict(self.floors)}


def _best_fill(task: Task, op_class: str, compute) -> float:
    """The most of the unit of `op_class` any tile of this task can fill: a tile's dimension is
    at most the task's, so min(1, d / lanes) per dimension on the unit."""
    if task.ext:
        return 1.0
    if op_class == OpClass.MAC and compute.mac_array and task.opcode in _FILL_DIMS:
        (ri, rd), (ci, cd) = _FILL_DIMS[task.opcode]
        rows, cols = compute.mac_array
        return (min(1.0, task.types[ri].shape[rd] / rows)
                * min(1.0, task.types[ci].shape[cd] / cols))
    if op_class in (OpClass.ELEMENTWISE, OpClass.COMPARE) and compute.vector_width:
        widest = max((t.shape[-1] if t.rank else 1) for t in task.types)
        return min(1.0, widest / compute.vector_width)
    return 1.0


#: opcodes whose ops grow faster than their data (n log n): split into pieces, the leaves' work
#: shrinks and the merges move to the LFUs, so their ops bound no plan's leaf time
_SUPERLINEAR = frozenset(("sort", "argsort"))


def _sorts(task: Task) -> bool:
    """Whether the task is, or its extension body runs, a sort."""
    if not task.ext:
        return task.opcode in _SUPERLINEAR
    decl, earlier = task.ext
    by_name = {d.name: d for d in earlier}
    seen, todo = set(), [decl]
    while todo:
        d = todo.pop()
        for ins in d.body:
            if ins.opcode in _SUPERLINEAR:
                return True
            if ins.opcode in by_name and ins.opcode not in seen:
                seen.add(ins.opcode)
                todo.append(by_name[ins.opcode])
    return False


def _compute_floor(task: Task, m: Machine) -> float:
    """0 for a sort: no valid floor on its leaf work (see _SUPERLINEAR)."""
    if _sorts(task):
        return 0.0
    c = m.compute
    dtype = task.inputs[0].dtype if task.inputs else task.outputs[0].dtype
    return sum(ops / (m.leaves * c.ops_per_cycle(k, dtype) * _best_fill(task, k, c))
               for k, ops in task.work if k != OpClass.MOVE and ops)


def _multiply_adds(task: Task) -> tuple[int, int]:
    """(G, R): the multiply-adds of a matmul or conv2d that read real data (a conv2d's taps
    on its padding read none), and the most products one input element enters per output
    channel; (0, 1) for other instructions."""
    if task.ext:
        return 0, 1
    if task.opcode == "matmul":             # every batch element is a product of its own
        return task.outputs[0].size * task.inputs[0].shape[-1], 1
    if task.opcode == "conv2d":
        x, w = task.inputs
        y = task.outputs[0]
        s = task.attr["stride"]
        top, left, _, _ = pads(task.attr)

        def taps(out_len, kernel, size, lo):     # (output, tap) pairs that land inside the input
            return sum(1 for o in range(out_len) for t in range(kernel)
                       if 0 <= o * s + t - lo < size)
        g = (y.shape[0] * y.shape[1] * x.shape[1] * taps(y.shape[2], w.shape[2], x.shape[2], top)
             * taps(y.shape[3], w.shape[3], x.shape[3], left))
        return g, math.ceil(w.shape[2] / s) * math.ceil(w.shape[3] / s)
    return 0, 1


def pebbling_words(g: float, words: float, reuse: int = 1) -> float:
    """Irony, Toledo and Tiskin (J. Parallel Distrib. Comput. 64, 2004), Theorem 3.1: a
    processor with a memory of `words` words that performs `g` multiply-adds of a matrix product
    moves at least g / (2 sqrt(2) sqrt(words)) - words words in and out. With `reuse` products
    per input element and output channel (a convolution's overlapping windows), the input's
    projection grows by at most that factor, so sqrt(reuse) divides the first term."""
    if g <= 0 or words <= 0:
        return 0.0
    return max(0.0, g / (2 * math.sqrt(2) * math.sqrt(reuse * words)) - words)


def _subtree_bytes(m: Machine, level: int) -> int:
    """Bytes of every memory in one subtree rooted at `level`, each child's whole memory (a
    distributed level's memory is its children's)."""
    total = 0
    for j in range(level, m.depth + 1):
        lv = m.levels[j]
        if lv.memory == "distributed":
            continue
        whole = lv.physical_memory[0] if lv.physical_memory else lv.memory_bytes
        total += whole * (m.nodes_at(j) // m.nodes_at(level))
    return total


def _level_floors(task: Task, m: Machine) -> list[tuple[str, float]]:
    amap = access_map(task)
    if amap is None:                # data movement: the root's DMA, exactly
        return []
    n_out = task.spec.outputs
    need_in = sum(amap.touched_bytes(i) for i in range(n_out, len(task.types)))
    need_out = sum(amap.touched_bytes(i) for i in range(n_out))
    g, reuse = _multiply_adds(task)
    word = min(amap.dtype_bytes)
    floors = []
    for level in range(1, m.depth + 1):
        parent, lv = m.levels[level - 1], m.levels[level]
        nodes, parents = m.nodes_at(level), m.nodes_at(level - 1)
        words = _subtree_bytes(m, level) / word
        moved = pebbling_words(g / nodes, words, reuse) * word     # in and out of one node
        remote = parent.link_fraction
        into, out = remote * need_in / nodes, remote * need_out / nodes
        if lv.duplex == "half":
            link = max(into + out, moved) / lv.link_bandwidth
        else:
            link = max(into, out, moved / 2) / lv.link_bandwidth
        port_moved = moved if parent.broadcast else moved * parent.fanout
        port = max((need_in + need_out) / parents, port_moved) / parent.memory_bandwidth
        cycles = max(link, port)
        if level == m.depth:        # every leaf reads its operands through its own port
            cycles = max(cycles, (need_in + need_out) / nodes / lv.memory_bandwidth)
        floors.append((lv.name, cycles))
    return floors


def _latency_floor(task: Task, m: Machine) -> float:
    if access_map(task) is None:
        return m.levels[0].decode_cycles
    cycles = sum(lv.decode_cycles for lv in m.levels)
    cycles += 2 * sum(lv.link_latency for lv in m.levels[1:])
    if m.compute.mac_array and any(k == OpClass.MAC and ops for k, ops in task.work):
        cycles += m.compute.array_fill_cycles
    return cycles


def instruction_bound(task: Task, m: Machine) -> Bound:
    """The floors of one root task on a machine."""
    if access_map(task) is None:    # run by the root's DMA: decode, then every byte once
        root = m.levels[0]
        return Bound(((root.name, moved_bytes(task) / root.memory_bandwidth),
                      ("latency", float(root.decode_cycles))))
    return Bound((("compute", _compute_floor(task, m)), *_level_floors(task, m),
                  ("latency", float(_latency_floor(task, m)))))


def program_bound(bounds: list[Bound]) -> tuple[float, str]:
    """The instructions run one after another: the program's bound is the sum of theirs, and
    the floor named is the one that sets the most of it."""
    by_name: dict = {}
    for b in bounds:
        by_name[b.bound] = by_name.get(b.bound, 0.0) + b.cycles
    total = sum(b.cycles for b in bounds)
    return total, (max(by_name, key=by_name.get) if by_name else "latency")


def plan_bounds(plan) -> list[Bound]:
    """The bound of each of a plan's root instructions (equal tasks computed once)."""
    seen: dict = {}
    for r in plan.roots:
        if r.task not in seen:
            seen[r.task] = instruction_bound(r.task, plan.machine)
    return [seen[r.task] for r in plan.roots]
