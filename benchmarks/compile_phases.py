"""Where a compile's time goes: VGG-16 at batch 1 in f16 on `f1`, by phase of the search and by
level, and what the explorer's next machines cost after it (`fractal.explore.evaluate.Memo`):
one whose clusters have twice the memory, with the fresh compile's plans and without or with its
prices, and one that differs only in its root (the "new root").

    python benchmarks/compile_phases.py                  # about 25 seconds
    python benchmarks/compile_phases.py --out compile_phases.md

Each phase's own time (without the children it plans) is taken by wrappers around
`_CostModel.cost` (closed-form pricing of a candidate split), `Decomposer._run_pipeline` (the
shortlist's node-model pipelines) and `Decomposer._split` (the rest of the search). Priced
candidates are counted by the step of `Decomposer._split` that asks for them: the first cut of
each parallel split, the halvings until a piece fits, the halvings tried beyond that
(`EXTRA_CUTS`) and the loop orders of the shortlist. The wrappers add a few percent, so the
report first gives a fresh compile without them (best of 3). It also counts, per level, the
splits whose shortlist's first entry (the closed form's cheapest) is not the fastest of its
pipelines: how often the closed form alone would have chosen a slower split, and which place of
a three-entry shortlist wins. `_CostModel.cost` and `_run_pipeline` answer from shared prices
too; the candidates priced anew (`Schedule.estimate`) and the node-model runs are counted apart.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import inspect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compiler.decompose as decompose                     # noqa: E402
from compiler.schedule import Schedule                      # noqa: E402
from fractal.explore.evaluate import Memo                   # noqa: E402
from fractal.workloads import generate                     # noqa: E402
from host import emit, header                              # noqa: E402
from isa.checker import parse_program                      # noqa: E402
from machine import preset                                 # noqa: E402

#: the calls of `model.cost` in `Decomposer._split`, in source order, by the step they serve
STEPS = ("first cut", "halvings to fit", "extra cuts", "loop orders")


def _cost_steps() -> dict:
    """Source line of each `model.cost` call in `_split` -> its step."""
    lines, first = inspect.getsourcelines(decompose.Decomposer._split)
    calls = [first + i for i, text in enumerate(lines) if "model.cost(" in text]
    if len(calls) != len(STEPS):
        raise SystemExit(f"expected {len(STEPS)} calls of model.cost in _split, found {len(calls)}")
    return dict(zip(calls, STEPS))


class Phases:
    """Own seconds and calls per (phase, level), priced candidates per (level, step)."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)
        self.calls = collections.Counter()
        self.steps = collections.Counter()
        self.stack = [0.0]
        self.where = _cost_steps()
        self.shortlists: list[list] = []    # per split being searched: its pipelines' cycles
        self.outranked = collections.Counter()  # (level, "splits" or "outranked")
        self.won = collections.Counter()        # (level, shortlist length, winner's place)

    def wrap(self, name, fn, level_of):
        def timed(*args, **kw):
            key = (name, level_of(*args))
            if name == "pricing":
                frame = sys._getframe(1)
                while frame.f_code.co_name == "<listcomp>":
                    frame = frame.f_back
                self.steps[(key[1], self.where.get(frame.f_lineno, "other"))] += 1
            if name == "search":
                self.shortlists.append([])
            start = time.perf_counter()
            self.stack.append(0.0)
            try:
                out = fn(*args, **kw)
                if name == "pipelines":
                    self.shortlists[-1].append(out[0])
                return out
            finally:
                if name == "search":
                    self._ranked(key[1], self.shortlists.pop())
                spent, inner = time.perf_counter() - start, self.stack.pop()
                self.seconds[key] += spent - inner
                self.calls[key] += 1
                self.stack[-1] += spent
        return timed

    def _ranked(self, level: int, cycles: list):
        if len(cycles) > 1:
            self.outranked[(level, "splits")] += 1
            self.outranked[(level, "outranked")] += min(cycles[1:]) < cycles[0]
            self.won[(level, len(cycles), cycles.index(min(cycles)))] += 1

    def count(self, name, fn, level_of):
        """fn, its calls counted per level (its time stays its caller's)."""
        def counted(*args, **kw):
            self.calls[(name, level_of(*args))] += 1
            return fn(*args, **kw)
        return counted

    def clear(self):
        self.seconds.clear()
        self.calls.clear()
        self.steps.clear()
        self.outranked.clear()
        self.won.clear()


def instrument(names) -> Phases:
    ph = Phases()
    d, model = decompose.Decomposer, decompose._CostModel
    d._split = ph.wrap("search", d._split, lambda self, task, level, amap: level)
    d._run_pipeline = ph.wrap("pipelines", d._run_pipeline, lambda self, s, level: level)
    model.cost = ph.wrap("pricing", model.cost,
                         lambda self, *a, **kw: names.index(self.node.name))
    Schedule.estimate = ph.count("estimate", Schedule.estimate,
                                 lambda self, node, *a: names.index(node.name))
    decompose.node_cycles = ph.count("node model", decompose.node_cycles,
                                     lambda schedule, level, *a, **kw: names.index(level.name))
    return ph


def table(ph: Phases, names, total: float) -> list[str]:
    out = [f"compile: {total:.2f} s", "",
           "| phase | " + " | ".join(f"level {i} ({n})" for i, n in enumerate(names[:-1])) + " |",
           "|---|" + "---:|" * (len(names) - 1)]
    what = {"pricing": "closed-form pricing (`_CostModel.cost`), candidates",
            "pipelines": "shortlist pipelines (`_run_pipeline`), runs",
            "search": "the rest of the search (`_split`), splits"}
    for phase, label in what.items():
        cells = [f"{ph.seconds[(phase, lv)]:.2f} s, {ph.calls[(phase, lv)]:,}"
                 for lv in range(len(names) - 1)]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("| of them priced anew (`Schedule.estimate`); node-model runs (`node_cycles`) | "
               + " | ".join(f"{ph.calls[('estimate', lv)]:,}; {ph.calls[('node model', lv)]:,}"
                            for lv in range(len(names) - 1)) + " |")
    for step in STEPS:
        cells = [f"{ph.steps[(lv, step)]:,}" for lv in range(len(names) - 1)]
        out.append(f"| candidates priced for: {step} | " + " | ".join(cells) + " |")
    cells = [f"{ph.outranked[(lv, 'outranked')]:,} of {ph.outranked[(lv, 'splits')]:,}"
             for lv in range(len(names) - 1)]
    out.append("| splits whose closed-form cheapest is not the fastest pipeline | "
               + " | ".join(cells) + " |")
    cells = [", ".join(f"{ph.won[(lv, 3, k)]:,}" for k in range(3)) + " of "
             + f"{sum(ph.won[(lv, 3, k)] for k in range(3)):,}" for lv in range(len(names) - 1)]
    out.append("| splits with three on the shortlist won by its first, second, third | "
               + " | ".join(cells) + " |")
    return out + [""]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="FILE")
    args = p.parse_args(argv)
    program = parse_program(generate("vgg16", batch=1, dtype="f16"), "vgg16-b1-f16.fasm")
    f1 = preset("f1")
    names = [lv.name for lv in f1.levels]
    plain = []
    for _ in range(3):
        start = time.perf_counter()
        decompose.compile_program(program, f1)
        plain.append(time.perf_counter() - start)
    ph = instrument(names)
    memo = Memo()       # the explorer's: plans and prices shared between machines
    lines = header("Where a VGG-16 compile's time goes (batch 1, f16, f1)",
                   "own seconds of each phase, without the children it plans")
    lines += [f"A fresh compile without the wrappers: {min(plain):.2f} s (best of 3; "
              + ", ".join(f"{t:.2f}" for t in plain) + ")", ""]
    start = time.perf_counter()
    memo.compile(program, f1)
    lines += ["### A fresh compile", ""] + table(ph, names, time.perf_counter() - start)
    cluster = dataclasses.replace(f1.levels[1], memory_bytes=2 * f1.levels[1].memory_bytes)
    m = dataclasses.replace(f1, levels=(f1.levels[0], cluster, *f1.levels[2:]))
    for shared in (False, True):
        ph.clear()
        again = Memo()
        again.plans = {k: dict(v) for k, v in memo.plans.items()}
        if shared:
            again.priced = {k: {t: dict(v) if t[0] == "costs" else v for t, v in d.items()}
                            for k, d in memo.priced.items()}
        start = time.perf_counter()
        again.compile(program, m)
        lines += [f"### A new cluster memory ({cluster.memory_bytes:,} bytes), after the fresh "
                  "compile: its plans shared" + (", and its prices" if shared else ""), ""]
        lines += table(ph, names, time.perf_counter() - start)
    ph.clear()
    ph.clear()
    root = dataclasses.replace(f1.levels[0], memory_bandwidth=f1.levels[0].memory_bandwidth / 2)
    m = dataclasses.replace(f1, levels=(root, *f1.levels[1:]))
    start = time.perf_counter()
    memo.compile(program, m)
    lines += [f"### A new root: the card's memory bandwidth halved ({root.memory_bandwidth:g} "
              "bytes/cycle), the levels below shared with the fresh compile", ""]
    lines += table(ph, names, time.perf_counter() - start)
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
