"""Figures from a sweep CSV (`fractal.sweep`): one metric against machine size (leaves, log
axis), one line per program.

Kinds: `speedup` and `efficiency` (ops per joule) relative to one GPU baseline, whose own line is
y = 1; `scaling` (ops per second, with the machine's peak dashed); `utilization` (the fraction of
peak). Where several (depth, fan-out) points of a program have the same number of leaves, the
line goes through the best of them. Rows with an error are left out.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from isa.errors import UserError

__all__ = ["plot", "KINDS", "FORMATS"]

FORMATS = (".png", ".svg", ".pdf")


@dataclass(frozen=True)
class Kind:
    column: str             # `{gpu}` stands for the GPU's tag
    ylabel: str             # `{GPU}` stands for its display name
    title: str
    log_y: bool
    gpu: bool = False


KINDS = {
    "speedup": Kind("speedup_vs_{gpu}", "speedup over {GPU} (GPU s / machine s)",
                    "Performance relative to {GPU}", log_y=True, gpu=True),
    "efficiency": Kind("efficiency_vs_{gpu}",
                       "ops/J relative to {GPU} (machine ops/J / GPU ops/J)",
                       "Energy efficiency relative to {GPU}", log_y=True, gpu=True),
    "scaling": Kind("ops_per_second", "throughput (ops/s)", "Throughput", log_y=True),
    "utilization": Kind("utilization", "utilization (fraction of peak ops/s)", "Utilization",
                        log_y=False),
}


def _read(path: Path) -> tuple[list[str], list[tuple[int, dict]]]:
    try:
        if path.exists() and not path.is_file() and not path.is_dir():    # a pipe would block
            raise UserError("not a regular file (a device, pipe or socket)", str(path))
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames
            rows = [(reader.line_num, row) for row in reader]
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the sweep results: {getattr(e, 'strerror', None) or e}",
                        str(path)) from None
    except csv.Error as e:
        raise UserError(f"not a CSV file: {e}", str(path)) from None
    if not header:
        raise UserError("the file is empty: no header and no rows", str(path))
    return header, rows


def _gpu_tag(header: list[str], gpu: str | None, path: Path) -> str:
    found = [c[len("speedup_vs_"):] for c in header if c.startswith("speedup_vs_")]
    if gpu is not None:
        tag = gpu.strip().lower()
        if tag not in found:
            raise UserError(f"no column 'speedup_vs_{tag}': the sweep has no GPU '{tag}' "
                            f"(GPUs in the file: {', '.join(found) or 'none'})", str(path),
                            hint="run the sweep again with --gpu " + tag)
        return tag
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError("no GPU columns (speedup_vs_NAME): the sweep was run without --gpu",
                        str(path), hint="run the sweep with --gpu NAME")
    raise UserError(f"the file has several GPUs ({', '.join(found)}): choose one with --gpu",
                    str(path))


def _number(text: str, column: str, path: Path, line: int, finite: bool = True) -> float:
    """The cell's number; `finite`: NaN and infinities are refused as not numbers."""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"column '{column}' holds {text[:40]!r}, not a number",
                        f"{path}:{line}") from None
    if finite and not math.isfinite(value):
        raise UserError(f"column '{column}' holds {text[:40]!r}, not a finite number",
                        f"{path}:{line}")
    return value


def _series(rows, column: str, path: Path) -> dict[tuple[str, str], dict[int, float]]:
    """Per (program, machine): leaves -> the best value of the column."""
    series: dict[tuple[str, str], dict[int, float]] = {}
    for line, row in rows:
        if row.get("error") or not row[column]:
            continue
        value = _number(row[column], column, path, line, finite=False)
        if not math.isfinite(value):        # NaN or infinite: no value to draw
            continue
        leaves = int(_number(row["leaves"], "leaves", path, line))
        points = series.setdefault((row["program"], row["machine"]), {})
        points[leaves] = max(value, points.get(leaves, value))
    if not series:
        raise UserError(f"no rows with a value in column '{column}' (every row is empty, NaN "
                        f"or infinite there, or has an error)", str(path))
    return series


def plot(results: str | Path, kind: str, out: str | Path, gpu: str | None = None,
         x: str = "latency", y: str = "energy") -> Path:
    """Draw one kind of figure from a sweep CSV into `out` (.png, .svg or .pdf); `pareto`: an
    exploration's points.csv on metrics `x` and `y` (`fractal.explore.figure`)."""
    from matplotlib.figure import Figure  # lazy: ~0.3 s, and every `fractal` start loads plot.py
    path, out = Path(results), Path(out)
    if kind not in KINDS and kind != "pareto":
        raise UserError(f"unknown plot kind '{kind}' (kinds: {', '.join(KINDS)}, pareto)",
                        "--kind")
    if out.suffix.lower() not in FORMATS:
        raise UserError(f"cannot tell the image format from '{out.name}': name it .png, .svg "
                        f"or .pdf", "-o")
    if kind == "pareto":
        from fractal.explore.figure import plot_pareto
        return plot_pareto(path, out, x, y)
    spec = KINDS[kind]
    header, rows = _read(path)
    tag = _gpu_tag(header, gpu, path) if spec.gpu else ""
    column = spec.column.format(gpu=tag)
    for needed in ("program", "machine", "leaves", column):
        if needed not in header:
            raise UserError(f"no column '{needed}' (columns: {', '.join(header)})", str(path))
    series = _series(rows, column, path)
    name = tag.upper()
    machines = sorted({m for _, m in series})

    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    all_leaves = set()
    for (program, machine), points in sorted(series.items()):
        leaves = sorted(points)
        all_leaves.update(leaves)
        label = Path(program).stem + (f" ({machine})" if len(machines) > 1 else "")
        ax.plot(leaves, [points[n] for n in leaves], marker="o", label=label)
    if spec.gpu:
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label=f"{name} (= 1)")
        ax.annotate(name, xy=(1.0, 1.0), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=9)
    if kind == "scaling" and "peak_ops_per_second" in header:
        _draw_peak(ax, rows, path)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(all_leaves), [f"{n:,}" for n in sorted(all_leaves)])
    ax.minorticks_off()
    if spec.log_y:
        ax.set_yscale("log")
    if kind == "utilization":
        ax.set_ylim(0, 1.05)
    ax.set_xlabel("machine size (leaves, log scale)")
    ax.set_ylabel(spec.ylabel.format(GPU=name))
    ax.set_title(f"{spec.title.format(GPU=name)} against machine size\n"
                 f"machine {', '.join(machines)}, timing-only simulation", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    try:
        fig.savefig(out, dpi=150)
    except OSError as e:
        raise UserError(f"cannot write the figure: {e.strerror or e}", f"-o {out}") from None
    return out


def _draw_peak(ax, rows, path: Path):
    peaks: dict[str, dict[int, float]] = {}
    for line, row in rows:
        if row["peak_ops_per_second"]:
            leaves = int(_number(row["leaves"], "leaves", path, line))
            peaks.setdefault(row["machine"], {})[leaves] = _number(
                row["peak_ops_per_second"], "peak_ops_per_second", path, line)
    for machine, points in sorted(peaks.items()):
        leaves = sorted(points)
        ax.plot(leaves, [points[n] for n in leaves], color="grey", linestyle="--", linewidth=1,
                label=f"peak ({machine})")


def plain_log(ax, which: str = "x") -> None:
    """Log-scale one axis of a matplotlib Axes, its ticks labelled as plain numbers (0.5, 2, 10)
    rather than powers of ten: the ratios of the reproduction and sensitivity figures."""
    from matplotlib.ticker import FuncFormatter  # lazy, as above
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)
    ax.tick_params(axis=which, which="minor", labelsize=7)
