"""The Cambricon-F comparison: the workload suite on `f1` against a GTX 1080 Ti and on `f100`
against a DGX-1, beside the paper's headline ratios.

Each workload runs timing-only on the fractal machine and through the roofline baseline on the
GPU system. Performance ratio = GPU seconds / fractal seconds; efficiency ratio = GPU joules /
fractal joules (ops per joule, the same ops on both sides). Every ratio is split into the factors
that explain it:

    speed-up   = (fractal peak / GPU peak) x (fractal utilization / GPU utilization)
    efficiency = speed-up x (GPU watts / fractal watts)

so a mismatch with the paper points at its cause (peak, utilization or power) instead of being
tuned away.
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from fractal import api
from fractal.baseline import estimate
from fractal.plot import plot as plot_sweep
from fractal.sweep import sweep
from fractal.workloads import WORKLOADS, generate

__all__ = ["Comparison", "COMPARISONS", "Row", "compare", "geomean", "summary",
           "table_text", "write_report"]


@dataclass(frozen=True)
class Comparison:
    machine: str
    gpu: str
    title: str
    paper_speedup: float
    paper_efficiency: float

    def against(self, gpu: str) -> "Comparison":
        """The same comparison with another GPU baseline (the paper's ratios kept beside it)."""
        if gpu == self.gpu:
            return self
        return replace(self, gpu=gpu, title=f"{self.title.split(' vs ')[0]} vs {gpu}")


#: the ISCA 2019 abstract's headline ratios (docs/machines.md); which DGX-1 is not stated, a
#: 2019 paper suggests V100
COMPARISONS = (Comparison("f1", "1080ti", "Cambricon-F1 vs GTX 1080 Ti", 5.14, 11.39),
               Comparison("f100", "dgx1-v100", "Cambricon-F100 vs DGX-1 (8x V100)", 2.82, 8.37))


@dataclass(frozen=True)
class Row:
    program: str
    machine: str
    gpu: str
    ops: int
    fractal_seconds: float
    fractal_joules: float
    fractal_peak_ops_per_second: float
    fractal_bound: str
    gpu_seconds: float
    gpu_joules: float
    gpu_peak_ops_per_second: float
    gpu_bound: str
    fractal_energy_breakdown: tuple = ()     # (class, joules) of the fractal run

    @property
    def speedup(self) -> float:
        return self.gpu_seconds / self.fractal_seconds

    @property
    def efficiency(self) -> float:
        return self.gpu_joules / self.fractal_joules

    @property
    def fractal_utilization(self) -> float:
        return self.ops / self.fractal_seconds / self.fractal_peak_ops_per_second

    @property
    def gpu_utilization(self) -> float:
        return self.ops / self.gpu_seconds / self.gpu_peak_ops_per_second

    @property
    def fractal_watts(self) -> float:
        return self.fractal_joules / self.fractal_seconds

    @property
    def gpu_watts(self) -> float:
        return self.gpu_joules / self.gpu_seconds

    def to_json(self) -> dict:
        d = dict(vars(self))
        d["fractal_energy_breakdown"] = dict(self.fractal_energy_breakdown)
        d.update(speedup=self.speedup, efficiency=self.efficiency,
                 fractal_utilization=self.fractal_utilization,
                 gpu_utilization=self.gpu_utilization, fractal_watts=self.fractal_watts,
                 gpu_watts=self.gpu_watts)
        return d


def _dominant(bounds) -> str:
    """The bound that takes the most time, from (bound, time) pairs."""
    time: dict[str, float] = {}
    for bound, t in bounds:
        time[bound] = time.get(bound, 0.0) + t
    return max(time, key=time.get) if time else "-"


def suite(batch: int | None = None) -> dict[str, str]:
    """The workload suite's programs (name -> program text) at their default sizes."""
    return {name: generate(name, batch=batch) if batch else generate(name) for name in WORKLOADS}


def compare(programs: dict[str, str], comparisons=COMPARISONS, progress=None) -> list[Row]:
    """Run every program on every comparison's machine and GPU system."""
    rows = []
    for c in comparisons:
        machine = api.build_machine(c.machine)
        for name, text in programs.items():
            program = api.load_program(text)
            f = api.run(program, machine, functional=False)
            g = estimate(program, c.gpu)
            rows.append(Row(
                program=name, machine=machine.name, gpu=g.gpu, ops=f.ops,
                fractal_seconds=f.seconds, fractal_joules=f.energy_joules,
                fractal_peak_ops_per_second=f.peak_ops_per_second,
                fractal_bound=_dominant((i.bottleneck, i.cycles) for i in f.instructions),
                gpu_seconds=g.seconds, gpu_joules=g.energy_joules,
                gpu_peak_ops_per_second=g.peak_ops_per_second,
                gpu_bound=max(g.time_breakdown, key=g.time_breakdown.get),
                fractal_energy_breakdown=tuple(f.energy_breakdown.items())))
            if progress:
                progress(rows[-1])
    return rows


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(rows: list[Row], c: Comparison) -> dict:
    """Geometric means of one comparison's ratios and of the factors that make them."""
    mine = [r for r in rows if (r.machine, r.gpu) == (c.machine, c.gpu)]
    peak = geomean(r.fractal_peak_ops_per_second / r.gpu_peak_ops_per_second for r in mine) \
        if mine else 0
    return {"title": c.title, "machine": c.machine, "gpu": c.gpu, "programs": len(mine),
            "speedup": geomean(r.speedup for r in mine),
            "efficiency": geomean(r.efficiency for r in mine),
            "paper_speedup": c.paper_speedup, "paper_efficiency": c.paper_efficiency,
            "peak_ratio": peak,
            "utilization_ratio": geomean(r.fractal_utilization / r.gpu_utilization for r in mine),
            "power_ratio": geomean(r.gpu_watts / r.fractal_watts for r in mine),
            "fractal_watts": geomean(r.fractal_watts for r in mine),
            "gpu_watts": geomean(r.gpu_watts for r in mine),
            "fractal_energy_shares": _shares(mine)}


def _shares(rows: list[Row]) -> dict:
    """Each energy class's share of the fractal machine's energy over all the rows."""
    total: dict[str, float] = {}
    for r in rows:
        for k, j in r.fractal_energy_breakdown:
            total[k] = total.get(k, 0.0) + j
    whole = sum(total.values()) or 1.0
    return {k: v / whole for k, v in total.items()}


def table_text(rows: list[Row], c: Comparison, markdown: bool = False) -> str:
    """One comparison's rows as a table, with the geometric means and the paper's ratios."""
    head = ["program", "ops", "fractal ms", "bound", "util", "GPU ms", "bound", "util",
            "speed-up", "efficiency"]
    body = []
    for r in rows:
        if (r.machine, r.gpu) != (c.machine, c.gpu):
            continue
        body.append([r.program, f"{r.ops:.3g}", f"{r.fractal_seconds * 1e3:.4g}", r.fractal_bound,
                     f"{r.fractal_utilization:.1%}", f"{r.gpu_seconds * 1e3:.4g}", r.gpu_bound,
                     f"{r.gpu_utilization:.1%}", f"{r.speedup:.2f}x", f"{r.efficiency:.2f}x"])
    s = summary(rows, c)
    body.append(["geometric mean", "", "", "", "", "", "", "", f"{s['speedup']:.2f}x",
                 f"{s['efficiency']:.2f}x"])
    body.append(["paper", "", "", "", "", "", "", "", f"{c.paper_speedup:.2f}x",
                 f"{c.paper_efficiency:.2f}x"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda row: "  ".join(x.ljust(w) if i == 0 else x.rjust(w)
                                for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([c.title, fmt(head)] + [fmt(row) for row in body])


def plot(rows: list[Row], comparisons, path: Path) -> None:
    """Per program, the speed-up and the efficiency gain of each comparison (log scale), with the
    geometric mean and the paper's ratio as lines."""
    # lazy: matplotlib takes ~0.3 s, and its Agg backend is chosen only when a figure is drawn
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    fig, axes = plt.subplots(len(comparisons), 2, figsize=(12, 4.2 * len(comparisons)),
                             squeeze=False)
    for (ax_s, ax_e), c in zip(axes, comparisons):
        mine = [r for r in rows if (r.machine, r.gpu) == (c.machine, c.gpu)]
        s = summary(rows, c)
        names = [r.program for r in mine]
        for ax, key, what, paper in ((ax_s, "speedup", "performance", c.paper_speedup),
                                     (ax_e, "efficiency", "energy efficiency", c.paper_efficiency)):
            ax.bar(names, [getattr(r, key) for r in mine], color="#4878a8")
            ax.axhline(1.0, color="black", lw=0.8, label=f"{c.gpu} = 1")
            ax.axhline(s[key], color="#4878a8", ls="--", label=f"geometric mean {s[key]:.2f}x")
            ax.axhline(paper, color="#c0504d", ls=":", lw=2, label=f"paper {paper:.2f}x")
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_ylabel(f"{what} relative to {c.gpu} (x)")
            ax.set_title(f"{c.title}: {what}")
            ax.tick_params(axis="x", labelrotation=45)
            ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: the machine sizes of the scaling figure: each comparison's machine re-scaled to these
SCALING_DEPTHS, SCALING_FANOUTS = (1, 2, 3), (2, 4, 8, 16)


def scaling(programs: dict[str, str], comparisons, folder: Path) -> list[Path]:
    """Per comparison, sweep its machine over SCALING_DEPTHS x SCALING_FANOUTS (a CSV beside
    the figures) and plot the speed-up over its GPU against the number of leaves."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = folder / "programs"
    sources.mkdir(exist_ok=True)
    files = []
    for name, text in programs.items():
        (sources / f"{name}.fasm").write_text(text)
        files.append(str(sources / f"{name}.fasm"))
    figures = []
    for c in comparisons:
        csv = folder / f"{c.machine}_scaling.csv"
        with tempfile.TemporaryDirectory() as scratch:  # a new run, not a resumed one
            sweep(files, c.machine, list(SCALING_DEPTHS), list(SCALING_FANOUTS), [c.gpu], csv,
                  progress=False, store=Path(scratch) / "runs.sqlite")
        figures.append(plot_sweep(csv, "speedup", folder / f"{c.machine}_scaling.png", gpu=c.gpu))
    return figures


def write_report(rows: list[Row], comparisons, out: Path, command: str, host: str,
                 programs: dict[str, str] | None = None) -> None:
    """docs/reproduction.md: method, tables, figures, and the factors that explain each ratio;
    with `programs`, also the speed-up against machine size."""
    out = Path(out)
    figure = out.parent / "reproduction" / "cambricon_f.png"
    plot(rows, comparisons, figure)
    lines = ["# Reproducing the Cambricon-F comparison", "",
             f"Generated by `{command}` ({host}). Do not edit by hand; run the command again.", "",
             "Each program of the workload suite (`docs/workloads.md`, default sizes) runs "
             "timing-only on the preset fractal machine and through the roofline GPU baseline "
             "(`docs/baseline.md`, default factors). Both sides run each program at its own "
             "data width: the neural networks (`vgg16`, `resnet18`, `alexnet`, `lstm`, "
             "`mlp_classifier`) are f16 programs and their GPU baseline runs in fp16 (tensor "
             "cores where the GPU has them), the classic machine-learning programs are f32 and "
             "their baseline runs in fp32; the fractal machine moves and stores the program's "
             "bytes, and the GPU moves the same number of bytes. "
             "Speed-up is GPU time over fractal time; efficiency is GPU energy over fractal "
             "energy for the same ops. The machines' parameters are our choices, reasoned in "
             "`docs/machines.md`; nothing here is tuned to approach the paper's ratios.", "",
             f"![speed-up and efficiency per program]({figure.relative_to(out.parent).as_posix()})",
             ""]
    for c in comparisons:
        s = summary(rows, c)
        lines += [f"## {c.title}", "", table_text(rows, c, markdown=True), "",
                  f"Geometric means: **{s['speedup']:.2f}x** performance (paper "
                  f"{c.paper_speedup}x) and **{s['efficiency']:.2f}x** efficiency (paper "
                  f"{c.paper_efficiency}x) over {s['programs']} programs.", "",
                  "Where the ratios come from (geometric means over the programs):", "",
                  f"- peak: `{c.machine}` has {s['peak_ratio']:.2f}x the peak of `{c.gpu}` "
                  "(a geometric mean over the programs; fractal: its multiply-accumulate rate; "
                  "GPU: its matrix-product peak at each program's precision, fp16 for the f16 "
                  "programs and fp32 for the f32 ones);",
                  f"- utilization: the fractal machine reaches {s['utilization_ratio']:.2f}x the "
                  "GPU's fraction of its own peak;",
                  f"- power: the GPU system draws {s['power_ratio']:.2f}x the fractal machine's "
                  f"average power while running (geometric means {s['gpu_watts']:.0f} W and "
                  f"{s['fractal_watts']:.0f} W). The fractal machine's energy over the suite: "
                  + ", ".join(f"{k} {v:.0%}" for k, v in sorted(
                      s["fractal_energy_shares"].items(), key=lambda kv: -kv[1])) + ".", "",
                  f"So speed-up = {s['peak_ratio']:.2f} x {s['utilization_ratio']:.2f} = "
                  f"{s['peak_ratio'] * s['utilization_ratio']:.2f}x, and efficiency = speed-up x "
                  f"{s['power_ratio']:.2f}. Against the paper: "
                  f"{_verdict(s['speedup'], c.paper_speedup)} in performance, "
                  f"{_verdict(s['efficiency'], c.paper_efficiency)} in efficiency.", ""]
    if programs:
        lines += ["## Speed-up against machine size", "",
                  "Each comparison's machine re-scaled to "
                  f"{', '.join(map(str, SCALING_DEPTHS))} stages of fan-out "
                  f"{', '.join(map(str, SCALING_FANOUTS))} (`fractal sweep`; the rows are in the "
                  "CSV beside each figure, the programs in `reproduction/programs/`). Where "
                  "several shapes have the same number of leaves, the figure shows the best.", ""]
        for c, fig in zip(comparisons, scaling(programs, comparisons, figure.parent)):
            lines += [f"![{c.machine} against {c.gpu}]"
                      f"({fig.relative_to(out.parent).as_posix()})", ""]
    lines += ["## Why the numbers differ from the paper", "",
              "- The paper's benchmark list, batch sizes and per-benchmark numbers are not public; "
              "this suite is ours (`docs/workloads.md`). A geometric mean over other programs is "
              "a different number.",
              "- F1's and F100's levels, memories, bandwidths, clock, power and process are not "
              "public; `f1` and `f100` are physically reasoned guesses (`docs/machines.md`). The "
              "peak factor above is therefore ours, not the paper's.",
              "- The GPU side is a roofline with efficiency factors (`docs/baseline.md`), not a "
              "measured cuDNN run; it is optimistic for small kernels with irregular access and "
              "pessimistic where libraries fuse kernels. `fractal baseline measure` can calibrate "
              "it on real hardware.",
              "- Which DGX-1 (P100 or V100) the paper used is not stated; this comparison uses "
              "V100. `fractal reproduce --gpu-f100 dgx1-p100` runs the other.", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))


def _verdict(ours: float, paper: float) -> str:
    r = ours / paper
    if 0.8 <= r <= 1.25:
        return f"within 25% of the paper ({r:.2f}x its ratio)"
    return f"{'above' if r > 1 else 'below'} the paper ({r:.2f}x its ratio)"
