"""The `fractal` command: a thin layer over `fractal.api`.

Exit status: 0 success; 1 some points of a sweep failed (their rows say why); 2 invalid input of
any kind (program, machine file, arguments, data files; `fractal check` finding a problem); 3 an
internal error. No traceback reaches the user unless FRACTAL_DEBUG=1 is set.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
import traceback
import warnings

import fractal.commands as commands
from fractal import strict_json
from fractal.collector import tuned_collector
from isa.errors import InternalError, UserError
from machine import PRESETS, preset
from machine.area import machine_area

EXIT_OK, EXIT_USAGE, EXIT_INTERNAL = 0, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are UserErrors (status 2, no traceback, the argument named)."""

    def error(self, message):
        raise UserError(f"{message}\n{self.format_usage().rstrip()}", self.prog)


def fanout_arg(text: str) -> int | tuple[int, ...]:
    """One machine's fan-out: `8` for every stage, or `3x5x7`, one per stage. The grammar is the
    sweep's (`fractal.commands.sweep.int_range`), where commas and `..` list alternatives."""
    if "," in text or ".." in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} lists several machines; a list or range of fan-outs (2,4,8 or 2..8) is for "
            f"fractal sweep. One fan-out per stage is written 3x5x7")
    try:
        vals = tuple(int(x) for x in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fan-out (8) or one per stage (3x5x7), "
                                         f"got {text!r}") from None
    if any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"fan-outs must be at least 1, got {text!r}")
    return vals[0] if len(vals) == 1 else vals


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**63-1, got {v}")
    return v


def machine_args(p: argparse.ArgumentParser, default: str = "f1"):
    p.add_argument("--machine", "-m", default=default,
                   help=f"preset name (tiny, f1, f100) or a machine .toml file (default {default})")
    p.add_argument("--depth", type=positive_int, help="re-scale to this many fan-out stages")
    p.add_argument("--fanout", type=fanout_arg,
                   help="re-scale every stage to this fan-out, or give one per stage: 3x5x7")


def lib_args(p: argparse.ArgumentParser):
    p.add_argument("--lib", action="append", default=[], metavar="DIR",
                   help="a folder of extension libraries that includes may name (repeatable; "
                        "also FRACTAL_LIB_PATH)")


def checked_machine(args):
    """The machine of --machine/--depth/--fanout. The size limits on the re-scaled machine are
    checked on the arguments first: a depth of 10^22 is refused, not built."""
    from fractal import api
    from machine.limits import LIMITS, limit
    fanouts = args.fanout if isinstance(args.fanout, tuple) else ()
    for what, n, arg in (("depth", args.depth, "--depth"), ("depth", len(fanouts), "--fanout")):
        if n is not None and n > limit(what):
            var, _, bounds = LIMITS[what]
            raise UserError(f"the machine's depth is {n:,}, over the limit of {limit(what):,} "
                            f"({bounds}; set {var} to raise it)", arg)
    return api.build_machine(args.machine, args.depth, args.fanout)


def mapping_args(p: argparse.ArgumentParser):
    p.add_argument("--objective", choices=("cycles", "energy", "edp"), default="cycles",
                   help="what each node's choice among its best splits minimises: cycles "
                        "(default), energy, or edp (energy x cycles) (docs/compiler.md)")
    p.add_argument("--mapping", metavar="FILE.toml",
                   help="pin some instructions' cuts: parallel ways, serial pieces, loop order "
                        "per level (docs/compiler.md, \"Pinned mappings\")")


def data_args(p: argparse.ArgumentParser):
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy",
                   help="data for an input or param tensor (repeatable)")
    p.add_argument("--inputs", metavar="FILE.npz", help="data for several tensors in one .npz")
    p.add_argument("--seed", type=seed, default=0,
                   help="seed of the generator for tensors not given (default 0)")
    p.add_argument("--save-outputs", metavar="DIR", help="write each output tensor to DIR/NAME.npy")


class _Version(argparse.Action):
    """`--version`: the release and the digest of the source (fractal/version.py)."""
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="print the tool's version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from fractal.version import tool_version
        print(f"fractal {tool_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fractal", description="Compiler and simulator for fractal machines.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="parse and check programs, reporting every problem")
    c.add_argument("files", nargs="+", metavar="FILE")
    lib_args(c)

    r = sub.add_parser("run", help="simulate a program on a machine (or --reference: numpy)")
    r.add_argument("file", metavar="FILE")
    r.add_argument("--reference", action="store_true", help="run the numpy reference interpreter")
    r.add_argument("--json", action="store_true", help="print a machine-readable report")
    r.add_argument("--timing-only", action="store_true",
                   help="simulate timing and energy only; leaves compute no data (faster)")
    r.add_argument("--exact", action="store_true",
                   help="simulate every node one by one (small machines) instead of one node per "
                        "distinct sub-problem; the results are the same")
    r.add_argument("--trace", metavar="FILE.json",
                   help="write a Chrome/Perfetto trace of the node pipelines: every node's with "
                        "--exact, else the root's and one representative node's per distinct task")
    machine_args(r)
    mapping_args(r)
    data_args(r)
    lib_args(r)

    k = sub.add_parser("compile", help="decompose a program for a machine and print the plan")
    k.add_argument("file", metavar="FILE")
    k.add_argument("--json", action="store_true", help="print the plan as JSON")
    k.add_argument("--summary", action="store_true", help="print only the per-level totals")
    machine_args(k)
    mapping_args(k)
    lib_args(k)

    c2 = sub.add_parser("compare", help="two programs side by side on one machine (timing only)")
    c2.add_argument("a", metavar="A.fasm")
    c2.add_argument("b", metavar="B.fasm")
    c2.add_argument("--json", action="store_true",
                    help="print both run reports under the keys a and b")
    machine_args(c2)
    lib_args(c2)

    m = sub.add_parser("machines", help="list the preset machines, or write a machine of a "
                                        "results store as a machine file (--from-store)")
    m.add_argument("--json", action="store_true")
    m.add_argument("--from-store", metavar="KEY",
                   help="write the machine of this evaluation of --store (a key of points.csv "
                        "or fractal store export, or its first 8 or more characters)")
    m.add_argument("--store", metavar="FILE.sqlite", help="the results store of --from-store")
    m.add_argument("-o", "--output", dest="out", metavar="FILE.toml",
                   help="the machine file --from-store writes (default: print it)")

    # Every module of fractal.commands adds one subcommand: `register(sub)` adds its parser and
    # sets `handler=function(args, out) -> exit status` as a default. Such modules keep heavy
    # imports inside their handlers so that `fractal --help` stays fast.
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        importlib.import_module(f"fractal.commands.{info.name}").register(sub)
    return p


def _cmd_check(args, out) -> int:
    from fractal import api     # lazy: numpy and the compiler (~0.2 s), not for every command
    failed = 0
    for f in args.files:
        try:
            prog = api.load_program(f)
        except UserError as e:
            print(e.format(), file=sys.stderr)
            failed += 1
        else:
            print(f"{f}: ok ({len(prog.tensors)} tensors, {len(prog.instructions)} instructions)",
                  file=out)
    return EXIT_USAGE if failed else EXIT_OK


def _progress(i: int, n: int, what: str):
    print(f"\r  simulated {i}/{n} instructions ({what})".ljust(60), end="" if i < n else "\n",
          file=sys.stderr, flush=True)


def _cmd_run(args, out) -> int:
    # lazy: the API and the reference interpreter load numpy and the compiler (~0.2 s)
    from fractal import api
    from isa.reference import nonfinite_note, save_outputs
    machine = None
    if args.reference:
        res = api.reference(args.file, args.input, args.inputs, args.seed)
        report = res.to_json()
        outputs = res.outputs
        text = [f"{res.program.file}: reference run, {report['instructions']} instructions, "
                f"{res.ops:,} ops, seed {res.seed}"]
        for name, s in report["outputs"].items():
            shape = "[" + ", ".join(map(str, s["shape"])) + "]"
            stats = f"min {s['min']:.6g}  max {s['max']:.6g}  mean {s['mean']:.6g}" if "min" in s else ""
            text.append(f"  {name:<12} {s['dtype']}{shape:<18} {stats}")
        text = "\n".join(text + nonfinite_note(outputs, res.first_nonfinite))
    else:
        if args.timing_only and (args.input or args.inputs or args.save_outputs):
            raise UserError("--timing-only computes no data: drop --input/--inputs/--save-outputs, "
                            "or drop --timing-only", "--timing-only")
        machine = checked_machine(args)
        res = api.run(args.file, machine, functional=not args.timing_only, inputs=args.input,
                      inputs_npz=args.inputs, seed=args.seed, exact=args.exact, trace=args.trace,
                      mapping=args.mapping, objective=args.objective,
                      progress=_progress if sys.stderr.isatty() and not args.json else None)
        report, outputs, text = res.to_json(), res.outputs, res.text()
    if args.save_outputs:
        save_outputs(outputs, args.save_outputs, where="--save-outputs")
    if args.json:
        strict_json.dump(_with_machine(report, machine), out)
        return EXIT_OK
    print(text, file=out)
    if args.save_outputs:
        print(f"outputs written to {args.save_outputs.rstrip('/')}/", file=out)
    if getattr(args, "trace", None):
        print(f"trace written to {args.trace} (open it in ui.perfetto.dev or chrome://tracing)",
              file=out)
    return EXIT_OK


def _cmd_compile(args, out) -> int:
    # lazy: the API and the compiler load numpy (~0.2 s), not needed for --help
    from fractal import api
    from compiler import plan_json, plan_text
    plan = api.compile(args.file, checked_machine(args), args.mapping, args.objective)
    if args.json:
        strict_json.dump(_with_machine(plan_json(plan), plan.machine), out)
    else:
        print(plan_text(plan, detail=not args.summary), file=out)
    return EXIT_OK


def _cmd_compare(args, out) -> int:
    from fractal import api     # lazy: numpy and the compiler (~0.2 s), not for every command
    machine = checked_machine(args)
    a, b = (api.run(f, machine, functional=False) for f in (args.a, args.b))
    if args.json:
        strict_json.dump(_with_machine({"machine": machine.name, "a": a.to_json(),
                                        "b": b.to_json()}, machine), out)
        return EXIT_OK
    print(compare_text(a, b), file=out)
    return EXIT_OK


def compare_text(a, b) -> str:
    """Two run reports side by side, with the ratio b / a."""
    rows = [("root instructions", len(a.instructions), len(b.instructions)),
            ("leaf instructions", a.levels[-1]["instructions"], b.levels[-1]["instructions"])]
    for la, lb in zip(a.levels[1:], b.levels[1:]):
        rows.append((f"bytes down to level {la['level']} ({la['name']})", la["bytes_in"], lb["bytes_in"]))
        rows.append((f"bytes up from level {la['level']} ({la['name']})", la["bytes_out"], lb["bytes_out"]))
    rows += [("reduction ops", a.reduction_ops, b.reduction_ops), ("cycles", a.cycles, b.cycles),
             ("energy (joules)", a.energy_joules, b.energy_joules), ("ops", a.ops, b.ops)]
    wa, wb = max(len(a.program), 14), max(len(b.program), 14)
    lines = [f"machine {a.machine} ({a.leaves:,} leaves)", "",
             f"{'':<36}{a.program:>{wa}}  {b.program:>{wb}}  {'b / a':>9}"]
    for name, x, y in rows:
        fx = f"{x:,.4g}" if isinstance(x, float) else f"{x:,}"
        fy = f"{y:,.4g}" if isinstance(y, float) else f"{y:,}"
        ratio = f"{y / x:,.3g}" if x else "-"
        lines.append(f"{name:<36}{fx:>{wa}}  {fy:>{wb}}  {ratio:>9}")
    neck = lambda r: ", ".join(sorted({i.bottleneck for i in r.instructions}))
    lines.append(f"{'bottleneck':<36}{neck(a):>{wa}}  {neck(b):>{wb}}")
    return "\n".join(lines)


def _with_machine(obj: dict, machine) -> dict:
    """A report with every parameter of the machine it ran on (none for the reference)."""
    if machine is None:
        return obj
    from fractal.store import plain
    return {**obj, "machine_parameters": plain(machine)}


def _cmd_machines(args, out) -> int:
    if args.from_store is not None or args.store is not None or args.out is not None:
        from fractal.explore.writeback import from_store_command  # lazy: the store and writer
        return from_store_command(args, out)
    machines = [preset(n) for n in PRESETS]
    if args.json:
        rows = [{"name": m.name, "description": m.description, "levels": m.depth + 1,
                 "leaves": m.leaves, "peak_ops_per_second": m.peak_ops_per_second,
                 "frequency_hz": m.frequency_hz,
                 "memory_bytes_per_level": [lv.memory_bytes for lv in m.levels],
                 **machine_area(m).to_json()} for m in machines]
        strict_json.dump(rows, out)
        return EXIT_OK
    for m in machines:
        print(m.summary(), file=out)
        print(f"  area {machine_area(m).total:,.4g} mm2 at {m.process_nm:g} nm "
              f"(docs/machines.md, \"Area\")", file=out)
        if m.description:
            print(f"  {m.description}", file=out)
        print(file=out)
    return EXIT_OK


COMMANDS = {"check": _cmd_check, "run": _cmd_run, "compile": _cmd_compile,
            "compare": _cmd_compare, "machines": _cmd_machines}


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(argv)
        handler = getattr(args, "handler", None) or COMMANDS[args.command]
        from isa.parser import library_path
        with warnings.catch_warnings(), library_path(getattr(args, "lib", None)), \
                tuned_collector():
            # numpy's floating-point warnings (a mean of inf and -inf is nan, as reported) are
            # not for the user: an f32 program may overflow by design
            warnings.simplefilter("ignore", RuntimeWarning)
            return handler(args, out)
    except UserError as e:
        print(e.format(), file=sys.stderr)
        return EXIT_USAGE
    except InternalError as e:
        print(str(e), file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug of ours: say so plainly, keep the traceback for debugging
        if os.environ.get("FRACTAL_DEBUG"):
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e} (set FRACTAL_DEBUG=1 for details; "
              f"please report this)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
