"""GPU descriptions: sourced vendor figures in TOML files, validated as a whole and built into a
frozen `Gpu`.

Every number in a GPU file is a table `{ value = ..., source = "..." }`: the value and where it
comes from (a vendor whitepaper or datasheet with its year, or "ours:" and the reasoning for an
estimate). Figures are per GPU; a multi-GPU system (a DGX-1) states `gpus` and an `[interconnect]`
table. Problems are reported together, each located by its key (`v100.toml: memory_bandwidth`),
like machine files (machine/description.py).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from isa.errors import ErrorGroup, UserError, did_you_mean
from machine import read_toml

__all__ = ["Gpu", "GPUS", "GPU_DIR", "load_gpu", "gpu_from_dict", "LAUNCH_MODES",
           "GRAPH_LAUNCH_OVERHEAD_S", "with_launch"]

GPU_DIR = Path(__file__).parent / "gpus"
GPUS = ("1080ti", "p100", "v100", "dgx1-p100", "dgx1-v100", "a100", "h100", "h200")


@dataclass(frozen=True)
class Gpu:
    """One GPU model, or a system of `gpus` alike GPUs joined by an interconnect. Rates, memory,
    power and area are per GPU; `host_watts` is the rest of a system (CPUs, fans, switches)."""
    name: str
    description: str
    gpus: int
    fp32_flops: float                  # dense FP32 on CUDA cores (an FMA counts as two)
    fp16_flops: float                  # dense FP16: tensor cores where present, else CUDA cores
    fp16_tensor_cores: bool
    memory_bandwidth: float            # bytes/s of device memory
    memory_bytes: float
    tdp_watts: float
    idle_watts: float
    host_watts: float
    die_area_mm2: float
    process: str
    launch_overhead_s: float           # fixed cost of one kernel launch in a dependent chain
    interconnect: str = ""
    interconnect_bandwidth: float = 0.0   # bytes/s one GPU sends (and receives) at once
    interconnect_latency_s: float = 0.0   # per step of a collective
    sources: tuple[tuple[str, str], ...] = ()   # (key, source) of every number

    def source(self, key: str) -> str:
        return dict(self.sources).get(key, "")

    def summary(self) -> str:
        many = f"{self.gpus} x " if self.gpus > 1 else ""
        fp16 = "tensor" if self.fp16_tensor_cores else "no tensor cores"
        text = (f"{self.name}: {many}{self.fp32_flops / 1e12:.4g} TFLOPS fp32, "
                f"{self.fp16_flops / 1e12:.4g} TFLOPS fp16 ({fp16}), "
                f"{self.memory_bandwidth / 1e9:.4g} GB/s, {self.memory_bytes / 1e9:.4g} GB, "
                f"{self.tdp_watts:.4g} W, {self.die_area_mm2:.4g} mm2 {self.process}")
        if self.gpus > 1:
            text += (f"; {self.interconnect} {self.interconnect_bandwidth / 1e9:.4g} GB/s per GPU, "
                     f"host {self.host_watts:.4g} W")
        return text


# ---------------------------------------------------------------- validation

# sourced numbers: key -> (must be an integer, must be positive (True) or non-negative (False))
_NUMBERS = {
    "fp32_flops": (False, True), "fp16_flops": (False, True), "memory_bandwidth": (False, True),
    "memory_bytes": (False, True), "tdp_watts": (False, True), "idle_watts": (False, False),
    "die_area_mm2": (False, True), "launch_overhead_s": (False, False),
}
_OPTIONAL_NUMBERS = {"host_watts": (False, False)}
#: physically sane ranges (least, most, in words), wider than any GPU or system built (a wafer-scale
#: die is 46,225 mm2; an H200 moves 4.8e12 bytes/s): values outside are typing slips, and would
#: overflow or vanish in a report (docs/baseline.md, "GPU files")
RANGES = {
    "fp32_flops": (1e6, 1e18, "1e6 to 1e18 FLOP/s"), "fp16_flops": (1e6, 1e18, "1e6 to 1e18 FLOP/s"),
    "memory_bandwidth": (1e6, 1e15, "1e6 to 1e15 bytes/s"),
    "memory_bytes": (1e6, 1e15, "1e6 to 1e15 bytes"), "tdp_watts": (1, 1e5, "1 to 1e5 W"),
    "idle_watts": (0, 1e5, "0 to 1e5 W"), "host_watts": (0, 1e6, "0 to 1e6 W"),
    "die_area_mm2": (1, 1e5, "1 to 1e5 mm2"), "launch_overhead_s": (0, 1, "0 to 1 s"),
    "bandwidth": (1e6, 1e15, "1e6 to 1e15 bytes/s"), "latency_s": (0, 1, "0 to 1 s"),
}
MAX_GPUS = 100_000
_LINK_NUMBERS = {"bandwidth": (False, True), "latency_s": (False, False)}
_PLAIN = {"name": str, "description": str, "gpus": int, "fp16_tensor_cores": bool,
          "process": str, "note": str, "interconnect": dict}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _sourced(table: dict, key: str, spec, path: str, where, errors: list, sources: list):
    """The value of a `{ value, source }` entry, or None with the problem appended to errors."""
    entry = table.get(key)
    at = where(path + key)
    if not isinstance(entry, dict):
        errors.append(UserError(f"'{key}' must be a table {{ value = <number>, source = \"...\" }}, "
                                f"got {entry!r}", at))
        return None
    for k in entry:
        if k not in ("value", "source"):
            errors.append(UserError(f"unknown key '{k}' (an entry has only value and source)",
                                    where(f"{path}{key}.{k}")))
    src = entry.get("source")
    if not isinstance(src, str) or not src.strip():
        errors.append(UserError(f"'{key}' needs a source: where the number comes from (a "
                                f"datasheet, a measurement, or 'ours: ' and the reasoning)",
                                where(f"{path}{key}.source")))
    v = entry.get("value")
    _, positive = spec
    if not _is_number(v):
        errors.append(UserError(f"'{key}.value' must be a number, got {v!r}", where(f"{path}{key}.value")))
        return None
    if positive and v <= 0 or v < 0:
        word = "positive" if positive else "non-negative"
        errors.append(UserError(f"'{key}.value' must be {word}, got {v}", where(f"{path}{key}.value")))
        return None
    lo, hi, words = RANGES[key]
    if not lo <= v <= hi:
        errors.append(UserError(f"'{key}.value' must lie in the range {words}, got {v:g}",
                                where(f"{path}{key}.value")))
        return None
    if isinstance(src, str):
        sources.append((path + key, src))
    return float(v)


def gpu_from_dict(data: dict, file: str = "<gpu>") -> Gpu:
    """Validate a parsed GPU file as a whole and build the frozen `Gpu`."""
    def where(key):
        return f"{file}: {key}"
    errors: list[UserError] = []
    known = [*_PLAIN, *_NUMBERS, *_OPTIONAL_NUMBERS]
    for key in data:
        if key not in known:
            errors.append(UserError(f"unknown key '{key}'", where(key), hint=did_you_mean(key, known)))
    for key, kind in _PLAIN.items():
        if key in data and not (isinstance(data[key], kind) and
                                (kind is bool or not isinstance(data[key], bool))):
            what = {str: "a string", int: "an integer", bool: "true or false", dict: "a table"}[kind]
            errors.append(UserError(f"'{key}' must be {what}, got {data[key]!r}", where(key)))
    for key in ("name", "fp16_tensor_cores", "process"):
        if key not in data:
            errors.append(UserError(f"missing key '{key}'", where(key)))
    name = data.get("name")
    if isinstance(name, str) and not re.fullmatch(r"[\w.+-]+", name):
        errors.append(UserError(f"'name' must be a word (letters, digits, . + - _), got {name!r}",
                                where("name")))
    gpus = data.get("gpus", 1)
    if isinstance(gpus, int) and not isinstance(gpus, bool) and not 1 <= gpus <= MAX_GPUS:
        errors.append(UserError(f"'gpus' must lie in the range 1 to {MAX_GPUS:,}, got {gpus}",
                                where("gpus")))

    sources: list = []
    values = {}
    for key, spec in _NUMBERS.items():
        if key not in data:
            errors.append(UserError(f"missing key '{key}' (a table {{ value, source }})", where(key)))
        else:
            values[key] = _sourced(data, key, spec, "", where, errors, sources)
    for key, spec in _OPTIONAL_NUMBERS.items():
        values[key] = _sourced(data, key, spec, "", where, errors, sources) if key in data else 0.0
    tdp, idle = values.get("tdp_watts"), values.get("idle_watts")
    if tdp is not None and idle is not None and idle > tdp:
        errors.append(UserError(f"'idle_watts' ({idle:g}) exceeds 'tdp_watts' ({tdp:g})",
                                where("idle_watts.value")))

    link = data.get("interconnect")
    link_values = {"name": "", "bandwidth": 0.0, "latency_s": 0.0}
    if isinstance(link, dict):
        for k in link:
            if k not in ("name", *_LINK_NUMBERS):
                errors.append(UserError(f"unknown key '{k}'", where(f"interconnect.{k}"),
                                        hint=did_you_mean(k, ("name", *_LINK_NUMBERS))))
        if not isinstance(link.get("name"), str):
            errors.append(UserError("missing key 'name' (a string)", where("interconnect.name")))
        else:
            link_values["name"] = link["name"]
        for k, spec in _LINK_NUMBERS.items():
            if k not in link:
                errors.append(UserError(f"missing key '{k}' (a table {{ value, source }})",
                                        where(f"interconnect.{k}")))
            else:
                link_values[k] = _sourced(link, k, spec, "interconnect.", where, errors, sources)
    elif isinstance(gpus, int) and gpus > 1:
        errors.append(UserError(f"a system of {gpus} GPUs needs an [interconnect] table (name, "
                                f"bandwidth, latency_s)", where("interconnect")))
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return Gpu(name=name, description=data.get("description", ""), gpus=gpus,
               fp16_tensor_cores=data["fp16_tensor_cores"], process=data["process"],
               interconnect=link_values["name"], interconnect_bandwidth=link_values["bandwidth"],
               interconnect_latency_s=link_values["latency_s"], sources=tuple(sources),
               **values)


def _load_file(path: Path, where: str) -> Gpu:
    data = read_toml(path, "GPU file", where)
    return gpu_from_dict(data, str(path))


def load_gpu(name_or_path: str | Path | Gpu, where: str = "--gpu") -> Gpu:
    """A preset GPU by name (`GPUS`), or a GPU description file by path."""
    if isinstance(name_or_path, Gpu):
        return name_or_path
    text = str(name_or_path)
    if text in GPUS:
        return _load_file(GPU_DIR / f"{text}.toml", where)
    if isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text or Path(text).is_file():
        return _load_file(Path(text), where)
    raise UserError(f"unknown GPU '{text}' (presets: {', '.join(GPUS)}, or a .toml file)", where,
                    hint=did_you_mean(text, GPUS))


# ---------------------------------------------------------------- launch modes

#: How a program's kernels are launched (docs/baseline.md, "Launch overhead"): `eager`, one by
#: one from the host, as a framework runs a model op by op (and as GPUs were run when the
#: Cambricon-F papers were written), costs the GPU file's `launch_overhead_s` per kernel; `graphs`,
#: the whole chain captured once as a CUDA graph and replayed, costs GRAPH_LAUNCH_OVERHEAD_S.
LAUNCH_MODES = ("eager", "graphs")
#: the time per kernel of a chain of dependent kernels replayed as a CUDA graph: measured 0.84 us
#: (CUDA 13 C++, cudaGraphLaunch) and 1.02 us (PyTorch 2.11 torch.cuda.CUDAGraph replay) per
#: kernel on an H200, each kernel's own sub-microsecond work included (ours, 2026-12-04,
#: benchmarks/launch/); NVIDIA's "Getting Started with CUDA Graphs" (A. Gray, NVIDIA Technical
#: Blog, 2019) gives 3.4 us per kernel as a graph against 3.8 us as plain stream launches for
#: kernels of about 2.9 us on a V100, about 0.5 us of overhead: 1 us is the upper of these
GRAPH_LAUNCH_OVERHEAD_S = 1.0e-6


def with_launch(gpu: Gpu, launch: str | None, where: str = "--launch") -> Gpu:
    """The GPU with the launch overhead of `launch` (eager: the file's own; graphs: a CUDA
    graph's per-kernel overhead, GRAPH_LAUNCH_OVERHEAD_S); None keeps the GPU as it is."""
    if launch is None or launch == "eager":
        return gpu
    if launch == "graphs":
        return replace(gpu, launch_overhead_s=GRAPH_LAUNCH_OVERHEAD_S)
    raise UserError(f"launch must be one of {', '.join(LAUNCH_MODES)}, got {launch!r}", where,
                    hint=did_you_mean(str(launch), LAUNCH_MODES))
