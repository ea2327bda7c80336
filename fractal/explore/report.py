"""An exploration's outputs: every point as a CSV row (`points.csv`), and a markdown summary of
the best machines, their parameters and how each differs from the base (`summary.md`).

The CSV has one row per design point evaluated, the base machine first: its key in the results
store (a design-point evaluation, whose inputs hold the whole machine: `fractal machines
--from-store KEY` writes it out), its machine's name, whether it is the base, feasible and on the
front, the reason it is infeasible, one column per parameter, the metrics (units in their
names) and the budgets. `fractal plot points.csv --kind pareto` draws it.
"""
from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

from fractal.explore.outcome import METRICS
from fractal.explore.spec import CONSTRAINTS, OBJECTIVES
from isa.errors import UserError

__all__ = ["write", "columns", "POINTS", "SUMMARY", "differences", "cell", "dominates"]

POINTS, SUMMARY = "points.csv", "summary.md"
FLAGS = ("key", "name", "is_base", "feasible", "on_front", "reason")
BUDGETS = tuple(f"budget_{c}" for c in CONSTRAINTS)


def columns(spec) -> list[str]:
    return [*FLAGS, *(p.name for p in spec.parameters), *METRICS, *BUDGETS]


def cell(v) -> str:
    """A value as the CSV writes it: numbers in their shortest round-trip form, a MAC array as
    [rows, columns], true/false."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


def _replace(path: Path, text: str):
    """Write `path` through a temporary file beside it and an atomic rename."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise UserError(f"cannot write {path}: {e.strerror}", f"-o {path.parent}") from None


def dominates(a: dict, b: dict, objectives) -> bool:
    """Whether row a is at least as good as b in every objective and better in one."""
    better = False
    for o in objectives:
        col, low = OBJECTIVES[o]
        if a.get(col) is None or b.get(col) is None:
            return False                    # a point that never ran dominates nothing
        x, y = (a[col], b[col]) if low else (b[col], a[col])
        if x > y:
            return False
        better |= x < y
    return better


def differences(row: dict, base: dict, spec) -> str:
    """The parameters in which a point differs from the base, as `name base -> value`."""
    out = [f"{p.name} {cell(base.get(p.name))} -> {cell(row.get(p.name))}"
           for p in spec.parameters if row.get(p.name) != base.get(p.name)]
    return ", ".join(out) or "none (the base machine)"


def _csv(result) -> str:
    import io
    header = columns(result.spec)
    budgets = {f"budget_{k}": v for k, v in result.budgets.items()}
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    rows = sorted(result.points, key=lambda r: (not r["is_base"], r["name"] or r["reason"]))
    for r in rows:
        writer.writerow(cell({**r, **budgets}.get(c)) for c in header)
    return buf.getvalue()


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else cell(v)


def _summary(result) -> str:
    spec, rows = result.spec, result.points
    base = next(r for r in rows if r["is_base"])
    feasible = [r for r in rows if r["feasible"]]
    objectives = spec.objectives
    cols = [OBJECTIVES[o][0] for o in objectives]
    shown = [*cols, *(c for c in ("area_mm2", "power_w") if c not in cols)]
    budgets = ", ".join(f"{k} at most {v:,.6g}" + (" (the base machine's own)" if dict(
        spec.constraints)[k] == "base" else "") for k, v in result.budgets.items()) or "none"
    search = (f"the grid of {spec.size:,} points" if spec.method == "grid" else
              f"{spec.method}, {spec.trials} trials, seed {spec.seed}")
    reasons: dict = {}
    for r in rows:
        if not r["feasible"]:
            kind = r["reason"].split(":")[0].split(" ")[0] if r["reason"] else "?"
            reasons[kind] = reasons.get(kind, 0) + 1
    better = [r for r in feasible if dominates(r, base, objectives)]
    lines = [f"# Exploration of {spec.file}", "",
             f"- base machine: {spec.base.name} ({spec.base.leaves:,} leaves)",
             "- workloads: " + ", ".join(f"{w.label} (weight {w.weight:g})"
                                         for w in spec.workloads),
             "- objectives: " + ", ".join(f"{o} ({'lower' if OBJECTIVES[o][1] else 'higher'} is "
                                          f"better, {OBJECTIVES[o][0]})" for o in objectives),
             f"- budgets: {budgets}",
             f"- search: {search}; {len(rows):,} points evaluated, {len(feasible):,} feasible, "
             f"{len(rows) - len(feasible):,} infeasible"
             + (" (" + ", ".join(f"{k}: {n}" for k, n in sorted(reasons.items())) + ")"
                if reasons else ""),
             f"- the front: {len(result.front)} points; {len(better)} feasible points dominate "
             f"the base machine" + ("" if base["feasible"] else
                                    f" (the base itself is infeasible: {base['reason']})"),
             "", "## Best machine per objective", "",
             "| objective | machine | value | base's | differences from the base |",
             "|---|---|---:|---:|---|"]
    for o, c in zip(objectives, cols):
        if not feasible:
            break
        # ties go to the point better in the other objectives, in their order
        pick = min(feasible, key=lambda r: [r[OBJECTIVES[k][0]] * (1 if OBJECTIVES[k][1] else -1)
                                            for k in (o, *objectives)])
        lines.append(f"| {o} | {pick['name']} | {_fmt(pick[c])} | {_fmt(base.get(c))} | "
                     f"{differences(pick, base, spec)} |")
    lines += ["", "## The Pareto front", "",
              "| machine | key | " + " | ".join(shown) + " | differences from the base |",
              "|---|---|" + "---:|" * len(shown) + "---|"]
    for r in sorted(result.front, key=lambda r: r[cols[0]]):
        lines.append(f"| {r['name']}{' (base)' if r['is_base'] else ''} | {r['key'][:12]} | "
                     + " | ".join(_fmt(r.get(c)) for c in shown)
                     + f" | {differences(r, base, spec)} |")
    lines += ["", f"The base machine: " + ", ".join(f"{c} {_fmt(base.get(c))}" for c in shown)
              + ".", "", "Every point, with its reason when infeasible, is in "
              f"`{POINTS}`. Write a machine out as a machine file with "
              f"`fractal machines --from-store KEY --store {result.store} -o machine.toml`.", ""]
    return "\n".join(lines)


def write(result) -> None:
    """Write `points.csv` and `summary.md` into the result's folder."""
    _replace(Path(result.out) / POINTS, _csv(result))
    _replace(Path(result.out) / SUMMARY, _summary(result))
