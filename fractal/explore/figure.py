"""`fractal plot points.csv --kind pareto`: an exploration's points on two of its metrics.

Feasible points are dots, infeasible ones (with metrics) grey crosses, the base machine a star;
the front of the two metrics drawn (the points no other feasible point beats on both) is a line,
each of its points labelled by the parameters in which it differs from the base. A metric with a
budget (area, power) has the budget drawn as a dashed line.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from fractal.explore.spec import CONSTRAINTS, OBJECTIVES
from isa.errors import UserError

__all__ = ["plot_pareto", "AXES"]

#: the metrics an axis may show: name -> (column, lower is better, label)
AXES = {o: (c, low, c.replace("_", " ")) for o, (c, low) in OBJECTIVES.items()}
#: the most front points labelled
MAX_LABELS = 8


def _read(path: Path):
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            raise UserError("not a regular file (a device, pipe or socket)", str(path))
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = [(reader.line_num, row) for row in reader]
            header = reader.fieldnames
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the exploration's points: "
                        f"{getattr(e, 'strerror', None) or e}", str(path)) from None
    except csv.Error as e:
        raise UserError(f"not a CSV file: {e}", str(path)) from None
    if not header:
        raise UserError("the file is empty: no header and no rows", str(path))
    return header, rows


def _float(text: str, column: str, path: Path, line: int) -> float | None:
    if text == "":
        return None
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"column '{column}' holds {text[:40]!r}, not a number",
                        f"{path}:{line}") from None
    return v if math.isfinite(v) else None


def _label(row: dict, base: dict | None, params: list[str]) -> str:
    if row.get("is_base") == "true":
        return "base"
    if base is None:
        return row.get("name", "")
    diff = [f"{p.split('.')[-1] if p.count('.') < 2 else '.'.join(p.split('.')[1:])}={row[p]}"
            for p in params if row.get(p) != base.get(p)]
    return "\n".join(diff[:3]) + ("\n..." if len(diff) > 3 else "")


def plot_pareto(results: str | Path, out: str | Path, x: str = "latency",
                y: str = "energy") -> Path:
    """Draw an exploration's points.csv on metrics `x` and `y` (names of `AXES`) into `out`."""
    from matplotlib.figure import Figure     # lazy: ~0.3 s
    from fractal.explore.pareto import front  # lazy: numpy
    path, out = Path(results), Path(out)
    for flag, name in (("--x", x), ("--y", y)):
        if name not in AXES:
            raise UserError(f"unknown metric '{name}' (one of {', '.join(AXES)})", flag)
    if x == y:
        raise UserError(f"--x and --y are both {x}: a front needs two metrics", "--y")
    header, rows = _read(path)
    (cx, lx, tx), (cy, ly, ty) = AXES[x], AXES[y]
    for needed in ("name", "is_base", "feasible", "reason", cx, cy):
        if needed not in header:
            raise UserError(f"no column '{needed}': not an exploration's points.csv (columns: "
                            f"{', '.join(header[:12])}{', ...' if len(header) > 12 else ''})",
                            str(path))
    params = header[header.index("reason") + 1:header.index("leaves")] \
        if "leaves" in header and header.index("leaves") > header.index("reason") else []
    pts = []
    for line, row in rows:
        a, b = _float(row[cx], cx, path, line), _float(row[cy], cy, path, line)
        if a is not None and b is not None:
            pts.append((a, b, row))
    if not pts:
        raise UserError(f"no point with values of both '{cx}' and '{cy}'", str(path))
    base = next((r for _, _, r in pts if r["is_base"] == "true"), None)
    good = [p for p in pts if p[2]["feasible"] == "true"]
    bad = [p for p in pts if p[2]["feasible"] != "true"]

    fig = Figure(figsize=(8, 5.5), layout="constrained")
    ax = fig.subplots()
    if bad:
        ax.scatter([p[0] for p in bad], [p[1] for p in bad], marker="x", color="0.6",
                   label="infeasible (over a budget)", zorder=2)
    if good:
        ax.scatter([p[0] for p in good], [p[1] for p in good], s=14, color="tab:blue",
                   label="feasible", zorder=3)
        on = sorted((good[i] for i in front([p[:2] for p in good], [lx, ly])),
                    key=lambda p: p[0])
        ax.plot([p[0] for p in on], [p[1] for p in on], color="tab:red", marker="o",
                label=f"front of {x} and {y}", zorder=4)
        step = max(1, math.ceil(len(on) / MAX_LABELS))
        for p in on[::step]:
            ax.annotate(_label(p[2], base, params), (p[0], p[1]), xytext=(6, 4),
                        textcoords="offset points", fontsize=7)
    if base is not None:
        ax.scatter([float(base[cx])], [float(base[cy])], marker="*", s=160, color="black",
                   label=f"base ({base['name']})", zorder=5)
    for name, draw, axis in ((x, ax.axvline, "x"), (y, ax.axhline, "y")):
        column = f"budget_{AXES[name][0]}" if AXES[name][0] in CONSTRAINTS else None
        if column in header:
            budget = next((_float(r[column], column, path, line) for line, r in rows
                           if r[column]), None)
            if budget is not None:
                draw(budget, color="black", linestyle="--", linewidth=1,
                     label=f"budget: {name} {budget:.4g}")
    for setter, values in ((ax.set_xscale, [p[0] for p in pts]),
                           (ax.set_yscale, [p[1] for p in pts])):
        if min(values) > 0 and max(values) / min(values) > 20:
            setter("log")
    better = lambda low: "lower" if low else "higher"     # noqa: E731
    ax.set_xlabel(f"{tx} ({better(lx)} is better)")
    ax.set_ylabel(f"{ty} ({better(ly)} is better)")
    ax.set_title(f"Design points of {path.parent.name or path.name}: {len(good)} feasible, "
                 f"{len(rows) - len(good)} infeasible", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    try:
        fig.savefig(out, dpi=150)
    except OSError as e:
        raise UserError(f"cannot write the figure: {e.strerror or e}", f"-o {out}") from None
    return out
