"""`fractal plot`: a figure from a `fractal sweep` CSV."""
from __future__ import annotations

from fractal.explore.figure import AXES
from fractal.plot import FORMATS, KINDS, plot


def register(sub):
    p = sub.add_parser("plot", help="plot a sweep CSV: speedup or efficiency against a GPU, "
                                    "throughput scaling or utilization, against machine size; "
                                    "or an exploration's points.csv (--kind pareto)")
    p.add_argument("results", metavar="RESULTS.csv")
    p.add_argument("--kind", required=True, choices=[*KINDS, "pareto"],
                   help="speedup / efficiency (relative to --gpu), scaling (ops/s), utilization; "
                        "pareto: an exploration's points on --x and --y")
    p.add_argument("--gpu", help="the GPU to compare with (default: the only one in the file)")
    p.add_argument("-o", "--output", dest="out", required=True, metavar="FIG",
                   help=f"image to write ({', '.join(FORMATS)})")
    p.add_argument("--x", default="latency", choices=AXES,
                   help="pareto: the metric across (default latency)")
    p.add_argument("--y", default="energy", choices=AXES,
                   help="pareto: the metric up (default energy)")
    p.set_defaults(handler=run)


def run(args, out) -> int:
    path = plot(args.results, args.kind, args.out, args.gpu, args.x, args.y)
    print(f"{args.kind} figure written to {path}", file=out)
    return 0
