"""The roofline estimate of a program on a GPU or a multi-GPU system.

Every instruction is one kernel (an extension instruction: one kernel per core instruction of its
body, per piece), and a kernel takes

    launch overhead + max(ops / (peak of its op class x compute factor),
                          bytes / (memory bandwidth x bandwidth factor of its op class))

where ops are the instruction's arithmetic ops (isa/opcodes.py: a multiply-accumulate counts as
two) and bytes its compulsory traffic: each source read once and each destination written once
(a slice reads only what it copies; a gather reads its indices and the elements it picks). On a
system of several GPUs the instruction runs on every GPU's share of the batch or on GPU 0 alone
(fractal/baseline/split.py), plus the time of the NVLink transfers it needs. Energy: every GPU
draws its idle power the whole time, the host its host power, and a running kernel adds
(TDP - idle) x its activity (the busier of its arithmetic and its memory traffic, as a fraction
of the vendor peak). The reasoning, the defaults and the caveats are in docs/baseline.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from isa.errors import UserError
from isa.checker import opcode_table, program_ops
from isa.extensions import leaf_pieces
from isa.opcodes import instruction_ops
from isa.program import DTYPES, Program, TensorType

from fractal.baseline.factors import Factors, factors_from_dict, opcode_class
from fractal.baseline.gpu import Gpu, load_gpu, with_launch
from fractal.baseline.split import split_program

__all__ = ["PRECISIONS", "InstructionEstimate", "BaselineReport", "estimate", "element_bytes",
           "class_peak", "program_precision"]

PRECISIONS = ("fp16", "fp32")


def element_bytes(dtype: str, precision: str) -> int:
    """Bytes of one element as the GPU stores it: f32 tensors in the chosen precision, every
    other type (i32, f16, bf16, i8) at its own size."""
    return 2 if dtype == "f32" and precision == "fp16" else DTYPES[dtype]


def program_precision(program: Program) -> str:
    """The precision a program's GPU baseline runs at: fp16 when its floating-point tensors are
    all 16-bit (f16 or bf16), fp32 when any is f32 (or it has none), so that both sides move and
    multiply data of the same width."""
    floats = {t.type.dtype for t in program.tensors} & {"f32", "f16", "bf16"}
    return "fp16" if floats and "f32" not in floats else "fp32"


def class_peak(gpu: Gpu, op_class: str, precision: str) -> float:
    """Vendor peak ops/s of one GPU for an op class. Matrix products in fp16 run on tensor cores
    (or at the FP32 rate where FP16 is slower, as on GP102: fp16 data multiplied in fp32); every
    other class runs on the CUDA cores at one op per lane per cycle, half the FMA-counted FP32 peak."""
    if op_class == "matmul":
        return max(gpu.fp16_flops, gpu.fp32_flops) if precision == "fp16" else gpu.fp32_flops
    return gpu.fp32_flops / 2


@dataclass(frozen=True)
class InstructionEstimate:
    line: int | None
    text: str
    op_class: str                # matmul, elementwise, reduction, irregular, move, or extension
    mode: str                    # split (each GPU a share of the batch), replicated (each GPU
                                 # the whole instruction) or single (GPU 0 alone)
    kernels: int
    seconds: float
    ops: int                     # arithmetic ops of the whole instruction
    bytes: int                   # device-memory bytes, all GPUs together
    interconnect_bytes: int      # bytes sent over NVLink for it
    bound: str                   # compute, bandwidth, launch or interconnect
    energy_joules: float


@dataclass
class BaselineReport:
    program: str
    gpu: str
    gpus: int
    gpus_used: int               # GPUs the batch was split over (1 when nothing splits)
    batch: int | None
    precision: str
    seconds: float
    energy_joules: float         # the activity power model (module docstring)
    tdp_energy_joules: float     # every GPU at TDP, plus the host, the whole time: an upper bound
    ops: int
    peak_ops_per_second: float   # all GPUs, matrix-product peak at this precision
    area_mm2: float              # GPU silicon of the system
    time_breakdown: dict         # seconds spent bound by launch, compute, bandwidth, interconnect
    instructions: list = field(default_factory=list)
    factors: Factors | None = None
    launch: str = "eager"                # how its kernels were launched (eager or graphs)
    launch_overhead_s: float = 0.0       # the launch overhead per kernel that follows from it
    fused: bool = False                  # every extension instruction one kernel

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.seconds if self.seconds else 0.0

    @property
    def ops_per_joule(self) -> float:
        return self.ops / self.energy_joules if self.energy_joules else 0.0

    @property
    def utilization(self) -> float:
        return self.ops_per_second / self.peak_ops_per_second

    @property
    def watts(self) -> float:
        return self.energy_joules / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict:
        return {"program": self.program, "gpu": self.gpu, "gpus": self.gpus,
                "gpus_used": self.gpus_used, "batch": self.batch, "precision": self.precision,
                "seconds": self.seconds, "energy_joules": self.energy_joules,
                "tdp_energy_joules": self.tdp_energy_joules, "watts": self.watts, "ops": self.ops,
                "ops_per_second": self.ops_per_second, "ops_per_joule": self.ops_per_joule,
                "peak_ops_per_second": self.peak_ops_per_second, "utilization": self.utilization,
                "area_mm2": self.area_mm2, "time_breakdown": dict(self.time_breakdown),
                "factors": self.factors.to_json() if self.factors else None,
                "launch": self.launch, "launch_overhead_s": self.launch_overhead_s,
                "fused": self.fused,
                "instructions": [vars(i).copy() for i in self.instructions]}

    def text(self) -> str:
        many = f" ({self.gpus_used} of {self.gpus} GPUs, batch {self.batch} split)" \
            if self.gpus_used > 1 else (f" ({self.gpus} GPUs, nothing split: GPU 0 runs all)"
                                         if self.gpus > 1 else "")
        lines = [f"{self.program} on {self.gpu}{many}, {self.precision} roofline estimate",
                 f"  time          {self.seconds * 1e6:,.3f} us",
                 f"  ops           {self.ops:,}  ({self.ops_per_second / 1e12:,.3f} Tops/s, "
                 f"utilization {self.utilization:.2%} of {self.peak_ops_per_second / 1e12:,.4g} Tops/s)",
                 f"  energy        {self.energy_joules * 1e3:,.4f} mJ  "
                 f"({self.ops_per_joule / 1e12:,.4f} Tops/J; at TDP {self.tdp_energy_joules * 1e3:,.4f} mJ)",
                 "  bound by      " + ", ".join(f"{k} {v * 1e6:,.2f} us"
                                                 for k, v in self.time_breakdown.items() if v),
                 "", f"  {'line':>4}  {'instruction':<40} {'mode':<10} {'us':>10} {'ops':>14} "
                 f"{'bytes':>12}  bound"]
        for i in self.instructions:
            text = i.text if len(i.text) <= 40 else i.text[:37] + "..."
            lines.append(f"  {i.line or '':>4}  {text:<40} {i.mode:<10} {i.seconds * 1e6:>10,.3f} "
                         f"{i.ops:>14,} {i.bytes:>12,}  {i.bound}")
        return "\n".join(lines)


# ---------------------------------------------------------------- kernels

def _kernels(spec, names, types, attrs, table, nbytes) -> list[tuple[str, int, int]]:
    """(op class, ops, bytes) of every kernel one instruction launches on one GPU."""
    if spec.decl is not None:
        n_out = spec.outputs
        out = []
        for piece, _ in leaf_pieces(spec.decl, tuple(types)):
            body = spec.body(piece[:n_out], piece[n_out:], attrs)
            body_types = body.types
            for ins in body.instructions:
                sub = table[ins.opcode] if ins.opcode in table else spec.table[ins.opcode]
                out += _kernels(sub, ins.operands, [body_types[n] for n in ins.operands],
                                sub.full_attrs(ins.attr), spec.table, nbytes)
        return out
    ops = int(spec.ops(types[:spec.outputs], types[spec.outputs:], attrs))
    return [(opcode_class(spec.name), ops, _traffic(spec.name, spec.outputs, names, types, nbytes))]


def _launches(spec, names, types, attrs, table, nbytes, fused: bool) -> list[tuple[dict, int]]:
    """({op class: ops}, bytes) of every kernel launched: `_kernels`, or with `fused` an extension
    instruction as one kernel that moves only the extension's operands, its temporaries held on
    chip (as FlashAttention or a fused LayerNorm kernel runs), and does all its body's ops."""
    kernels = _kernels(spec, names, types, attrs, table, nbytes)
    if not fused or spec.decl is None:
        return [({op_class: ops}, kbytes) for op_class, ops, kbytes in kernels]
    ops: dict[str, int] = {}
    for op_class, n, _ in kernels:
        ops[op_class] = ops.get(op_class, 0) + n
    return [(ops, _traffic(spec.name, spec.outputs, names, types, nbytes))]


def _traffic(name, n_out, names, types, nbytes) -> int:
    """Compulsory bytes of one kernel: every distinct source read once, every destination
    written once; a slice reads only what it copies, a gather its indices and what it picks."""
    written = sum(nbytes(t) for t in types[:n_out])
    if name == "slice":
        return 2 * written
    if name == "gather":
        return nbytes(types[n_out + 1]) + 2 * written
    sources = dict(zip(names[n_out:], types[n_out:]))         # a source named twice is read once
    return sum(nbytes(t) for t in sources.values()) + written


def _precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise UserError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}",
                        "--precision")
    return precision


def estimate(program: str | Path | Program, gpu: str | Path | Gpu, *, precision: str | None = None,
             factors: dict | Factors | None = None, launch: str | None = None,
             fused: bool = False) -> BaselineReport:
    """The roofline time and energy of a program on a GPU (a preset name, a .toml path or a Gpu),
    at `precision` (fp16 or fp32; None: the program's own, see `program_precision`), with its
    kernels launched `launch` (eager or graphs; None: eager, the GPU's own launch overhead);
    `fused`: every extension instruction one kernel (`_kernels`)."""
    from fractal.api import load_program  # lazy: `baseline gpus` needs no compiler (~0.2 s)
    program = load_program(program)
    gpu = with_launch(load_gpu(gpu), launch)
    precision = program_precision(program) if precision is None else _precision(precision)
    factors = factors_from_dict(factors)
    table = opcode_table(program)

    def nbytes(t: TensorType) -> int:
        return t.size * element_bytes(t.dtype, precision)

    batch, used, steps = split_program(program, table, gpu.gpus,
                                       lambda dtype: element_bytes(dtype, precision))
    link = gpu.interconnect_bandwidth * factors.interconnect
    rows, breakdown = [], {"launch": 0.0, "compute": 0.0, "bandwidth": 0.0, "interconnect": 0.0}
    total_s = dynamic_j = 0.0
    for ins, step in zip(program.instructions, steps):
        spec = table[ins.opcode]
        active = 1 if step.mode == "single" else used
        parts = {"launch": 0.0, "compute": 0.0, "bandwidth": 0.0, "interconnect": 0.0}
        energy = traffic = 0.0
        kernels = _launches(spec, ins.operands, list(step.types), spec.full_attrs(ins.attr), table,
                            nbytes, fused)
        for classes, kbytes in kernels:
            # a kernel of several op classes (a fused extension) runs them one after another;
            # it streams its bytes at the bandwidth factor of the class that takes longest
            times = {c: ops / (class_peak(gpu, c, precision) * factors.compute[c]) if ops else 0.0
                     for c, ops in classes.items()}
            compute = sum(times.values())
            memory = kbytes / (gpu.memory_bandwidth
                               * factors.bandwidth[max(times, key=times.get)])
            busy = max(compute, memory)
            parts["launch"] += gpu.launch_overhead_s
            parts["compute" if compute >= memory else "bandwidth"] += busy
            if busy:
                peak_time = sum(ops / class_peak(gpu, c, precision) for c, ops in classes.items())
                activity = max(peak_time, kbytes / gpu.memory_bandwidth) / busy
                energy += (gpu.tdp_watts - gpu.idle_watts) * activity * busy * active
            traffic += kbytes * active
        g = used
        if step.gather_bytes:
            parts["interconnect"] += step.gather_bytes / link + gpu.interconnect_latency_s
        if step.broadcast_bytes:
            parts["interconnect"] += step.broadcast_bytes / link + (g - 1) * gpu.interconnect_latency_s
        if step.allreduce_bytes:
            parts["interconnect"] += (2 * (g - 1) / g * step.allreduce_bytes / link
                                      + 2 * (g - 1) * gpu.interconnect_latency_s)
        seconds = sum(parts.values())
        energy += (gpu.gpus * gpu.idle_watts + gpu.host_watts) * seconds
        for k, v in parts.items():
            breakdown[k] += v
        total_s += seconds
        dynamic_j += energy
        rows.append(InstructionEstimate(
            line=ins.loc.line if ins.loc else None, text=ins.to_text(),
            op_class="extension" if spec.decl is not None else opcode_class(ins.opcode),
            mode=step.mode, kernels=len(kernels), seconds=seconds,
            ops=instruction_ops(ins, program.types, table), bytes=int(traffic),
            interconnect_bytes=step.gather_bytes + step.broadcast_bytes
            + (2 * (g - 1) * step.allreduce_bytes // g if g > 1 else 0),
            bound=max(parts, key=parts.get) if seconds else "launch", energy_joules=energy))
    return BaselineReport(
        program=program.file, gpu=gpu.name, gpus=gpu.gpus, gpus_used=used, batch=batch,
        precision=precision, seconds=total_s, energy_joules=dynamic_j,
        tdp_energy_joules=(gpu.gpus * gpu.tdp_watts + gpu.host_watts) * total_s,
        ops=program_ops(program, table),
        peak_ops_per_second=gpu.gpus * class_peak(gpu, "matmul", precision),
        area_mm2=gpu.gpus * gpu.die_area_mm2, time_breakdown=breakdown, instructions=rows,
        factors=factors, launch=launch or "eager", launch_overhead_s=gpu.launch_overhead_s,
        fused=fused)
