"""`fractal sensitivity`: how far a fractal-versus-GPU comparison moves when each assumed
constant of either side takes the low or the high end of a plausible range.

    fractal sensitivity programs/mlp.fasm logreg --machine f1 --gpu 1080ti
    fractal sensitivity vgg16 lstm -m f100 -g dgx1-v100 --launch graphs --figure t.png -o t.csv

PROGRAMS are program files or names of the workload suite (`fractal gen --list`, at their
defaults). The method and the ranges' sources are in docs/reproduction.md, "Sensitivity".
"""
from __future__ import annotations

import sys
from pathlib import Path

from fractal import strict_json
from fractal.cli import checked_machine, machine_args
from fractal.commands.baseline import launch_arg
from isa.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("sensitivity", help="vary every assumed constant of a fractal-vs-GPU "
                                           "comparison over its range: table and tornado figure")
    p.add_argument("programs", nargs="+", metavar="PROGRAM",
                   help="program files (.fasm) or workload names (fractal gen --list)")
    machine_args(p)
    p.add_argument("--gpu", "-g", default="1080ti",
                   help="GPU preset (fractal baseline gpus) or a GPU .toml file (default 1080ti)")
    p.add_argument("--factors", metavar="F.toml", help="GPU efficiency factors overriding the "
                                                      "defaults (the middle of their ranges)")
    launch_arg(p)
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("-o", "--output", metavar="FILE.csv", help="write the table as CSV")
    p.add_argument("--figure", metavar="FILE.png", help="write the tornado figure")
    p.set_defaults(handler=run)


def load_programs(names: list[str]) -> dict:
    """name -> checked Program, from files or workload names; a bad one is a located error."""
    from fractal import api                      # lazy: numpy and the checker (~0.2 s)
    from fractal.workloads import WORKLOADS, generate
    programs = {}
    for name in names:
        if name in WORKLOADS and not Path(name).exists():
            program = api.load_program(generate(name))
        else:
            program = api.load_program(name)
        programs[Path(name).stem if name not in WORKLOADS else name] = program
    return programs


def writable(path: str | None, where: str) -> None:
    """A file the command will write: refused before any work when it cannot be one."""
    if path is None:
        return
    p = Path(path)
    if p.is_dir():
        raise UserError(f"cannot write {path}: it is a directory", where)
    if where != "--figure" and not p.parent.is_dir():
        raise UserError(f"cannot write {path}: no directory {p.parent}", where)


def run(args, out) -> int:
    from fractal import sensitivity as sn        # lazy: the compiler, simulator, baseline
    writable(args.output, "--output")
    writable(args.figure, "--figure")
    from fractal.baseline import load_factors, load_gpu, with_launch
    gpu = with_launch(load_gpu(args.gpu), args.launch)
    factors = load_factors(args.factors) if args.factors else None
    machine = checked_machine(args)
    programs = load_programs(args.programs)
    tty = sys.stderr.isatty() and not args.json
    note = (lambda what: print(f"  {what}".ljust(70)[:70], end="\r", file=sys.stderr,
                               flush=True)) if tty else None
    runs = sn.run_programs(programs, machine, gpu, factors,
                           note and (lambda r: note(f"ran {r.name}")))
    s = sn.sensitivity(runs, machine, gpu, factors, note and (lambda c: note(f"varied {c.key()}")))
    if tty:
        print(" " * 70, end="\r", file=sys.stderr)
    if args.output:
        sn.write_csv(s, args.output)
    if args.figure:
        sn.tornado(s, args.figure)
    if args.json:
        strict_json.dump(s.to_json(), out)
        return 0
    print(s.table(), file=out)
    print("\nsources of the ranges:", file=out)
    for line in s.sources():
        print(f"  {line}", file=out)
    for what, path in (("table", args.output), ("figure", args.figure)):
        if path:
            print(f"{what} written to {path}", file=out)
    return 0
