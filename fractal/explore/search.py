"""The explorer's driver: evaluate design points through the results store, by an exhaustive grid
or an optuna sampler, and write the outcome.

Every run is the sweep's timing-only evaluation under the sweep's key (`fractal.sweep`), looked
up in the results store first, so a resumed exploration, a second explorer on the same store and
a sweep share their runs. Missing runs go to local worker processes or a Dask cluster
(`fractal.sweep`'s machinery), grouped by their levels below the root and by timing class,
so that one worker reuses what it planned (`fractal.explore.evaluate`). Each run is stored the moment it arrives.

The grid evaluates every point of the space. NSGA-II (several objectives) or TPE (one) propose
`trials` points, BATCH at a time, told back in the order asked: a seeded search proposes the
same points again, so `--resume` replays it with the runs taken from the store. The base
machine's row is made first (the "base" budgets are its own); a grid's runs, the base's among
them, all go to the workers at once, only the leaves and area budgets (known from the base
machine without a run) keeping a point from running. The front is computed
exactly over every feasible point evaluated; infeasible points are kept with their reason.
"""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from compiler.decompose import plan_inputs
from compiler.tables import frame, html_table
from fractal.explore.evaluate import Evaluation, Job, run_job, timing_class
from fractal.explore.outcome import PRECHECKED, outcome, precheck
from fractal.explore.pareto import Front, front
from fractal.explore.share import shared_results
from fractal.explore.spec import OBJECTIVES, Spec, load_spec
from fractal.explore.space import (DESIGN_POINT, DesignPoint, base_point, design_point,
                                   fingerprint, grid)
from fractal.store import Store, evaluation_key, plain, program_inputs
from fractal.sweep import SIMULATION, TIMING, Progress, _results, timing_inputs
from isa.errors import InternalError, UserError

__all__ = ["explore", "ExploreResult", "BATCH"]

#: points an optuna sampler proposes before it is told their outcomes
BATCH = 8


@dataclass
class ExploreResult:
    """What an exploration found: every point's row (`report.COLUMNS`), the front's, the
    budgets, how many runs it made now, and where it wrote."""
    spec: Spec
    points: list
    front: list
    budgets: dict
    ran: int
    out: Path
    store: str

    def to_frame(self):
        """Every point's row as a pandas DataFrame (the columns of points.csv)."""
        return frame(self.points)

    def _repr_html_(self) -> str:
        return html_table(self.points, f"{len(self.points)} design points, {len(self.front)} on "
                                       f"the front ({self.ran} run now)")


class _Study:
    def __init__(self, spec: Spec, db: Store, workers, dask, bar):
        self.spec, self.db, self.workers, self.dask, self.bar = spec, db, workers, dask, bar
        self.digests = [program_inputs(w.program) for w in spec.workloads]
        self.budgets: dict = {}
        self.rows: dict = {}            # name -> the point's row
        self.ran = 0
        self.record = True              # store design-point evaluations
        self.base_fp = fingerprint(spec.base)
        self.tracker = Front([OBJECTIVES[o][1] for o in spec.objectives])

    def _name(self, p: DesignPoint) -> str:
        return p.name or "invalid " + repr(p.values)

    def evaluate(self, points: list[DesignPoint]) -> list[dict]:
        """The rows of these points: from earlier in this study, the store, or runs made now."""
        points = self._known(points)
        had = len(points) - len(self._todo(points))     # points this study had already
        self.run(points, self._finish)
        self.bar.update(had)
        return [self.rows[self._name(p)] for p in points]

    def _known(self, points: list[DesignPoint]) -> list[DesignPoint]:
        """The points, a machine equal to the base's as the base point."""
        return [base_point(self.spec) if p.machine is not None and not p.is_base
                and fingerprint(p.machine) == self.base_fp else p for p in points]

    def _todo(self, points: list[DesignPoint]) -> list[DesignPoint]:
        """The points without a row in this study, each once."""
        todo, seen = [], set()
        for p in points:
            if self._name(p) not in self.rows and self._name(p) not in seen:
                seen.add(self._name(p))
                todo.append(p)
        return todo

    def run(self, points: list[DesignPoint], finish=None):
        """Make the timing runs these points need that the store lacks (a point over the
        leaves or area budget needs none), storing each as it arrives; `finish(p, pre, runs,
        results)` for each point once its runs are all in (by default, the progress bar
        moves)."""
        todo = self._todo(points)
        pre = {self._name(p): precheck(p, self.budgets) for p in todo}
        runs = {}                       # key -> (point name, workload index, inputs)
        for p in todo:
            if not pre[self._name(p)]["reason"]:
                for i, w in enumerate(self.spec.workloads):
                    inputs = timing_inputs(w.program, p.machine, self.digests[i])
                    runs[evaluation_key(TIMING, inputs)] = (p, i, inputs)
        results = self.db.get_many(runs)
        # by what the plans below the root depend on, then by timing class: a worker that runs
        # one group reuses the lower levels' plans across its classes and derives within each
        groups: dict = {}
        for key, (p, i, _) in runs.items():
            if key not in results:
                w = self.spec.workloads[i]
                c = timing_class(p.machine)
                below = plan_inputs(c, 1) if c.depth else c.compute
                groups.setdefault(below, {}).setdefault(c, []).append(
                    Evaluation(key, w.label, w.program, p.machine))
        pending = dict.fromkeys((self._name(p) for p in todo), 0)
        for key, (p, _, _) in runs.items():
            pending[self._name(p)] += key not in results
        finish = finish or (lambda *_: self.bar.update())
        for p in todo:
            if not pending[self._name(p)]:
                finish(p, pre, runs, results)
        n = (os.cpu_count() or 1) if self.workers is None else self.workers
        if len(groups) >= n or self.dask is not None:   # a group to a worker
            jobs = [Job(tuple(e for c in g.values() for e in c)) for g in groups.values()]
            finished = (done for _, done in _results(jobs, max(1, min(n, len(jobs))), self.dask,
                                                    run_job))
        else:               # a timing class to all workers at once, what they plan passed on
            classes = [c for g in groups.values() for c in g.values()]
            jobs = [Job(tuple(c), (i, n), k) for k, c in enumerate(classes) for i in range(n)]
            finished = shared_results(jobs, n)
        for done in (finished if jobs else ()):
            for key, (kind, value) in done:
                if kind == "internal":
                    raise InternalError(*value)
                p, _, inputs = runs[key]
                self.db.put(key, TIMING, inputs, value)
                results[key] = value
                self.ran += 1
                pending[self._name(p)] -= 1
                if not pending[self._name(p)]:
                    finish(p, pre, runs, results)

    def _finish(self, p: DesignPoint, pre: dict, runs: dict, results: dict):
        """Record a point whose runs are all in: its row, its design-point evaluation."""
        info = pre[self._name(p)]
        if not info["reason"]:
            mine = {i: results[k] for k, (q, i, _) in runs.items() if q is p}
            info = outcome(info, [(w.label, w.weight, mine[i])
                                  for i, w in enumerate(self.spec.workloads)], self.budgets)
        row = {"name": self._name(p) if p.machine is not None else "", "is_base": p.is_base,
               **dict(p.values), **info, "feasible": not info["reason"], "key": ""}
        if p.machine is not None and self.record:
            inputs = {"machine": plain(p.machine), "simulation": SIMULATION,
                      "workloads": [{"program": d, "weight": w.weight, "label": w.label}
                                    for d, w in zip(self.digests, self.spec.workloads)],
                      "budgets": self.budgets}
            row["key"] = evaluation_key(DESIGN_POINT, inputs)
            self.db.put(row["key"], DESIGN_POINT, inputs,
                        {k: v for k, v in info.items() if v is not None})
        self.rows[self._name(p)] = row
        if row["feasible"]:
            self.tracker.add([row[OBJECTIVES[o][0]] for o in self.spec.objectives])
        self.bar.update()
        self.bar.set_postfix(feasible=sum(r["feasible"] for r in self.rows.values()),
                             front=len(self.tracker), refresh=False)


def _budgets(study: _Study, base: dict, names=None) -> dict:
    """The spec's budgets in numbers, "base" resolved to the base machine's own (only those
    in `names`, if given)."""
    out = {}
    for name, v in study.spec.constraints:
        if names is not None and name not in names:
            continue
        if v != "base":
            out[name] = v
        elif base.get(name) is None:
            raise UserError(f"the budget is the base machine's own {name}, but the base machine "
                            f"has none: {base['reason']}", f"{study.spec.file}: constraints.{name}")
        else:
            out[name] = base[name]
    return out


def _grid(study: _Study):
    study.evaluate(list(grid(study.spec)))


def _optuna(study: _Study):
    try:
        import optuna       # lazy: an optional extra (.[explore]), ~1 s to import
    except ImportError:
        raise UserError(f"method '{study.spec.method}' needs optuna, which is not installed",
                        f"{study.spec.file}: search.method",
                        hint="pip install -e \".[explore]\", or search with method = \"grid\"") from None
    spec = study.spec
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    directions = ["minimize" if OBJECTIVES[o][1] else "maximize" for o in spec.objectives]
    violation = lambda trial: trial.user_attrs["violation"]     # noqa: E731
    with warnings.catch_warnings():         # constraints_func is marked experimental
        warnings.simplefilter("ignore")
        if spec.method == "nsga2":
            sampler = optuna.samplers.NSGAIISampler(
                seed=spec.seed, constraints_func=violation,
                population_size=max(BATCH, min(50, spec.trials // 4)))
        else:
            sampler = optuna.samplers.TPESampler(seed=spec.seed, constraints_func=violation)
        study_ = optuna.create_study(directions=directions, sampler=sampler)
        dists = {p.name: optuna.distributions.IntDistribution(0, len(p.values) - 1)
                 for p in spec.parameters}
        asked = 0
        while asked < spec.trials:
            trials = [study_.ask(dists) for _ in range(min(BATCH, spec.trials - asked))]
            asked += len(trials)
            points = [design_point(spec, {p.name: p.values[t.params[p.name]]
                                          for p in spec.parameters}) for t in trials]
            for t, row in zip(trials, study.evaluate(points)):
                values = [row.get(OBJECTIVES[o][0]) for o in spec.objectives]
                if any(v is None for v in values):
                    study_.tell(t, state=optuna.trial.TrialState.FAIL)
                    continue
                t.set_user_attr("violation", [row[n] / b - 1 for n, b in study.budgets.items()
                                              if row.get(n) is not None])
                study_.tell(t, values)


def explore(spec: str | Path | Spec, out: str | Path, store: str | Path | None = None,
            workers: int | None = None, dask=None, resume: bool = False,
            progress: bool = True) -> ExploreResult:
    """Explore the spec's space (a path or a loaded `Spec`) into the folder `out`: every
    point's row in `out/points.csv`, the best machines in `out/summary.md`, runs in the results
    store (`store`, default `out/store.sqlite`). `resume`: continue in a folder an earlier
    exploration wrote. `workers`, `dask`: as `fractal.sweep.sweep`."""
    from fractal.explore import report      # lazy: its CSV and markdown writers
    spec = spec if isinstance(spec, Spec) else load_spec(spec)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise UserError(f"workers must be a positive integer, got {workers!r}", "--workers")
    if workers is not None and dask is not None:
        raise UserError("give either local workers or a Dask scheduler, not both", "--workers")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is not a folder", f"-o {out}", hint="choose another -o")
    if not resume and (out / report.POINTS).exists():
        raise UserError(f"{out} holds an exploration already", f"-o {out}",
                        hint="add --resume to continue it (its runs come from the store), or "
                             "choose another -o")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot make the folder {out}: {e.strerror}", f"-o {out}") from None
    path = str(store) if store is not None else str(out / "store.sqlite")
    total = 1 + (spec.size if spec.method == "grid" else spec.trials)
    with Store(path, "--store" if store is not None else f"-o {out}") as db, \
            Progress(total=total, unit="point", desc="explore", disable=not progress,
                     file=sys.stderr, dynamic_ncols=True) as bar:
        study = _Study(spec, db, workers, dask, bar)
        if spec.method == "grid":
            # every run of the grid at once, the base's among them, so that the workers start
            # together; a point over the leaves or area budget is known before any run
            study.budgets = _budgets(study, precheck(base_point(spec), {}), PRECHECKED)
            study.run(study._known([base_point(spec), *grid(spec)]))
            study.budgets = {}
            bar.reset(total)                    # the rows follow, from the store
        study.record = False                    # the base on no budget: what "base" means
        base_row, = study.evaluate([base_point(spec)])
        study.budgets, study.record = _budgets(study, base_row), True
        study.rows.clear()
        study.tracker = Front([OBJECTIVES[o][1] for o in spec.objectives])
        bar.reset(total)
        study.evaluate([base_point(spec)])      # again, against the budgets: from the store
        (_grid if spec.method == "grid" else _optuna)(study)
    rows = list(study.rows.values())
    feasible = [r for r in rows if r["feasible"]]
    on = front([[r[OBJECTIVES[o][0]] for o in spec.objectives] for r in feasible],
               [OBJECTIVES[o][1] for o in spec.objectives])
    for i in on:
        feasible[i]["on_front"] = True
    for r in rows:
        r.setdefault("on_front", False)
    result = ExploreResult(spec, rows, [feasible[i] for i in on], study.budgets, study.ran, out,
                           path)
    report.write(result)
    return result
