"""Machine-size sweeps: rows against direct runs, resume from the results store after SIGKILL, a
Dask cluster giving the same rows, and the errors a user can cause."""
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fractal import api
from fractal import sweep as sweep_module
from fractal.cli import main
from fractal.commands.sweep import int_range
from fractal.store import Store
from fractal.sweep import KEY, PROVENANCE, columns, read_rows, sweep
from isa.errors import UserError

from tests.sweep.sweep_helpers import GRID, N_POINTS, PROGRAMS, ROOT, fractal

MLP = PROGRAMS[0]


def data_lines(path) -> list[str]:
    return Path(path).read_text().splitlines()[1:]


def stored_runs(path) -> int:
    """Timing rows in a results store (0 while it is being created)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT count(*) FROM evaluations WHERE kind = 'timing'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_rows_match_direct_runs(reference):
    from fractal.baseline import estimate, load_gpu
    rows = read_rows(reference)
    assert len(rows) == N_POINTS
    assert [(r["depth"], r["fanout"]) for r in rows[:6]] == [
        (d, str(f)) for d in (1, 2) for f in (2, 4, 8)]          # key order
    gpu_seconds = estimate(api.load_program(ROOT / "programs/mlp.fasm"), load_gpu("v100")).seconds
    for row in rows:
        assert row["leaves"] == int(row["fanout"]) ** row["depth"]
        assert row["error"] is None
    for row in [r for r in rows if r["program"] == MLP][::3]:
        r = api.run(row["program"], api.build_machine("tiny", row["depth"],
                                                             int(row["fanout"])), functional=False)
        assert (row["cycles"], row["ops"], row["energy_joules"]) == (r.cycles, r.ops,
                                                                       r.energy_joules)
        assert row["ops_per_second"] == pytest.approx(r.ops / r.cycles * 1e9)   # tiny: 1 GHz
        assert row["traffic_bytes_total"] == sum(lv["bytes_in"] + lv["bytes_out"]
                                                 for lv in r.levels)
        assert row["gpu_v100_seconds"] == gpu_seconds
        assert row["speedup_vs_v100"] == pytest.approx(gpu_seconds / r.seconds)


def test_killed_sweep_resumes_to_the_same_file(reference, tmp_path):
    out, store = tmp_path / "results.csv", tmp_path / "results.sqlite"
    # one tool version for both processes, whatever source edits happen between them
    env = {**os.environ, "FRACTAL_STORE_VERSION": "killed-sweep-test"}
    proc = subprocess.Popen([sys.executable, "-m", "fractal.cli", "sweep", *PROGRAMS, *GRID,
                             "-o", str(out), "--workers", "1"], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if store.exists() and stored_runs(store) >= 3:
            break
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep ended before it could be killed"
    before = stored_runs(store)
    assert 3 <= before < N_POINTS
    assert not out.exists()                 # the CSV is written at the end only

    res = subprocess.run([sys.executable, "-m", "fractal.cli", "sweep", *PROGRAMS, *GRID,
                          "-o", str(out)], cwd=ROOT, capture_output=True, text=True, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"({N_POINTS - before} run now, {before} from the results store" in res.stdout
    assert stored_runs(store) == N_POINTS
    # the same rows as an uninterrupted sweep; only the version in the keys differs (the override)
    strip = lambda rows: [{k: v for k, v in r.items() if k not in PROVENANCE} for r in rows]
    assert strip(read_rows(out)) == strip(read_rows(reference))
    assert {r["tool_version"] for r in read_rows(out)} == {"killed-sweep-test"}


def test_resume_runs_only_the_missing_points(reference, tmp_path, monkeypatch):
    out = tmp_path / "results.csv"
    first = sweep(PROGRAMS, "tiny", [1], [2, 4], ["v100"], out, workers=1, progress=False)
    assert len(first) == first.ran == 4
    ran = []
    run_point = sweep_module.run_point

    def run_and_look(point):
        ran.append(point.key)
        return run_point(point)
    monkeypatch.setattr(sweep_module, "run_point", run_and_look)
    rows = sweep(PROGRAMS, "tiny", [1, 2], [2, 4, 8], ["v100"], out, workers=1, progress=False)
    done = {tuple(str(r[k]) for k in KEY) for r in first}
    assert len(ran) == rows.ran == N_POINTS - 4 and not done & set(ran)
    assert len(rows) == N_POINTS
    assert out.read_bytes() == reference.read_bytes()


def test_dask_cluster_gives_the_same_rows(reference, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "results.csv"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        rows = sweep(PROGRAMS, "tiny", [1, 2], [2, 4, 8], ["v100"], out,
                     dask=cluster.scheduler_address, progress=False)
    assert len(rows) == N_POINTS
    assert sorted(data_lines(out)) == sorted(data_lines(reference))
    assert rows == read_rows(reference)


def test_a_torn_header_is_rewritten(tmp_path):
    out = tmp_path / "results.csv"
    out.write_text(",".join(columns())[:30])
    rows = sweep([MLP], "tiny", 1, 4, out=out, workers=1, progress=False)
    assert len(rows) == 1 and out.read_text().splitlines()[0] == ",".join(columns())


def test_a_program_that_does_not_fit_is_an_error_row(tmp_path, capsys):
    big = tmp_path / "big.fasm"
    big.write_text("tensor x : f32[4096, 4096] input\ntensor y : f32[4096, 4096] output\n"
                   "relu y, x\n")
    out = tmp_path / "results.csv"
    # exit status 1: some points failed, and their rows say why
    assert main(["sweep", str(big), MLP, "--machine", "tiny", "--depth", "1",
                 "--fanout", "2", "-o", str(out), "--workers", "1"]) == 1
    assert "2 runs in" in capsys.readouterr().out
    by_program = {Path(r["program"]).name: r for r in read_rows(out)}
    assert "67,108,864" in by_program["big.fasm"]["error"] or \
        "more than" in by_program["big.fasm"]["error"]
    assert by_program["big.fasm"]["cycles"] is None and by_program["big.fasm"]["leaves"] == 2
    assert by_program["mlp.fasm"]["error"] is None and by_program["mlp.fasm"]["cycles"] > 0


def test_unwritable_output_exits_2_without_traceback(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    for out in (not_a_dir / "results.csv", tmp_path / "missing" / "results.csv"):
        res = fractal("sweep", MLP, "--machine", "tiny", "--depth", "1",
                      "-o", out)
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        assert f"-o {out}: error: cannot open {out} for writing" in res.stderr


def test_full_disk_keeps_the_rows_written_before(reference, tmp_path, monkeypatch):
    out = tmp_path / "results.csv"
    puts = []
    real_put = Store.put

    def put(self, key, kind, inputs, result):
        if kind == "timing":
            puts.append(key)
            if len(puts) > 2:
                raise UserError("cannot write to the results store: database or disk is full",
                                self.where)
        return real_put(self, key, kind, inputs, result)
    monkeypatch.setattr(Store, "put", put)
    with pytest.raises(UserError, match="database or disk is full"):
        sweep(PROGRAMS, "tiny", [1, 2], [2, 4, 8], ["v100"], out, workers=1, progress=False)
    monkeypatch.undo()
    assert len(data_lines(out)) == 2                # the CSV shows the rows stored before
    assert set(data_lines(out)) <= set(data_lines(reference))
    rows = sweep(PROGRAMS, "tiny", [1, 2], [2, 4, 8], ["v100"], out, workers=1, progress=False)
    assert rows.ran == N_POINTS - 2
    assert out.read_bytes() == reference.read_bytes()


def test_a_full_store_or_csv_is_a_located_error(reference, tmp_path, monkeypatch):
    out = tmp_path / "results.csv"
    store = Store(tmp_path / "results.sqlite")
    store.close()

    class Full:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *args):
            if sql.startswith("INSERT") and "evaluations" in sql:
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

        def close(self):
            self.db.close()
    real_open = Store._open

    def open_full(self, create):
        real_open(self, create)
        self.db = Full(self.db)
    monkeypatch.setattr(Store, "_open", open_full)
    with pytest.raises(UserError, match=f"cannot write to the results store {tmp_path}.*"
                                        "database or disk is full") as e:
        sweep([MLP], "tiny", 1, 2, out=out, workers=1, progress=False)
    assert e.value.where == f"-o {out}"
    monkeypatch.undo()

    def replace(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(sweep_module.os, "replace", replace)
    with pytest.raises(UserError, match="No space left on device; every finished run is kept in "
                                        "the results store"):
        sweep([MLP], "tiny", 1, 2, out=out, workers=1, progress=False)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_header_mismatch_is_refused(reference, tmp_path, capsys):
    out = tmp_path / "results.csv"
    out.write_text("a,b,c\n1,2,3\n")
    argv = ["sweep", MLP, "--machine", "tiny", "--depth", "1", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"-o {out}: error: {out} exists but was not written by a sweep" in err
    assert "choose another -o or delete the file" in err
    assert out.read_text() == "a,b,c\n1,2,3\n"
    # a sweep's CSV with other GPU columns is replaced: it is written from the store
    other = tmp_path / "other.csv"
    other.write_bytes(reference.read_bytes())
    assert main(["sweep", MLP, "--machine", "tiny", "--depth", "1", "--fanout", "2",
                 "-o", str(other)]) == 0
    assert other.read_text().splitlines()[0] == ",".join(columns())


def test_rows_of_an_earlier_csv_are_never_trusted(reference, tmp_path):
    # the old CSV was the sweep's memory: a row in it was kept whatever it held
    out = tmp_path / "results.csv"
    lines = reference.read_text().splitlines(keepends=True)
    forged = lines[7].replace("tiny,1,2,2,", "tiny,1,2,999,", 1)
    assert forged != lines[7]
    out.write_text(lines[0] + lines[1] + forged + f"{MLP},tiny,1\n")
    sweep(PROGRAMS, "tiny", 1, 2, ["v100"], out, workers=1, progress=False)
    assert out.read_text() == lines[0] + lines[1] + lines[7]


def test_ranges():
    assert int_range("1..4") == (1, 2, 3, 4)
    assert int_range("2,4,8,16,32") == (2, 4, 8, 16, 32)
    assert int_range("1..3,8,2") == (1, 2, 3, 8)
    assert int_range("5") == (5,)


@pytest.mark.parametrize("flag, value, message", [
    ("--depth", "4..1", "empty range '4..1': its start is above its end"),
    ("--depth", "1..x", "expected N, A..B or a comma-separated list of them, got '1..x'"),
    ("--fanout", "0,2", "values must be at least 1, got 0 in '0,2'"),
    ("--fanout", "", "expected N, A..B"),
    ("--workers", "0", "must be at least 1"),
])
def test_bad_arguments_exit_2(flag, value, message, capsys, tmp_path):
    argv = ["sweep", MLP, flag, value, "-o", str(tmp_path / "r.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and message in err
    assert not (tmp_path / "r.csv").exists()


def test_bad_programs_machines_and_gpus_fail_before_the_file_is_made(tmp_path, capsys):
    out = tmp_path / "r.csv"
    for argv, message in [([str(ROOT / "programs" / "nope.fasm")], "nope.fasm"),
                          ([MLP, "--machine", "f2"], "unknown machine 'f2'"),
                          ([MLP, "--gpu", "v1000"], "unknown GPU 'v1000'")]:
        assert main(["sweep", *argv, "-o", str(out)]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()


def test_header_lists_key_metrics_and_gpu_columns():
    header = columns(["v100", "h100"])
    assert tuple(header[:4]) == KEY and header[-4:] == ["error", *PROVENANCE]
    for name in ("leaves", "seconds", "ops_per_second", "energy_joules", "ops_per_joule",
                 "speedup_vs_v100", "efficiency_vs_h100", "gpu_h100_energy_joules"):
        assert name in header
    assert len(header) == len(set(header))
    assert "wall_seconds" not in header


def test_a_broken_invariant_stops_the_sweep_with_status_3(tmp_path, monkeypatch, capsys):
    from isa.errors import InternalError

    def broken(*args, **kw):
        raise InternalError("cycles are positive and finite", "whole program", "0 cycles")
    monkeypatch.setattr(api, "run", broken)
    out = tmp_path / "r.csv"
    assert main(["sweep", MLP, "--machine", "tiny", "--depth", "1", "-o",
                 str(out), "--workers", "1"]) == 3
    assert ("invariant 'cycles are positive and finite' violated at whole program: 0 cycles"
            in capsys.readouterr().err)
    assert out.read_text() == ",".join(columns()) + "\n"            # no row for it


def test_the_machines_own_size_listed_again_is_one_point(tmp_path):
    # tiny is depth 1, fan-out 4: "keep its own" and "4" are the same point
    mlp = os.path.relpath(MLP)              # a relative path, as written from where the tests run
    rows = sweep([mlp, os.path.join(".", os.path.dirname(mlp), "..", "programs", "mlp.fasm")],
                 "tiny", None, [None, 4, 2], out=tmp_path / "r.csv", workers=1, progress=False)
    assert [(r["program"], r["depth"], r["fanout"]) for r in rows] == [
        (mlp, 1, "2"), (mlp, 1, "4")]


@pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux only")
def test_workers_are_forked_from_a_process_with_a_progress_bar_and_spawned_beside_a_thread():
    script = ("import sys, threading, time\n"
              "from fractal.sweep import Progress, _start_method\n"
              "with Progress(total=2, file=sys.stderr) as bar:\n"
              "    bar.update()\n"
              "    print(_start_method())\n"
              "    threading.Thread(target=time.sleep, args=(1,), daemon=True).start()\n"
              "    print(_start_method())\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fork", "spawn"]
