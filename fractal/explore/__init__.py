"""Design-space exploration: the best machines for a set of workloads under area, power and
size budgets (`docs/explore.md`).

    from fractal.explore import explore, load_spec
    result = explore("programs/explore/f1_neighbourhood.toml", out="study")

`spec` reads and validates the explore spec, `space` builds its design points, `evaluate` runs
them (the sweep's timing-only runs, memoized across machines), `search` drives a grid or an
optuna sampler over the results store, `pareto` finds the front, and `report` writes the
points, the summary of the best machines and a chosen machine's file.
"""
from fractal.explore.spec import Spec, load_spec, spec_from_dict
from fractal.explore.search import explore, ExploreResult

__all__ = ["explore", "ExploreResult", "Spec", "load_spec", "spec_from_dict"]
