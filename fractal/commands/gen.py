"""`fractal gen`: the fractal assembly of a workload (VGG-16, ResNet-18, LSTM, k-NN, ...).

    fractal gen --list
    fractal gen vgg16 --batch 2 --resolution 64 --width 8 -o vgg_small.fasm
    fractal gen logreg --dtype f16            # the data tensors in f16 (f32, f16 or bf16)
    fractal gen vgg16 --help                  # the parameters of one workload
    fractal gen --all -o programs/            # every workload at its defaults, NAME.fasm each

The parameters depend on the workload, so everything after NAME is parsed by a parser built
for that workload.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from fractal.cli import positive_int
from isa.errors import UserError, did_you_mean


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UserError(f"{message}\n{self.format_usage().rstrip()}", self.prog)


def register(sub):
    p = sub.add_parser("gen", help="write the program of a workload (vgg16, resnet18, lstm, ...)",
                       description="Write the fractal assembly of a workload. "
                                   "`fractal gen NAME --help` lists NAME's parameters.")
    p.add_argument("--list", action="store_true", help="list the workloads and their parameters")
    p.add_argument("--all", action="store_true",
                   help="write every workload at its defaults as DIR/NAME.fasm (needs -o DIR)")
    p.add_argument("--batch", type=positive_int, help="samples per run (default: the workload's)")
    p.add_argument("--dtype", type=_dtype, metavar="f32|f16|bf16",
                   help="float type of the data tensors (default: the workload's, see --list)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    p.add_argument("name", nargs="?", metavar="NAME", help="the workload (see --list)")
    p.add_argument("params", nargs=argparse.REMAINDER, metavar="--PARAM VALUE",
                   help="workload parameters")
    p.set_defaults(handler=_gen)


def _dtype(text: str) -> str:
    from fractal.workloads.base import DTYPES  # lazy: ~10 ms at every `fractal` start
    if text not in DTYPES:
        close = did_you_mean(text, DTYPES)
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(DTYPES)}, got {text!r}"
                                         + (f" ({close})" if close else ""))
    return text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _workload_args(w, args) -> tuple[dict, str | None]:
    """The parameter values given for workload `w`, and the output path."""
    from fractal.workloads.base import value_text  # lazy: ~10 ms at every `fractal` start
    p = _Parser(prog=f"fractal gen {w.name}", description=w.description, allow_abbrev=False)
    p.add_argument("-o", "--output", metavar="FILE", default=args.output,
                   help="write here instead of standard output")
    for key, param in w.params.items():
        flag = "--" + key.replace("_", "-")
        names = [flag] if "_" not in key else [flag, f"--{key}"]
        p.add_argument(*names, dest=key,
                       type=str if param.choices else _int_list if param.is_list else _int,
                       metavar="|".join(param.choices) if param.choices else
                       "N,N,..." if param.is_list else "N",
                       help=f"{param.help} (default {value_text(param.default)})")
    p.add_argument("--dtype", type=_dtype, metavar="f32|f16|bf16",
                   help=f"float type of the data tensors (default {w.dtype})")
    given, unknown = p.parse_known_args(args.params)
    if unknown and not unknown[0].startswith("-"):
        raise UserError(f"unexpected argument {unknown[0]!r}: parameters are given as --PARAM VALUE",
                        unknown[0])
    if unknown:
        flags = [f"--{k.replace('_', '-')}" for k in w.params] + ["--dtype"]
        # the closest of the command's own flags and the workload's (`--out` is -o/--output)
        hint = did_you_mean(unknown[0], flags + ["--output", "--batch"])
        raise UserError(f"{w.name} has no parameter {unknown[0]!r}", unknown[0],
                        hint=hint or "parameters: " + " ".join(flags))
    values = {k: getattr(given, k) for k in w.params if getattr(given, k) is not None}
    if args.batch is not None:
        values.setdefault("batch", args.batch)
    if given.dtype is not None or args.dtype is not None:
        values["dtype"] = given.dtype or args.dtype
    return values, given.output


def _write(path: Path, text: str, where: str):
    try:
        path.write_text(text)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}", where) from None


def _gen(args, out) -> int:
    # lazy: the workloads take ~10 ms, and every `fractal` start loads this module
    from fractal.workloads import WORKLOADS, generate, workload
    from fractal.workloads.base import value_text
    if args.list:
        for w in WORKLOADS.values():
            print(f"{w.name:<18} {w.description}", file=out)
            print(" " * 19 + "  ".join([f"--{k.replace('_', '-')} {value_text(p.default)}"
                                       for k, p in w.params.items()] + [f"--dtype {w.dtype}"]),
                  file=out)
        return 0
    if args.all:
        if args.name or args.params or args.batch or args.dtype:
            raise UserError("--all writes every workload at its defaults: give no NAME, "
                            "parameters, --batch or --dtype", "--all")
        if not args.output or not Path(args.output).is_dir():
            raise UserError(f"--all needs -o DIR, an existing directory; got {args.output!r}", "-o")
        for name in WORKLOADS:
            _write(Path(args.output) / f"{name}.fasm", generate(name), "-o")
            print(f"wrote {Path(args.output) / name}.fasm", file=out)
        return 0
    if not args.name:
        raise UserError("give a workload NAME (fractal gen --list shows them), or --list, or --all",
                        "fractal gen")
    if args.name.startswith("-"):
        raise UserError(f"unknown option {args.name}", "fractal gen")
    w = workload(args.name)
    values, output = _workload_args(w, args)
    text = generate(w.name, **values)
    if output:
        _write(Path(output), text, "-o")
        print(f"wrote {output} ({w.name})", file=out)
    else:
        out.write(text)
    return 0
