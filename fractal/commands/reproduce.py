"""`fractal reproduce`: the workload suite on f1 against a GTX 1080 Ti and on f100 against a
DGX-1, with the paper's headline ratios beside the geometric means: each side's bound per
program, the means per class, a batch table, the sensitivity of each comparison to every
assumed constant, and the area check."""
from __future__ import annotations

import platform
import sys
from datetime import date

from fractal import strict_json
from fractal.cli import positive_int
from fractal.commands.baseline import launch_arg
from isa.errors import UserError, did_you_mean


def register(sub) -> None:
    p = sub.add_parser("reproduce", help="compare f1 with a GTX 1080 Ti and f100 with a DGX-1 "
                                         "over the workload suite, beside the paper's ratios")
    p.add_argument("--batch", type=positive_int,
                   help="batch size of every workload (default: each workload's own)")
    p.add_argument("--programs", nargs="+", metavar="NAME",
                   help="only these workloads of the suite (default: all)")
    p.add_argument("--gpu-f1", default="1080ti", metavar="GPU",
                   help="the baseline of f1 (default 1080ti)")
    p.add_argument("--gpu-f100", default="dgx1-v100", metavar="GPU",
                   help="the baseline of f100 (default dgx1-v100; the paper does not say which)")
    p.add_argument("-o", "--output", metavar="FILE.md",
                   help="write the report (tables, figure beside it in reproduction/) to FILE.md")
    p.add_argument("--json", action="store_true", help="print every row and summary as JSON")
    p.add_argument("--no-scaling", action="store_true",
                   help="leave out the sweep of speed-up against machine size from the report")
    p.add_argument("--no-sensitivity", action="store_true",
                   help="leave out the sensitivity of each comparison to its assumed constants")
    p.add_argument("--no-batches", action="store_true",
                   help="leave out the batch table (the CNN and RNN programs at batch "
                        "1, 16 and 64)")
    p.add_argument("--dtype", choices=("f16", "bf16", "f32", "own"), default="f16",
                   help="data type of every workload's data tensors, which the GPU baseline "
                        "computes in too (default f16, the presets' MAC width; own: each "
                        "workload's default)")
    launch_arg(p)
    p.set_defaults(handler=run)


def run(args, out) -> int:
    # lazy: numpy, the compiler, the sweeps (~0.3 s); every `fractal` start loads this module
    from fractal import api, reproduce as rp, sensitivity as sn
    from fractal.baseline import LAUNCH_MODES, load_gpu, with_launch

    f1, f100 = rp.COMPARISONS
    comparisons = (f1.against(load_gpu(args.gpu_f1, "--gpu-f1").name),
                   f100.against(load_gpu(args.gpu_f100, "--gpu-f100").name))
    names = list(rp.PROGRAM_CLASSES)               # the papers' suite
    for n in args.programs or []:
        if n not in rp.PROGRAM_CLASSES:
            raise UserError(f"unknown workload '{n}'{did_you_mean(n, names)}; the suite has: "
                            f"{', '.join(names)}", "--programs")
    dtype = None if args.dtype == "own" else args.dtype
    programs = {n: t for n, t in rp.suite(args.batch, dtype).items()
                if not args.programs or n in args.programs}
    tty = sys.stderr.isatty() and not args.json
    note = (lambda what: print(f"  {what}".ljust(70)[:70], end="\r", file=sys.stderr,
                               flush=True)) if tty else None
    runs = rp.compare_runs(programs, comparisons, args.launch,
                           note and (lambda c, r: note(f"{c.machine} vs {c.gpu}: {r.name}")))
    rows = rp.compare(programs, comparisons, runs=runs)
    sensitivities = {}
    if not args.no_sensitivity:
        for c in comparisons:
            sensitivities[c] = sn.sensitivity(
                runs[c], api.build_machine(c.machine), with_launch(load_gpu(c.gpu), args.launch),
                progress=note and (lambda k, c=c: note(f"{c.machine} vs {c.gpu}: {k.key()}")))
    # the same runs with the GPU's kernels launched each way: only the roofline again
    launches = {c: {mode: sn.evaluate(runs[c], api.build_machine(c.machine),
                                      with_launch(load_gpu(c.gpu), mode), None, False)
                    for mode in LAUNCH_MODES} for c in comparisons}
    names = [n for n in programs if rp.PROGRAM_CLASSES.get(n) in ("CNN", "RNN")]
    batches = [] if args.no_batches or args.batch or not names else rp.batch_rows(
        comparisons, names, launch=args.launch, dtype=dtype,
        progress=note and (lambda c, r: note(f"batch: {c.machine} vs {c.gpu}: {r.name}")))
    if tty:
        print(" " * 70, end="\r", file=sys.stderr)
    if args.json:
        strict_json.dump({"rows": [r.to_json() for r in rows],
                          "summaries": [rp.summary(rows, c) for c in comparisons],
                          "sensitivity": [sensitivities[c].to_json() for c in sensitivities],
                          "batches": [r.to_json() for r in batches],
                          "area": rp.area_rows(comparisons),
                          "launch_modes": [{"machine": c.machine, "gpu": c.gpu, **{
                              mode: {"speedup": e.speedup, "efficiency": e.efficiency}
                              for mode, e in launches[c].items()}} for c in comparisons]}, out)
    else:
        for c in comparisons:
            print(rp.table_text(rows, c), file=out)
            print(file=out)
            print(rp.class_table(rows, c), file=out)
            print(file=out)
            if c in sensitivities:
                print(sensitivities[c].table(), file=out)
                print(file=out)
        if batches:
            print(rp.batch_table(batches, comparisons), file=out)
            print(file=out)
    if args.output:
        command = "fractal reproduce" + (f" --batch {args.batch}" if args.batch else "") + \
            (f" --programs {' '.join(args.programs)}" if args.programs else "") + \
            (" --no-scaling" if args.no_scaling else "") + \
            (" --no-sensitivity" if args.no_sensitivity else "") + \
            (" --no-batches" if args.no_batches else "") + \
            (f" --dtype {args.dtype}" if args.dtype != "f16" else "") + \
            (f" --launch {args.launch}" if args.launch != "eager" else "") + \
            f" -o {args.output}"
        host = f"{platform.machine()}, Python {platform.python_version()}, {date.today()}"
        from fractal.reproduce_report import write_report
        try:
            write_report(rows, comparisons, args.output, command, host,
                            None if args.no_scaling else programs, sensitivities, batches,
                            args.launch, dtype, launches)
        except OSError as e:
            raise UserError(f"cannot write the report: {e.strerror}", args.output)
        if not args.json:
            print(f"report written to {args.output}", file=out)
    return 0
