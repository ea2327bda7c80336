"""Generated cases for the `fractal` command and the properties every outcome must have.

A `Case` is an argument vector, the files it names (written into a fresh directory before it
runs), the exit status it must end with (0, 2, or None for "0 or 2": a mutant may stay valid)
and what kind of location a rejection must carry. `make_case(rng, kind)` draws one case of a
kind; `run_case(case, directory)` runs it in process through `fractal.cli.main` (or through a real
subprocess) and `check_case` returns every property it breaks, as short strings:

- no traceback and no internal error reaches the user; the status is 0 or 2 (as expected);
- every rejection is located (see `located`): a program problem as FILE:LINE:COL (a whole-file
  problem, such as bytes that are not UTF-8, as FILE), a machine-file problem as FILE: KEY or
  FILE:LINE:COL, a data-file problem as the --input/--inputs argument (or the archive beside the
  program) with the tensor or file named, a bad argument by its name (--depth) or by argparse's
  message naming it; a resource limit by the program location, the argument or the machine key;
- valid programs: the leaves' outputs equal the reference interpreter's on the random machine;
  exact and symmetric simulation agree on small machines; the report invariants hold; two runs
  of the same input print byte-identical JSON (wall-clock fields excepted).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.fuzz import mutate
from tests.strategies import any_program, close_to_reference, machine_toml, random_machine

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("valid", "program", "machine", "data", "args", "files", "limits", "mapping", "store",
         "explore", "onnx")
CASE_SECONDS = 30           # a case that runs longer is reported as a hang


@dataclass
class Case:
    kind: str
    detail: str
    argv: list
    files: dict = field(default_factory=dict)      # relative path -> bytes (b"<dir>" for a folder)
    expect: int | None = None
    locate: str = "any"
    program: object = None                          # valid cases: checked through the API too
    machine: object = None
    repeat: bool = False                            # run twice, compare the JSON


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str
    seconds: float
    second_stdout: str | None = None


# ---------------------------------------------------------------- case generators

def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _small_program(rng):
    """A valid program small enough for a functional run in well under a second."""
    while True:
        p = any_program(rng)
        if sum(t.type.nbytes for t in p.tensors) <= 200_000:
            return p


def valid_case(rng) -> Case:
    program = _small_program(rng)
    machine = random_machine(rng, max_leaves=512, huge=True)
    files = {"p.fasm": program.source.encode(), "m.toml": machine_toml(machine).encode()}
    seed = str(int(rng.integers(0, 2**31)))
    argv, repeat = _pick(rng, [
        (["run", "p.fasm", "--machine", "m.toml", "--json", "--seed", seed], True),
        (["run", "p.fasm", "--reference", "--json", "--seed", seed], True),
        (["run", "p.fasm", "--machine", "m.toml", "--timing-only", "--json"], True),
        (["compile", "p.fasm", "--machine", "m.toml", "--json"], True),
        (["compile", "p.fasm", "--machine", "m.toml", "--summary"], False),
        (["compare", "p.fasm", "p.fasm", "--machine", "m.toml", "--json"], True),
        (["run", "p.fasm", "--machine", "m.toml", "--save-outputs", "out"], False),
        (["check", "p.fasm"], False),
        (["run", "p.fasm", "--machine", "m.toml", "--trace", "t.json"], False),
    ])
    # status 2 only when the machine's leaf memory is too small for the program (a located
    # "cannot be fitted", or a root memory smaller than the program's tensors): the smallest
    # random memories are barely enough on purpose
    return Case("valid", program.file.removeprefix("random_").removesuffix(".fasm"), argv, files,
                None, "program", program, machine, repeat)


def program_case(rng) -> Case:
    program = _small_program(rng)
    data, how = mutate.mutate_text(rng, program.source)
    argv = _pick(rng, [["check", "p.fasm"], ["run", "p.fasm", "--reference"],
                       ["run", "p.fasm", "--machine", "tiny"],
                       ["compile", "p.fasm", "--machine", "tiny", "--summary"]])
    expect = 2 if how in ("invalid-utf8", "empty") else None
    return Case("program", how, argv, {"p.fasm": data}, expect, "program")


def machine_case(rng) -> Case:
    machine = random_machine(rng, max_leaves=512, huge=True)
    text = machine_toml(machine)
    if rng.integers(0, 2):
        data, how = mutate.mutate_text(rng, text)
    else:
        table, how = mutate.mutate_table(rng, tomllib.loads(text))
        data = mutate.toml_text(table).encode()
    program = _pick(rng, ["programs/mlp.fasm", "programs/elementwise.fasm", "programs/knn.fasm"])
    argv = _pick(rng, [["compile", str(ROOT / program), "--machine", "m.toml", "--summary"],
                       ["run", str(ROOT / program), "--machine", "m.toml", "--timing-only"]])
    expect = 2 if how.split(":")[0] in ("invalid-utf8", "empty", "delete-key", "unknown-key",
                                        "drop-levels", "level-not-table") else None
    if how.startswith("delete-key") and how.endswith((".name", ".broadcast", ".buffering", ".duplex", ".note",
                                                      ".mac_array", ".vector_width",
                                                      ".array_fill_cycles", ".memory",
                                                      ".memory_share", ".bandwidth_share",
                                                      ".mac_ops_per_cycle_by_dtype",
                                                      ".memory_technology", "process_nm",
                                                      "description")):
        expect = None           # optional keys
    return Case("machine", how, argv, {"m.toml": data}, expect, "machine")


def data_case(rng) -> Case:
    from isa.reference import generate_feeds
    feeds = {}
    while not feeds:        # a program of fills alone (no input to feed) is drawn again
        program = _small_program(rng)
        feeds = generate_feeds(program, int(rng.integers(0, 1000)))
    name = _pick(rng, sorted(feeds))
    files = {"p.fasm": program.source.encode()}
    how = _pick(rng, ["npy", "npy", "npz", "sidecar", "spec", "missing"])
    if how == "npy":
        data, what, valid = mutate.mutate_array(rng, feeds[name])
        files["x.npy"] = data
        extra = ["--input", f"{name}=x.npy"]
    elif how in ("npz", "sidecar"):
        arrays = dict(feeds)
        sub = _pick(rng, ["drop", "unknown-name", "output-name", "object", "bad-array", "valid"])
        valid = sub in ("drop", "valid")
        if sub == "drop":
            arrays.pop(name)
        elif sub == "unknown-name":
            arrays[name + "_x"] = arrays.pop(name)
        elif sub == "output-name":
            arrays[program.outputs[0].name] = np.zeros(program.outputs[0].type.shape, np.float32)
        elif sub == "object":
            arrays[name] = np.array([{"a": 1}], dtype=object)
        elif sub == "bad-array":            # a type the tensor's dtype does not accept
            bad = np.int16 if arrays[name].dtype == np.float16 else np.float16
            arrays[name] = arrays[name].astype(np.float32).astype(bad)
        arrays = {k: mutate.on_disk(v) if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
        data = mutate.npz_bytes(arrays, allow_pickle=sub == "object")
        if how == "sidecar":
            files["p.npz"] = data
            extra = []
        else:
            files["d.npz"] = data
            extra = ["--inputs", "d.npz"]
        what = f"{how}:{sub}"
    elif how == "spec":
        files["x.npy"] = mutate.npy_bytes(mutate.on_disk(feeds[name]))
        spec, valid = _pick(rng, [(f"{name}", False), (f"={name}", False), (f"{name}=", False),
                                  (f"{name}x=x.npy", False), (f" {name} = x.npy", True),
                                  (f"{name}=x.npy=y", False), (f"{name}=.", False),
                                  (f"{name}=x.npy", True)])
        extra, what = ["--input", spec], f"spec:{spec}"
    else:
        extra, what, valid = ["--input", f"{name}=nothing.npy"], "missing-file", False
    base = _pick(rng, [["run", "p.fasm", "--reference"], ["run", "p.fasm", "--machine", "tiny"]])
    return Case("data", what, base + extra, files, 0 if valid else 2 if valid is False else None,
                "data")


# --- arguments: generic over every subcommand's parser

def parsers() -> dict:
    """Every (sub)command's parser by its words, e.g. {'run': p, 'baseline estimate': q}."""
    from fractal.cli import build_parser
    found = {}

    def walk(p, words):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    found[" ".join(words + [name])] = sp
                    walk(sp, words + [name])
    walk(build_parser(), [])
    return {k: v for k, v in found.items()
            if not any(isinstance(a, argparse._SubParsersAction) for a in v._actions)}


BAD_VALUES = ["0", "-1", "x", "", "1.5", "1,,2", "99999999999999999999999999", "-", "--",
              "nan", "1e3", "2**8", "\u00e9", "3,-2", " ", "0x10"]


def _bad_value(action) -> str | None:
    """A value that the option's type or choices reject, or None when it accepts anything."""
    for v in BAD_VALUES:
        if action.choices is not None and v not in action.choices:
            return v
        if action.type is not None and action.choices is None:
            try:
                action.type(v)
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                return v
    return None


#: values for workload parameters: sizes a generator takes, and values it must refuse
GEN_VALUES = ["1", "2", "3", "4", "8", "16", "64", "128", "129", "0", "-1", "x", "", "1.5",
              "3,-2", "4,8", "99999999999999999999", "prefill", "decode", "decod"]


def gen_case(rng) -> Case:
    """`fractal gen NAME` with a few of its parameters set to sizes it takes or values it must
    refuse (a size below its minimum, words, a list where a size goes, a mode it lacks, sizes
    that break a rule between parameters such as heads dividing hidden): 0 or a located 2."""
    from fractal.workloads import WORKLOADS
    name = _pick(rng, sorted(WORKLOADS))
    params = sorted(WORKLOADS[name].params) + ["dtype"]
    argv = ["gen", name]
    for key in rng.choice(params, size=int(rng.integers(1, 4)), replace=False):
        value = _pick(rng, ["f32", "f16", "bf16", "f64"]) if key == "dtype" else \
            _pick(rng, GEN_VALUES)
        argv += [f"--{key.replace('_', '-')}", value]
    return Case("args", f"gen {name}:params", argv, {}, None, "args")


def args_case(rng) -> Case:
    if rng.integers(0, 4) == 0:
        return gen_case(rng)
    table = parsers()
    words = _pick(rng, sorted(table))
    p = table[words]
    opts = [a for a in p._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    positionals = [a for a in p._actions if not a.option_strings]
    argv = words.split()
    for a in positionals:
        if a.nargs in ("?", "*", "...", argparse.REMAINDER):
            continue
        argv += [str(ROOT / "programs" / "mlp.fasm")] * (a.nargs if isinstance(a.nargs, int) else 1)
    typed = [a for a in opts if a.nargs != 0 and _bad_value(a) is not None]
    required = [a for a in positionals if a.nargs not in ("?", "*", "...", argparse.REMAINDER)]
    faults = ["unknown-option", "stray-dash"] + (["bad-value"] * 3 if typed else []) + \
        (["missing-positional"] if required else []) + (["missing-value"] if any(
            a.nargs is None for a in opts) else [])
    fault = _pick(rng, faults)
    if fault == "unknown-option":
        argv.append(_pick(rng, ["--bogus", "--jsn", "-Z", "---x", "--bogus=1"]))
    elif fault == "stray-dash":
        argv.append(_pick(rng, ["-Q", "-x", "--=1"]))
    elif fault == "bad-value":
        a = _pick(rng, typed)
        argv += [_pick(rng, a.option_strings), _bad_value(a)]
    elif fault == "missing-positional":
        argv = words.split()
    else:
        a = _pick(rng, [a for a in opts if a.nargs is None])
        argv.append(a.option_strings[0])
    return Case("args", f"{words}:{fault}", argv, {}, 2, "args")


BAD_FILES = {"missing.fasm": None, "folder": b"<dir>", "empty.fasm": b"", "junk.bin": None,
             "latin1.fasm": "tensor x : f32[2] input # caf\u00e9\n".encode("latin-1"),
             "bad.csv": b"a,b\n1,\n\xff\n", "bad.onnx": b"\x08\x07garbage",
             "bad.toml": b"[[level]\n"}


def files_case(rng) -> Case:
    """A command whose file arguments are missing, empty, folders or garbage; its required
    options are given plausible values. The command must refuse it, located, or handle it."""
    table = parsers()
    words = _pick(rng, sorted(w for w, p in table.items()
                             if any(not a.option_strings for a in p._actions)))
    p = table[words]
    argv, files = words.split(), {}
    for a in p._actions:
        if a.option_strings and a.required:
            value = a.choices and sorted(a.choices)[0] or "out.dat"
            argv += [a.option_strings[0], str(value)]
    for a in p._actions:
        if a.option_strings or a.nargs in ("?", "*", "...", argparse.REMAINDER):
            continue
        for _ in range(a.nargs if isinstance(a.nargs, int) else 1):
            name = _pick(rng, sorted(BAD_FILES))
            data = BAD_FILES[name]
            if name == "junk.bin":
                data = rng.bytes(int(rng.integers(0, 300)))
            if data == b"<dir>":
                (files.setdefault("folder/keep", b""))
            elif data is not None:
                files[name] = data
            argv.append(name)
    return Case("files", words, argv, files, None, "args")


# --- resource limits

def limits_case(rng) -> Case:
    how = _pick(rng, ["huge-tensor", "huge-window", "deep", "wide", "leaves", "deep-file",
                      "wide-file", "huge-timing"])
    if how in ("huge-tensor", "huge-timing"):
        dims = [int(rng.integers(10**4, 10**7)) for _ in range(int(rng.integers(3, 5)))]
        text = (f"tensor x : f32[{', '.join(map(str, dims))}] input\n"
                f"tensor y : f32[{', '.join(map(str, dims))}] output\nrelu y, x\n")
        if how == "huge-tensor":
            argv = _pick(rng, [["run", "p.fasm", "--reference"], ["run", "p.fasm"],
                               ["run", "p.fasm", "--machine", "big.toml"]])
            return Case("limits", how, argv, {"p.fasm": text.encode(), "big.toml": _big_root()},
                        2, "program")
        argv = ["run", "p.fasm", "--machine", "big.toml", "--timing-only", "--json"]
        return Case("limits", how, argv, {"p.fasm": text.encode(), "big.toml": _big_root()},
                    None, "program")
    if how == "huge-window":
        k = int(rng.integers(10**4, 10**9))
        op = _pick(rng, ["maxpool", "avgpool"])
        text = ("tensor x : f32[1, 1, 1, 1] input\ntensor y : f32[1, 1, 1, 1] output\n"
                f"{op} y, x, kernel={k}, stride={k}, pad={k - 1}\n")
        argv = _pick(rng, [["run", "p.fasm", "--reference"], ["run", "p.fasm", "--machine", "tiny"]])
        return Case("limits", f"{how}:{op}", argv, {"p.fasm": text.encode()}, 2, "program")
    mlp = str(ROOT / "programs" / "mlp.fasm")
    if how == "deep":
        argv = ["compile", mlp, "--machine", "tiny", "--depth", str(int(rng.integers(65, 10**6))),
                "--fanout", "1", "--summary"]
        return Case("limits", how, argv, {}, 2, "args")
    if how == "wide":
        argv = ["run", mlp, "--machine", "tiny", "--timing-only", "--fanout",
                str(int(rng.integers(16385, 10**12)))]
        return Case("limits", how, argv, {}, 2, "args")
    if how == "leaves":
        argv = ["run", mlp, "--machine", "tiny", "--timing-only", "--depth", "30",
                "--fanout", str(int(rng.integers(5, 100)))]
        return Case("limits", how, argv, {}, 2, "args")
    base = tomllib.loads(machine_toml(random_machine(rng)))
    if how == "deep-file":
        mid = dict(base["level"][0], fanout=1)
        base["level"] = [base["level"][0]] + [mid] * int(rng.integers(64, 400)) + [base["level"][-1]]
    else:
        base["level"][0]["fanout"] = int(rng.integers(16385, 10**15))
    argv = ["compile", mlp, "--machine", "m.toml", "--summary"]
    return Case("limits", how, argv, {"m.toml": mutate.toml_text(base).encode()}, 2, "machine")


def mapping_case(rng) -> Case:
    """A mapping file of random pins (axes, counts and loop orders drawn near the program's own,
    so that many hold), maybe mutated in its text or one of its values, for compile or run on a
    random machine. A run that succeeds must still compute the reference's outputs."""
    from fractal import api
    from isa.errors import FractalError
    program = _small_program(rng)
    machine = random_machine(rng, max_leaves=64)
    lines = [ins.loc.line for ins in program.instructions if ins.loc is not None]
    try:
        roots = api.compile(program, machine).roots
        axes = {ins.loc.line: [s.name for s in r.splits]
                for ins, r in zip(program.instructions, roots) if ins.loc is not None}
    except FractalError:
        axes = {}
    pins = []
    for _ in range(int(rng.integers(1, 4))):
        line = _pick(rng, lines) if rng.random() < 0.9 else int(rng.integers(0, 100))
        if any(p["line"] == line for p in pins) and rng.random() < 0.8:
            continue                # a second pin of a line is mostly a duplicate: rarely
        names = axes.get(line) or ["M", "N", "K"]
        pin = {"line": line}
        if rng.random() < 0.5:
            pin["level"] = int(rng.integers(0, machine.depth + (rng.random() < 0.2)))
        for key, most in (("parallel", 5), ("serial", 9)):
            if rng.random() < 0.6:
                chosen = [a for a in names if rng.random() < 0.5]
                pin[key] = {a: int(rng.integers(1, most)) for a in chosen}
        if rng.random() < 0.4:
            pin["order"] = [names[i] for i in rng.permutation(len(names))]
        pins.append(pin)
    text = mutate.toml_text({"pin": pins})
    how = "pins"
    if rng.random() < 0.3:
        data, how = mutate.mutate_text(rng, text)
    else:
        if rng.random() < 0.3:
            pin = _pick(rng, pins)
            key = _pick(rng, list(pin) + ["extra"])
            pin[key] = _pick(rng, [0, -1, "x", 1.5, True, [1], {"Z": 2}, 10**30, ["M", "M"]])
            how = f"value:{key}"
        data = mutate.toml_text({"pin": pins}).encode()
    files = {"p.fasm": program.source.encode(), "m.toml": machine_toml(machine).encode(),
             "map.toml": data}
    argv = _pick(rng, [["compile", "p.fasm", "--machine", "m.toml", "--mapping", "map.toml",
                        "--summary"],
                       ["run", "p.fasm", "--machine", "m.toml", "--mapping", "map.toml",
                        "--json", "--seed", "3"]])
    return Case("mapping", how, argv, files, None, "mapping", program, machine)


def store_case(rng) -> Case:
    """A results store, whole or damaged (bytes flipped, cut short, junk appended, a row or its
    mark edited), given to `store export` or to `sweep --store`: used, or refused located."""
    import sqlite3
    import tempfile
    from fractal.store import Store, evaluation_key
    how = _pick(rng, ["whole", "flip", "cut", "append", "row", "mark"])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.sqlite"
        with Store(path) as store:
            for i in range(int(rng.integers(0, 5))):
                inputs = {"program": {"file": "p.fasm", "sha256": str(i)}, "n": i}
                store.put(evaluation_key("timing", inputs), "timing", inputs,
                          {"seconds": float(rng.random()), "cycles": int(rng.integers(1, 10**6))})
        if how in ("row", "mark"):
            column = _pick(rng, ["key", "kind", "version", "inputs", "result", "checksum"])
            value = _pick(rng, ["", "x", "{}", "[1]", "{\"n\": 1}", 7, 1.5, None, b"\xff"])
            sql = (f"UPDATE evaluations SET {column} = ?" if how == "row" else
                   _pick(rng, ["UPDATE meta SET value = ?", "DELETE FROM meta WHERE 1 = ?",
                               "DROP TABLE evaluations -- ?"]))
            db = sqlite3.connect(path)
            with contextlib.suppress(sqlite3.Error):
                db.execute(sql, (value,)) if "?" in sql.split("--")[0] else db.execute(sql)
                db.commit()
            db.close()
        data = bytearray(path.read_bytes())
    if how == "flip":
        for _ in range(int(rng.integers(1, 20))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
    elif how == "cut":
        data = data[:int(rng.integers(0, len(data)))]
    elif how == "append":
        data += rng.bytes(int(rng.integers(1, 5000)))
    argv = _pick(rng, [["store", "export", "s.sqlite", "-o", "out.csv"],
                       ["sweep", str(ROOT / "programs" / "elementwise.fasm"), "--machine", "tiny",
                        "--depth", "1", "--fanout", "2", "--workers", "1", "--store", "s.sqlite",
                        "-o", "r.csv"]])
    return Case("store", how, argv, {"s.sqlite": bytes(data)}, None, "store")


#: what an explore case may vary, with values near and beyond tiny's
EXPLORE_VARY = {"frequency_hz": [[0.5e9, 1e9], [1e9], [2e3, 1e9]],
                "fanout": [[2, 4], [1, 3], [4]],
                "level.root.memory_bandwidth": [[8, 64], [16], {"from": 8, "to": 64, "factor": 2}],
                "level.leaf.memory_bytes": [[16, 4096], [4096, 8192]],
                "level.all.link_bandwidth": [[4, 16]],
                "compute.mac_ops_per_cycle": [[16, 64]], "compute.mac_array": [[[2, 4], [4, 4]]]}


def explore_case(rng) -> Case:
    """An explore spec near a valid one (tiny, a small program, a few parameters, budgets, a
    grid or a short NSGA-II search), maybe mutated in its text or one of its values, explored
    on one worker: explored, or refused located."""
    program = _small_program(rng)
    vary: dict = {}
    for name in rng.permutation(sorted(EXPLORE_VARY))[:int(rng.integers(1, 4))]:
        table = vary
        parts = str(name).split(".")
        for part in parts[:-1]:
            table = table.setdefault(part, {})
        table[parts[-1]] = _pick(rng, EXPLORE_VARY[name])
    objectives = [str(o) for o in rng.permutation(["latency", "energy", "edp", "perf_per_mm2",
                                                   "perf_per_w", "area", "power"])
                  [:int(rng.integers(1, 3))]]
    search = {"objectives": objectives}
    if rng.random() < 0.3:
        search.update(method=_pick(rng, ["nsga2", "tpe"]), trials=int(rng.integers(1, 7)),
                      seed=int(rng.integers(0, 100)))
    spec = {"machine": "tiny", "workload": [{"program": "p.fasm"}], "vary": vary,
            "constraints": {k: _pick(rng, ["base", 1, 30.0, 64]) for k in
                            ("area_mm2", "power_w", "leaves") if rng.random() < 0.4},
            "search": search}
    how = "spec"
    if rng.random() < 0.3:
        data, how = mutate.mutate_text(rng, mutate.toml_text(spec))
    else:
        if rng.random() < 0.4:
            table = _pick(rng, [spec, spec["search"], spec["vary"], spec["workload"][0]])
            key = _pick(rng, list(table) + ["extra"])
            table[key] = _pick(rng, [0, -1, "x", 1.5, True, [], [0], {"from": 9, "to": 1,
                                                                     "step": 1}, 10**30])
            how = f"value:{key}"
        data = mutate.toml_text(spec).encode()
    files = {"p.fasm": program.source.encode(), "spec.toml": data}
    return Case("explore", how, ["explore", "spec.toml", "-o", "out", "--workers", "1"], files,
                None, "explore")


def _big_root() -> bytes:
    """`tiny` with a root memory of 1 EiB, the most a machine file allows: timing-only runs."""
    from machine import preset
    from dataclasses import replace
    m = preset("tiny")
    m = replace(m, name="bigroot", levels=(replace(m.levels[0], memory_bytes=2**60),
                                           *m.levels[1:]))
    return machine_toml(m).encode()


def onnx_case(rng) -> Case:
    from tests.fuzz.onnx_cases import onnx_case as make     # lazy: onnx takes ~1 s to import
    return make(rng)


MAKERS = {"valid": valid_case, "program": program_case, "machine": machine_case,
          "data": data_case, "args": args_case, "files": files_case, "limits": limits_case,
          "mapping": mapping_case, "store": store_case, "explore": explore_case,
          "onnx": onnx_case}


def make_case(rng, kind: str) -> Case:
    return MAKERS[kind](rng)


# ---------------------------------------------------------------- running

class CaseTimeout(BaseException):
    """Raised by the alarm when a case runs past CASE_SECONDS (not an Exception, so that the
    CLI's own handler cannot swallow it)."""


def _write_files(case: Case, directory: Path):
    for rel, data in case.files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _in_process(argv, directory: Path, seconds: int) -> tuple[int, str, str]:
    from fractal.cli import main
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(directory)

    def alarm(signum, frame):
        raise CaseTimeout()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            warnings.simplefilter("always")         # every warning shows, not once per place
            try:
                status = main(list(argv), out)
            except SystemExit as e:       # argparse --help / --version
                status = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    except CaseTimeout:
        status = -1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    return status, out.getvalue(), err.getvalue()


def _subprocess(argv, directory: Path, seconds: int) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("FRACTAL_DEBUG", None)
    try:
        res = subprocess.run([sys.executable, "-m", "fractal.cli", *argv], cwd=directory, env=env,
                             capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return -1, "", ""
    return (res.returncode, res.stdout.decode("utf-8", "replace"),
            res.stderr.decode("utf-8", "replace"))


def run_case(case: Case, directory: Path, real: bool = False, seconds: int = CASE_SECONDS) -> Outcome:
    """Write the case's files into `directory` and run it (twice when it asks for a repeat)."""
    directory.mkdir(parents=True, exist_ok=True)
    _write_files(case, directory)
    runner = _subprocess if real else _in_process
    start = time.perf_counter()
    status, out, err = runner(case.argv, directory, seconds)
    outcome = Outcome(status, out, err, time.perf_counter() - start)
    if case.repeat and status == 0:
        outcome.second_stdout = runner(case.argv, directory, seconds)[1]
    return outcome


# ---------------------------------------------------------------- properties

ERROR_LINE = re.compile(r"^(?P<where>.*?)(?:^|: )error: (?P<message>.*)$")
FILE_LINE_COL = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)$")
WHOLE_FILE = ("not UTF-8", "no such file", "cannot read", "is a directory", "the program's tensors need",
              "cannot include")


def error_lines(stderr: str) -> list[tuple[str, str]]:
    """(location, message) of every 'LOCATION: error: MESSAGE' line ('' when unlocated)."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("    "):
            continue
        m = ERROR_LINE.match(line)
        if m:
            found.append((m.group("where"), m.group("message")))
    return found


def _program_located(where: str, message: str) -> bool:
    m = FILE_LINE_COL.match(where)
    if m and m.group("file").endswith(".fasm") and int(m.group("line")) >= 1 and int(m.group("col")) >= 1:
        return True
    return where.endswith(".fasm") and any(w in message for w in WHOLE_FILE)


def _machine_located(where: str, message: str) -> bool:
    if where.startswith("m.toml: ") and len(where) > len("m.toml: "):
        return True                                  # FILE: KEY PATH
    if FILE_LINE_COL.match(where) and where.startswith("m.toml:"):
        return True                                  # FILE:LINE:COL of a TOML syntax error
    if where == "--machine" and "m.toml" in message:
        return True                                  # the file itself (unreadable, not UTF-8)
    return _program_located(where, message)          # a program that cannot fit the machine


def _data_located(where: str, message: str, case: Case) -> bool:
    if where.startswith(("--input ", "--inputs ")) or where.startswith("p.npz"):
        return True
    return _program_located(where, message)          # a bad gather index in the data


def _args_located(where: str, message: str, case: Case) -> bool:
    if where.startswith("-") or where.startswith("FRACTAL_"):
        return True                                  # --depth, -o ...
    if where.startswith("fractal"):                  # argparse: its message names the argument
        # argparse's words, or the argument named by its metavar (NAME) or option (--list)
        return bool(re.search(r"argument|option|invalid choice|unrecognized|--\w|\b[A-Z]{2,}\b",
                              message))
    return _program_located(where, message) or any(where.startswith(a) for a in case.argv[1:] if a)


def _mapping_located(where: str, message: str) -> bool:
    if where.startswith("map.toml: ") and len(where) > len("map.toml: "):
        return True                                  # FILE: pin[i].KEY
    if FILE_LINE_COL.match(where) and where.startswith("map.toml:"):
        return True                                  # FILE:LINE:COL of a TOML syntax error
    if where == "--mapping" and "map.toml" in message:
        return True                                  # the file itself (not UTF-8, ...)
    return _machine_located(where, message)          # a program that cannot fit the machine


def _store_located(where: str, message: str) -> bool:
    return where.startswith(("s.sqlite", "--store")) and "s.sqlite" in where + message


def _explore_located(where: str, message: str) -> bool:
    if where.startswith("spec.toml: ") and len(where) > len("spec.toml: "):
        return True                                  # FILE: KEY PATH
    if FILE_LINE_COL.match(where) and where.startswith("spec.toml:"):
        return True                                  # FILE:LINE:COL of a TOML syntax error
    if where == "spec.toml":
        return True                                  # the file itself (not UTF-8, ...)
    return _program_located(where, message)          # the program a workload names


def located(case: Case, stderr: str) -> list[str]:
    """The rejection problems of a status-2 outcome: unlocated or wrongly located errors."""
    lines = error_lines(stderr)
    if not lines:
        return ["status 2 without an 'error:' line"]
    bad = []
    for where, message in lines:
        if not where:
            bad.append(f"unlocated error: {message[:120]}")
            continue
        ok = {"program": lambda: _program_located(where, message),
              "machine": lambda: _machine_located(where, message),
              "data": lambda: _data_located(where, message, case),
              "args": lambda: _args_located(where, message, case),
              "mapping": lambda: _mapping_located(where, message),
              "store": lambda: _store_located(where, message),
              "explore": lambda: _explore_located(where, message),
              "onnx": lambda: where.startswith("m.onnx"),
              "any": lambda: True}[case.locate]()
        if not ok and case.kind == "limits":
            ok = _args_located(where, message, case) or _machine_located(where, message)
        if not ok:
            bad.append(f"{case.locate} error not located as such: {where}: {message[:120]}")
    return bad


#: how a refusal says that the random machine is too small for a valid program
TOO_SMALL = ("cannot be fitted", "the program's tensors need")
WALL = re.compile(r'\s*"wall_seconds": [^,\n]*,?')


def check_case(case: Case, outcome: Outcome) -> list[str]:
    """Every property the outcome breaks (empty when it is clean)."""
    text = outcome.stdout + outcome.stderr
    problems = []
    if outcome.status == -1:
        return [f"no answer within {CASE_SECONDS} s"]
    if "Traceback (most recent call last)" in text:
        problems.append("traceback reached the user")
    if re.search(r"\w+Warning: ", text):
        problems.append("a Python warning reached the user: " +
                        re.search(r".*\w+Warning: .*", text).group(0)[:200])
    if outcome.status == 3 or "internal error" in outcome.stderr:
        first = outcome.stderr.strip().splitlines()[-1:] or [""]
        problems.append(f"internal error: {first[0][:200]}")
    swept = outcome.status == 1 and case.argv[:1] == ["sweep"] and "with an error" in outcome.stdout
    if outcome.status not in (0, 2) and not swept:     # 1: a sweep whose points failed, said so
        problems.append(f"exit status {outcome.status}")
    elif case.expect is not None and outcome.status != case.expect:
        problems.append(f"exit status {outcome.status}, expected {case.expect}: "
                        f"{outcome.stderr.strip()[:200]}")
    if outcome.status == 2:
        problems += located(case, outcome.stderr)
        if case.kind == "valid" and not any(w in outcome.stderr for w in TOO_SMALL):
            problems.append(f"valid input refused: {outcome.stderr.strip()[:200]}")
    if outcome.second_stdout is not None:
        a, b = WALL.sub("", outcome.stdout), WALL.sub("", outcome.second_stdout)
        if a != b:
            problems.append("two runs of the same input printed different JSON")
    if case.kind == "valid" and outcome.status == 0 and case.program is not None:
        problems += check_valid(case)
    if case.kind == "mapping" and outcome.status == 0 and case.argv[0] == "run":
        problems += check_pinned(case, outcome.stdout)
    if case.kind == "onnx" and outcome.status == 0 and case.program is not None:
        from tests.fuzz.onnx_cases import check_onnx
        problems += check_onnx(case)
    return problems


def check_pinned(case: Case, stdout: str) -> list[str]:
    """A pinned run's outputs are the reference's; its JSON keeps the bound at most 1."""
    import tempfile
    from fractal import api
    report = json.loads(stdout)
    if not 0 < report["fraction_of_bound"] <= 1:
        return [f"fraction_of_bound {report['fraction_of_bound']} outside (0, 1]"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "map.toml"
        path.write_bytes(case.files["map.toml"])
        got = api.run(case.program, case.machine, seed=3, mapping=path).outputs
    return compare_outputs(got, api.reference(case.program, seed=3).outputs)


def check_valid(case: Case) -> list[str]:
    """API-level properties of a valid program on its random machine."""
    from fractal import api
    from simulator.report import check_report
    from isa.errors import FractalError
    problems = []
    program, machine = case.program, case.machine
    try:
        ref = api.reference(program, seed=3).outputs
        report = api.run(program, machine, seed=3)
        check_report(report)
        problems += compare_outputs(report.outputs, ref)
        if machine.leaves <= 64:
            exact = api.run(program, machine, functional=False, exact=True)
            sym = api.run(program, machine, functional=False)
            ja, jb = exact.to_json(), sym.to_json()
            for j in (ja, jb):
                j.pop("mode"), j.pop("wall_seconds")
            if ja != jb:
                diff = sorted(k for k in ja if ja[k] != jb.get(k))
                problems.append(f"exact and symmetric simulation differ in {diff}")
    except FractalError as e:
        if not any(w in str(e) for w in TOO_SMALL):    # a machine too small for it, said as such
            problems.append(f"valid program refused through the API: {str(e)[:200]}")
    except Exception as e:
        problems.append(f"API raised {type(e).__name__}: {str(e)[:200]}")
    return problems


def compare_outputs(got: dict, want: dict) -> list[str]:
    """The leaves' outputs against the reference's: integers exactly, floats within their type's
    tolerance (tests/strategies.py TOLERANCE: f32 2e-4, relative to the output's scale), NaN
    where the reference has NaN."""
    if got.keys() != want.keys():
        return [f"outputs {sorted(got)} differ from the reference's {sorted(want)}"]
    problems = []
    for k in want:
        g, w = got[k], want[k]
        if g.shape != w.shape or g.dtype != w.dtype:
            problems.append(f"output {k}: {g.dtype}{g.shape} but reference {w.dtype}{w.shape}")
            continue
        close = close_to_reference(g, w)
        if not close.all():
            i = int(np.argmax(~close.ravel()))
            problems.append(f"output {k}: {int((~close).sum())} of {w.size} {w.dtype} elements differ "
                            f"(first {g.ravel()[i]!r} vs reference {w.ravel()[i]!r})")
    return problems
