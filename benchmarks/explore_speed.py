"""Design points per second of the explorer: VGG-16 (batch 1, f16) on machines near f1,
timing-only, each point a fresh evaluation (an empty results store).

    python benchmarks/explore_speed.py                  # about half a minute on 2 cores
    python benchmarks/explore_speed.py --out explore_speed.md --workers 2
    python benchmarks/explore_speed.py --grid-only --grid memory   # one grid alone

A design point costs what the explorer cannot reuse (`fractal/explore/evaluate.py`), so the
report gives the rate of each kind of point on one worker, then of a mixed grid:

- fresh: a machine nothing before shares anything with (the cost of `api.run`);
- new root: a machine that differs from an earlier one only in its root level (the card's
  memory bandwidth), so the plans of the levels below are reused;
- same timing class: a machine that differs from an earlier one only in its clock, process
  node or energy figures, whose row is derived from the earlier run's plan and cycles;
- the mixed grid: frequency x process node x the card's memory bandwidth x the clusters' memory,
  3 x 3 x 3 x 2 = 54 points, through `fractal.explore.explore` on `--workers` processes;
  `--grid memory` runs instead the clusters' memory alone, 4 sizes (the base among them).
  The grid runs `--runs` times (3), each from an empty store and fresh workers; the report
  gives every run, the best and the median (the host's other work slows some runs: the best is
  the least disturbed).
"""
from __future__ import annotations

import argparse
import dataclasses
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.host import header, report  # noqa: E402

GRID = """\
machine = "f1"

[[workload]]
gen = "vgg16"
batch = 1
dtype = "f16"

[vary]
frequency_hz = [0.8e9, 1.0e9, 1.2e9]
process_nm = [16, 12, 7]

[vary.level.card]
memory_bandwidth = [128, 256, 512]

[vary.level.cluster]
memory_bytes = [2_097_152, 4_194_304]

[search]
objectives = ["latency", "energy"]
"""
#: the clusters' memory capacity alone: the plans of the clusters' tasks are shared between
#: its values (compiler.decompose.plan_inputs), the card's are not
MEMORY_GRID = GRID.split("[vary]")[0] + """[vary.level.cluster]
memory_bytes = [1_048_576, 2_097_152, 4_194_304, 8_388_608]

[search]
objectives = ["latency", "energy"]
"""
GRIDS = {"mixed": GRID, "memory": MEMORY_GRID}


def kinds(program, repeat: int) -> list[tuple[str, int, float]]:
    """(kind, points, seconds) of each kind of point on one worker."""
    from fractal.explore.evaluate import Evaluation, Memo
    from machine import preset
    f1 = preset("f1")

    def card(m, **kw):
        return dataclasses.replace(m, levels=(dataclasses.replace(m.levels[0], **kw),
                                              *m.levels[1:]))
    out = []
    memo = Memo()
    start = time.perf_counter()
    memo.evaluate(Evaluation("k", "vgg16", program, f1))
    out.append(("fresh (nothing reused)", 1, time.perf_counter() - start))
    roots = [card(f1, memory_bandwidth=b) for b in (128.0, 512.0, 192.0, 384.0)][:repeat]
    start = time.perf_counter()
    for m in roots:
        memo.evaluate(Evaluation("k", "vgg16", program, m))
    out.append(("new root (the card's bandwidth)", len(roots), time.perf_counter() - start))
    same = [dataclasses.replace(f1, frequency_hz=f, process_nm=nm)
            for f in (0.8e9, 1.2e9, 1.4e9) for nm in (12.0, 7.0)]
    same += [card(f1, static_watts=w) for w in (6.0, 24.0)]
    start = time.perf_counter()
    for m in same:
        memo.evaluate(Evaluation("k", "vgg16", program, m))
    out.append(("same timing class (clock, process, energy)", len(same),
                time.perf_counter() - start))
    return out


def _cpu() -> tuple[float, float]:
    """Processor seconds so far of this process and of its ended child processes."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=4, help="new-root points (at most 4)")
    p.add_argument("--out", help="also write the report to this file")
    p.add_argument("--grid", choices=sorted(GRIDS), default="mixed", help="which grid to explore")
    p.add_argument("--grid-only", action="store_true", help="time the grid alone")
    p.add_argument("--runs", type=int, default=3,
                   help="runs of the grid, each from an empty store and fresh workers")
    args = p.parse_args(argv)
    from fractal.collector import tuned_collector
    from fractal.explore import explore
    from fractal.explore.evaluate import MEMO
    from fractal.workloads import generate
    from isa.checker import parse_program
    program = parse_program(generate("vgg16", batch=1, dtype="f16"), "vgg16-b1-f16.fasm")
    lines = header("Explorer: VGG-16 design points per second",
                   "VGG-16 at batch 1 in f16, timing-only, machines near f1; an empty results "
                   "store, so every point is evaluated")
    lines += ["| design points | points | wall (s) | points/s |", "|---|---:|---:|---:|"]
    with tuned_collector():     # as in the command and its workers
        each = [] if args.grid_only else kinds(program, args.repeat)
    for kind, n, seconds in each:
        lines.append(f"| {kind}, one worker | {n} | {seconds:.2f} | {n / seconds:.2f} |")
        print(lines[-1], file=sys.stderr)
    what = ("the mixed grid (54 points and the base)" if args.grid == "mixed" else
            "the clusters' memory (4 points, the base among them)")
    times, cpus = [], []
    for run in range(args.runs):
        MEMO.__init__()     # each run from nothing, as a fresh pool of workers starts
        folder = Path(tempfile.mkdtemp(prefix="explore-speed-"))
        try:
            (folder / "spec.toml").write_text(GRIDS[args.grid])
            start, before = time.perf_counter(), _cpu()
            result = explore(folder / "spec.toml", folder / "out", workers=args.workers,
                             progress=False)
            times.append(time.perf_counter() - start)
            cpus.append([b - a for a, b in zip(before, _cpu())])
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        n = len(result.points)
        lines.append(f"| {what}, {args.workers} workers, {result.ran} runs, run {run + 1} | {n} | "
                     f"{times[-1]:.2f} | {n / times[-1]:.2f} |")
        print(lines[-1], file=sys.stderr)
    if args.runs > 1:
        for name, seconds in (("best", min(times)), ("median", statistics.median(times))):
            lines.append(f"| {what}, {name} of {args.runs} runs | {n} | {seconds:.2f} | "
                         f"{n / seconds:.2f} |")
    lines.append("\nProcessor time of the grid, run by run: " + "; ".join(
        f"{kids:.2f} s in the worker processes and {own:.2f} s in this one" for own, kids in cpus)
        + ".")
    report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
