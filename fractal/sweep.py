"""Machine-size sweeps: one timing-only run per (program, depth, fan-out) of a machine, each
kept in a results store (`fractal.store`) the moment it finishes, so that an interrupted sweep
resumes where it stopped and a repeated one runs only what changed.

The grid is programs x depths x fan-outs on one machine preset (or machine file). Every point
runs `fractal.api.run(program, build_machine(machine, depth, fanout), functional=False)` in a
worker process (or on a Dask cluster) and becomes one CSV row: the point's key, the machine's
size, the run's metrics with their units in the column names, and, for each GPU asked for, the
GPU baseline estimate of the same program with the speedup and energy-efficiency ratios against
it (wide layout: one row per point, six columns per GPU). Run-to-run wall time is not recorded,
so a row is a pure function of its key.

Resume: each point's run is an evaluation of the store under the hash of the program's text
(with its includes), every parameter of the re-scaled machine and the tool version; a GPU
estimate likewise under the program, the GPU's parameters, the factors and the precision. Only
the points whose key the store lacks are run, so an edited machine file, program or library is
run again and never answered with an old row. The CSV is written from the store at the end (and
when the sweep stops early) through a temporary file and an atomic rename: it holds exactly the
grid's rows, in key order. `docs/sweeps.md` lists the columns.
"""
from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import stat
import sys
import tempfile
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from tqdm import tqdm

from fractal import api
from fractal.baseline import (DEFAULT_FACTORS, PRECISIONS, estimate, load_factors, load_gpu,
                              program_precision)
from fractal.baseline.factors import factors_from_dict
from compiler.tables import frame, html_table
from fractal.collector import tuned_collector
from fractal.store import Store, evaluation_key, plain, program_inputs, tool_version
from fractal.version import SCHEMA_VERSION
from isa.errors import InternalError, UserError
from isa.program import Program
from machine import PRESETS, Machine

__all__ = ["sweep", "columns", "read_rows", "Point", "run_point", "timing_row", "KEY",
           "GPU_METRICS", "TIMING", "GPU_ESTIMATE", "timing_inputs", "store_path"]

KEY = ("program", "machine", "depth", "fanout")
ENERGY_PARTS = ("compute", "reduction", "memory", "link", "static")
GPU_METRICS = ("seconds", "energy_joules", "ops_per_second", "ops_per_joule")
BASE_COLUMNS = [
    *KEY, "leaves", "peak_ops_per_second", "cycles", "seconds", "ops", "ops_per_second",
    "utilization", "energy_joules", "ops_per_joule",
    *(f"energy_{part}_joules" for part in ENERGY_PARTS),
    "traffic_bytes_below_root", "traffic_bytes_leaves", "traffic_bytes_total", "reduction_ops",
    "root_instructions", "leaf_instructions", "bottleneck",
]
INT_COLUMNS = {"depth", "leaves", "cycles", "ops", "traffic_bytes_below_root",
               "traffic_bytes_leaves", "traffic_bytes_total", "reduction_ops",
               "root_instructions", "leaf_instructions", "schema_version"}
TEXT_COLUMNS = {"program", "machine", "fanout", "bottleneck", "error", "tool_version",
                "evaluation"}


def gpu_columns(gpu: str) -> list[str]:
    return ([f"gpu_{gpu}_{metric}" for metric in GPU_METRICS]
            + [f"speedup_vs_{gpu}", f"efficiency_vs_{gpu}"])


#: what makes a row traceable: the tool's version, the layout of the CSV, and the row's key in
#: the results store, under which `fractal store export` lists every input (the machine's every
#: parameter, the program's digest)
PROVENANCE = ["tool_version", "schema_version", "evaluation"]


def columns(gpus=()) -> list[str]:
    """The CSV header of a sweep with these GPU baselines."""
    return BASE_COLUMNS + [c for g in gpus for c in gpu_columns(g)] + ["error"] + PROVENANCE


#: the store's kinds of evaluation: a timing-only run, a GPU roofline estimate
TIMING, GPU_ESTIMATE = "timing", "gpu-estimate"
#: how a sweep runs a point: the options of `api.run` that change its result
SIMULATION = {"functional": False, "mode": "symmetric", "objective": "cycles", "mapping": None}


def timing_inputs(program: Program, machine: Machine, digest: dict | None = None) -> dict:
    """The inputs a timing-only run's result depends on (its store key hashes them)."""
    return {"program": digest or program_inputs(program), "machine": plain(machine),
            "simulation": SIMULATION}


@dataclass(frozen=True)
class Point:
    """One run of the grid: what the worker needs, and the keys naming its row."""
    program: str            # as written in the CSV
    code: Program           # the checked program the worker runs (it travels with the task)
    machine: str            # preset name or machine file, as written in the CSV
    spec: Machine           # the machine re-scaled to this point's depth and fan-out
    evaluation: str         # its key in the results store

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.program, self.machine, str(self.spec.depth), fanout_tag(self.spec.fanouts))


def fanout_tag(fanouts) -> str:
    """`4` for a uniform fan-out, `8x16` for one per stage."""
    return str(fanouts[0]) if len(set(fanouts)) == 1 else "x".join(map(str, fanouts))


def sort_key(row: dict) -> tuple:
    return (row["program"], row["machine"], int(row["depth"]),
            tuple(int(f) for f in row["fanout"].split("x")))


def _one_line(e: UserError) -> str:
    text = f"{e.where}: {e.message}" if e.where else e.message
    if e.hint:
        text += f" (hint: {e.hint})"
    return " ".join(text.split())


def run_point(point: Point) -> tuple[str, object]:
    """Run one point (in a worker): ("row", result: the row without its key) or ("internal",
    (invariant, where, detail))."""
    with tuned_collector():
        return timing_row(point.code, point.spec, point.program)


def timing_row(code: Program, m: Machine, label: str, run=None) -> tuple[str, object]:
    """One timing-only run of a checked program on a machine as a store result: ("row", the
    row without its key) or ("internal", (invariant, where, detail)). `run(code, m)` gives the
    report (default: `api.run(code, m, functional=False)`; the explorer passes its memoized
    one, which gives the same report)."""
    row = dict(leaves=m.leaves, peak_ops_per_second=m.peak_ops_per_second)
    try:
        r = run(code, m) if run is not None else api.run(code, m, functional=False)
    except UserError as e:               # e.g. the program does not fit this machine
        return "row", {**row, "error": _one_line(e)}
    except InternalError as e:           # its pickled form loses the fields: send them plainly
        return "internal", (e.invariant, e.where, e.detail)
    if set(r.energy_breakdown) != set(ENERGY_PARTS):
        return "internal", ("the energy breakdown has the parts " + ", ".join(ENERGY_PARTS),
                            f"{label} on {m.name}", str(sorted(r.energy_breakdown)))
    costliest = max(r.instructions, key=lambda i: i.cycles)
    traffic = r.traffic_bytes
    row.update(cycles=r.cycles, seconds=r.seconds, ops=r.ops, ops_per_second=r.ops / r.seconds,
               utilization=r.utilization, energy_joules=r.energy_joules,
               ops_per_joule=r.ops_per_joule,
               **{f"energy_{p}_joules": r.energy_breakdown[p] for p in ENERGY_PARTS},
               traffic_bytes_below_root=traffic[1], traffic_bytes_leaves=traffic[-1],
               traffic_bytes_total=sum(traffic), reduction_ops=r.reduction_ops,
               root_instructions=len(r.instructions),
               leaf_instructions=r.levels[-1]["instructions"], bottleneck=costliest.bottleneck)
    return "row", row


# ---------------------------------------------------------------- GPU baselines

def _load_gpus(gpus) -> dict:
    """The GPUs asked for, by column tag."""
    specs = {}
    for name in gpus:
        gpu = load_gpu(name)
        tag = gpu.name.strip().lower()
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", tag):
            raise UserError(f"GPU name '{gpu.name}' cannot name a column: use letters, digits, "
                            f"'_', '-' and '.'", f"--gpu {name}")
        specs.setdefault(tag, gpu)
    return specs


def _gpu_baselines(store: Store, programs: dict, specs: dict, digests: dict,
                   precision: str | None = None, factors=DEFAULT_FACTORS) -> dict:
    """Per (program, tag), the GPU estimate's metrics or an error message: from the store, or
    estimated now and stored. `precision`: None takes each program's own."""
    baselines = {}
    for label, program in programs.items():
        at = precision or program_precision(program)
        for tag, gpu in specs.items():
            inputs = {"program": digests[label], "gpu": plain(gpu),
                      "factors": plain(factors), "precision": at}
            key = evaluation_key(GPU_ESTIMATE, inputs)
            result = store.get_many([key]).get(key)
            if result is None:
                try:
                    base = estimate(program, gpu, precision=at, factors=factors)
                    result = {metric: getattr(base, metric) for metric in GPU_METRICS}
                except UserError as e:
                    result = {"error": f"gpu {tag}: {_one_line(e)}"}
                store.put(key, GPU_ESTIMATE, inputs, result)
            baselines[label, tag] = result.get("error") or result
    return baselines


def _with_gpus(row: dict, tags, baselines) -> dict:
    errors = [row["error"]] if row.get("error") else []
    for tag in tags:
        base = baselines[row["program"], tag]
        if isinstance(base, str):
            errors.append(base)
            continue
        for metric in GPU_METRICS:
            row[f"gpu_{tag}_{metric}"] = base[metric]
        if not row.get("error"):
            if row["seconds"] > 0 and base["seconds"] > 0:
                row[f"speedup_vs_{tag}"] = base["seconds"] / row["seconds"]
            if base["ops_per_joule"] > 0:
                row[f"efficiency_vs_{tag}"] = row["ops_per_joule"] / base["ops_per_joule"]
    if errors:
        row["error"] = "; ".join(errors)
    return row


# ---------------------------------------------------------------- the CSV

def _cell(value) -> str:
    return "" if value is None else str(value)


def _csv_line(values) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _typed(row: dict) -> dict:
    def convert(name, text):
        if text == "":
            return None
        if name in TEXT_COLUMNS:
            return text
        return int(text) if name in INT_COLUMNS else float(text)
    return {name: convert(name, text) for name, text in row.items()}


def _is_header(line: str) -> bool:
    """Whether a CSV line is the header of some sweep (any GPU list)."""
    names = next(csv.reader([line]), [])
    tags = [n[len("speedup_vs_"):] for n in names if n.startswith("speedup_vs_")]
    return names in (columns(tags), columns(tags)[:-len(PROVENANCE)])   # or an earlier version's


def _check_out(path: str, header: list[str]):
    """Refuse, before any run, an output that cannot be written or that holds something other
    than a sweep's rows (it is replaced at the end)."""
    where = f"-o {path}"
    target = os.path.realpath(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".sweep.", suffix=".tmp",
                                   dir=os.path.dirname(target))
        os.close(fd)
        os.unlink(tmp)
        if os.path.lexists(target) and not stat.S_ISREG(os.stat(target).st_mode):
            raise UserError(f"{path} is not a regular file", where, hint="choose another -o")
        with contextlib.suppress(FileNotFoundError), open(target, "rb") as f:
            data = f.read(1 << 16)
            first, newline, _ = data.partition(b"\n")
            torn = not newline and _csv_line(header).encode().startswith(first)
            try:
                ours = not data or torn or _is_header(first.decode("utf-8"))
            except (UnicodeDecodeError, csv.Error):
                ours = False
            if not ours:
                raise UserError(f"{path} exists but was not written by a sweep (its first line "
                                f"is not a sweep's header; expected columns: "
                                f"{', '.join(header)})", where,
                                hint="choose another -o or delete the file")
    except OSError as e:
        raise UserError(f"cannot open {path} for writing: {e.strerror}", where,
                        hint="choose another -o") from None


def _write_csv(path: str, header: list[str], rows: list[dict], store: str):
    """Replace `path` by the rows: a temporary file beside it, an fsync, an atomic rename."""
    target = os.path.realpath(path)
    if os.path.exists(target):
        mode = os.stat(target).st_mode & 0o777                  # keep the file's permissions
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                   dir=os.path.dirname(target))
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows([row[name] for name in header] for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise UserError(f"cannot write {path}: {e.strerror}; every finished run is kept in the "
                        f"results store {store}: free space or choose another -o, then run the "
                        f"same sweep again", f"-o {path}") from None


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a sweep CSV with numbers as numbers and empty cells as None."""
    with open(path, newline="", encoding="utf-8") as f:
        return [_typed(row) for row in csv.DictReader(f)]


# ---------------------------------------------------------------- running the grid

def _values(name: str, values, default) -> list:
    if values is None:
        return [default]
    values = [values] if isinstance(values, int) else list(values)
    if not values:
        raise UserError(f"no {name} given", f"--{name.rstrip('s')}")
    for v in values:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise UserError(f"{name} must be positive integers, got {v!r}", f"--{name.rstrip('s')}")
    return list(dict.fromkeys(values))


def _grid(programs, machine, depths, fanouts) -> tuple[list[Point], dict, dict]:
    """The points, the checked programs by label and what each contributes to a store key."""
    if isinstance(programs, (str, Path)):
        programs = [programs]
    loaded = {}
    for p in programs:
        label = os.path.normpath(str(p))
        if label not in loaded:
            loaded[label] = api.load_program(Path(label))
    if not loaded:
        raise UserError("no programs given", "PROGRAMS")
    if not isinstance(machine, (str, Path)):
        raise UserError(f"machine must be a preset name or a .toml path, got "
                        f"{type(machine).__name__}", "--machine")
    label = str(machine) if str(machine) in PRESETS else os.path.normpath(str(machine))
    template = api.build_machine(label)
    digests = {prog: program_inputs(code) for prog, code in loaded.items()}
    points = {}                 # by key: the machine's own depth may also be listed explicitly
    for prog, code in loaded.items():
        for d in _values("depths", depths, None):
            for f in _values("fanouts", fanouts, None):
                spec = api.build_machine(template, d, f)
                key = evaluation_key(TIMING, timing_inputs(code, spec, digests[prog]))
                point = Point(prog, code, label, spec, key)
                points.setdefault(point.key, point)
    return list(points.values()), loaded, digests


def _connect(address: str):
    from distributed import Client  # lazy: Dask is an optional extra, ~1 s to import
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise UserError(f"cannot reach the Dask scheduler at {address}: {e}", "--dask") from None


def _results(points: list, workers: int, dask, work=None, context=None, initializer=None,
             initargs=()):
    """(point, `work(point)` run in a worker, `run_point` by default) for each point, in the
    order they finish. Local worker processes start in `context` (by default `worker_context()`)
    and run `initializer(*initargs)` first."""
    work = work or run_point
    if dask is not None:
        # lazy: Dask is an optional extra (.[dask]) and takes ~1 s to import
        from distributed import Client, as_completed as dask_completed
        client = dask if isinstance(dask, Client) else _connect(str(dask))
        try:
            futures = {client.submit(work, p, pure=False): p for p in points}
            for future in dask_completed(list(futures)):
                yield futures[future], future.result()
                future.release()
        finally:
            if client is not dask:
                client.close()
    elif workers == 1:
        for p in points:
            yield p, work(p)
    else:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context or worker_context(),
                                   initializer=initializer, initargs=initargs)
        try:
            futures = {pool.submit(work, p): p for p in points}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class Progress(tqdm):
    """A progress bar without tqdm's monitor thread (which only retunes a bar that stalls), so
    that local workers can be forked (`_start_method`)."""
    monitor_interval = 0


def worker_context():
    """The multiprocessing context local workers start in (`_start_method`)."""
    return get_context(_start_method())


def _start_method() -> str:
    """How local workers start: forked on Linux from a process with no other thread (they
    inherit its imports, about half a second each), spawned otherwise (a fork while another
    thread holds a lock, or on macOS, can hang the child). The workers run timing-only
    evaluations, so no numba kernel runs in them."""
    return "fork" if sys.platform == "linux" and threading.active_count() == 1 else "spawn"


def store_path(out: str | Path, store: str | Path | None = None) -> str:
    """The results store of a sweep: `store`, or the CSV's path with the suffix .sqlite."""
    path = Path(out).with_suffix(".sqlite") if store is None else Path(store)
    if os.path.realpath(path) == os.path.realpath(out):
        raise UserError(f"the results store and the CSV would be the same file, {out}",
                        "--store" if store is not None else f"-o {out}",
                        hint="give the store another path with --store")
    return str(path)


def sweep(programs, machine: str = "f1", depths=None, fanouts=None, gpus=(),
          out: str | Path = "results.csv", workers: int | None = None, dask=None,
          progress: bool = True, store: str | Path | None = None,
          precision: str | None = None, factors=None) -> list[dict]:
    """Run every (program, depth, fan-out) point of `machine` that the results store has no
    evaluation of yet, storing each as it finishes; write the grid's rows to `out` and return
    them in key order (numbers typed, empty cells None).

    `depths`/`fanouts`: an int or a list; None keeps the machine's own. `gpus`: GPU baseline
    names (`fractal.baseline.GPUS`), estimated at `precision` ("fp16" or "fp32"; None: each
    program's own) with `factors` (a factors file, a table, or None for the defaults). `workers`: local worker processes (default one per core;
    1 runs in this process). `dask`: a scheduler address or a `distributed.Client` to run the
    points on instead. `store`: the results store (default: `out` with the suffix .sqlite).
    Scripts that use worker processes need an `if __name__ == "__main__":` guard (they are
    spawned where they cannot be forked, `_start_method`).
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise UserError(f"workers must be a positive integer, got {workers!r}", "--workers")
    if workers is not None and dask is not None:
        raise UserError("give either local workers or a Dask scheduler, not both", "--workers")
    if precision is not None and precision not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}",
                        "--precision")
    factors = load_factors(factors) if isinstance(factors, (str, Path)) else \
        factors_from_dict(factors)
    points, programs, digests = _grid(programs, machine, depths, fanouts)
    specs = _load_gpus(gpus)
    out, path = str(out), store_path(out, store)
    header = columns(list(specs))
    _check_out(out, header)
    with Store(path, "--store" if store is not None else f"-o {out}") as db:
        baselines = _gpu_baselines(db, programs, specs, digests, precision, factors)
        results = db.get_many(p.evaluation for p in points)
        todo = [p for p in points if p.evaluation not in results]

        def rows():
            done = sorted((p for p in points if p.evaluation in results),
                          key=lambda p: sort_key(dict(zip(KEY, p.key))))
            return [{name: _cell(value) for name, value in _row(p, results[p.evaluation],
                                                                 specs, baselines).items()}
                    for p in done]
        try:
            n = max(1, min(os.cpu_count() or 1, len(todo))) if workers is None else workers
            with Progress(total=len(points), initial=len(points) - len(todo), unit="run",
                          desc="sweep", disable=not progress, file=sys.stderr,
                          dynamic_ncols=True) as bar:
                for point, (kind, value) in (_results(todo, n, dask) if todo else ()):
                    if kind == "internal":
                        raise InternalError(*value)
                    db.put(point.evaluation, TIMING,
                           timing_inputs(point.code, point.spec, digests[point.program]), value)
                    results[point.evaluation] = value
                    bar.update()
        except BaseException:               # the CSV shows the runs done before the stop
            with contextlib.suppress(Exception):
                _write_csv(out, header, rows(), path)
            raise
        grid = rows()
        _write_csv(out, header, grid, path)
    return Rows((_typed(row) for row in grid), ran=len(todo), store=path)


class Rows(list):
    """A sweep's rows, with how many of its points were run now (`ran`; the others came from
    the results store) and the store's path."""

    def __init__(self, rows, ran: int, store: str):
        super().__init__(rows)
        self.ran, self.store = ran, store

    def to_frame(self):
        """The rows as a pandas DataFrame, one column per CSV column."""
        return frame(list(self))

    def _repr_html_(self) -> str:
        return html_table(list(self), f"{len(self)} sweep rows ({self.ran} run now)")


def _row(point: Point, result: dict, specs: dict, baselines: dict) -> dict:
    """A CSV row: the point's key, its stored result and its GPU columns."""
    row = {name: None for name in columns(list(specs))}
    row.update(zip(KEY, point.key))
    row.update(result)
    row.update(tool_version=tool_version(), schema_version=SCHEMA_VERSION,
               evaluation=point.evaluation)
    return _with_gpus(row, list(specs), baselines)
