"""Compile time of VGG-16-sized work against the number of leaves of the machine.

Compiles `benchmarks/vgg16_layers.fasm` (all 16 weight layers of VGG-16 at batch 1, 53
instructions) and a single convolution layer (VGG-16's conv3_2: 256 -> 256 channels, 3x3 pad 1,
56x56) with `compiler.compile_program` for the f1 preset re-scaled to 16 ... 1,048,576 leaves,
and prints a markdown table per workload: leaves, wall time (best of --repeat runs, 5 by default), plan entries
(`len(plan.table)`, the distinct (task, level) sub-problems planned) and the time of
`verify_plan` on the result; then the ratio of the largest to the smallest compile time.

    python benchmarks/compile_scaling.py                     # print the tables
    python benchmarks/compile_scaling.py --out results.md    # and write them to a file
    python benchmarks/compile_scaling.py --repeat 9

Compile time depends on levels times distinct shapes (the plan is memoized), not on the number of
leaves; what grows with the fan-out is the parallel-split search at each node.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# the checkout this script lives in, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler import compile_program, verify_plan  # noqa: E402
from host import emit, header
from machine import preset
from isa.checker import load_program, parse_program

ROOT = Path(__file__).resolve().parent.parent
VGG16 = ROOT / "benchmarks" / "vgg16_layers.fasm"

#: (depth, fan-out) of the f1 preset re-scaled: 16, 256, 4096, 65,536 and 1,048,576 leaves
MACHINES = ((4, 2), (4, 4), (4, 8), (4, 16), (4, 32))

CONV3_2 = """\
# VGG-16 conv3_2 alone: 256 -> 256 channels, 3x3 pad 1, at 56x56, batch 1
tensor x : f32[1, 256, 56, 56]  input
tensor w : f32[256, 256, 3, 3]  param
tensor y : f32[1, 256, 56, 56]  output
conv2d y, x, w, stride=1, pad=1
"""


def measure(program, machine, repeat: int) -> dict:
    """Best-of-`repeat` wall time of compile_program, the plan size, and one verify_plan."""
    times = []
    plan = None
    for _ in range(repeat):
        start = time.perf_counter()
        plan = compile_program(program, machine)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    verify_plan(plan)
    verify = time.perf_counter() - start
    return {"machine": machine.name, "depth": machine.depth, "fanouts": machine.fanouts,
            "leaves": machine.leaves, "best": min(times), "entries": len(plan.table),
            "verify": verify}


def table(title: str, rows: list[dict]) -> list[str]:
    lines = [f"### {title}", "",
             "| machine | fan-outs | leaves | compile time (s, best) | plan entries | verify_plan (s) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        fans = "x".join(map(str, r["fanouts"]))
        lines.append(f"| {r['machine']} | {fans} | {r['leaves']:,} | {r['best']:.3f} | "
                     f"{r['entries']:,} | {r['verify']:.3f} |")
    lo = min(rows, key=lambda r: r["best"])
    hi = max(rows, key=lambda r: r["best"])
    leaves = max(r["leaves"] for r in rows) / min(r["leaves"] for r in rows)
    lines += ["", f"Largest / smallest compile time: {hi['best'] / lo['best']:.1f}x "
                  f"({hi['best']:.3f} s on {hi['leaves']:,} leaves against {lo['best']:.3f} s on "
                  f"{lo['leaves']:,}), for {leaves:,.0f}x the leaves; plan entries "
                  f"{min(r['entries'] for r in rows):,} to {max(r['entries'] for r in rows):,}.", ""]
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="FILE", help="also write the markdown to FILE")
    p.add_argument("--repeat", type=int, default=5, help="runs per machine; the best counts (5)")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")

    base = preset("f1")
    machines = [base.rescaled(d, f) for d, f in MACHINES]
    workloads = [
        ("VGG-16, all 16 weight layers (benchmarks/vgg16_layers.fasm)", load_program(VGG16)),
        ("One layer: VGG-16 conv3_2, conv2d 256 -> 256 channels, 3x3 pad 1, 56x56, batch 1",
         parse_program(CONV3_2, "<conv3_2>")),
    ]
    compile_program(workloads[0][1], machines[0])      # warm-up, untimed: imports, first calls
    started = time.perf_counter()
    lines = header("Compile time against machine size",
                   f"machines: preset f1 re-scaled with `rescaled(depth, fanout)`; wall time of "
                   f"`compiler.compile_program`, best of {args.repeat} (one CPU used)")
    for title, program in workloads:
        n = len(program.instructions)
        rows = []
        for m in machines:
            rows.append(measure(program, m, args.repeat))
            print(f"  {title[:40]:<40} {m.name:<14} {rows[-1]['best']:.3f} s", file=sys.stderr,
                  flush=True)
        lines += table(f"{title}, {n} instruction{'s' if n > 1 else ''}", rows)
    lines.append(f"Total benchmark time {time.perf_counter() - started:.1f} s.")
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
