"""`fractal plot`: a figure from a `fractal sweep` CSV."""
from __future__ import annotations

from fractal.plot import FORMATS, KINDS, plot


def register(sub):
    p = sub.add_parser("plot", help="plot a sweep CSV: speedup or efficiency against a GPU, "
                                    "throughput scaling or utilization, against machine size")
    p.add_argument("results", metavar="RESULTS.csv")
    p.add_argument("--kind", required=True, choices=list(KINDS),
                   help="speedup / efficiency (relative to --gpu), scaling (ops/s), utilization")
    p.add_argument("--gpu", help="the GPU to compare with (default: the only one in the file)")
    p.add_argument("-o", "--output", dest="out", required=True, metavar="FIG",
                   help=f"image to write ({', '.join(FORMATS)})")
    p.set_defaults(handler=run)


def run(args, out) -> int:
    path = plot(args.results, args.kind, args.out, args.gpu)
    print(f"{args.kind} figure written to {path}", file=out)
    return 0
