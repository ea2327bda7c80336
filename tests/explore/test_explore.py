"""The explorer on a small space: its front is the brute-forced front of fresh runs, infeasible
points keep their reasons, a resumed exploration runs nothing again, and a chosen machine
written back loads as the same machine."""
import csv
import itertools

import pytest

from fractal import api
from fractal.explore import explore
from fractal.explore.writeback import write_machine
from isa.errors import UserError
from machine import load_machine, machine_area
from tests.explore.helpers import SPEC, folder, machine_at

PARAMS = {"frequency_hz": [0.5e9, 1e9], "fanout": [2, 4, 8], "level.root.memory_bandwidth": [8, 64],
          "level.root.memory_bytes": [65536], "level.leaf.memory_bytes": [16, 4096]}
AREA, POWER = 0.6, 1.5


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explore")
    result = explore(folder(tmp), tmp / "out", workers=1, progress=False)
    return tmp, result


def brute_force():
    """Every point run fresh (`api.run`), judged and compared here: {values: metrics or reason}
    and the front, by the definition."""
    programs = [(api.load_program(f"{d}"), w) for d, w in ((LOGREG, 1), (MATMUL, 2))]
    outcome = {}
    for combo in itertools.product(*PARAMS.values()):
        values = dict(zip(PARAMS, combo))
        m = machine_at(values)
        area = machine_area(m).total
        if area > AREA:
            outcome[combo] = "area"
            continue
        try:
            runs = [(api.run(p, m, functional=False), w) for p, w in programs]
        except UserError as e:
            outcome[combo] = "fit: " + e.message
            continue
        latency = sum(w * r.seconds for r, w in runs)
        power = max(r.energy_joules / r.seconds for r, _ in runs)
        outcome[combo] = "power" if power > POWER else (latency, area)
    feasible = {c: v for c, v in outcome.items() if isinstance(v, tuple)}
    front = {c for c, v in feasible.items()
             if not any(o[0] <= v[0] and o[1] <= v[1] and o != v for o in feasible.values())}
    return outcome, front


LOGREG, MATMUL = "logreg.fasm", "matmul.fasm"


def test_the_front_is_the_brute_forced_front_of_fresh_runs(study, monkeypatch):
    tmp, result = study
    monkeypatch.chdir(tmp)
    outcome, front = brute_force()
    rows = {tuple(r[p] for p in PARAMS): r for r in result.points if not r["is_base"]}
    assert set(rows) == set(outcome)                # every point of the grid, none dropped
    for combo, expected in outcome.items():
        r = rows[combo]
        if isinstance(expected, tuple):
            assert r["feasible"] and (r["latency_seconds"], r["area_mm2"]) == expected
        else:
            assert not r["feasible"]
    assert {c for c, r in rows.items() if r["on_front"]} == front
    assert len(front) >= 2


def test_infeasible_points_are_kept_with_their_reason(study):
    _, result = study
    reasons = [r["reason"] for r in result.points if not r["feasible"]]
    assert any(r.startswith("area_mm2 ") and "over the budget of 0.6 mm2" in r for r in reasons)
    assert any(r.startswith("power_w ") and "over the budget of 1.5 W" in r for r in reasons)
    assert any(r.startswith("workload logreg: ") and "cannot be fitted" in r for r in reasons)
    tmp, _ = study
    with open(tmp / "out" / "points.csv", newline="") as f:
        written = list(csv.DictReader(f))
    assert len(written) == len(result.points) == 25     # 24 points and the base
    assert {r["reason"] for r in written if r["feasible"] == "false"} == set(reasons)


def test_a_resumed_exploration_runs_nothing_again(study):
    tmp, result = study
    before = (tmp / "out" / "points.csv").read_text()
    with pytest.raises(UserError, match="holds an exploration already"):
        explore(tmp / "spec.toml", tmp / "out", workers=1, progress=False)
    again = explore(tmp / "spec.toml", tmp / "out", workers=1, progress=False, resume=True)
    assert result.ran > 0 and again.ran == 0
    assert (tmp / "out" / "points.csv").read_text() == before


def test_a_machine_written_back_loads_with_the_chosen_parameters(study):
    tmp, result = study
    chosen = next(r for r in result.points if r["on_front"] and not r["is_base"])
    full, m, _ = write_machine(result.store, chosen["key"][:10], str(tmp / "chosen.toml"))
    loaded = load_machine(tmp / "chosen.toml")
    assert full == chosen["key"] and loaded == m and loaded.name == chosen["name"]
    values = {p: chosen[p] for p in PARAMS}
    assert (loaded.frequency_hz, loaded.fanouts[0], loaded.levels[0].memory_bandwidth,
            loaded.levels[0].memory_bytes, loaded.levels[1].memory_bytes) == tuple(values.values())
    assert loaded == machine_at(values).__class__(**{**vars(machine_at(values)),
                                                     "name": m.name, "description": m.description})


def test_a_seeded_search_proposes_the_same_points_again(study):
    pytest.importorskip("optuna")
    tmp, result = study
    spec = tmp / "nsga.toml"
    spec.write_text(SPEC.replace('objectives = ["latency", "area"]',
                                 'objectives = ["latency", "area"]\nmethod = "nsga2"\n'
                                 'trials = 12\nseed = 5'))
    first = explore(spec, tmp / "nsga", store=result.store, workers=1, progress=False)
    again = explore(spec, tmp / "nsga", store=result.store, workers=1, progress=False,
                    resume=True)
    assert first.points == again.points and again.ran == 0
    assert 1 < len(first.points) <= 13
    feasible = [r for r in first.points if r["feasible"]]
    for r in feasible:          # the front over what the search evaluated, by the definition
        beaten = any(o["latency_seconds"] <= r["latency_seconds"] and o["area_mm2"] <= r["area_mm2"]
                     and o is not r and (o["latency_seconds"], o["area_mm2"]) !=
                     (r["latency_seconds"], r["area_mm2"]) for o in feasible)
        assert r["on_front"] == (not beaten)


def test_the_commands_explore_plot_and_write_back(study):
    import io
    from fractal.cli import main
    tmp, result = study
    out = io.StringIO()
    assert main(["explore", str(tmp / "spec.toml"), "-o", str(tmp / "cli"), "--store",
                 result.store, "--workers", "1"], out) == 0
    assert "25 design points" in out.getvalue() and "(0 evaluations made now" in out.getvalue()
    assert main(["plot", str(tmp / "cli" / "points.csv"), "--kind", "pareto", "--x", "latency",
                 "--y", "area", "-o", str(tmp / "front.png")], out) == 0
    assert (tmp / "front.png").stat().st_size > 10_000
    (tmp / "bad.toml").write_text((tmp / "spec.toml").read_text().replace("fanout", "fan_out"))
    err = io.StringIO()
    import contextlib
    with contextlib.redirect_stderr(err):
        assert main(["explore", str(tmp / "bad.toml"), "-o", str(tmp / "bad")], out) == 2
    assert f"{tmp / 'bad.toml'}: vary.fan_out: error: unknown key 'fan_out'" in err.getvalue()


def test_an_exploration_is_a_table_in_a_notebook(study):
    """Like a sweep's rows: every point a row of `to_frame()`, and an HTML table for Jupyter."""
    pandas = pytest.importorskip("pandas")
    _, result = study
    df = result.to_frame()
    assert isinstance(df, pandas.DataFrame) and len(df) == len(result.points)
    assert int(df["feasible"].sum()) == sum(r["feasible"] for r in result.points)
    page = result._repr_html_()
    assert f"{len(result.points)} design points, {len(result.front)} on the front" in page


def test_base_budgets_are_the_base_machines_own_and_a_point_over_its_area_is_not_run(tmp_path):
    """The grid's runs start together, the base's among them: the area budget "base" is known
    before any run (the base's area), the power budget "base" after the base's run, and a point
    over the area budget costs no run."""
    from machine import preset
    spec = folder(tmp_path, SPEC_BASE)
    result = explore(spec, tmp_path / "out", workers=2, progress=False)
    base = next(r for r in result.points if r["is_base"])
    tiny = preset("tiny")
    assert result.budgets == {"area_mm2": machine_area(tiny).total, "power_w": base["power_w"]}
    params = {**PARAMS, "level.root.memory_bytes": [65536, 33554432]}   # 32 MB: over tiny's 16
    within = set()
    for combo in itertools.product(*params.values()):
        values = dict(zip(params, combo))
        if machine_area(machine_at(values)).total <= machine_area(tiny).total:
            within.add(combo)
    own = (tiny.frequency_hz, tiny.fanouts[0], tiny.levels[0].memory_bandwidth,
           tiny.levels[0].memory_bytes, tiny.levels[1].memory_bytes)
    assert 0 < len(within) < 48
    # two workloads a machine; a point equal to the base is the base
    assert result.ran == 2 * len(within | {own})
    rows = {tuple(r[p] for p in params): r for r in result.points if not r["is_base"]}
    assert len(rows) == 48
    for combo, r in rows.items():
        if combo in within:
            assert not r["reason"].startswith("area_mm2"), r["reason"]
        else:
            assert r["reason"].startswith("area_mm2 ") and not r["feasible"]
    over = [r for r in result.points if r["reason"].startswith("power_w ")]
    assert all(r["power_w"] > base["power_w"] for r in over)


SPEC_BASE = SPEC.replace("area_mm2 = 0.6\npower_w = 1.5", 'area_mm2 = "base"\npower_w = "base"') \
    .replace("memory_bytes = [65536]", "memory_bytes = [65536, 33554432]")


ONE_GROUP = SPEC.split("[vary]")[0] + """[vary]
frequency_hz = [0.5e9, 1e9]

[vary.level.root]
memory_bandwidth = [8, 16, 64]

[search]
objectives = ["latency", "energy"]
"""


def test_workers_planning_together_one_worker_and_dask_give_one_store(tmp_path):
    """Six machines with the same levels below the root (one group, three timing classes): two
    local workers plan each class together (`fractal.explore.share`), one worker runs them in
    turn, a Dask cluster runs them as one job; the stores hold the same evaluations."""
    from fractal.store import Store
    distributed = pytest.importorskip("distributed")
    spec = folder(tmp_path, ONE_GROUP)

    def evaluations(name, **how):
        result = explore(spec, tmp_path / name, progress=False, **how)
        with Store(result.store) as db:
            return result.ran, db.evaluations()
    ran, together = evaluations("two", workers=2)
    # two workloads on six machines, and each machine's design-point evaluation
    assert ran == 2 * 6 and len(together) == ran + 6
    assert evaluations("one", workers=1) == (ran, together)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert evaluations("dask", dask=cluster.scheduler_address) == (ran, together)
