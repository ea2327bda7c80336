"""The script API: load programs and machines, run them. The CLI is a thin layer over this."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from isa.checker import load_program as _load_program, parse_program, program_ops
from isa.errors import UserError
from isa.program import Program
from isa import reference as _ref
from compiler import Plan, compile_program, verify_plan
from simulator.report import Report
from machine import Machine, preset

__all__ = ["load_program", "build_machine", "compile", "run", "reference", "ReferenceResult"]


def load_program(source: str | Path | Program) -> Program:
    """A checked program from a file path, from program text (a string with a newline), or as is."""
    if isinstance(source, Program):
        return source
    if isinstance(source, str) and "\n" in source:
        return parse_program(source, "<string>")
    return _load_program(source)


def build_machine(name: str | Machine = "f1", depth: int | None = None,
            fanout: int | tuple[int, ...] | None = None) -> Machine:
    """A preset or machine file, optionally re-scaled to `depth` fan-out stages of `fanout`."""
    m = name if isinstance(name, Machine) else preset(name)
    if depth is not None or fanout is not None:
        m = m.rescaled(depth=depth, fanout=fanout)
    return m


def compile(program: str | Path | Program, machine: str | Machine = "f1",
            mapping: str | Path | None = None, objective: str = "cycles") -> Plan:
    """The verified decomposition plan of a program on a machine; `mapping` is a mapping file
    pinning some of its cuts (`compiler.mapping`), `objective` what each node's choice
    minimises: "cycles", "energy" or "edp"."""
    from compiler.mapping import load_mapping
    program, machine = load_program(program), build_machine(machine)
    pins = load_mapping(mapping, program, machine) if mapping is not None else None
    plan = compile_program(program, machine, pins, objective)
    verify_plan(plan)
    return plan


def _sidecar_path(program: Program) -> Path | None:
    """The data archive beside a program file (model.fasm -> model.npz), when there is one."""
    if program.file.startswith("<"):
        return None
    path = Path(program.file).with_suffix(".npz")
    return path if path.is_file() and path != Path(program.file) else None


def _sidecar_feeds(program: Program, path: Path, feeds: dict, explicit: set):
    """Load the archive beside the program into `feeds`, except tensors given explicitly; each
    array is checked from the archive's directory and its header before its data is read."""
    where = f"{path} (the data beside {program.file})"
    _ref.read_npz_feeds(program, str(path), where, feeds, skip=explicit, hint=None)


def _feeds(program: Program, inputs, inputs_npz, seed, sidecar: bool = True) -> dict:
    """Generated data, then the sidecar archive (unless `inputs_npz` replaces it), then the
    arrays or NAME=FILE.npy specs of `inputs`: the explicit source of a tensor wins."""
    if isinstance(inputs, dict):
        feeds = _ref.load_feeds(program, [], inputs_npz, seed)
        explicit = set(inputs)
    else:
        feeds = _ref.load_feeds(program, list(inputs or []), inputs_npz, seed)
        explicit = {spec.partition("=")[0].strip() for spec in inputs or []}
    path = _sidecar_path(program) if sidecar and inputs_npz is None else None
    if path is not None:
        _sidecar_feeds(program, path, feeds, explicit)
    if isinstance(inputs, dict):
        for name, value in inputs.items():
            feeds[name] = _ref.conform_feed(program, name, np.asarray(value), f"inputs['{name}']",
                                            "the array given")
    return feeds


def run(program: str | Path | Program, machine: str | Machine = "f1", *, functional: bool = True,
        inputs: list[str] | dict | None = None, inputs_npz: str | None = None, seed: int = 0,
        exact: bool = False, trace: str | Path | None = None, progress=None,
        sidecar: bool = True, mapping: str | Path | None = None,
        objective: str = "cycles") -> Report:
    """Compile and simulate a program: cycles, utilization, traffic, energy, and (functional
    mode) the outputs computed by the leaves. `trace` writes a Chrome/Perfetto trace: of every node
    with `exact`, of the root and one representative node per distinct task without.
    Data comes as in `reference`."""
    # lazy: the simulator loads simpy and the numba leaf kernels (~0.5 s); check, compile and
    # reference runs do not need it
    from simulator.run import simulate
    from simulator.trace import write_trace
    program = load_program(program)
    plan = compile(program, machine, mapping, objective)
    feeds = _feeds(program, inputs, inputs_npz, seed, sidecar) if functional else None
    report, engine = simulate(plan, "exact" if exact else "symmetric", functional, feeds,
                              trace=trace is not None, progress=progress)
    if trace is not None:
        write_trace(engine.events, plan.machine, trace)
    return report


@dataclass
class ReferenceResult:
    program: Program
    outputs: dict[str, np.ndarray]
    ops: int
    wall_seconds: float
    seed: int
    first_nonfinite: dict | None = None     # where the first NaN or inf came from

    def to_json(self) -> dict:
        outs = {}
        for name, v in self.outputs.items():
            t = self.program.tensor(name).type
            stats = {"shape": list(t.shape), "dtype": t.dtype}
            if v.size:
                stats.update(min=float(v.min()), max=float(v.max()), mean=float(v.mean(dtype=np.float64)))
            outs[name] = {**stats, **dict(zip(("nan", "inf"), _ref.nonfinite(v)))}
        return {"program": self.program.file, "mode": "reference", "seed": self.seed,
                "instructions": len(self.program.instructions), "ops": self.ops,
                "outputs": outs, "first_nonfinite": self.first_nonfinite}


def reference(program: str | Path | Program, inputs: list[str] | dict | None = None,
              inputs_npz: str | None = None, seed: int = 0,
              sidecar: bool = True) -> ReferenceResult:
    """Run a program on the numpy reference interpreter.

    `inputs` is a list of "NAME=path.npy" specs (as on the command line) or a dict of arrays;
    `inputs_npz` an .npz archive of several. When no archive is given, the archive beside a
    program file (model.npz for model.fasm, as `fractal import` writes) is loaded if there is
    one (`sidecar=False`: never). Each tensor comes from the first of: `inputs`, the archive,
    a generator seeded with `seed`.
    """
    program = load_program(program)
    feeds = _feeds(program, inputs, inputs_npz, seed, sidecar)
    start = time.perf_counter()
    overflow = _ref.FirstNonFinite(feeds)
    outputs = _ref.run_reference(program, feeds, watch=overflow)
    return ReferenceResult(program, outputs, program_ops(program), time.perf_counter() - start, seed,
                           overflow.found)
