"""The simulated cycles of the plans the compiler makes for a suite of cases, to compare two
versions of the compiler (a change to its search, say) on what its plans are worth.

    python benchmarks/plan_cycles.py --out before.json          # on one checkout, ~4 minutes
    python benchmarks/plan_cycles.py --against before.json      # on the other

Cases: every program of `programs/` on `tiny`, `f1` and `f100`; VGG-16 at batch 1, ResNet-18 at
batch 4, BERT-base and AlexNet at batch 8 generated in f16 on `f1` and `f100` (the suite); then
re-scaled machines (`f1` at 4x2, 4x4 and 3x8, `f100` at 4x4, `tiny` at 3x4) with eight programs
and, but on `tiny`, the three generated networks. A case that does not fit its machine is
skipped. With `--against`, the report lists the cases whose cycles differ and counts, for each
part, the cases unchanged, faster and slower, and the geometric mean of the ratios.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fractal                                   # noqa: E402
from fractal.workloads import generate           # noqa: E402
from host import header                          # noqa: E402
from isa.errors import UserError                 # noqa: E402
from machine import preset                       # noqa: E402

NETS = (("vgg16", 1), ("resnet18", 4), ("bert_base", 1), ("alexnet", 8))
RESCALED = (("f1", 4, 2), ("f1", 4, 4), ("f1", 3, 8), ("f100", 4, 4), ("tiny", 3, 4))
RESCALED_PROGRAMS = ("cnn", "mlp", "lstm", "attention", "alexnet_block", "transformer_block",
                     "knn", "topk")


def cases():
    """(part, name, program source or path, machine)."""
    for path in sorted((ROOT / "programs").glob("*.fasm")):
        for m in ("tiny", "f1", "f100"):
            yield "suite", f"{path.stem}@{m}", path, m
    for net, batch in NETS:
        for m in ("f1", "f100"):
            yield "suite", f"{net}-b{batch}@{m}", (net, batch), m
    for name, depth, fanout in RESCALED:
        m = preset(name).rescaled(depth, fanout)
        label = f"{name}-d{depth}f{fanout}"
        for p in RESCALED_PROGRAMS:
            yield "re-scaled", f"{p}@{label}", ROOT / "programs" / f"{p}.fasm", m
        if name != "tiny":
            for net, batch in NETS[:3]:
                yield "re-scaled", f"{net}-b{batch}@{label}", (net, batch), m


def measure() -> dict:
    out = {}
    for part, name, source, machine in cases():
        if isinstance(source, tuple):
            source = generate(source[0], batch=source[1], dtype="f16")
        try:
            run = fractal.run(fractal.load_program(source), machine, functional=False)
        except UserError:
            continue                    # the program does not fit the machine
        out[name] = {"part": part, "cycles": run.cycles}
    return out


def compare(now: dict, before: dict) -> list[str]:
    lines = ["| case | cycles before | cycles now | change |", "|---|---:|---:|---:|"]
    parts: dict = {}
    for name, row in now.items():
        if name not in before:
            continue
        a, b = before[name]["cycles"], row["cycles"]
        logs = parts.setdefault(row["part"], [])
        logs.append(math.log(b / a))
        if a != b:
            lines.append(f"| {name} | {a:,} | {b:,} | {b / a - 1:+.2%} |")
    lines.append("")
    for part, logs in parts.items():
        lines.append(f"- {part}: {len(logs)} cases, {sum(x == 0 for x in logs)} unchanged, "
                     f"{sum(x < 0 for x in logs)} faster (to {math.expm1(min(logs)):+.2%}), "
                     f"{sum(x > 0 for x in logs)} slower (to {math.expm1(max(logs)):+.2%}); "
                     f"geometric mean ratio {math.exp(sum(logs) / len(logs)):.5f}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="FILE.json", help="write the cycles of every case")
    p.add_argument("--against", metavar="FILE.json", help="compare with an earlier --out")
    args = p.parse_args(argv)
    start = time.perf_counter()
    now = measure()
    if args.out:
        Path(args.out).write_text(json.dumps(now, indent=1) + "\n")
    lines = header("Simulated cycles of the compiler's plans", "timing only, symmetric mode")
    lines.append(f"{len(now)} cases in {time.perf_counter() - start:.0f} s.")
    if args.against:
        lines += ["", *compare(now, json.loads(Path(args.against).read_text()))]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
