"""`fractal store export`: the evaluations of a results store (`fractal.store`) as CSV."""
from __future__ import annotations


def register(sub):
    p = sub.add_parser("store", help="the results store that sweeps keep their runs in")
    actions = p.add_subparsers(dest="store_command", required=True, parser_class=type(p))
    e = actions.add_parser("export", help="write a results store's evaluations as CSV, units "
                                          "in the column names")
    e.add_argument("store", metavar="STORE.sqlite")
    e.add_argument("-o", "--output", dest="out", required=True, metavar="FILE.csv", help="CSV to write")
    e.add_argument("--kind", choices=("timing", "gpu-estimate"),
                   help="only this kind of evaluation: timing (simulated runs) or gpu-estimate "
                        "(GPU baselines); default: both")
    e.set_defaults(handler=run_export)


def run_export(args, out) -> int:
    from fractal.store import Store, export_csv  # lazy: sqlite3 and json, not every command
    with Store(args.store, create=False) as store:
        n = export_csv(store, args.out, args.kind)
    print(f"{n} evaluations written to {args.out}", file=out)
    return 0
