"""The Pareto front: the points no other point dominates, computed exactly over all of them.

A point dominates another when it is at least as good in every objective and better in one
(lower where the objective is minimised, higher where it is maximised). Points with equal
objectives dominate neither each other: all of them are on the front.
"""
from __future__ import annotations

import numpy as np

__all__ = ["front", "Front"]


def _costs(values, minimise) -> np.ndarray:
    """Objective values as costs to minimise (maximised ones negated)."""
    a = np.asarray(values, dtype=float).reshape(len(values), len(minimise))
    return a * np.where(np.asarray(minimise), 1.0, -1.0)


def front(values, minimise) -> list[int]:
    """Indices of the non-dominated rows of `values` (one row per point, one column per
    objective), in order. `minimise[j]`: objective j is minimised (else maximised)."""
    if len(values) == 0:
        return []
    costs = _costs(values, minimise)
    on = []
    for i, c in enumerate(costs):
        no_worse = np.all(costs <= c, axis=1)
        better = np.any(costs < c, axis=1)
        if not np.any(no_worse & better):
            on.append(i)
    return on


class Front:
    """A front kept up to date as points arrive (for a progress bar): `len(front)`."""

    def __init__(self, minimise):
        self.sign = np.where(np.asarray(minimise), 1.0, -1.0)
        self.costs: list[np.ndarray] = []

    def add(self, values) -> None:
        c = np.asarray(values, dtype=float) * self.sign
        if any(np.all(k <= c) and np.any(k < c) for k in self.costs):
            return
        self.costs = [k for k in self.costs if not (np.all(c <= k) and np.any(c < k))] + [c]

    def __len__(self) -> int:
        return len(self.costs)
