"""The results store: a changed input (machine file, program, included library, GPU, factors,
precision, version) is a new key and never an old row; two processes write one store; a writer
killed at any moment leaves whole rows; a damaged store is a located error; the export."""
import csv
import io
import importlib.metadata
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import time
from dataclasses import replace

import pytest

from fractal import api, store as store_module
from fractal.baseline import DEFAULT_FACTORS, load_gpu
from fractal.cli import main
from fractal.store import Store, evaluation_key, export_csv, plain, program_inputs
from fractal.sweep import PROVENANCE, timing_inputs, read_rows, sweep
from isa.errors import UserError
from machine import PRESET_DIR

from tests.sweep.sweep_helpers import ROOT

MLP = str(ROOT / "programs" / "mlp.fasm")


def only_row(path) -> dict:
    rows = read_rows(path)
    assert len(rows) == 1
    return rows[0]


def test_an_edited_machine_file_is_run_again(tmp_path, capsys):
    """The report: a sweep, frequency_hz doubled in the machine file, the same command again.
    It said "1 runs" and kept the old row."""
    machine = tmp_path / "m.toml"
    text = (PRESET_DIR / "tiny.toml").read_text()
    machine.write_text(text)
    out = tmp_path / "results.csv"
    argv = ["sweep", MLP, "--machine", str(machine), "--workers", "1", "-o", str(out)]
    assert main(argv) == 0
    assert "1 runs in" in capsys.readouterr().out
    before = only_row(out)
    assert "frequency_hz = 1.0e9" in text
    machine.write_text(text.replace("frequency_hz = 1.0e9", "frequency_hz = 2.0e9"))
    assert main(argv) == 0
    assert "1 run now, 0 from the results store" in capsys.readouterr().out
    after = only_row(out)
    # the same cycles at twice the clock: half the time, twice the peak (exact: a power of two)
    assert after["cycles"] == before["cycles"]
    assert after["seconds"] == before["seconds"] / 2
    assert after["peak_ops_per_second"] == 2 * before["peak_ops_per_second"]
    fresh = api.run(MLP, api.build_machine(str(machine)), functional=False)
    assert after["seconds"] == fresh.seconds
    # and back: the first row is still in the store, not run again
    machine.write_text(text)
    assert main(argv) == 0
    assert "0 run now, 1 from the results store" in capsys.readouterr().out
    assert only_row(out) == before


def test_an_edited_program_or_included_library_is_run_again(tmp_path):
    (tmp_path / "lib").mkdir()
    shutil.copy(ROOT / "programs" / "softmax.fasm", tmp_path / "p.fasm")
    library = tmp_path / "lib" / "softmax.fasm"
    shutil.copy(ROOT / "programs" / "lib" / "softmax.fasm", library)
    program, out = str(tmp_path / "p.fasm"), tmp_path / "r.csv"

    def once():
        rows = sweep([program], "tiny", out=out, workers=1, progress=False)
        direct = api.run(program, "tiny", functional=False)
        assert (rows[0]["cycles"], rows[0]["ops"]) == (direct.cycles, direct.ops)
        return rows

    first = once()
    assert first.ran == 1
    text = library.read_text()
    assert "  exp e, e\n" in text
    library.write_text(text.replace("  exp e, e\n", "  exp e, e\n  exp e, e\n"))   # more work
    second = once()
    assert second.ran == 1 and second[0]["ops"] > first[0]["ops"]
    source = (tmp_path / "p.fasm").read_text()
    (tmp_path / "p.fasm").write_text(source.replace("f32[256, 128]", "f32[128, 128]"))
    third = once()
    assert third.ran == 1 and third[0]["ops"] < second[0]["ops"]
    assert once().ran == 0                                  # nothing changed: from the store


def test_the_key_changes_with_every_input(monkeypatch):
    program = api.load_program(MLP)
    machine = api.build_machine("tiny", 2, 4)
    base = timing_inputs(program, machine)
    key = evaluation_key("timing", base)
    assert evaluation_key("timing", timing_inputs(api.load_program(MLP),
                                                  api.build_machine("tiny", 2, 4))) == key
    changed = {
        "frequency": replace(machine, frequency_hz=2e9),
        "leaf memory": replace(machine, levels=(*machine.levels[:-1],
                                                replace(machine.leaf, memory_bytes=8192))),
        "fan-out": api.build_machine("tiny", 2, 2),
        "depth": api.build_machine("tiny", 1, 4),
        "mac rate": replace(machine, compute=replace(machine.compute, mac_ops_per_cycle=64)),
        "link energy": replace(machine, levels=(replace(machine.levels[0],
                                                        link_pj_per_byte=11.0),
                                                *machine.levels[1:])),
    }
    keys = {name: evaluation_key("timing", timing_inputs(program, m)) for name, m in
            changed.items()}
    edited = api.load_program(open(MLP).read() + "\n# edited\n")
    keys["program"] = evaluation_key("timing", timing_inputs(edited, machine))
    keys["simulation"] = evaluation_key("timing", {**base, "simulation": {
        **base["simulation"], "objective": "energy"}})
    keys["kind"] = evaluation_key("gpu-estimate", base)
    monkeypatch.setattr(store_module, "tool_version", lambda: "9.9.9+0")
    keys["version"] = evaluation_key("timing", base)
    monkeypatch.undo()
    release = importlib.metadata.version("fractal-machines")
    assert re.fullmatch(re.escape(release) + r"\+[0-9a-f]{16}", store_module.tool_version())
    monkeypatch.setenv("FRACTAL_STORE_VERSION", "pinned")
    keys["pinned version"] = evaluation_key("timing", base)
    monkeypatch.undo()
    assert key not in keys.values() and len(set(keys.values())) == len(keys), keys

    v100 = load_gpu("v100")
    gpu = {"program": program_inputs(program), "gpu": plain(v100),
           "factors": plain(DEFAULT_FACTORS), "precision": "fp32"}
    gpu_key = evaluation_key("gpu-estimate", gpu)
    others = [{**gpu, "gpu": plain(replace(v100, memory_bandwidth=v100.memory_bandwidth * 2))},
              {**gpu, "gpu": plain(load_gpu("h100"))},
              {**gpu, "factors": plain(replace(DEFAULT_FACTORS, interconnect=0.5))},
              {**gpu, "precision": "fp16"}]
    others = {evaluation_key("gpu-estimate", g) for g in others}
    assert gpu_key not in others and len(others) == 4


def test_a_gpu_file_edit_gives_new_gpu_columns(tmp_path):
    from fractal.baseline import estimate
    gpu_file = tmp_path / "g.toml"
    text = (ROOT / "fractal" / "baseline" / "gpus" / "v100.toml").read_text()
    gpu_file.write_text(text)
    out = tmp_path / "r.csv"
    first = sweep([MLP], "tiny", out=out, gpus=[str(gpu_file)], workers=1, progress=False)
    assert "memory_bandwidth = { value = 900e9" in text
    gpu_file.write_text(text.replace("memory_bandwidth = { value = 900e9",
                                     "memory_bandwidth = { value = 225e9"))
    assert load_gpu(str(gpu_file)).memory_bandwidth == 225e9
    second = sweep([MLP], "tiny", out=out, gpus=[str(gpu_file)], workers=1, progress=False)
    tag = [c for c in second[0] if c.startswith("gpu_") and c.endswith("_seconds")][0]
    assert second.ran == 0                              # the simulation is the same
    assert second[0][tag] == estimate(MLP, load_gpu(str(gpu_file))).seconds != first[0][tag]


WRITER = """
import sys
import time
from fractal.store import Store, evaluation_key
path, who, n, pad = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Store(path) as s:
    for i in range(n):
        inputs = {"i": i, "shared": i % 2 == 0 and "both" or who}
        s.put(evaluation_key("test", inputs), "test", inputs, {"i": i, "pad": "x" * pad})
        print(i, flush=True)
"""


def writer(path, who, n, pad=10):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(n), str(pad)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_processes_write_one_store(tmp_path):
    path = tmp_path / "s.sqlite"
    procs = [writer(path, who, 300) for who in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    with Store(path, create=False) as s:
        rows = s.evaluations("test")
    # even i: one key both wrote (kept once); odd i: one key each
    assert len(rows) == 150 + 2 * 150
    assert sorted(r[4]["i"] for r in rows) == sorted([*range(0, 300, 2), *range(1, 300, 2),
                                                      *range(1, 300, 2)])


def test_two_sweeps_on_one_store_at_once(tmp_path):
    shared = tmp_path / "shared.sqlite"
    outs = [tmp_path / "a.csv", tmp_path / "b.csv"]
    procs = [subprocess.Popen([sys.executable, "-m", "fractal.cli", "sweep", MLP, "--machine",
                               "tiny", "--depth", "1", "--fanout", fanouts, "--workers", "1",
                               "-o", str(out), "--store", str(shared)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "FRACTAL_STORE_VERSION": "two-sweeps-test"})
             for fanouts, out in zip(("2,4,8", "8,4,2"), outs)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert outs[0].read_bytes() == outs[1].read_bytes()
    with Store(shared, create=False) as s:
        assert len(s.evaluations("timing")) == 3
    alone = sweep([MLP], "tiny", 1, [2, 4, 8], out=tmp_path / "alone.csv", workers=1,
                  progress=False)
    # the same numbers; the version and keys differ by FRACTAL_STORE_VERSION
    strip = lambda rows: [{k: v for k, v in r.items() if k not in PROVENANCE} for r in rows]
    assert alone.ran == 3 and strip(read_rows(outs[0])) == strip(alone)


def test_a_writer_killed_at_any_moment_leaves_whole_rows(tmp_path):
    path = tmp_path / "s.sqlite"
    started = 0
    for delay in (0.3, 0.45, 0.6, 0.8):
        p = writer(path, "a", 100_000, pad=200_000)    # 200 kB rows: a kill lands mid-write
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate()
        assert p.returncode == -signal.SIGKILL
        started = max(started, len(out.split()))
        with Store(path) as s:                          # checks every row's key and JSON
            rows = s.evaluations("test")
        numbers = sorted(r[4]["i"] for r in rows)
        assert numbers == list(range(len(numbers)))      # whole rows, none lost or twice
        assert all(r[4]["pad"] == "x" * 200_000 for r in rows)
        assert len(numbers) >= started                  # every row it reported is there
    assert started > 0


def _store_with_one_row(path):
    with Store(path) as s:
        inputs = {"n": 1}
        s.put(evaluation_key("test", inputs), "test", inputs, {"seconds": 1.5})


@pytest.mark.parametrize("damage, message", [
    ("junk", "file is not a database"),
    ("truncated", "cannot read the results store"),
    ("foreign", "is not a results store"),
    ("schema", "has schema '99'"),
    ("tampered-inputs", "the key is not the hash of the row's inputs"),
    ("tampered-result", "the row's checksum does not match its result"),
    ("not-json", "the row is not JSON"),
    ("folder", "it is a directory"),
])
def test_a_damaged_store_is_a_located_error(damage, message, tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    if damage == "junk":
        path.write_bytes(os.urandom(3000))
    elif damage == "folder":
        path.mkdir()
    elif damage == "foreign":
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (text TEXT)")
        db.close()
    else:
        _store_with_one_row(path)
        if damage == "truncated":
            data = path.read_bytes()
            path.write_bytes(data[:len(data) // 2])
        else:
            with sqlite3.connect(path) as db:
                db.execute({"schema": "UPDATE meta SET value = '99' WHERE name = 'schema'",
                            "tampered-inputs": "UPDATE evaluations SET inputs = '{\"n\":2}'",
                            "tampered-result": "UPDATE evaluations SET result = "
                                               "'{\"seconds\": 2.5}'",
                            "not-json": "UPDATE evaluations SET inputs = '{n'"}[damage])
            db.close()
    for argv, where in ([["store", "export", str(path), "-o", str(tmp_path / "e.csv")], str(path)],
                        [["sweep", MLP, "--machine", "tiny", "--workers", "1", "-o",
                          str(tmp_path / "r.csv"), "--store", str(path)], "--store"]):
        if damage in ("tampered-inputs", "tampered-result", "not-json") and argv[0] == "sweep":
            continue                    # the sweep reads only its own keys
        assert main(argv) == 2, damage
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.startswith(f"{where}") and "error: " in err and message in err, err
    if damage in ("tampered-inputs", "tampered-result", "not-json"):
        with pytest.raises(UserError, match="evaluation [0-9a-f]{16}"):
            with Store(path) as s:
                s.get_many([r[0] for r in sqlite3.connect(path).execute(
                    "SELECT key FROM evaluations")])


def test_export_has_the_sweeps_numbers_with_units(tmp_path, capsys):
    out = tmp_path / "r.csv"
    rows = sweep([MLP], "tiny", 1, [2, 4], ["v100"], out, workers=1, progress=False)
    exported = tmp_path / "e.csv"
    assert main(["store", "export", str(tmp_path / "r.sqlite"), "-o", str(exported),
                 "--kind", "timing"]) == 0
    assert "2 evaluations written" in capsys.readouterr().out
    with open(exported, newline="") as f:
        table = list(csv.DictReader(f))
    for name in ("seconds", "energy_joules", "ops_per_second", "machine_frequency_hz",
                 "traffic_bytes_total", "peak_ops_per_second"):
        assert name in table[0]
    by_leaves = {int(r["machine_leaves"]): r for r in table}
    for row in rows:
        got = by_leaves[row["leaves"]]
        assert float(got["seconds"]) == row["seconds"] and int(got["cycles"]) == row["cycles"]
        assert got["program"] == MLP and got["machine"] == f"tiny-d1f{row['fanout']}"
    with Store(tmp_path / "r.sqlite", create=False) as s:
        assert export_csv(s, exported) == 3               # and the GPU estimate


def test_the_store_and_the_csv_cannot_be_one_file(tmp_path, capsys):
    for argv, where in ([["-o", str(tmp_path / "r.sqlite")], f"-o {tmp_path / 'r.sqlite'}"],
                        [["-o", str(tmp_path / "r.csv"), "--store", str(tmp_path / "r.csv")],
                         "--store"]):
        assert main(["sweep", MLP, "--machine", "tiny", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"{where}: error: the results store and the CSV would be the same")
    assert list(tmp_path.iterdir()) == []


def test_csv_rows_carry_their_version_and_key_and_the_store_lists_their_inputs(tmp_path):
    """A row of the CSV names the tool version, the schema and its key in the store, under
    which `fractal store export` gives every parameter of the machine it ran on."""
    import csv
    from fractal.version import SCHEMA_VERSION
    from fractal.store import tool_version
    out = tmp_path / "r.csv"
    rows = sweep([MLP], "tiny", 1, [2], out=out, workers=1, progress=False)
    (row,) = read_rows(out)
    assert row["tool_version"] == tool_version() and row["schema_version"] == SCHEMA_VERSION
    assert row["evaluation"] == rows[0]["evaluation"]
    export = tmp_path / "all.csv"
    assert main(["store", "export", str(tmp_path / "r.sqlite"), "-o", str(export),
                 "--kind", "timing"], io.StringIO()) == 0
    (stored,) = list(csv.DictReader(export.open()))
    assert stored["key"] == row["evaluation"]
    assert any(v == "1000000000.0" or v == "1e9" or v.startswith("1000000000")
               for k, v in stored.items() if "frequency" in k), stored



OPENER = """
import sys, time
from fractal.store import Store, evaluation_key
path, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
while time.time() < start:                  # every opener is ready: open at one moment
    pass
with Store(path) as s:
    s.put(evaluation_key("test", {"who": who}), "test", {"who": who}, {"ok": 1})
"""


def test_processes_making_one_new_store_at_once_all_open_it(tmp_path):
    # the first openers of a new file race to switch its journal to WAL, which SQLite answers
    # with "locked" at once instead of waiting; every opener must still get the store
    for round in range(3):
        path, start = tmp_path / f"s{round}.sqlite", time.time() + 2
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(path), f"w{k}", str(start)],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for k in range(4)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        with Store(path, create=False) as s:
            assert len(s.evaluations("test")) == 4
