"""The Cambricon-F comparison: the workload suite on `f1` against a GTX 1080 Ti and on `f100`
against a DGX-1, beside the paper's headline ratios.

Each workload runs timing-only on the fractal machine and through the roofline baseline on the
GPU system. Performance ratio = GPU seconds / fractal seconds; efficiency ratio = GPU joules /
fractal joules (ops per joule, the same ops on both sides). Every ratio is split into the factors
that explain it:

    speed-up   = (fractal peak / GPU peak) x (fractal utilization / GPU utilization)
    efficiency = speed-up x (GPU watts / fractal watts)

so a mismatch with the paper points at its cause (peak, utilization or power) instead of being
tuned away. Each program's row names what bounds each side; geometric means are given per
class of program (CNN, RNN, MLP, classic ML); a batch table runs the CNNs and the RNN at several
batch sizes; and `fractal.sensitivity` varies every assumed constant of both sides over its
range, so that the report states how far each ratio can move and whether the paper's lies
inside that range. The report itself is written by `fractal.reproduce_report`.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from fractal import api, sensitivity as sn
from fractal.baseline import load_gpu, with_launch
from fractal.plot import plain_log, plot as plot_sweep
from fractal.sensitivity import geomean
from fractal.sweep import sweep
from fractal.workloads import WORKLOADS, generate

__all__ = ["Comparison", "COMPARISONS", "Row", "compare", "compare_runs", "geomean", "summary",
           "table_text", "class_table", "batch_table", "batch_rows", "area_rows", "plot",
           "scaling", "PROGRAM_CLASSES", "BATCHES", "DTYPE"]

#: the class of each workload of the suite, for the per-class geometric means: the Cambricon-F
#: papers' 2019 suite of CNNs, RNNs and classic machine learning (the transformers of
#: fractal.workloads are compared with GPUs in docs/llm.md, scripts/llm_study.py)
PROGRAM_CLASSES = {"vgg16": "CNN", "resnet18": "CNN", "alexnet": "CNN", "lstm": "RNN",
                   "mlp_classifier": "MLP", "knn_classifier": "classic ML",
                   "kmeans_iteration": "classic ML", "svm_rbf": "classic ML",
                   "logreg": "classic ML", "gaussian_nb": "classic ML"}
#: the batch sizes of the batch table, run for the CNN and RNN programs
BATCHES = (1, 16, 64)
#: the data type every workload is generated in: the fractal presets' MACs are 16-bit, and the
#: GPU baseline then computes in fp16 too (`program_precision`), so both sides run at one width
DTYPE = "f16"


@dataclass(frozen=True)
class Comparison:
    machine: str
    gpu: str
    title: str
    paper_speedup: float
    paper_efficiency: float
    paper_area_saving: float = float("nan")   # the fraction of the GPU's silicon F saves

    def against(self, gpu: str) -> "Comparison":
        """The same comparison with another GPU baseline (the paper's ratios kept beside it)."""
        if gpu == self.gpu:
            return self
        return replace(self, gpu=gpu, title=f"{self.title.split(' vs ')[0]} vs {gpu}")


#: the ISCA 2019 abstract's headline ratios (docs/machines.md); which DGX-1 is not stated, a
#: 2019 paper suggests V100
COMPARISONS = (Comparison("f1", "1080ti", "Cambricon-F1 vs GTX 1080 Ti", 5.14, 11.39, 0.938),
               Comparison("f100", "dgx1-v100", "Cambricon-F100 vs DGX-1 (8x V100)", 2.82, 8.37,
                          0.745))


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
    gpu_launch_share: float = 0.0            # the part of the GPU's time spent launching kernels
    program_class: str = "other"             # PROGRAM_CLASSES
    batch: int | None = None                 # the program's batch (None: the workload's own)

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


def suite(batch: int | None = None, dtype: str | None = DTYPE) -> dict[str, str]:
    """The workload suite's programs (name -> program text) at their default sizes, every data
    tensor in `dtype` (None: each workload's own)."""
    params = {"dtype": dtype} if dtype else {}
    return {name: generate(name, batch=batch, **params) for name in PROGRAM_CLASSES}


def _row(run: sn.ProgramRun, machine: str, batch: int | None = None) -> Row:
    f, g = run.report, run.gpu
    return Row(program=run.name, machine=machine, gpu=g.gpu, ops=f.ops,
               fractal_seconds=f.seconds, fractal_joules=f.energy_joules,
               fractal_peak_ops_per_second=f.peak_ops_per_second, fractal_bound=run.bound,
               gpu_seconds=g.seconds, gpu_joules=g.energy_joules,
               gpu_peak_ops_per_second=g.peak_ops_per_second,
               gpu_bound=max(g.time_breakdown, key=g.time_breakdown.get),
               fractal_energy_breakdown=tuple(f.energy_breakdown.items()),
               gpu_launch_share=g.time_breakdown["launch"] / g.seconds if g.seconds else 0.0,
               program_class=PROGRAM_CLASSES.get(run.name, "other"), batch=batch)


def compare_runs(programs: dict[str, str], comparisons=COMPARISONS, launch: str | None = None,
                 progress=None) -> dict:
    """Every program on every comparison's machine and GPU system: {comparison: [ProgramRun]}."""
    loaded = {name: api.load_program(text) for name, text in programs.items()}
    out = {}
    for c in comparisons:
        out[c] = sn.run_programs(loaded, api.build_machine(c.machine),
                                 with_launch(load_gpu(c.gpu), launch),
                                 progress=progress and (lambda r, c=c: progress(c, r)))
    return out


def compare(programs: dict[str, str], comparisons=COMPARISONS, progress=None,
            launch: str | None = None, runs: dict | None = None) -> list[Row]:
    """Run every program on every comparison's machine and GPU system (or take `runs`, from
    `compare_runs`): one Row per program and comparison."""
    runs = runs if runs is not None else compare_runs(
        programs, comparisons, launch, progress and (lambda c, r: progress(r)))
    return [_row(r, c.machine) for c in comparisons for r in runs[c]]


def batch_rows(comparisons=COMPARISONS, names=None, batches=BATCHES, launch: str | None = None,
               dtype: str | None = DTYPE, progress=None) -> list[Row]:
    """The CNN and RNN workloads (or `names`) at each batch size, on every comparison."""
    names = [n for n, c in PROGRAM_CLASSES.items() if c in ("CNN", "RNN")] if names is None \
        else list(names)
    rows = []
    params = {"dtype": dtype} if dtype else {}
    for b in batches:
        programs = {n: generate(n, batch=b, **params) for n in names}
        runs = compare_runs(programs, comparisons, launch, progress)
        rows += [_row(r, c.machine, b) for c in comparisons for r in runs[c]]
    return rows


def summary(rows: list[Row], c: Comparison) -> dict:
    """Geometric means of one comparison's ratios and of the factors that make them, overall and
    per class of program."""
    mine = [r for r in rows if (r.machine, r.gpu) == (c.machine, c.gpu)]
    peak = geomean(r.fractal_peak_ops_per_second / r.gpu_peak_ops_per_second for r in mine) \
        if mine else 0
    classes = {}
    for cls in dict.fromkeys(r.program_class for r in mine):
        these = [r for r in mine if r.program_class == cls]
        classes[cls] = {"programs": [r.program for r in these],
                        "speedup": geomean(r.speedup for r in these),
                        "efficiency": geomean(r.efficiency for r in these),
                        "fractal_bounds": _counts(r.fractal_bound for r in these),
                        "gpu_bounds": _counts(r.gpu_bound for r in these),
                        "gpu_launch_share": geomean(max(r.gpu_launch_share, 1e-9) for r in these)}
    return {"title": c.title, "machine": c.machine, "gpu": c.gpu, "programs": len(mine),
            "speedup": geomean(r.speedup for r in mine),
            "efficiency": geomean(r.efficiency for r in mine),
            "paper_speedup": c.paper_speedup, "paper_efficiency": c.paper_efficiency,
            "peak_ratio": peak,
            "utilization_ratio": geomean(r.fractal_utilization / r.gpu_utilization for r in mine),
            "power_ratio": geomean(r.gpu_watts / r.fractal_watts for r in mine),
            "fractal_watts": geomean(r.fractal_watts for r in mine),
            "gpu_watts": geomean(r.gpu_watts for r in mine),
            "fractal_energy_shares": _shares(mine), "classes": classes,
            "launch_bound": sum(r.gpu_bound == "launch" for r in mine)}


def _counts(values) -> dict:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _shares(rows: list[Row]) -> dict:
    """Each energy class's share of the fractal machine's energy over all the rows."""
    total: dict[str, float] = {}
    for r in rows:
        for k, j in r.fractal_energy_breakdown:
            total[k] = total.get(k, 0.0) + j
    whole = sum(total.values()) or 1.0
    return {k: v / whole for k, v in total.items()}


def _table(head: list[str], body: list[list[str]], markdown: bool, title: str = "") -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    fmt = lambda row: "  ".join(x.ljust(w) if i == 0 else x.rjust(w)
                                for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join(([title] if title else []) + [fmt(head)] + [fmt(row) for row in body])


def _gpu_bound(r: Row) -> str:
    return f"{r.gpu_bound} ({r.gpu_launch_share:.0%} launch)" if r.gpu_bound != "launch" \
        else f"launch ({r.gpu_launch_share:.0%})"


def table_text(rows: list[Row], c: Comparison, markdown: bool = False) -> str:
    """One comparison's rows as a table, with the geometric means and the paper's ratios; each
    side's bound: the fractal run's (compute, latency, reduction, or the bandwidth of a level's
    memory or of the transfers between two levels) and the GPU's (compute, bandwidth, launch,
    interconnect; with the part of its time spent launching kernels)."""
    head = ["program", "class", "ops", "fractal ms", "fractal bound", "util", "GPU ms",
            "GPU bound", "util", "speed-up", "efficiency"]
    body = []
    for r in rows:
        if (r.machine, r.gpu) != (c.machine, c.gpu):
            continue
        body.append([r.program, r.program_class, f"{r.ops:.3g}", f"{r.fractal_seconds * 1e3:.4g}",
                     r.fractal_bound, f"{r.fractal_utilization:.1%}",
                     f"{r.gpu_seconds * 1e3:.4g}", _gpu_bound(r), f"{r.gpu_utilization:.1%}",
                     f"{r.speedup:.2f}x", f"{r.efficiency:.2f}x"])
    s = summary(rows, c)
    blank = [""] * (len(head) - 3)
    body.append(["geometric mean", "", *blank, f"{s['speedup']:.2f}x", f"{s['efficiency']:.2f}x"])
    body.append(["paper", "", *blank, f"{c.paper_speedup:.2f}x", f"{c.paper_efficiency:.2f}x"])
    return _table(head, body, markdown, c.title)


def class_table(rows: list[Row], c: Comparison, markdown: bool = False) -> str:
    """The geometric means of one comparison per class of program, with each side's bounds."""
    s = summary(rows, c)
    head = ["class", "programs", "speed-up", "efficiency", "fractal bounds", "GPU bounds",
            "GPU time launching"]
    body = [[cls, ", ".join(v["programs"]), f"{v['speedup']:.2f}x", f"{v['efficiency']:.2f}x",
             ", ".join(f"{k} {n}" for k, n in v["fractal_bounds"].items()),
             ", ".join(f"{k} {n}" for k, n in v["gpu_bounds"].items()),
             f"{v['gpu_launch_share']:.0%}"] for cls, v in s["classes"].items()]
    body.append(["all", str(s["programs"]), f"{s['speedup']:.2f}x", f"{s['efficiency']:.2f}x",
                 "", f"launch {s['launch_bound']}", ""])
    return _table(head, body, markdown, f"{c.title}, per class (geometric means)")


def batch_table(rows: list[Row], comparisons, markdown: bool = False) -> str:
    """Speed-up and efficiency of each program at each batch, per comparison, with the bounds;
    and the geometric mean at each batch."""
    head = ["program", "batch"]
    for c in comparisons:
        head += [f"{c.machine} vs {c.gpu}", "fractal bound", "GPU bound"]
    body = []
    keys = list(dict.fromkeys((r.program, r.batch) for r in rows))
    for program, batch in sorted(keys, key=lambda k: (list(WORKLOADS).index(k[0])
                                                      if k[0] in WORKLOADS else 99, k[1])):
        line = [program, str(batch)]
        for c in comparisons:
            r = next(r for r in rows if (r.program, r.batch, r.machine, r.gpu)
                     == (program, batch, c.machine, c.gpu))
            line += [f"{r.speedup:.2f}x / {r.efficiency:.2f}x", r.fractal_bound, _gpu_bound(r)]
        body.append(line)
    for batch in dict.fromkeys(k[1] for k in keys):
        line = ["geometric mean", str(batch)]
        for c in comparisons:
            mine = [r for r in rows if (r.batch, r.machine, r.gpu) == (batch, c.machine, c.gpu)]
            line += [f"{geomean(r.speedup for r in mine):.2f}x / "
                     f"{geomean(r.efficiency for r in mine):.2f}x", "", ""]
        body.append(line)
    return _table(head, body, markdown, "speed-up / efficiency at each batch")


def area_rows(comparisons) -> list[dict]:
    """Each comparison's silicon: the fractal machine's by the area model (machine/area.py)
    against the GPU system's dies, beside the paper's claim."""
    from machine import machine_area
    out = []
    for c in comparisons:
        m, g = api.build_machine(c.machine), load_gpu(c.gpu)
        fractal, gpu = machine_area(m).total, g.gpus * g.die_area_mm2
        out.append({"machine": c.machine, "gpu": c.gpu, "fractal_mm2": fractal, "gpu_mm2": gpu,
                    "process_nm": m.process_nm, "saving": 1 - fractal / gpu,
                    "paper_saving": c.paper_area_saving})
    return out


def plot(rows: list[Row], comparisons, path: Path) -> None:
    """Per program, the speed-up and the efficiency gain of each comparison (log scale), with the
    geometric mean and the paper's ratio as lines."""
    # lazy: matplotlib takes ~0.3 s, and its Agg backend is chosen only when a figure is drawn
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
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
            plain_log(ax, "y")
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
        if csv.is_file():                 # the report's own output, from an earlier version too
            csv.unlink()
        with tempfile.TemporaryDirectory() as scratch:  # a new run, not a resumed one
            sweep(files, c.machine, list(SCALING_DEPTHS), list(SCALING_FANOUTS), [c.gpu], csv,
                  progress=False, store=Path(scratch) / "runs.sqlite")
        figures.append(plot_sweep(csv, "speedup", folder / f"{c.machine}_scaling.png", gpu=c.gpu))
    return figures
