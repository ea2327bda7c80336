"""A design point's outcome: its size, area and, from its workloads' runs, its objectives,
power and feasibility against the budgets.

Over the workloads, run `weight` times each: latency is the weighted sum of their seconds,
energy that of their joules, EDP the product of the two, performance the weighted ops over the
latency (per mm2 of the machine's area, or per watt: ops per joule). Power is the highest
average power of one workload (its joules over its seconds): what the machine must be able to
draw. A point is infeasible, with its reason, when its values make no valid machine, when a
workload does not run on it (its message), or when it exceeds a budget; budgets on leaves and
area are checked before any run, so such a point costs nothing.
"""
from __future__ import annotations

from fractal.explore.spec import OBJECTIVES
from machine import machine_area

__all__ = ["precheck", "outcome", "METRICS", "PRECHECKED", "budget_reason"]

#: the columns of a point's outcome, units in their names
METRICS = ("leaves", "area_mm2", "power_w", *(c for c, _ in OBJECTIVES.values()), "ops")


#: the budgets a point is checked against before any run (`precheck`)
PRECHECKED = ("leaves", "area_mm2")


def _over(name: str, value: float, budget: float) -> str:
    unit = {"area_mm2": " mm2", "power_w": " W", "leaves": " leaves"}[name]
    return f"{name} {value:,.6g}{unit} over the budget of {budget:,.6g}{unit}"


def budget_reason(metrics: dict, budgets: dict, names=("leaves", "area_mm2", "power_w")) -> str:
    """Why the metrics exceed the budgets ('' when they do not)."""
    return "; ".join(_over(n, metrics[n], budgets[n]) for n in names
                     if n in budgets and metrics.get(n) is not None and metrics[n] > budgets[n])


def precheck(point, budgets: dict) -> dict:
    """What a point's machine gives before any run: its leaves, area, and the reason it is
    infeasible already (invalid, or over the leaves or area budget)."""
    if point.machine is None:
        return {"reason": point.invalid}
    m = point.machine
    metrics = {"leaves": m.leaves, "area_mm2": machine_area(m).total}
    return {**metrics, "reason": budget_reason(metrics, budgets, PRECHECKED)}


def outcome(pre: dict, rows: list[tuple[str, float, dict]], budgets: dict) -> dict:
    """The point's metrics and reason from its precheck and its workloads' runs
    [(label, weight, store result)]."""
    out = {**pre}
    errors = [f"workload {label}: {row['error']}" for label, _, row in rows if row.get("error")]
    if errors:
        out["reason"] = "; ".join(errors)
        return out
    latency = sum(w * row["seconds"] for _, w, row in rows)
    energy = sum(w * row["energy_joules"] for _, w, row in rows)
    ops = sum(w * row["ops"] for _, w, row in rows)
    perf = ops / latency if latency > 0 else 0.0
    out.update(
        power_w=max(row["energy_joules"] / row["seconds"] for _, _, row in rows),
        latency_seconds=latency, energy_joules=energy, edp_joule_seconds=energy * latency,
        ops_per_second_per_mm2=perf / out["area_mm2"] if out["area_mm2"] > 0 else 0.0,
        ops_per_second_per_watt=ops / energy if energy > 0 else 0.0, ops=ops)
    out["reason"] = budget_reason(out, budgets, ("power_w",))
    return out
