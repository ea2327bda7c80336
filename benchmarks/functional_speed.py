"""Functional-mode speed on whole networks: ResNet-18 at batch 1 and one BERT-base layer (128
tokens) on `f1` against onnxruntime running the same model (same graph, same weights) on the same
host, and VGG-16 at batch 1 on `f1` against the numpy reference interpreter, all in one run.

    python benchmarks/functional_speed.py                 # about two minutes
    python benchmarks/functional_speed.py --repeat 9 --out functional_speed.md
    python benchmarks/functional_speed.py --by-instruction   # where a BERT-layer run goes
    python benchmarks/functional_speed.py --by-instruction resnet18

The programs are `fractal gen resnet18`, `fractal gen vgg16` (batch 1, 224x224) and `fractal gen
bert_base --layers 1` (128 tokens), in f32 and in f16 (the generators' default). onnxruntime
runs the f32 program translated instruction by instruction into an ONNX graph (`to_onnx`) with
the same weights, on its CPU provider with its default threads, which do not spin when idle; the
f16 rows are timed against that same f32 session. The weights are drawn at the scale of a trained network (He
initialization, small biases), so that activations stay in f16's range and the outputs can be
compared: fractal's against onnxruntime's (f32) and against the reference's.

Times: a functional run is `simulator.run.compute_outputs` (the plan executor and the leaf
kernels), on a plan compiled beforehand (compile time given apart). The first run of a plan also
builds its nodes' child calls and tile tables; later runs given the same `cache` dict reuse them,
as onnxruntime's session reuses what it prepared when it was created. The runs are timed in
`--repeat` rounds of one functional run then one onnxruntime run, back to back, so that both
sides of each round see the host in the same state: the table gives each side's best time, the
ratio of the two, and the median (least and most) of the rounds' own ratios, which is what the
target is checked on: ResNet-18's and the BERT layer's runs within 3x of onnxruntime's
(docs/performance.md). The leaf kernels are compiled (or loaded from numba's cache) before any
timing. The host's load average is printed at the start and the end: on a host shared with other
work the times grow with it, the threaded ones most.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fractal                                   # noqa: E402
from fractal.workloads import generate           # noqa: E402
from host import best, emit, header, paired             # noqa: E402
from isa.checker import opcode_table             # noqa: E402
from isa.opcodes import pads                     # noqa: E402
from isa.program import Program                  # noqa: E402
from isa.reference import NP_DTYPES, run_reference   # noqa: E402
from simulator.batch_kernels import warm_up_batches   # noqa: E402
from simulator.kernels import warm_up            # noqa: E402
from simulator.run import compute_outputs        # noqa: E402

TARGET = 3.0


def trained_scale_feeds(program: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs N(0, 1); weights of fan-in k drawn N(0, 2/k) (He; k = C*kh*kw for a conv, the
    second-to-last dimension for a matrix); biases N(0, 0.01^2); LayerNorm gains 1 + N(0, 0.01^2):
    the magnitudes of a trained network's, so activations stay in f16's range."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in program.tensors:
        if t.role not in ("input", "param"):
            continue
        shape = t.type.shape
        x = rng.standard_normal(shape)
        if t.role == "param" and re.search(r"_g$", t.name):
            x = 1 + 0.01 * x
        elif t.role == "param" and (len(shape) < 2 or re.search(r"_(b|beta|b[qkv])$", t.name)):
            x = 0.01 * x
        elif t.role == "param":
            fan_in = int(np.prod(shape[1:])) if len(shape) == 4 else shape[-2]
            x = x * np.sqrt(2.0 / fan_in)
        feeds[t.name] = x.astype(NP_DTYPES[t.type.dtype])
    return feeds


def to_onnx(program: Program, feeds: dict):
    """The program as an f32 ONNX model, instruction by instruction (the opcodes the CNN
    generators emit, and bert_base's: its layernorm, attention and gelu extensions as ONNX's
    LayerNormalization, softmax(Q K^T / sqrt(D)) V and x (1 + erf(x / sqrt 2)) / 2); params become
    initializers. Returns (model, input feeds for onnxruntime)."""
    from onnx import TensorProto, helper, numpy_helper
    types, table = program.types, opcode_table(program)
    version: dict[str, int] = {}
    nodes, inits = [], []

    def read(name):
        return f"{name}__{version[name]}" if version.get(name) else name

    def write(name):
        version[name] = version.get(name, 0) + 1
        return f"{name}__{version[name]}"

    def const(value, name):
        inits.append(numpy_helper.from_array(np.array(value, np.float32), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    for i, ins in enumerate(program.instructions):
        op = ins.opcode
        spec = table[op]
        dst, srcs = ins.operands[0], [read(s) for s in ins.operands[spec.outputs:]]
        a = spec.full_attrs(ins.attr)
        if op == "conv2d":
            pt, pl, pb, pr = pads(a)
            node("Conv", srcs, write(dst), strides=[a["stride"]] * 2, pads=[pt, pl, pb, pr])
        elif op in ("maxpool", "avgpool"):
            pt, pl, pb, pr = pads(a)
            extra = {"count_include_pad": 0} if op == "avgpool" else {}
            node("MaxPool" if op == "maxpool" else "AveragePool", srcs, write(dst),
                 kernel_shape=[a["kernel"]] * 2, strides=[a["stride"]] * 2, pads=[pt, pl, pb, pr], **extra)
        elif op in ("add", "relu", "matmul"):
            node({"add": "Add", "relu": "Relu", "matmul": "MatMul"}[op], srcs, write(dst))
        elif op == "reshape":
            shape = f"{dst}__shape{i}"
            inits.append(numpy_helper.from_array(np.array(types[dst].shape, np.int64), shape))
            node("Reshape", [srcs[0], shape], write(dst))
        elif op == "transpose":
            node("Transpose", srcs, write(dst), perm=list(a["perm"]))
        elif op == "argmax":
            node("ArgMax", srcs, write(dst), axis=a["axis"], keepdims=0)
        elif op == "layernorm":
            node("LayerNormalization", srcs, write(dst), axis=-1, epsilon=float(a["eps"]))
        elif op == "attention":              # o only: the running max and sum are not read again
            scale = const(1 / np.sqrt(types[ins.operands[3]].shape[-1]), f"scale{i}")
            scores = node("Mul", [node("MatMul", srcs[:2], f"qk{i}"), scale], f"s{i}")
            node("MatMul", [node("Softmax", [scores], f"p{i}", axis=-1), srcs[2]], write(dst))
        elif op == "gelu":
            e = node("Erf", [node("Mul", [srcs[0], const(2 ** -0.5, f"r2{i}")], f"xr{i}")], f"e{i}")
            half = node("Mul", [srcs[0], const(0.5, f"h{i}")], f"xh{i}")
            node("Mul", [half, node("Add", [e, const(1.0, f"one{i}")], f"e1{i}")], write(dst))
        else:
            raise SystemExit(f"to_onnx: no ONNX form for {op}")
    inputs, outputs = [], []
    for t in program.tensors:
        if t.role == "param":
            inits.append(numpy_helper.from_array(feeds[t.name].astype(np.float32), t.name))
        elif t.role == "input":
            inputs.append(helper.make_tensor_value_info(t.name, TensorProto.FLOAT, t.type.shape))
    for t in program.outputs:
        elem = TensorProto.INT64 if t.type.dtype == "i32" else TensorProto.FLOAT
        nodes.append(helper.make_node("Identity", [read(t.name)], [t.name]))
        outputs.append(helper.make_tensor_value_info(t.name, elem, None))
    graph = helper.make_graph(nodes, program.file or "program", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 8)
    given = {t.name: feeds[t.name].astype(np.float32) for t in program.tensors if t.role == "input"}
    return model, given


def _err(got, want) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))))


#: the workloads, their generator parameters besides the batch of 1, and the output compared
PROGRAMS = {"resnet18": ({}, "logits"), "vgg16": ({}, "logits"),
            "bert_base": ({"layers": 1, "seq": 128}, "y")}


def measure(name: str, dtype: str, repeat: int, session) -> dict:
    """Compile `name` (batch 1) in `dtype` for f1 and time its functional runs, each round back to
    back with one run of the onnxruntime `session` (`paired`), and its reference."""
    program = fractal.load_program(generate(name, batch=1, dtype=dtype, **PROGRAMS[name][0]))
    feeds = trained_scale_feeds(program)
    start = time.perf_counter()
    plan = fractal.compile(program, "f1")
    compile_s = time.perf_counter() - start
    first_s, _ = best(lambda: compute_outputs(plan, feeds), 1)      # child calls and tiles built
    tables: dict = {}
    compute_outputs(plan, feeds, tables)
    functional_s, ort_s, median, low, high, outs, ort_out = paired(
        lambda: compute_outputs(plan, feeds, tables), session, repeat)
    reference_s, ref = best(lambda: run_reference(program, feeds), repeat)
    return {"compile": compile_s, "first": first_s, "functional": functional_s, "ort": ort_s,
            "median": median, "low": low, "high": high, "reference": reference_s,
            "outputs": outs, "ort_outputs": ort_out, "ref": ref}


def onnxruntime_session(name: str):
    """A function that runs onnxruntime on `name`'s f32 program (`to_onnx`) with the weights
    `measure` feeds it, and returns the outputs by name (one untimed run done)."""
    import onnxruntime
    program = fractal.load_program(generate(name, batch=1, dtype="f32", **PROGRAMS[name][0]))
    model, given = to_onnx(program, trained_scale_feeds(program))
    options = onnxruntime.SessionOptions()
    # idle threads that spin for work after a run would take the cores from the functional run
    # that follows it
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    session.run(names, given)                       # untimed: first-run allocations

    def run():
        return dict(zip(names, session.run(names, given)))
    return run


def by_instruction(name: str, repeat: int) -> list[str]:
    """Where one run of `name` (f32, batch 1, `f1`) goes: seconds per root opcode (an extension
    by its name), its extensions leaf by leaf (`run_node`) and stacked (`run_extension_node`),
    each the best of `repeat` runs after one that built the tables."""
    from threadpoolctl import threadpool_limits
    import compiler.execute as execute
    from simulator.batch_kernels import LEAF_BATCH_KERNELS
    from simulator.extension_batch import run_extension_node
    from simulator.kernels import LEAF_KERNELS
    program = fractal.load_program(generate(name, batch=1, dtype="f32", **PROGRAMS[name][0]))
    feeds = trained_scale_feeds(program)
    plan = fractal.compile(program, "f1")
    inner_node = execute.run_node

    def per_root(extension) -> dict:
        """Best seconds per root opcode over `repeat` runs (the roots' own calls only)."""
        best_of: dict = {}
        tables: dict = {}
        for run in range(repeat + 1):
            times: dict = {}
            depth = [0]

            def timed(fn):
                def call(plan_, root, *rest, **kw):
                    depth[0] += 1
                    start = time.perf_counter()
                    try:
                        return fn(plan_, root, *rest, **kw)
                    finally:
                        depth[0] -= 1
                        if depth[0] == 0:
                            key = root.task.opcode
                            times[key] = times.get(key, 0.0) + time.perf_counter() - start
                return call
            execute.run_node = timed(inner_node)
            try:
                with threadpool_limits(1, user_api="blas"):
                    execute.execute_plan(plan, feeds, LEAF_KERNELS, LEAF_BATCH_KERNELS, tables,
                                         timed(extension) if extension else None)
            finally:
                execute.run_node = inner_node
            if run:                                 # the first run built the tables
                for k, v in times.items():
                    best_of[k] = min(best_of.get(k, v), v)
        return best_of

    leaf, stacked = per_root(None), per_root(run_extension_node)
    lines = ["| root instructions | leaf by leaf (ms) | stacked (ms) |", "|---|---:|---:|"]
    for k in sorted(leaf, key=lambda k: -leaf[k]):
        lines.append(f"| {k} | {leaf[k] * 1e3:.1f} | {stacked[k] * 1e3:.1f} |")
    lines.append(f"| the whole run | {sum(leaf.values()) * 1e3:.1f} | "
                 f"{sum(stacked.values()) * 1e3:.1f} |")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7,
                   help="rounds of one functional and one onnxruntime run (7)")
    p.add_argument("--out", metavar="FILE")
    p.add_argument("--by-instruction", nargs="?", const="bert_base", choices=sorted(PROGRAMS),
                   metavar="PROGRAM",
                   help="only where one run of PROGRAM (bert_base, its one layer, unless named) "
                        "goes, per root opcode")
    args = p.parse_args(argv)
    start = time.perf_counter()
    warm_up()
    warm_up_batches()
    if args.by_instruction:
        emit(header(f"Where a functional {args.by_instruction} run goes (f32, batch 1, f1)",
                    f"best of {args.repeat} runs per root opcode, after one that built the "
                    f"tables; load average {os.getloadavg()[0]:.2f}")
             + by_instruction(args.by_instruction, args.repeat), args.out)
        return 0
    lines = header("Functional mode on whole networks: ResNet-18 and a BERT-base layer against "
                   "onnxruntime, VGG-16 against the numpy reference",
                   f"batch 1 (224x224 images; 128 tokens), on f1; {args.repeat} rounds of one "
                   f"functional run then one onnxruntime run, back to back; compile time apart")
    import onnxruntime
    lines += [f"- onnxruntime {onnxruntime.__version__}, CPU provider, default threads (no "
              f"spinning); numba "
              f"threads {numba.config.NUMBA_NUM_THREADS}",
              f"- load average at the start: {os.getloadavg()[0]:.2f}", "",
              "| program | dtype | compile (s) | first run (s) | run (s, best) | reference (s) "
              "| onnxruntime f32 (s, best) | run / onnxruntime: best / best | per round: median "
              "(least-most) | run / reference | output max abs diff (vs onnxruntime; vs reference) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    ratios = {}
    for name, (_, output) in PROGRAMS.items():
        session = onnxruntime_session(name)
        for dtype in ("f32", "f16"):
            r = measure(name, dtype, args.repeat, session)
            got = r["outputs"][output]
            diff = f"{_err(got, r['ort_outputs'][output]):.2e}; {_err(got, r['ref'][output]):.2e}"
            ratios[name, dtype] = r
            lines.append(f"| {name} | {dtype} | {r['compile']:.2f} | {r['first']:.3f} | "
                         f"{r['functional']:.3f} | {r['reference']:.3f} | {r['ort']:.4f} | "
                         f"{r['functional'] / r['ort']:.1f}x | {r['median']:.1f}x "
                         f"({r['low']:.1f}-{r['high']:.1f}) | "
                         f"{r['functional'] / r['reference']:.2f}x | {diff} |")
            print(lines[-1], file=sys.stderr, flush=True)
    lines.append("")
    for name in ("resnet18", "bert_base"):
        r = ratios[name, "f32"]
        met = r["median"] <= TARGET
        lines.append(f"{name} f32, run / onnxruntime, median over rounds: {r['median']:.1f}x "
                     f"(best / best {r['functional'] / r['ort']:.1f}x; target: within {TARGET:g}x; "
                     f"{'met' if met else 'not met'}); in f16 {ratios[name, 'f16']['median']:.1f}x.")
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.2f}. "
              f"Total benchmark time {time.perf_counter() - start:.0f} s."]
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
