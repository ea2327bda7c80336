"""Timing-only evaluations of design points, memoized across machines.

Each evaluation is the sweep's (`fractal.sweep.timing_row`: a timing-only run in symmetric
mode under the compiler's `cycles` objective) and gives the same row; three things a worker
remembers between the machines it runs make most of them cheaper:

- plans of shared lower levels. The plan of a task at level l depends only on the levels from
  l down and the leaf's compute, and not on level l's own memory capacity, which only its
  parent's split reads (`compiler.decompose.plan_inputs`). Every worker keeps the node plans it
  made under those inputs, so a machine that differs from an earlier one only above level l, or
  in level l's memory capacity, plans nothing at or below it again (`SharedTable`), and the
  simulator runs none of those nodes again (`simulator.engine.Engine`'s `known`);
- prices of candidate splits. What the search at level l prices a candidate by (its closed
  form, and the node model's cycles with the children's plans) depends on neither level l's
  nor level l+1's memory capacity, which decide only which candidates fit
  (`compiler.decompose.pricing_inputs`). A machine that differs from an earlier one only in a
  level's memory capacity prices again at the level above only the candidates that fit now and
  did not before;
- timing classes. Under the `cycles` objective no choice of the compiler and no cycle of the
  simulator depends on the clock, the process node, the memories' technology or any energy
  figure (pJ per byte or op, static watts): these enter only seconds, energy and area. Two
  machines that differ only there have the same plan and the same cycles, so the second one's
  row is the first one's, with its seconds (cycles / clock) and its energy
  (`simulator.energy.plan_energy` of the same plan on it) computed as a run computes them.

tests/explore/test_evaluate.py checks all three against fresh runs (`api.run`), row for row.
Local workers also pass each other what they plan (`fractal.explore.share`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections import OrderedDict
from dataclasses import dataclass

from compiler import verify_plan
from compiler.decompose import (child_plan_inputs, compile_program, plan_inputs,
                                plan_instructions, pricing_inputs, pricing_of)
from compiler.plan import Plan
from compiler.rules import task_of
from fractal.collector import tuned_collector
from fractal.store import program_inputs
from fractal.sweep import ENERGY_PARTS, timing_row
from isa.checker import opcode_table
from isa.program import Program
from machine import Machine

__all__ = ["Evaluation", "Job", "run_job", "Memo", "timing_class", "MEMO"]

#: node plans a worker keeps before it forgets them all (a VGG-16 plan holds a few hundred)
MAX_PLANS = 200_000
#: prices a worker keeps before it forgets them all (closed-form costs and node-model runs of
#: candidate splits; VGG-16 on a machine near f1 adds about 5,000, 1.4 MB)
MAX_PRICES = 1_000_000
#: timing classes a worker keeps (each a plan and a row per program)
MAX_CLASSES = 512


@dataclass(frozen=True)
class Evaluation:
    """One timing-only run to make: its store key, the program and the machine."""
    key: str
    label: str
    code: Program
    machine: Machine


@dataclass(frozen=True)
class Job:
    """Runs a worker makes one after another, so that it reuses what the first ones planned.
    A job shared by n workers (`fractal.explore.share`) goes out as n shares (i, n) with one
    claim counter (`slot`): share 0 makes the runs, and every share plans the instructions of
    the runs' programs it claims (`Memo.share`)."""
    runs: tuple[Evaluation, ...]
    share: tuple[int, int] = (0, 1)
    slot: int = 0       # which claim counter of `fractal.explore.share` the shares use


def timing_class(m: Machine) -> Machine:
    """The machine with every field that changes no cycle set to one value (see the module's
    docstring): two machines of one class have the same plan and cycles."""
    levels = tuple(dataclasses.replace(lv, memory_pj_per_byte=0.0, link_pj_per_byte=0.0,
                                       static_watts=0.0, memory_technology="sram")
                   for lv in m.levels)
    compute = dataclasses.replace(m.compute, mac_pj_per_op=0.0, elementwise_pj_per_op=0.0,
                                  compare_pj_per_op=0.0)
    return dataclasses.replace(m, name="", description="", frequency_hz=1.0, process_nm=16.0,
                               levels=levels, compute=compute)


def _distinct(program: Program) -> list[int]:
    """The instructions whose task no earlier one has (a task is planned once)."""
    types, table = program.types, opcode_table(program)
    first: dict = {}
    for i, ins in enumerate(program.instructions):
        first.setdefault(task_of(ins, types, table), i)
    return list(first.values())


class SharedTable:
    """A plan table (`compile_program`'s `table`) backed by the plans of every machine with the
    same `plan_inputs` at a level."""

    def __init__(self, machine: Machine, plans: dict):
        self.by_level = [plans.setdefault(plan_inputs(machine, i), {})
                         for i in range(machine.depth + 1)]

    def get(self, key, default=None):
        task, level = key
        return self.by_level[level].get(task, default)

    def __getitem__(self, key):
        task, level = key
        return self.by_level[level][task]

    def __setitem__(self, key, node):
        task, level = key
        self.by_level[level][task] = node

    def __contains__(self, key) -> bool:
        task, level = key
        return task in self.by_level[level]


class Memo:
    """What one worker process remembers across the machines it runs."""

    def __init__(self):
        self.plans: dict = {}
        self.priced: dict = {}      # pricing_inputs -> what the search priced there
        self.simulated: dict = {}   # plan_inputs -> the node runs simulated there
        self.classes: OrderedDict = OrderedDict()   # (class, program) -> (plan, row)
        self.stats = {"runs": 0, "derived": 0}
        self.channel = None     # to the other workers (`fractal.explore.share.Channel`)

    def compile(self, program: Program, machine: Machine) -> Plan:
        """`compiler.compile_program(program, machine)` (objective cycles, no pins), planning
        only the (task, level) entries no machine of the same suffix planned before (and, with
        a channel to other workers, none that they passed on)."""
        table, priced = self._tables(machine)
        c = self.channel
        plan = compile_program(program, machine, table=table, priced=priced,
                               between=None if c is None else lambda: c.exchange(self))
        if c is not None:
            c.exchange(self)
        return plan

    def share(self, job: "Job"):
        """Plan the instructions of a job's programs for its machine together with the other
        workers running the same job (`fractal.explore.share`): each claims the next instruction
        not yet claimed, plans it and passes its plans on, until none is left; the worker
        that makes the job's runs then waits for the instructions the others claimed. An
        instruction that cannot be compiled is left to that worker to report."""
        c = self.channel
        work = [(e, k) for e in {id(e.code): e for e in job.runs}.values()
                for k in _distinct(e.code)]
        mine, tables = set(), {}
        while (at := c.claim(job.slot)) < len(work):
            e, k = work[at]
            if id(e) not in tables:
                tables[id(e)] = self._tables(e.machine)
            table, priced = tables[id(e)]
            c.exchange(self)
            with contextlib.suppress(Exception):
                plan_instructions(e.code, e.machine, [k], table=table, priced=priced)
            c.exchange(self)
            c.done(job.slot, at)
            mine.add(at)
        if not job.share[0]:
            c.wait(job.slot, [at for at in range(len(work)) if at not in mine], self)

    def _tables(self, machine: Machine) -> tuple:
        """The plan table and the per-level prices of a machine, the bounds kept."""
        if sum(len(t) for t in self.plans.values()) > MAX_PLANS:
            self.plans.clear()
            self.simulated.clear()
            if self.channel is not None:
                self.channel.mark = None    # what is left was passed on or taken
        if sum(len(v) if k[0] == "costs" else 1
               for level in self.priced.values() for k, v in level.items()) > MAX_PRICES:
            self.priced.clear()
            if self.channel is not None:
                self.channel.mark = None
        priced = [self.priced.setdefault(pricing_inputs(machine, i), {})
                  for i in range(machine.depth)]
        return SharedTable(machine, self.plans), priced

    # ------------------------------------------------------------ shared between workers
    def mark(self) -> tuple:
        """How far the plan and price tables reach now (they only grow, until a bound clears
        them): `since` gives what was added after."""
        return ({k: len(v) for k, v in self.plans.items()},
                {k: len(v) for k, v in self.priced.items()})

    def since(self, mark: tuple) -> tuple:
        """(plans, prices) added after `mark`, in the tables' own shape. A task's prices are
        added to only by its search, which makes a plan of it: those of the tasks planned
        after `mark` go whole."""
        plans = {}
        for k, v in self.plans.items():
            n = mark[0].get(k, 0)
            if len(v) > n:
                plans[k] = dict(itertools.islice(v.items(), n, None))
        priced = {}
        for k, v in self.priced.items():
            n = mark[1].get(k, 0)
            if len(v) > n:
                priced[k] = dict(itertools.islice(v.items(), n, None))
        for k, new in plans.items():
            searched = k[2] and self.priced.get(pricing_of(k))
            if searched:
                out = priced.setdefault(pricing_of(k), {})
                for task in new:
                    costs = searched.get(("costs", task))
                    if costs:
                        out[("costs", task)] = costs
        return plans, priced

    def take(self, plans: dict, priced: dict):
        """Add plans and prices another worker made (`since`), keeping those this one has. A
        plan is taken only with its children's (deepest level first), so that every plan in
        the table has its subtree there."""
        for k in sorted(plans, key=lambda k: -k[0]):
            mine = self.plans.setdefault(k, {})
            below = self.plans.get(child_plan_inputs(k), {}) if k[2] else {}
            for task, node in plans[k].items():
                if task not in mine and all(t in below for t, _ in node.children):
                    mine[task] = node
        for k, v in priced.items():
            mine = self.priced.setdefault(k, {})
            for key, value in v.items():
                if key[0] == "costs":
                    d = mine.setdefault(key, {})
                    for c, x in value.items():
                        d.setdefault(c, x)
                else:
                    mine.setdefault(key, value)

    def run(self, program: Program, machine: Machine):
        """`api.run(program, machine, functional=False)` with the plan from `compile`."""
        from simulator.run import simulate     # lazy, as in fractal.api: simpy and numba
        plan = self.compile(program, machine)
        verify_plan(plan)
        self.last_plan = plan
        return simulate(plan, "symmetric", False, None,
                        known=SharedTable(machine, self.simulated))[0]

    def evaluate(self, e: Evaluation) -> tuple[str, object]:
        """The run's store result, as `fractal.sweep.timing_row` gives it."""
        key = (timing_class(e.machine), program_inputs(e.code)["sha256"], e.code.file)
        known = self.classes.get(key)
        if known is not None and "error" not in known[1]:
            self.classes.move_to_end(key)
            self.stats["derived"] += 1
            return "row", derived_row(known[0], known[1], e.machine)
        self.last_plan = None
        self.stats["runs"] += 1
        kind, row = timing_row(e.code, e.machine, e.label, run=self.run)
        if kind == "row" and "error" not in row and self.last_plan is not None:
            self.classes[key] = (self.last_plan, row)
            if len(self.classes) > MAX_CLASSES:
                self.classes.popitem(last=False)
        return kind, row


def derived_row(plan: Plan, row: dict, m: Machine) -> dict:
    """The row of machine `m` from the plan and row of another machine of its timing class:
    the same cycles, traffic and instructions; seconds and energy computed from them as
    `simulator.run.simulate` computes them."""
    from simulator.energy import plan_energy    # lazy, as above
    seconds = row["cycles"] / m.frequency_hz
    energy = plan_energy(Plan(plan.program, m, plan.roots, plan.table, plan.objective), seconds)
    parts = energy.to_json()
    total = energy.total
    return {**row, "peak_ops_per_second": m.peak_ops_per_second, "seconds": seconds,
            "ops_per_second": row["ops"] / seconds, "energy_joules": total,
            "ops_per_joule": row["ops"] / total if total else 0.0,
            **{f"energy_{p}_joules": parts[p] for p in ENERGY_PARTS}}


#: the memo of this process (each worker process has its own)
MEMO = Memo()


def run_job(job: Job) -> list[tuple[str, tuple[str, object]]]:
    """Run a job's evaluations in order (in a worker): [(key, ("row", result) or ("internal",
    (invariant, where, detail)))]; a helper's share of their planning, with no result."""
    with tuned_collector():
        if job.share[1] > 1 and MEMO.channel is not None:
            MEMO.share(job)
        return [] if job.share[0] else [(e.key, MEMO.evaluate(e)) for e in job.runs]
