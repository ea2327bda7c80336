"""`fractal explore`: search an explore spec's design space for the best machines under area,
power and size budgets (docs/explore.md)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from fractal.cli import positive_int


def register(sub):
    p = sub.add_parser("explore", help="search a space of machines for the best ones for some "
                                       "workloads under area, power and size budgets (an "
                                       "explore spec, docs/explore.md)")
    p.add_argument("spec", metavar="SPEC.toml", help="the explore spec")
    p.add_argument("--machine", "-m",
                   help="the base machine (a preset or a machine .toml file), replacing the "
                        "spec's")
    p.add_argument("-o", "--output", dest="out", metavar="DIR",
                   help="folder to write points.csv and summary.md into (default: the spec's "
                        "name with the suffix -explore, in the current folder)")
    p.add_argument("--store", metavar="FILE.sqlite",
                   help="results store to take runs from and add to, shared with sweeps and "
                        "other explorations (default: DIR/store.sqlite)")
    p.add_argument("--resume", action="store_true",
                   help="continue an exploration in DIR: its runs come from the store, a seeded "
                        "search proposes the same points again")
    p.add_argument("--workers", type=positive_int,
                   help="local worker processes (default: one per core)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on this Dask scheduler (tcp://host:port) instead of local workers")
    p.set_defaults(handler=run)


def run(args, out) -> int:
    # lazy: the explorer loads numpy, the compiler and the simulator
    from fractal.explore import explore, load_spec
    from fractal.explore.report import POINTS, SUMMARY
    from machine import preset
    spec = load_spec(args.spec)
    if args.machine is not None:
        from fractal.explore.spec import spec_from_dict
        from machine.description import read_toml
        data = read_toml(args.spec, "explore spec", args.spec)
        data["machine"] = str(Path(args.machine).resolve()) if args.machine not in (
            "tiny", "f1", "f100") else args.machine
        preset(args.machine)                     # a bad --machine is located at --machine
        spec = spec_from_dict(data, args.spec)
    folder = args.out or f"{Path(args.spec).stem}-explore"
    result = explore(spec, folder, args.store, args.workers, args.dask, args.resume,
                     progress=sys.stderr.isatty())
    feasible = sum(r["feasible"] for r in result.points)
    print(f"{len(result.points)} design points in {Path(folder) / POINTS} ({result.ran} "
          f"evaluations made now, the others from the results store {result.store}): "
          f"{feasible} feasible, {len(result.front)} on the front; the best machines in "
          f"{Path(folder) / SUMMARY}", file=out)
    return 0
