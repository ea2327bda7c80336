"""`fractal baseline`: the GPU baseline fractal machines are compared with.

    fractal baseline estimate FILE --gpu v100 [--precision fp16|fp32] [--factors F.toml] [--json]
    fractal baseline measure FILE --device cpu|cuda [--repeat N] [--warmup N] [--json]
                             [--calibrate-against GPU -o factors.toml]
    fractal baseline gpus [--json]
"""
from __future__ import annotations

from fractal import strict_json
from fractal.cli import data_args, positive_int
from isa.errors import UserError


def register(sub):
    p = sub.add_parser("baseline", help="GPU baseline: roofline estimates, PyTorch measurements, "
                                        "GPU specifications")
    b = p.add_subparsers(dest="baseline_command", required=True)

    e = b.add_parser("estimate", help="roofline time and energy of a program on a GPU or DGX-1")
    e.add_argument("file", metavar="FILE")
    e.add_argument("--gpu", "-g", default="v100",
                   help="GPU preset (fractal baseline gpus) or a GPU .toml file (default v100)")
    e.add_argument("--precision",
                   help="fp16 (tensor cores, 16-bit data) or fp32 (default: the program's, fp16 "
                        "when its float tensors are all f16/bf16, else fp32)")
    e.add_argument("--factors", metavar="F.toml", help="efficiency factors overriding the defaults")
    launch_arg(e)
    e.add_argument("--fused", action="store_true",
                   help="each extension instruction one kernel that moves only its operands "
                        "(FlashAttention, fused LayerNorm); default: a kernel per body instruction")
    e.add_argument("--json", action="store_true", help="print a machine-readable report")
    e.set_defaults(handler=_estimate)

    m = b.add_parser("measure", help="run a program with PyTorch and time every instruction")
    m.add_argument("file", metavar="FILE")
    m.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    m.add_argument("--repeat", type=positive_int, default=10, help="timed runs (default 10)")
    m.add_argument("--warmup", type=positive_int, default=2, help="untimed runs first (default 2)")
    m.add_argument("--calibrate-against", metavar="GPU",
                   help="derive efficiency factors against this GPU preset or description file")
    m.add_argument("--output", "-o", metavar="FACTORS.toml",
                   help="write the derived factors (needs --calibrate-against)")
    m.add_argument("--json", action="store_true", help="print a machine-readable report")
    data_args(m)
    m.set_defaults(handler=_measure)

    g = b.add_parser("gpus", help="list the GPU presets with their specifications and sources")
    g.add_argument("--json", action="store_true")
    g.set_defaults(handler=_gpus)


def launch_arg(p) -> None:
    """--launch eager|graphs: how the GPU's kernels are launched (docs/baseline.md)."""
    p.add_argument("--launch", choices=("eager", "graphs"), default="eager",
                   help="eager: kernels launched one by one, the GPU file's launch overhead "
                        "(default; 5 us, as frameworks ran models op by op); graphs: the chain "
                        "replayed as a CUDA graph, 1 us per kernel (docs/baseline.md)")


def _estimate(args, out) -> int:
    from fractal.baseline import estimate, load_factors  # lazy: ~10 ms at every `fractal` start
    factors = load_factors(args.factors) if args.factors else None
    report = estimate(args.file, args.gpu, precision=args.precision, factors=factors,
                      launch=args.launch, fused=args.fused)
    if args.json:
        strict_json.dump(report.to_json(), out)
    else:
        print(report.text(), file=out)
    return 0


def _measure(args, out) -> int:
    # lazy: numpy and the compiler (~0.2 s); every `fractal` start loads this module
    from isa.reference import save_outputs
    from fractal.baseline.measure import calibrate, measure
    if args.output and not args.calibrate_against:
        raise UserError("-o writes derived factors: give --calibrate-against GPU too", "--output")
    result = measure(args.file, args.device, repeat=args.repeat, warmup=args.warmup,
                     inputs=args.input, inputs_npz=args.inputs, seed=args.seed)
    cal = calibrate(result, args.calibrate_against)
    if args.output:
        comments = {f"{part}.{cls}": f"measured on {result.device} ({result.device_name}): "
                                     f"{result.program}"
                    for cls, c in cal.classes.items() for part in ("compute", "bandwidth") if part in c}
        text = (f"# efficiency factors of {cal.against} ({cal.precision}) calibrated from "
                f"{result.program} on {result.device}; uncommented entries are defaults\n"
                + cal.factors.to_toml(comments))
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise UserError(f"cannot write {args.output}: {e.strerror or e}", "--output") from None
    if args.save_outputs:
        save_outputs(result.outputs, args.save_outputs, where="--save-outputs")
    if args.json:
        strict_json.dump({**result.to_json(), "calibration": cal.to_json()}, out)
        return 0
    print(result.text(), file=out)
    print("", file=out)
    print(cal.text(), file=out)
    if args.output:
        print(f"factors written to {args.output}", file=out)
    return 0


def _gpus(args, out) -> int:
    from fractal.baseline import GPUS, load_gpu  # lazy: ~10 ms at every `fractal` start
    gpus = [load_gpu(n) for n in GPUS]
    if args.json:
        rows = []
        for g in gpus:
            row = {k: v for k, v in vars(g).items() if k != "sources"}
            row["sources"] = dict(g.sources)
            rows.append(row)
        strict_json.dump(rows, out)
        return 0
    for g in gpus:
        print(g.summary(), file=out)
        for key, source in g.sources:
            print(f"    {key}: {source}", file=out)
    return 0
