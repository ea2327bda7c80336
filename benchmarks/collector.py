"""What Python's garbage collector costs the explorer's runs: the six timing classes of
explore_speed.py's mixed grid (VGG-16 at batch 1 in f16, the card's memory bandwidth x the
clusters' memory), run one after another in one process as one worker runs them
(`fractal.explore.evaluate.Memo.evaluate`), under Python's default collector thresholds and
under the tool's (`fractal.collector.COLLECTOR_THRESHOLDS`).

    python benchmarks/collector.py                  # about a minute on 2 cores
    python benchmarks/collector.py --pairs 3 --out collector.md

Each setting runs in a fresh process, the two alternating, `--pairs` times. For each run the
report gives the processor time of the six classes, the part of it spent simulating, the
collector's passes by generation and the time they took (`gc.callbacks`), and the process's
peak resident memory.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.host import header, report  # noqa: E402

DEFAULT = (700, 10, 10)     # CPython's own thresholds


def classes():
    """The mixed grid's six timing classes: f1 with the card's bandwidth and the clusters'
    memory varied (explore_speed.GRID)."""
    from machine import preset
    f1 = preset("f1")
    names = [lv.name for lv in f1.levels]

    def at(m, name, **kw):
        i = names.index(name)
        return dataclasses.replace(m, levels=(*m.levels[:i], dataclasses.replace(m.levels[i], **kw),
                                              *m.levels[i + 1:]))
    return [at(at(f1, "card", memory_bandwidth=b), "cluster", memory_bytes=mb)
            for b in (128.0, 256.0, 512.0) for mb in (2_097_152, 4_194_304)]


def child(thresholds: tuple) -> dict:
    """One run of the six classes under these thresholds (in its own process)."""
    from fractal.explore.evaluate import Evaluation, Memo
    from fractal.workloads import generate
    from isa.checker import parse_program
    import simulator.run
    program = parse_program(generate("vgg16", batch=1, dtype="f16"), "vgg16-b1-f16.fasm")
    simulate, simulating = simulator.run.simulate, [0.0]

    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return simulate(*args, **kwargs)
        finally:
            simulating[0] += time.process_time() - start
    simulator.run.simulate = timed
    passes, seconds, began = [0, 0, 0], [0.0, 0.0, 0.0], [0.0]

    def note(phase, info):
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            passes[info["generation"]] += 1
            seconds[info["generation"]] += time.perf_counter() - began[0]
    gc.set_threshold(*thresholds)
    gc.callbacks.append(note)
    memo, start = Memo(), time.process_time()
    for m in classes():
        memo.evaluate(Evaluation("k", "vgg16", program, m))
    cpu = time.process_time() - start
    gc.callbacks.remove(note)
    return {"cpu": cpu, "simulate": simulating[0], "passes": passes, "seconds": seconds,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--out", help="also write the report to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(tuple(int(x) for x in args.child.split(",")))))
        return 0
    from fractal.collector import COLLECTOR_THRESHOLDS
    lines = header("The garbage collector's share of the explorer's runs",
                   "the six timing classes of the mixed grid (VGG-16 at batch 1 in f16 near f1), "
                   "one after another in one process, each setting in a fresh process")
    lines += ["| thresholds | processor time (s) | of it simulating (s) | collector passes by "
              "generation | their time (s) | peak memory (MB) |", "|---|---:|---:|---|---|---:|"]
    for _ in range(args.pairs):
        for thresholds in (DEFAULT, COLLECTOR_THRESHOLDS):
            out = subprocess.run([sys.executable, __file__, "--child",
                                  ",".join(map(str, thresholds))],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.splitlines()[-1])
            lines.append(f"| {thresholds} | {r['cpu']:.2f} | {r['simulate']:.2f} | "
                         f"{', '.join(map(str, r['passes']))} | "
                         f"{', '.join(f'{s:.2f}' for s in r['seconds'])} | {r['peak_mb']:.0f} |")
            print(lines[-1], file=sys.stderr)
    report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
