"""`fractal sweep`: run programs over a grid of machine sizes into a CSV, each run kept in a
results store that an interrupted or repeated sweep resumes from."""
from __future__ import annotations

import argparse
import re
import sys

from fractal.cli import positive_int


#: the most values one --depth or --fanout list may hold
MAX_VALUES = 10_000


def int_range(text: str) -> tuple[int, ...]:
    """`3`, `1..4` (both ends included), `2,4,8`, or a mix: `1..3,8`; every value at least 1."""
    values = []
    if any(re.fullmatch(r"\s*\d+(x\d+)+\s*", item) for item in text.split(",")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a sweep gives every stage the same fan-out; one fan-out per stage "
            f"(3x5x7) is for one machine: fractal run, compile or compare")
    for item in text.split(","):
        item = item.strip()
        start, sep, end = item.partition("..")
        try:
            lo, hi = (int(start), int(end)) if sep else (int(item), int(item))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected N, A..B or a comma-separated list of them, got {text!r}") from None
        if lo > hi:
            raise argparse.ArgumentTypeError(f"empty range {item!r}: its start is above its end")
        if lo < 1:
            raise argparse.ArgumentTypeError(f"values must be at least 1, got {lo} in {text!r}")
        if hi - lo + 1 + len(values) > MAX_VALUES:
            raise argparse.ArgumentTypeError(f"{text!r} holds more than {MAX_VALUES:,} values; a "
                                             f"sweep runs every one of them")
        values.extend(range(lo, hi + 1))
    return tuple(dict.fromkeys(values))


def name_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return names


def register(sub):
    p = sub.add_parser("sweep", help="run programs over a grid of machine sizes (timing only) "
                                     "into a CSV; runs are kept in a results store that a "
                                     "repeated sweep resumes from")
    p.add_argument("programs", nargs="+", metavar="PROGRAM")
    p.add_argument("--machine", "-m", default="f1",
                   help="preset name (tiny, f1, f100) or a machine .toml file (default f1)")
    p.add_argument("--depth", type=int_range,
                   help="fan-out stages: 3, 1..4 or 1,2,4 (default: the machine's own)")
    p.add_argument("--fanout", type=int_range,
                   help="fan-out of every stage: 8, 2..4 or 2,4,8,16 (default: the machine's own)")
    p.add_argument("--gpu", type=name_list, default=(),
                   help="GPU baselines to compare with, e.g. 1080ti,v100,h100")
    p.add_argument("--precision", choices=("fp16", "fp32"),
                   help="the GPU baselines' precision (default: each program's own, as "
                        "fractal baseline estimate)")
    p.add_argument("--factors", metavar="F.toml",
                   help="efficiency factors of the GPU baselines, overriding the defaults")
    p.add_argument("-o", "--output", dest="out", default="results.csv",
                   help="CSV to write, the grid's rows (default results.csv)")
    p.add_argument("--store", metavar="FILE.sqlite",
                   help="results store to resume from and add to, keyed by the content of every "
                        "input (default: the CSV's path with the suffix .sqlite)")
    p.add_argument("--workers", type=positive_int,
                   help="local worker processes (default: one per core)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on this Dask scheduler (tcp://host:port) instead of local workers")
    p.set_defaults(handler=run)


def run(args, out) -> int:
    from fractal.sweep import sweep  # lazy: numpy, the compiler, tqdm (~0.3 s), not every command
    rows = sweep(args.programs, args.machine, args.depth, args.fanout, args.gpu, args.out,
                 args.workers, args.dask, progress=sys.stderr.isatty(), store=args.store,
                 precision=args.precision, factors=args.factors)
    failed = [r for r in rows if r["error"]]
    print(f"{len(rows)} runs in {args.out} ({rows.ran} run now, {len(rows) - rows.ran} from the "
          f"results store {rows.store})" + (f", {len(failed)} with an error:" if failed else ""),
          file=out)
    for r in failed[:10]:
        print(f"  {r['program']} depth {r['depth']} fan-out {r['fanout']}: {r['error']}", file=out)
    if len(failed) > 10:
        print(f"  ... and {len(failed) - 10} more (the error column of {args.out})", file=out)
    return 1 if failed else 0       # some points failed: their rows say why (exit statuses: cli.py)
