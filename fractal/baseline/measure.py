"""The measured baseline: run a program instruction by instruction with PyTorch on a device (cpu
or cuda), time every instruction, and derive the roofline's efficiency factors from the times.

Each instruction is one or more torch calls (torch_ops.py gives the meaning of every opcode, the
same as isa/reference.py); an extension instruction runs its body on every piece, like the
reference. A measurement runs the whole program `warmup` times (the first run also checks the
data, such as gather indices), then `repeat` timed times; every instruction is timed on its own,
between device synchronizations on cuda, and its time is the median over the timed runs.

`calibrate` compares the times with a GPU description (any file in the GPU format; a CPU can be
described the same way): per op class, the fraction of the peak arithmetic rate reached by the
instructions the roofline calls compute-bound, and the fraction of the peak memory bandwidth
reached by the bandwidth-bound ones, after the launch overhead. Every class's achieved rates are
reported whether or not a description is given.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from isa.errors import UserError
from isa.checker import opcode_table
from isa.extensions import leaf_pieces
from isa.opcodes import instruction_ops
from isa.program import Program
from isa import reference as _ref
from fractal.api import load_program

from fractal.baseline.factors import OP_CLASSES, Factors, opcode_class, DEFAULT_FACTORS
from fractal.baseline.gpu import Gpu, load_gpu
from fractal.baseline.roofline import _kernels, class_peak, element_bytes

__all__ = ["MeasuredInstruction", "Measurement", "Calibration", "measure", "calibrate", "need_torch"]

DEVICES = ("cpu", "cuda")


def need_torch():
    """The torch module, or a UserError saying how to install it."""
    try:
        import torch                    # lazy: PyTorch is an optional extra (.[gpu])
    except ImportError:
        raise UserError("the measured baseline needs PyTorch: install the gpu extra: "
                        "pip install -e '.[gpu]'", "fractal baseline measure") from None
    return torch


@dataclass(frozen=True)
class MeasuredInstruction:
    line: int | None
    text: str
    op_class: str
    seconds: float               # median over the timed runs
    ops: int
    bytes: int                   # operand bytes as f32 / i32 (4 bytes an element)
    kernels: list = field(default_factory=list, compare=False)   # (op class, ops, bytes) each


@dataclass
class Measurement:
    program: str
    device: str
    device_name: str
    torch_version: str
    warmup: int
    repeat: int
    seconds: float               # median over the timed runs of the whole program's time
    ops: int
    instructions: list
    outputs: dict = field(default_factory=dict, repr=False)
    notes: list = field(default_factory=list)

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        return {"program": self.program, "mode": "measured", "device": self.device,
                "device_name": self.device_name, "torch": self.torch_version,
                "warmup": self.warmup, "repeat": self.repeat, "seconds": self.seconds,
                "ops": self.ops, "ops_per_second": self.ops_per_second, "notes": list(self.notes),
                "instructions": [{k: v for k, v in vars(i).items() if k != "kernels"}
                                 for i in self.instructions]}

    def text(self) -> str:
        lines = [f"{self.program} measured on {self.device} ({self.device_name}), torch "
                 f"{self.torch_version}, median of {self.repeat} runs after {self.warmup} warm-up",
                 f"  time          {self.seconds * 1e6:,.3f} us",
                 f"  ops           {self.ops:,}  ({self.ops_per_second / 1e9:,.3f} Gops/s)",
                 *[f"  note: {n}" for n in self.notes],
                 "", f"  {'line':>4}  {'instruction':<40} {'us':>12} {'ops':>14} {'bytes':>12}"]
        for i in self.instructions:
            text = i.text if len(i.text) <= 40 else i.text[:37] + "..."
            lines.append(f"  {i.line or '':>4}  {text:<40} {i.seconds * 1e6:>12,.3f} {i.ops:>14,} "
                         f"{i.bytes:>12,}")
        return "\n".join(lines)


# ---------------------------------------------------------------- running

def _run_instruction(torch, spec, table, instr_operands, attrs, env, types, check):
    """Compute one instruction from env (torch tensors) into env."""
    from fractal.baseline.torch_ops import run_core, TORCH_DTYPES  # lazy: torch, an extra
    dsts, srcs = instr_operands[:spec.outputs], instr_operands[spec.outputs:]
    ins = [env[s] for s in srcs]
    if spec.decl is None:
        out = run_core(spec.name, ins, attrs, types[dsts[0]], check)
        if not ins and env:                 # a fill: made on the host, moved to the data's device
            out = out.to(next(iter(env.values())).device)
        env[dsts[0]] = out
        return
    decl, n_out = spec.decl, spec.outputs
    all_types = tuple(types[n] for n in instr_operands)
    outs = [torch.zeros(t.shape, dtype=TORCH_DTYPES[t.dtype], device=ins[0].device)
            for t in all_types[:n_out]]
    for piece, slices in leaf_pieces(decl, all_types):
        body = spec.body(piece[:n_out], piece[n_out:], attrs)
        local = {o.name: x[s] for o, x, s in zip(decl.inputs, ins, slices[n_out:])}
        body_types = body.types
        for b in body.instructions:
            sub = spec.table[b.opcode]
            _run_instruction(torch, sub, spec.table, b.operands, sub.full_attrs(b.attr), local,
                             body_types, check)
        for o, out, s in zip(decl.outputs, outs, slices):
            out[s] = local[o.name]
    for d, out in zip(dsts, outs):
        env[d] = out


def _feeds(program: Program, inputs, inputs_npz, seed) -> dict:
    if isinstance(inputs, dict):
        feeds = _ref.load_feeds(program, [], inputs_npz, seed)
        for name, value in inputs.items():
            feeds[name] = _ref.conform_feed(program, name, np.asarray(value), f"inputs['{name}']",
                                            "the array given")
        return feeds
    return _ref.load_feeds(program, list(inputs or []), inputs_npz, seed)


def _device(torch, device: str):
    if device not in DEVICES:
        raise UserError(f"device must be one of {', '.join(DEVICES)}, got {device!r}", "--device")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("no CUDA device is available to this PyTorch (torch "
                        f"{torch.__version__}); measure on --device cpu", "--device")
    return torch.device(device)


def measure(program: str | Path | Program, device: str = "cpu", *, repeat: int = 10,
            warmup: int = 2, inputs: list | dict | None = None, inputs_npz: str | None = None,
            seed: int = 0) -> Measurement:
    """Run a program with PyTorch on `device`; time every instruction (median of `repeat` runs
    after `warmup` runs). `outputs` holds the program's outputs as numpy arrays."""
    if repeat < 1 or warmup < 1:
        raise UserError(f"repeat and warmup must be at least 1, got {repeat} and {warmup}",
                        "--repeat")
    program = load_program(program)             # the user's input is checked before the extra
    torch = need_torch()
    dev = _device(torch, device)
    from fractal.baseline.torch_ops import TORCH_DTYPES  # lazy: torch, an optional extra
    table, types = opcode_table(program), program.types
    feeds = _feeds(program, inputs, inputs_npz, seed)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    start_env = {}
    for t in program.tensors:
        if t.role in ("input", "param"):
            start_env[t.name] = torch.from_numpy(np.ascontiguousarray(feeds[t.name])).to(dev)
        else:
            start_env[t.name] = torch.zeros(t.type.shape, dtype=TORCH_DTYPES[t.type.dtype], device=dev)
    specs = [(table[i.opcode], i.operands, table[i.opcode].full_attrs(i.attr))
             for i in program.instructions]
    times = [[] for _ in specs]
    totals = []
    env = {}
    with torch.inference_mode():
        for run in range(warmup + repeat):
            env = dict(start_env)
            total = 0.0
            for k, (spec, operands, attrs) in enumerate(specs):
                sync()
                t0 = time.perf_counter()
                try:
                    _run_instruction(torch, spec, table, operands, attrs, env, types, check=run == 0)
                except UserError as e:
                    instr = program.instructions[k]
                    if e.where is None:
                        e.where = instr.loc or f"instruction '{instr.to_text()}'"
                        e.source_line = program.source_line(instr.loc)
                    raise
                sync()
                dt = time.perf_counter() - t0
                total += dt
                if run >= warmup:
                    times[k].append(dt)
            if run >= warmup:
                totals.append(total)
    rows = []
    nbytes = lambda t: t.size * element_bytes(t.dtype, "fp32")
    for instr, (spec, operands, attrs), ts in zip(program.instructions, specs, times):
        kernels = _kernels(spec, operands, [types[n] for n in operands], attrs, table, nbytes)
        rows.append(MeasuredInstruction(
            line=instr.loc.line if instr.loc else None, text=instr.to_text(),
            op_class="extension" if spec.decl is not None else opcode_class(instr.opcode),
            seconds=statistics.median(ts), ops=instruction_ops(instr, types, table),
            bytes=sum(b for _, _, b in kernels), kernels=kernels))
    outputs = {t.name: env[t.name].cpu().numpy() for t in program.outputs}
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "host CPU"
    notes = [] if dev.type == "cuda" else [
        f"CPU timings with {torch.get_num_threads()} torch threads: a reference for the method, "
        f"not a GPU number"]
    return Measurement(program.file, device, name, torch.__version__, warmup, repeat,
                       statistics.median(totals), sum(r.ops for r in rows), rows, outputs, notes)


# ---------------------------------------------------------------- calibration

@dataclass
class Calibration:
    against: str | None
    precision: str
    classes: dict               # op class -> achieved rates and the derived factors
    factors: Factors | None     # the defaults with every derivable factor replaced

    def to_json(self) -> dict:
        return {"against": self.against, "precision": self.precision, "classes": self.classes,
                "factors": self.factors.to_json() if self.factors else None}

    def text(self) -> str:
        head = f"calibration against {self.against} ({self.precision})" if self.against else \
            "achieved rates per op class"
        lines = [head, f"  {'class':<12} {'instr':>5} {'us':>12} {'Gops/s':>10} {'GB/s':>10}  "
                       f"derived factors"]
        for cls, c in self.classes.items():
            derived = ", ".join(f"{k} {c[k]:.3g}" for k in ("compute", "bandwidth") if c.get(k))
            lines.append(f"  {cls:<12} {c['instructions']:>5} {c['seconds'] * 1e6:>12,.3f} "
                         f"{c['ops_per_second'] / 1e9:>10,.3f} {c['bytes_per_second'] / 1e9:>10,.3f}"
                         f"  {derived or '-'}")
        return "\n".join(lines)


def calibrate(measurement: Measurement, gpu: str | Path | Gpu | None = None) -> Calibration:
    """Achieved rates per op class; with a description, the efficiency factors they imply.

    Per op class, the roofline's busy time of every kernel with the default factors (its time
    past the launch overhead) is set against the measured time past the launch overhead (a
    kernel's share of its instruction's time is its share of the roofline's time); the ratio
    scales the class's compute and bandwidth factors alike, capped at 1. Estimates with the
    derived factors then reproduce the measured time of every class (where no cap bites), and
    no kernel changes its bound. Classes not measured keep their defaults. The measurement
    computes in float32, so the factors are those of `--precision fp32` estimates."""
    precision = "fp32"
    gpu = load_gpu(gpu, "--calibrate-against") if gpu is not None else None
    acc = {c: {"instructions": 0, "seconds": 0.0, "ops": 0, "bytes": 0, "model": 0.0, "busy": 0.0}
           for c in OP_CLASSES}
    for row in measurement.instructions:
        model = [_roofline_busy(gpu, k) for k in row.kernels] if gpu else None
        for i, (cls, ops, nbytes) in enumerate(row.kernels):
            a = acc[cls]
            if gpu is None:
                seconds = row.seconds / len(row.kernels)
            else:
                total = sum(m + gpu.launch_overhead_s for m in model)
                seconds = row.seconds * (model[i] + gpu.launch_overhead_s) / total
                a["model"] += model[i]
                a["busy"] += max(seconds - gpu.launch_overhead_s, 0.0)
            a["seconds"] += seconds
            a["ops"] += ops
            a["bytes"] += nbytes
        for cls in {k[0] for k in row.kernels}:
            acc[cls]["instructions"] += 1
    classes, compute, bandwidth = {}, dict(DEFAULT_FACTORS.compute), dict(DEFAULT_FACTORS.bandwidth)
    for cls, a in acc.items():
        if not a["instructions"]:
            continue
        c = {"instructions": a["instructions"], "seconds": a["seconds"], "ops": a["ops"],
             "bytes": a["bytes"], "ops_per_second": a["ops"] / a["seconds"] if a["seconds"] else 0.0,
             "bytes_per_second": a["bytes"] / a["seconds"] if a["seconds"] else 0.0}
        if gpu is not None and a["busy"] > 0 and a["model"] > 0:
            scale = a["model"] / a["busy"]
            if cls in compute:
                compute[cls] = c["compute"] = min(1.0, compute[cls] * scale)
            bandwidth[cls] = c["bandwidth"] = min(1.0, bandwidth[cls] * scale)
        classes[cls] = c
    factors = Factors(compute, bandwidth, DEFAULT_FACTORS.interconnect) if gpu else None
    return Calibration(gpu.name if gpu else None, precision, classes, factors)


def _roofline_busy(gpu: Gpu, kernel) -> float:
    """Roofline seconds past the launch overhead of one kernel, fp32, default factors."""
    cls, ops, nbytes = kernel
    compute = ops / (class_peak(gpu, cls, "fp32") * DEFAULT_FACTORS.compute[cls]) if ops else 0.0
    return max(compute, nbytes / (gpu.memory_bandwidth * DEFAULT_FACTORS.bandwidth[cls]))
