"""Machine-size sweeps: one timing-only run per (program, depth, fan-out) of a machine, each
written to a CSV file the moment it finishes, so that an interrupted sweep resumes where it
stopped.

The grid is programs x depths x fan-outs on one machine preset (or machine file). Every point
runs `fractal.api.run(program, build_machine(machine, depth, fanout), functional=False)` in a
worker process (or on a Dask cluster) and becomes one CSV row: the point's key, the machine's
size, the run's metrics with their units in the column names, and, for each GPU asked for, the
GPU baseline estimate of the same program with the speedup and energy-efficiency ratios against
it (wide layout: one row per point, six columns per GPU). Run-to-run wall time is not recorded,
so a row is a pure function of its key.

Resume: the CSV is append-only while a sweep runs (one write and an fsync per row). On start the
file is read, a torn last line is dropped, the header must equal the one this sweep would write,
and only the points without a row are run. At the end the whole file is rewritten in key order
(temporary file, then an atomic rename), so a sweep killed part-way and resumed leaves exactly the
file of an uninterrupted one. `docs/sweeps.md` lists the columns.
"""
from __future__ import annotations

import csv
import io
import os
import re
import stat
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from tqdm import tqdm

from fractal import api
from fractal.baseline import estimate, load_gpu
from isa.errors import InternalError, UserError
from machine import PRESETS, Machine

__all__ = ["sweep", "columns", "read_rows", "Point", "run_point", "KEY", "GPU_METRICS"]

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
               "root_instructions", "leaf_instructions"}
TEXT_COLUMNS = {"program", "machine", "fanout", "bottleneck", "error"}


def gpu_columns(gpu: str) -> list[str]:
    return ([f"gpu_{gpu}_{metric}" for metric in GPU_METRICS]
            + [f"speedup_vs_{gpu}", f"efficiency_vs_{gpu}"])


def columns(gpus=()) -> list[str]:
    """The CSV header of a sweep with these GPU baselines."""
    return BASE_COLUMNS + [c for g in gpus for c in gpu_columns(g)] + ["error"]


@dataclass(frozen=True)
class Point:
    """One run of the grid: what the worker needs, and the key naming its row."""
    program: str            # as written in the CSV
    path: str               # absolute path the worker loads
    machine: str            # preset name or machine file, as written in the CSV
    spec: Machine           # the machine re-scaled to this point's depth and fan-out

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
    """Run one point (in a worker): ("row", row) or ("internal", (invariant, where, detail))."""
    m = point.spec
    row = dict(zip(KEY, point.key), leaves=m.leaves, peak_ops_per_second=m.peak_ops_per_second)
    try:
        r = api.run(point.path, m, functional=False)
    except UserError as e:               # e.g. the program does not fit this machine
        return "row", {**row, "error": _one_line(e)}
    except InternalError as e:           # its pickled form loses the fields: send them plainly
        return "internal", (e.invariant, e.where, e.detail)
    if set(r.energy_breakdown) != set(ENERGY_PARTS):
        return "internal", ("the energy breakdown has the parts " + ", ".join(ENERGY_PARTS),
                            f"{point.program} on {m.name}", str(sorted(r.energy_breakdown)))
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

def _gpu_baselines(programs: dict, gpus) -> tuple[list[str], dict]:
    """The GPU column tags and, per (program, tag), the BaselineReport or an error message."""
    if not gpus:
        return [], {}
    specs = {}
    for name in gpus:
        gpu = load_gpu(name)
        tag = gpu.name.strip().lower()
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", tag):
            raise UserError(f"GPU name '{gpu.name}' cannot name a column: use letters, digits, "
                            f"'_', '-' and '.'", f"--gpu {name}")
        specs.setdefault(tag, gpu)
    tags = list(specs)
    baselines = {}
    for label, program in programs.items():
        for tag, gpu in specs.items():
            try:
                baselines[label, tag] = estimate(program, gpu)
            except UserError as e:
                baselines[label, tag] = f"gpu {tag}: {_one_line(e)}"
    return tags, baselines


def _with_gpus(row: dict, tags, baselines) -> dict:
    errors = [row["error"]] if row.get("error") else []
    for tag in tags:
        base = baselines[row["program"], tag]
        if isinstance(base, str):
            errors.append(base)
            continue
        for metric in GPU_METRICS:
            row[f"gpu_{tag}_{metric}"] = getattr(base, metric)
        if not row.get("error"):
            if row["seconds"] > 0 and base.seconds > 0:
                row[f"speedup_vs_{tag}"] = base.seconds / row["seconds"]
            if base.ops_per_joule > 0:
                row[f"efficiency_vs_{tag}"] = row["ops_per_joule"] / base.ops_per_joule
    if errors:
        row["error"] = "; ".join(errors)
    return row


# ---------------------------------------------------------------- the results file

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


class ResultsFile:
    """The sweep's CSV, held open for appending under an exclusive lock."""

    def __init__(self, path: str | Path, header: list[str]):
        self.path, self.header = str(path), header
        self.where = f"-o {self.path}"
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise UserError(f"cannot open {self.path} for writing: {e.strerror}", self.where,
                            hint="choose another -o") from None
        try:
            self._lock()
            self.rows = self._read()
        except BaseException:
            os.close(self.fd)
            raise

    def _lock(self):
        if not stat.S_ISREG(os.fstat(self.fd).st_mode):
            raise UserError(f"{self.path} is not a regular file", self.where)
        try:
            import fcntl                # lazy: POSIX only; elsewhere the sweep runs unlocked
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:             # no advisory locks on this platform
            pass
        except OSError:
            raise UserError(f"another sweep is writing {self.path}", self.where) from None

    def _read(self) -> list[dict]:
        """The complete rows already in the file; a torn last line is cut off, a new or empty
        file gets the header."""
        with open(self.path, "rb") as f:
            data = f.read()
        header_line = _csv_line(self.header).encode()
        complete = data[:data.rfind(b"\n") + 1]
        if not complete:                # new, empty, or a header cut short by a kill
            if data and not header_line.startswith(data):
                raise self._mismatch("its first line is not a sweep header")
            self._truncate(0)
            self._write(header_line)
            return []
        try:
            lines = complete.decode("utf-8").split("\n")[:-1]
        except UnicodeDecodeError:
            raise self._mismatch("it is not UTF-8 text") from None
        if next(csv.reader(lines[:1])) != self.header:
            raise self._mismatch("its header differs")
        rows, seen, keep = [], {}, len(lines)
        for number, values in enumerate(csv.reader(lines[1:]), start=2):
            if len(values) != len(self.header):
                if number == len(lines):    # a torn last line: drop it
                    keep = number - 1
                    break
                raise UserError(f"line {number} has {len(values)} fields, the header "
                                f"{len(self.header)}", f"{self.path}:{number}",
                                hint="the file is damaged: choose another -o or delete it")
            row = dict(zip(self.header, values))
            key = tuple(row[k] for k in KEY)
            if key in seen:
                raise UserError(f"the row of {', '.join(key)} appears twice (lines {seen[key]} "
                                f"and {number})", f"{self.path}:{number}",
                                hint="the file is damaged: choose another -o or delete it")
            seen[key] = number
            rows.append(row)
        good = sum(len(line.encode()) + 1 for line in lines[:keep])
        if good != len(data):
            self._truncate(good)
        return rows

    def _mismatch(self, why: str) -> UserError:
        return UserError(f"{self.path} exists but was not written by this sweep ({why}; "
                         f"expected columns: {', '.join(self.header)})", self.where,
                         hint="choose another -o or delete the file")

    def _truncate(self, size: int):
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            raise self._write_error(e) from None

    def _write_error(self, e: OSError) -> UserError:
        return UserError(f"cannot write to {self.path}: {e.strerror}; the {len(self.rows)} rows "
                         f"written before are intact: free space or choose another -o, then run "
                         f"the same sweep again to resume", self.where)

    def _write(self, data: bytes):
        size = os.lseek(self.fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fsync(self.fd)
        except OSError as e:
            try:
                os.ftruncate(self.fd, size)     # leave no partial row behind
            except OSError:
                pass                            # a torn line is dropped on the next start
            raise self._write_error(e) from None

    def append(self, row: dict):
        values = {name: _cell(row.get(name)) for name in self.header}
        self._write(_csv_line(values[name] for name in self.header).encode())
        self.rows.append(values)

    def rewrite_sorted(self):
        """Put the rows in key order: a temporary file beside it, then an atomic rename."""
        ordered = sorted(self.rows, key=sort_key)
        if ordered == self.rows:
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.path)}.", suffix=".tmp",
                                   dir=directory)
        try:
            os.chmod(tmp, os.stat(self.path).st_mode & 0o777)   # keep the file's permissions
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f, lineterminator="\n")
                writer.writerow(self.header)
                writer.writerows([row[name] for name in self.header] for row in ordered)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise UserError(f"cannot rewrite {self.path} in order: {e.strerror}; its rows are "
                            f"all there, unordered", self.where) from None
        self.rows = ordered

    def close(self):
        os.close(self.fd)


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


def _grid(programs, machine, depths, fanouts) -> tuple[list[Point], dict]:
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
    points = {}                 # by key: the machine's own depth may also be listed explicitly
    for prog in loaded:
        for d in _values("depths", depths, None):
            for f in _values("fanouts", fanouts, None):
                point = Point(prog, os.path.abspath(prog), label, api.build_machine(template, d, f))
                points.setdefault(point.key, point)
    return list(points.values()), loaded


def _connect(address: str):
    from distributed import Client  # lazy: Dask is an optional extra, ~1 s to import
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise UserError(f"cannot reach the Dask scheduler at {address}: {e}", "--dask") from None


def _results(points: list[Point], workers: int, dask):
    """Each point's worker result, in the order they finish."""
    if dask is not None:
        # lazy: Dask is an optional extra (.[dask]) and takes ~1 s to import
        from distributed import Client, as_completed as dask_completed
        client = dask if isinstance(dask, Client) else _connect(str(dask))
        try:
            futures = [client.submit(run_point, p, pure=False) for p in points]
            for future in dask_completed(futures):
                yield future.result()
                future.release()
        finally:
            if client is not dask:
                client.close()
    elif workers == 1:
        yield from map(run_point, points)
    else:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
        try:
            for future in as_completed([pool.submit(run_point, p) for p in points]):
                yield future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def sweep(programs, machine: str = "f1", depths=None, fanouts=None, gpus=(),
          out: str | Path = "results.csv", workers: int | None = None, dask=None,
          progress: bool = True) -> list[dict]:
    """Run every (program, depth, fan-out) point of `machine` that `out` has no row for yet,
    appending each row as it finishes; return the grid's rows in key order (numbers typed, empty
    cells None).

    `depths`/`fanouts`: an int or a list; None keeps the machine's own. `gpus`: GPU baseline
    names (`fractal.baseline.GPUS`). `workers`: local worker processes (default one per core;
    1 runs in this process). `dask`: a scheduler address or a `distributed.Client` to run the
    points on instead. Scripts that use worker processes need an `if __name__ == "__main__":`
    guard (they are started with spawn).
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise UserError(f"workers must be a positive integer, got {workers!r}", "--workers")
    if workers is not None and dask is not None:
        raise UserError("give either local workers or a Dask scheduler, not both", "--workers")
    points, programs = _grid(programs, machine, depths, fanouts)
    tags, baselines = _gpu_baselines(programs, gpus)
    results = ResultsFile(out, columns(tags))
    try:
        done = {tuple(row[k] for k in KEY) for row in results.rows}
        todo = [p for p in points if p.key not in done]
        workers = workers or max(1, min(os.cpu_count() or 1, len(todo)))
        with tqdm(total=len(points), initial=len(points) - len(todo), unit="run", desc="sweep",
                  disable=not progress, file=sys.stderr, dynamic_ncols=True) as bar:
            for kind, value in (_results(todo, workers, dask) if todo else ()):
                if kind == "internal":
                    raise InternalError(*value)
                results.append(_with_gpus(value, tags, baselines))
                bar.update()
        results.rewrite_sorted()
        grid = {p.key for p in points}
        return [_typed(row) for row in results.rows
                if tuple(row[k] for k in KEY) in grid]
    finally:
        results.close()
