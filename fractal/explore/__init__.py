"""Design-space exploration: the best machines for a set of workloads under area, power and
size budgets (`docs/explore.md`).

    from fractal.explore import explore
    result = explore("programs/explore/f1_neighbourhood.toml", out="study")

`spec` reads and validates the explore spec, `space` builds its design points, `evaluate` runs
them (the sweep's timing-only runs, memoized across machines), `search` drives a grid or an
optuna sampler over the results store, `outcome` and `pareto` judge the points, `report`
writes the points and the summary of the best machines, `figure` draws them and `writeback`
writes a chosen machine out as a machine file.
"""
__all__ = ["explore", "ExploreResult", "Spec", "load_spec", "spec_from_dict"]


def __getattr__(name):
    # lazy: `fractal plot` and `fractal --help` import this package; the explorer loads the
    # compiler, the simulator and tqdm
    if name in ("explore", "ExploreResult"):
        from fractal.explore import search
        return getattr(search, name)
    if name in ("Spec", "load_spec", "spec_from_dict"):
        from fractal.explore import spec
        return getattr(spec, name)
    raise AttributeError(f"module 'fractal.explore' has no attribute {name!r}")
