"""What a fractal-versus-GPU comparison rests on: every assumed constant of both sides varied one
at a time over a plausible range, and the geometric-mean speed-up and energy-efficiency ratio at
each end (a tornado).

A comparison runs each program once on the fractal machine (compiled and simulated, timing only)
and once through the GPU roofline (`fractal.baseline.estimate`). Varying a constant then costs
only what it changes:

- fractal energy constants (static power, pJ per byte of each level's memory and link, pJ per
  op) change no timing: the run's energy is priced again from the same plan and simulated
  seconds (`simulator.energy.plan_energy` on the machine with the constant changed);
- fractal link bandwidths change the plan: the programs are compiled and simulated again;
- GPU constants (launch overhead, efficiency factors, idle and host power) need only the roofline
  estimate again, which takes milliseconds.

Every range carries its source (`Constant.source`); "ours" marks our own judgement. The ranges
are wide on purpose: they say how far each ratio can move on what is not known, not where it is.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from compiler.plan import PlanKind
from fractal.baseline import estimate
from fractal.baseline.factors import Factors, factors_from_dict
from fractal.baseline.gpu import GRAPH_LAUNCH_OVERHEAD_S, Gpu
from fractal.plot import plain_log
from isa.errors import UserError

__all__ = ["Constant", "Evaluation", "ProgramRun", "Sensitivity", "constants", "evaluate",
           "geomean", "run_programs", "sensitivity", "where_bound", "write_csv", "tornado"]


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


# ---------------------------------------------------------------- one program on both sides

@dataclass
class ProgramRun:
    """One program on a fractal machine and a GPU: what re-pricing a constant starts from."""
    name: str
    program: object              # the checked Program
    plan: object                 # the fractal plan (compiler.Plan)
    report: object               # the fractal run (simulator.report.Report)
    bound: str                   # what bounds the fractal run most (`where_bound`)
    gpu: object                  # the roofline estimate (BaselineReport)

    @property
    def speedup(self) -> float:
        return self.gpu.seconds / self.report.seconds

    @property
    def efficiency(self) -> float:
        return self.gpu.energy_joules / self.report.energy_joules


def where_bound(engine, node) -> str:
    """What bounds a node's time, as `simulator.engine.Engine.bound` finds it (the busiest stage,
    down the slowest children), with the place named: `compute`, `latency`, `reduction`, or
    `bandwidth` of a level's memory or of the transfers between a level and its children."""
    m = engine.plan.machine
    t = engine.totals.get((node.task, node.level))
    if t is None:
        return "latency"
    here = m.levels[node.level]
    if node.kind == PlanKind.LEAF:
        return "compute" if t.leaf_compute >= t.leaf_memory else f"bandwidth: {here.name} memory"
    if node.kind == PlanKind.LOCAL:
        return f"bandwidth: {here.name} memory"
    stages = {"execute": t.execute, "bandwidth": t.transfer, "latency": t.latency,
              "reduction": t.reduce}
    top = max(stages, key=stages.get)
    if top == "execute" and t.slowest_child is not None:
        return where_bound(engine, engine.plan.node(*t.slowest_child[0]))
    if top == "bandwidth":
        return f"bandwidth: {here.name}-{m.levels[node.level + 1].name}"
    return top


def _fractal(program, machine):
    """Compile and simulate (timing only): the plan, the report and the bound that takes most
    of the run's cycles."""
    from fractal import api                      # lazy: the compiler and simulator (~0.5 s)
    from simulator.run import simulate
    plan = api.compile(program, machine)
    report, engine = simulate(plan, functional=False)
    cycles: dict[str, int] = {}
    for root, row in zip(plan.roots, report.instructions):
        b = where_bound(engine, root)
        cycles[b] = cycles.get(b, 0) + row.cycles
    return plan, report, max(cycles, key=cycles.get) if cycles else "latency"


def run_programs(programs: dict, machine, gpu: Gpu, factors=None, progress=None) -> list[ProgramRun]:
    """Every program (name -> Program) on the machine and through the GPU roofline."""
    runs = []
    for name, program in programs.items():
        plan, report, bound = _fractal(program, machine)
        runs.append(ProgramRun(name, program, plan, report, bound,
                               estimate(program, gpu, factors=factors)))
        if progress:
            progress(runs[-1])
    return runs


# ---------------------------------------------------------------- the constants

@dataclass(frozen=True)
class Constant:
    """One assumed constant: its value in the comparison, a plausible low and high, where the
    range comes from, and how a value is put in. `apply(machine, gpu, factors, value)` returns
    the three with the constant set; `timing` is whether it changes the fractal machine's plan
    or timing (a recompile) rather than only its energy."""
    side: str                    # fractal or GPU
    name: str
    unit: str
    base: float
    low: float
    high: float
    source: str
    apply: Callable = field(repr=False, compare=False)
    timing: bool = False

    def key(self) -> str:
        return f"{self.side}: {self.name}"


def _level(machine, i: int, **changes):
    levels = list(machine.levels)
    levels[i] = replace(levels[i], **changes)
    return replace(machine, levels=tuple(levels))


#: the range of each kind of fractal constant, as factors of the machine file's value, and why
FRACTAL_RANGES = {
    "static_watts": (0.5, 2.0, "ours: every preset's static power is our estimate (machine file "
                     "comments); leakage alone moves about 2x with temperature and process corner"),
    "memory_pj_per_byte": (0.5, 2.0, "DRAM access energy spans about 4x between interfaces (GDDR5 "
                           "about 15 pJ/bit, HBM2 3.9 pJ/bit: O'Connor et al., MICRO 2017) and "
                           "SRAM energy per bit about 2x with array size (Horowitz, ISSCC 2014)"),
    "link_pj_per_byte": (0.5, 2.0, "wire and SerDes energy per bit spans more than 2x with distance "
                         "and signalling (Horowitz, ISSCC 2014; O'Connor et al., MICRO 2017); "
                         "the presets' link energies are our estimates"),
    "pj_per_op": (0.5, 2.0, "Horowitz (ISSCC 2014) gives 16-bit FP multiply 1.1 pJ and add 0.4 pJ "
                  "at 45 nm; operand delivery and the scaling to 16 nm leave about 2x either way"),
    "link_bandwidth": (0.5, 2.0, "ours: every link bandwidth below the root is our choice "
                       "(machine file comments); half to twice spans the on-chip networks and "
                       "board links of the era"),
}

#: the range of each GPU efficiency factor (docs/baseline.md, "Default efficiency factors")
FACTOR_RANGES = {
    "compute.matmul": (0.35, 0.9, "cuBLAS reaches 80-90% of peak on large square GEMMs; "
                       "inference-sized GEMMs and cuDNN convolutions far less at small batch "
                       "(Baidu DeepBench inference results, 2017); docs/baseline.md"),
    "compute.elementwise": (0.25, 0.9, "ours: one op per lane per cycle is rarely sustained "
                            "(special-function units, index arithmetic); docs/baseline.md"),
    "compute.reduction": (0.25, 0.9, "ours: tree reductions idle lanes at each step; "
                          "docs/baseline.md"),
    "compute.irregular": (0.05, 0.3, "ours: sorts and merges diverge within warps; "
                          "docs/baseline.md"),
    "bandwidth.matmul": (0.6, 0.9, "ours: tiled kernels stream a little below copy kernels; "
                         "docs/baseline.md"),
    "bandwidth.elementwise": (0.7, 0.93, "STREAM-style copy and triad kernels reach about 75-93% "
                              "of HBM2 and GDDR5X peak (Deakin et al., BabelStream, 2018)"),
    "bandwidth.reduction": (0.6, 0.9, "ours: as matmul; docs/baseline.md"),
    "bandwidth.irregular": (0.1, 0.5, "ours: a radix sort makes about four passes over its "
                            "keys; scattered gathers fetch whole 32-byte sectors; docs/baseline.md"),
    "bandwidth.move": (0.7, 0.93, "as bandwidth.elementwise (Deakin et al., BabelStream, 2018)"),
    "interconnect": (0.6, 0.9, "ours: ring all-reduces reach roughly 75-85% of NVLink's peak "
                     "for large messages, less for small ones; docs/baseline.md"),
}

#: the range of the launch overhead per kernel (docs/baseline.md, "Launch overhead")
LAUNCH_RANGE = (GRAPH_LAUNCH_OVERHEAD_S, 10e-6,
                "1 us: a chain replayed as a CUDA graph, 0.84-1.02 us per kernel on an H200 (ours, "
                "benchmarks/launch/), about 0.5 us over the kernel on a V100 (Gray, NVIDIA "
                "Technical Blog, 2019); 10 us: a launch followed by a synchronization, 9.7-10.2 us "
                "on an H200 (ours) and 9.6 us on a V100 (Gray, 2019), and PyTorch eager ops, "
                "6.7-9.3 us on an H200 (ours)")
IDLE_RANGE = (0.5, 2.0, "the GPU files' idle power is an estimate (8-14% of TDP) except the "
              "H200's: measured, an H200 draws 82.6 W with no CUDA context and 127.5 W with one "
              "and no work, as much as running a launch-bound chain of small kernels (128-129 W; "
              "ours, benchmarks/launch/power.py), 1.7x the 75 W once estimated for it; half to "
              "twice spans a module in its lowest state and one that holds its clocks")
HOST_RANGE = (0.4, 1.0, "ours: the file's host power is the system's maximum less the GPUs' TDP, "
              "an upper bound; 40% of it is the two host CPUs (2 x 135 W Xeon E5-2698 v4 in a "
              "DGX-1, DGX-1 System Architecture whitepaper, 2017) and memory with fans near idle")


def constants(machine, gpu: Gpu, factors: Factors | None = None) -> list[Constant]:
    """Every assumed constant of a comparison of `machine` with `gpu`, each with its range."""
    factors = factors_from_dict(factors)
    out: list[Constant] = []

    def fractal(name, unit, base, kind, set_value, timing=False):
        lo, hi, source = FRACTAL_RANGES[kind]
        if base > 0:
            out.append(Constant("fractal", name, unit, base, base * lo, base * hi, source,
                                lambda m, g, f, v: (set_value(m, v), g, f), timing))

    for i, lv in enumerate(machine.levels):
        fractal(f"static power, {lv.name}", "W/node", lv.static_watts, "static_watts",
                lambda m, v, i=i: _level(m, i, static_watts=v))
        if lv.memory != "distributed":       # a distributed memory is its children's
            fractal(f"memory pJ/byte, {lv.name}", "pJ/B", lv.memory_pj_per_byte,
                    "memory_pj_per_byte", lambda m, v, i=i: _level(m, i, memory_pj_per_byte=v))
        if i:                                # the root's link to a host carries nothing
            fractal(f"link pJ/byte, {lv.name}", "pJ/B", lv.link_pj_per_byte, "link_pj_per_byte",
                    lambda m, v, i=i: _level(m, i, link_pj_per_byte=v))
            fractal(f"link bandwidth, {lv.name}", "B/cycle", lv.link_bandwidth, "link_bandwidth",
                    lambda m, v, i=i: _level(m, i, link_bandwidth=v), timing=True)
    for cls in ("mac", "elementwise", "compare"):
        key = f"{cls}_pj_per_op"
        fractal(f"{cls} pJ/op", "pJ/op", machine.compute.pj_per_op(cls), "pj_per_op",
                lambda m, v, key=key: replace(m, compute=replace(m.compute, **{key: v})))

    def gpu_constant(name, unit, base, lo, hi, source, set_value):
        out.append(Constant("GPU", name, unit, base, lo, hi, source,
                            lambda m, g, f, v: (m, *set_value(g, f, v))))

    gpu_constant("launch overhead", "s/kernel", gpu.launch_overhead_s, *LAUNCH_RANGE,
                 lambda g, f, v: (replace(g, launch_overhead_s=v), f))
    for key, (lo, hi, source) in FACTOR_RANGES.items():
        if key == "interconnect":
            if gpu.gpus > 1:
                gpu_constant("efficiency interconnect", "", factors.interconnect, lo, hi, source,
                             lambda g, f, v: (g, replace(f, interconnect=v)))
            continue
        part, cls = key.split(".")
        gpu_constant(f"efficiency {key}", "", getattr(factors, part)[cls], lo, hi, source,
                     lambda g, f, v, part=part, cls=cls: (g, replace(f, **{
                         part: {**getattr(f, part), cls: v}})))
    lo, hi, source = IDLE_RANGE
    gpu_constant("idle power", "W/GPU", gpu.idle_watts, gpu.idle_watts * lo,
                 min(gpu.idle_watts * hi, gpu.tdp_watts), source,
                 lambda g, f, v: (replace(g, idle_watts=v), f))
    if gpu.host_watts > 0:                   # a card's comparison counts no host on either side
        lo, hi, source = HOST_RANGE
        gpu_constant("host power", "W", gpu.host_watts, gpu.host_watts * lo, gpu.host_watts * hi,
                     source, lambda g, f, v: (replace(g, host_watts=v), f))
    return out


# ---------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class Evaluation:
    speedup: float               # geometric mean over the programs
    efficiency: float


def evaluate(runs: list[ProgramRun], machine, gpu: Gpu, factors: Factors, timing: bool
             ) -> Evaluation:
    """The geometric-mean ratios with the machine, GPU and factors given: the fractal side
    recompiled and simulated when `timing`, else its energy priced again from each run's plan
    and seconds; the GPU side estimated again."""
    from simulator.energy import plan_energy     # lazy: the simulator (~0.3 s)
    speedups, efficiencies = [], []
    for r in runs:
        if timing:
            _, report, _ = _fractal(r.program, machine)
            seconds, joules = report.seconds, report.energy_joules
        else:
            seconds = r.report.seconds
            joules = plan_energy(replace(r.plan, machine=machine), seconds).total
        g = estimate(r.program, gpu, factors=factors)
        speedups.append(g.seconds / seconds)
        efficiencies.append(g.energy_joules / joules)
    return Evaluation(geomean(speedups), geomean(efficiencies))


@dataclass
class Row:
    constant: Constant
    low: Evaluation
    high: Evaluation

    def span(self, ratio: str) -> tuple[float, float]:
        a, b = getattr(self.low, ratio), getattr(self.high, ratio)
        return min(a, b), max(a, b)

    def to_json(self) -> dict:
        c = self.constant
        return {"side": c.side, "constant": c.name, "unit": c.unit, "base": c.base, "low": c.low,
                "high": c.high, "source": c.source, "speedup_at_low": self.low.speedup,
                "speedup_at_high": self.high.speedup, "efficiency_at_low": self.low.efficiency,
                "efficiency_at_high": self.high.efficiency}


@dataclass
class Sensitivity:
    machine: str
    gpu: str
    programs: list
    base: Evaluation
    rows: list                   # Row per constant that moves a ratio
    unmoved: list                # names of the constants that move neither ratio here
    joint: dict                  # ratio -> (all constants at their lowering ends, raising ends)

    def range(self, ratio: str) -> tuple[float, float]:
        """The least and greatest value of a ratio with one constant at a time at an end."""
        values = [getattr(self.base, ratio)]
        for r in self.rows:
            values += r.span(ratio)
        return min(values), max(values)

    def to_json(self) -> dict:
        return {"machine": self.machine, "gpu": self.gpu, "programs": list(self.programs),
                "speedup": self.base.speedup, "efficiency": self.base.efficiency,
                "speedup_range": list(self.range("speedup")),
                "efficiency_range": list(self.range("efficiency")),
                "speedup_joint": list(self.joint["speedup"]),
                "efficiency_joint": list(self.joint["efficiency"]),
                "rows": [r.to_json() for r in self.rows], "unmoved": list(self.unmoved)}

    def table(self, markdown: bool = False) -> str:
        """One line per constant, the widest swing in efficiency or speed-up first."""
        head = ["side", "constant", "value", "range", "speed-up", "efficiency"]
        body = []
        for r in self.rows:
            c = r.constant
            body.append([c.side, c.name, quantity(c.base, c.unit), f"{quantity(c.low, c.unit)} to "
                         f"{quantity(c.high, c.unit)}", _ends(r, "speedup"), _ends(r, "efficiency")])
        s, e = self.range("speedup"), self.range("efficiency")
        body.append(["", "one at a time", "", "", f"{s[0]:.2f}x to {s[1]:.2f}x",
                     f"{e[0]:.2f}x to {e[1]:.2f}x"])
        js, je = self.joint["speedup"], self.joint["efficiency"]
        body.append(["", "all at once", "", "", f"{js[0]:.2f}x to {js[1]:.2f}x",
                     f"{je[0]:.2f}x to {je[1]:.2f}x"])
        if markdown:
            lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---|---:|---:|"]
            return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        lines = [f"{self.machine} vs {self.gpu} over {len(self.programs)} programs: speed-up "
                 f"{self.base.speedup:.2f}x, efficiency {self.base.efficiency:.2f}x (geometric "
                 f"means); each constant at the low and the high end of its range:",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in body]
        if self.unmoved:
            lines.append("moving neither ratio here: " + ", ".join(self.unmoved))
        return "\n".join(lines)

    def sources(self) -> list[str]:
        """`constant: source` for each row."""
        return [f"{r.constant.key()}: {r.constant.source}" for r in self.rows]


def quantity(v: float, unit: str) -> str:
    """A constant's value in its unit, as the tables print it."""
    if unit == "s/kernel":
        return f"{v * 1e6:.3g} us"
    return (f"{v:,.0f}" if v >= 1000 else f"{v:.3g}") + (f" {unit}" if unit else "")


def _ends(r: Row, ratio: str) -> str:
    return f"{getattr(r.low, ratio):.2f}x / {getattr(r.high, ratio):.2f}x"


def _moves(a: Evaluation, b: Evaluation) -> bool:
    return any(abs(getattr(a, k) / getattr(b, k) - 1) > 1e-9 for k in ("speedup", "efficiency"))


def sensitivity(runs: list[ProgramRun], machine, gpu: Gpu, factors=None,
                progress=None) -> Sensitivity:
    """Every constant of `constants` at each end of its range, one at a time, over the runs
    (`run_programs` on the same machine, GPU and factors), and every constant at once at the
    ends that lower, then raise, each ratio."""
    factors = factors_from_dict(factors)
    if not runs:
        raise UserError("a sensitivity analysis needs at least one program", "PROGRAMS")
    base = Evaluation(geomean(r.speedup for r in runs), geomean(r.efficiency for r in runs))
    rows, unmoved = [], []
    for c in constants(machine, gpu, factors):
        ends = [evaluate(runs, *c.apply(machine, gpu, factors, v), c.timing)
                for v in (c.low, c.high)]
        if progress:
            progress(c)
        if _moves(ends[0], base) or _moves(ends[1], base):
            rows.append(Row(c, *ends))
        else:
            unmoved.append(c.key())
    rows.sort(key=lambda r: -max(math.log(r.span(k)[1] / r.span(k)[0])
                                 for k in ("speedup", "efficiency")))
    joint = {}
    for ratio in ("speedup", "efficiency"):
        pair = []
        for lower in (True, False):
            m, g, f, timing = machine, gpu, factors, False
            for r in rows:
                at_low = getattr(r.low, ratio) <= getattr(r.high, ratio)
                value = r.constant.low if at_low == lower else r.constant.high
                m, g, f = r.constant.apply(m, g, f, value)
                timing |= r.constant.timing
            pair.append(getattr(evaluate(runs, m, g, f, timing), ratio))
        joint[ratio] = tuple(pair)
    return Sensitivity(machine.name, gpu.name, [r.name for r in runs], base, rows, unmoved, joint)


# ---------------------------------------------------------------- outputs

def write_csv(s: Sensitivity, path) -> None:
    """One row per constant: its range, its source and both ratios at each end."""
    rows = [r.to_json() for r in s.rows]
    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["constant"])
            w.writeheader()
            w.writerows(rows)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}", "--output") from None


def tornado(s: Sensitivity, path, paper: tuple[float, float] | None = None, top: int = 14,
            where: str = "--figure") -> Path:
    """The tornado figure: per ratio, a bar per constant from its value at one end of its range to
    the other (log scale), the widest on top, around the comparison's ratio; with `paper`
    (speed-up, efficiency), the paper's ratios as lines."""
    import matplotlib                            # lazy: ~0.3 s
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.38 * min(top, max(len(s.rows), 3)) + 1.8),
                             squeeze=False)
    for ax, ratio, what, i in ((axes[0][0], "speedup", "speed-up", 0),
                               (axes[0][1], "efficiency", "energy efficiency", 1)):
        base = getattr(s.base, ratio)
        rows = sorted((r for r in s.rows if _moves_ratio(r, ratio)),
                      key=lambda r: r.span(ratio)[1] / r.span(ratio)[0])[-top:]
        for y, r in enumerate(rows):
            ends = [(getattr(r.low, ratio), "#4878a8"), (getattr(r.high, ratio), "#c0504d")]
            for value, color in sorted(ends, key=lambda e: -abs(math.log(e[0] / base))):
                ax.barh(y, value - base, left=base, color=color, height=0.6)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{r.constant.side}: {r.constant.name}" for r in rows], fontsize=8)
        ax.axvline(base, color="black", lw=1, label=f"{s.machine} vs {s.gpu}: {base:.2f}x")
        if paper:
            ax.axvline(paper[i], color="#2e7d32", ls=":", lw=2, label=f"paper {paper[i]:.2f}x")
        plain_log(ax, "x")
        ax.set_xlabel(f"geometric-mean {what} (x)")
        ax.set_title(f"{s.machine} vs {s.gpu}: {what}")
        ax.barh([0], [0], color="#4878a8", label="constant at the low end of its range")
        ax.barh([0], [0], color="#c0504d", label="at the high end")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    except (OSError, ValueError) as e:
        raise UserError(f"cannot write the figure {path}: {getattr(e, 'strerror', None) or e}",
                        where) from None
    finally:
        plt.close(fig)
    return path


def _moves_ratio(r: Row, ratio: str) -> bool:
    lo, hi = r.span(ratio)
    return hi / lo - 1 > 1e-9
