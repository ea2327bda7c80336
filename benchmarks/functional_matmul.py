"""Functional-mode throughput: a 1024 x 1024 x 1024 matmul computed by the leaves of a 64-leaf
machine (plan executor + numba leaf kernels), against numpy's own matmul in the same run.

    python benchmarks/functional_matmul.py [--n 1024] [--repeat 3] [--out FILE]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

# the checkout this script lives in, not an installed copy
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler import compile_program  # noqa: E402
from compiler.plan import level_counts
from machine import preset
from host import best, emit, header
from isa.checker import parse_program
from isa.reference import generate_feeds
from simulator.run import compute_outputs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", metavar="FILE")
    args = p.parse_args(argv)
    n = args.n
    program = parse_program(f"tensor a : f32[{n}, {n}] input\ntensor b : f32[{n}, {n}] param\n"
                            f"tensor c : f32[{n}, {n}] output\nmatmul c, a, b\n", "<matmul>")
    feeds = generate_feeds(program, 0)
    lines = header(f"Functional mode: {n}^3 matmul on 64 leaves against numpy",
                   f"best of {args.repeat}; numpy's matmul on the same arrays in the same run")
    lines += ["| machine | leaf tasks | fractal (s) | numpy (s) | fraction of numpy's throughput "
              "| max abs error |", "|---|---:|---:|---:|---:|---:|"]
    for m in (preset("f1").rescaled(3, 4), preset("f1").rescaled(2, 8)):
        plan = compile_program(program, m)
        out = compute_outputs(plan, feeds)          # warm-up: kernels compiled/loaded
        t_fractal, _ = best(lambda: compute_outputs(plan, feeds), args.repeat)
        t_numpy, _ = best(lambda: feeds["a"] @ feeds["b"], args.repeat)
        err = float(np.abs(out["c"] - feeds["a"] @ feeds["b"]).max())
        leaf_tasks = sum(c for (_, lv), c in level_counts(plan).items() if lv == m.depth)
        lines.append(f"| {m.name} ({m.leaves} leaves) | {leaf_tasks:,} | {t_fractal:.3f} | "
                     f"{t_numpy:.3f} | {t_numpy / t_fractal:.2f} | {err:.2e} |")
        print(lines[-1], file=sys.stderr, flush=True)
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
