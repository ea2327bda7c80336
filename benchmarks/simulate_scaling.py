"""Timing-only simulation time of VGG-16-sized work against the number of leaves.

Simulates `benchmarks/vgg16_layers.fasm` (VGG-16 at batch 1) and VGG-16's conv3_2 layer in
timing-only, symmetric mode on the f1 preset re-scaled to 16, 256, 4,096, 65,536 and 1,048,576
leaves, and prints a markdown table: leaves, compile and simulation wall time (best of --repeat),
simulated cycles and utilization; then the ratio of the slowest to the fastest total.

    python benchmarks/simulate_scaling.py [--repeat N] [--out FILE]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# the checkout this script lives in, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler import compile_program  # noqa: E402
from machine import preset
from host import best, emit, header
from isa.checker import load_program, parse_program
from simulator.run import simulate

ROOT = Path(__file__).resolve().parent.parent
MACHINES = ((4, 2), (4, 4), (4, 8), (4, 16), (4, 32))
CONV3_2 = ("tensor x : f32[1, 256, 56, 56] input\ntensor w : f32[256, 256, 3, 3] param\n"
           "tensor y : f32[1, 256, 56, 56] output\nconv2d y, x, w, stride=1, pad=1\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    workloads = [("VGG-16 at batch 1 (benchmarks/vgg16_layers.fasm)",
                  load_program(ROOT / "benchmarks" / "vgg16_layers.fasm")),
                 ("VGG-16 conv3_2 (256 -> 256, 3x3, 56x56)", parse_program(CONV3_2, "<conv3_2>"))]
    lines = header("Timing-only simulation against machine size",
                   f"f1 re-scaled with `rescaled(4, fanout)`; wall times best of {args.repeat}; "
                   f"symmetric mode, timing only")
    for title, program in workloads:
        lines += [f"### {title}", "", "| leaves | compile (s) | simulate (s) | total (s) | cycles | "
                  "utilization |", "|---:|---:|---:|---:|---:|---:|"]
        totals = []
        for depth, fanout in MACHINES:
            m = preset("f1").rescaled(depth, fanout)
            t_compile, plan = best(lambda: compile_program(program, m), args.repeat)
            t_sim, (report, _) = best(lambda: simulate(plan), args.repeat)
            totals.append(t_compile + t_sim)
            lines.append(f"| {m.leaves:,} | {t_compile:.3f} | {t_sim:.3f} | {totals[-1]:.3f} | "
                         f"{report.cycles:,} | {report.utilization:.2%} |")
            print(f"  {m.leaves:>9,} leaves {totals[-1]:.3f} s", file=sys.stderr, flush=True)
        lines += ["", f"Slowest / fastest total: {max(totals) / min(totals):.1f}x; at "
                      f"{preset('f1').rescaled(*MACHINES[-1]).leaves:,} leaves {totals[-1]:.2f} s.", ""]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
