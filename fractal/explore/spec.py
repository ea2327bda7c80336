"""The explore spec: a TOML file that sets out a design-space exploration, validated as a whole.

    machine = "f1"                         # the base machine: a preset or a machine file

    [[workload]]                           # what the machines are judged on, with weights
    gen = "vgg16"                          # a `fractal gen` workload ...
    batch = 1
    dtype = "f16"
    weight = 1.0
    [[workload]]
    program = "../mlp.fasm"                # ... or a program file (relative to the spec)

    [vary]                                 # the space: a list of values, or a range table
    frequency_hz = [0.8e9, 1.0e9, 1.2e9]
    [vary.level.root]                      # a level: root, leaf, all, its index or its name
    memory_bandwidth = { from = 64, to = 512, factor = 2 }
    [vary.compute]                         # the leaf's compute
    mac_array = [[32, 32], [16, 64]]

    [constraints]                          # upper bounds; "base": the base machine's own
    area_mm2 = "base"
    power_w = 120

    [search]
    objectives = ["latency", "energy"]     # latency, energy, edp, perf_per_mm2, perf_per_w,
                                           # area, power
    method = "auto"                        # grid, nsga2, tpe; auto: grid when it is small
    trials = 100
    seed = 0

Every problem is collected and reported together, each at `SPEC: key.path`; a value of a
machine field is checked by the machine file's own validation, on the base machine.
`docs/explore.md` describes every key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from isa.errors import ErrorGroup, UserError, did_you_mean
from isa.program import Program
from machine import DTYPE_NAMES, PRESETS, Machine, machine_from_dict, preset, read_toml
from machine.description import _COMPUTE_KEYS, _COMPUTE_OPTIONAL, _LEVEL_KEYS, _LEVEL_OPTIONAL
from machine.limits import limit
from machine.writer import machine_dict

__all__ = ["Spec", "Parameter", "Workload", "load_spec", "spec_from_dict", "OBJECTIVES",
           "CONSTRAINTS", "METHODS", "apply"]

#: objective -> (its column in the results, minimised (True) or maximised)
OBJECTIVES = {"latency": ("latency_seconds", True), "energy": ("energy_joules", True),
              "edp": ("edp_joule_seconds", True),
              "perf_per_mm2": ("ops_per_second_per_mm2", False),
              "perf_per_w": ("ops_per_second_per_watt", False),
              "area": ("area_mm2", True), "power": ("power_w", True)}
#: constraint -> its column (each an upper bound)
CONSTRAINTS = {"area_mm2": "area_mm2", "power_w": "power_w", "leaves": "leaves"}
METHODS = ("auto", "grid", "nsga2", "tpe")
#: the level keys and compute keys a spec may vary (the machine file's own)
LEVEL_FIELDS = tuple(k for k in [*_LEVEL_KEYS, *_LEVEL_OPTIONAL]
                     if k not in ("name", "note", "compute", "memory", "memory_share",
                                  "bandwidth_share"))
COMPUTE_FIELDS = tuple(k for k in [*_COMPUTE_KEYS, *_COMPUTE_OPTIONAL]
                       if k not in ("note", "mac_ops_per_cycle_by_dtype"))
TOP_FIELDS = ("frequency_hz", "process_nm", "depth", "fanout")
#: the most values one parameter may list, and the most points a grid may hold
MAX_VALUES = 10_000
MAX_GRID = 100_000
_TOP_KEYS = ("machine", "workload", "vary", "constraints", "search", "note")


@dataclass(frozen=True)
class Parameter:
    """One varied machine field: `name` is its key path under [vary] (`level.root.fanout`)."""
    name: str
    values: tuple


@dataclass(frozen=True)
class Workload:
    label: str
    program: Program
    weight: float


@dataclass(frozen=True)
class Spec:
    file: str
    base: Machine
    machine: str                    # the base as the spec names it
    workloads: tuple[Workload, ...]
    parameters: tuple[Parameter, ...]
    constraints: tuple              # ((name, number or "base"), ...)
    objectives: tuple[str, ...]
    method: str                     # grid, nsga2 or tpe (auto resolved)
    trials: int
    seed: int

    @property
    def size(self) -> int:
        """Points in the space (the grid's)."""
        return math.prod(len(p.values) for p in self.parameters)


# ---------------------------------------------------------------- applying values to a machine

def _levels(selector: str, data: dict) -> list[int]:
    """The indices a level selector names in a machine file's table."""
    n = len(data["level"])
    if selector == "root":
        return [0]
    if selector == "leaf":
        return [n - 1]
    if selector == "all":
        return list(range(n))
    if selector.isdigit():
        return [int(selector)] if int(selector) < n else []
    return [i for i, lv in enumerate(data["level"]) if lv.get("name") == selector]


def apply(base: Machine, values: dict, name: str | None = None, where: str = "<design point>",
          description: str | None = None) -> Machine:
    """The base machine with these parameter values (names as `Parameter.name`), built and
    validated as a machine file is. Depth and a fan-out for every stage re-scale the base first
    (`Machine.rescaled`); a MAC array sets the MAC rate it implies (2 x rows x columns)."""
    m = base
    if "depth" in values or "fanout" in values:
        m = m.rescaled(values.get("depth"), values.get("fanout"))
    data = machine_dict(m)
    data["name"] = name or base.name
    if description is not None:
        data["description"] = description
    for key, v in values.items():
        parts = key.split(".")
        if key in ("depth", "fanout"):
            continue
        if len(parts) == 1:
            data[key] = v
        elif parts[0] == "compute":
            compute = data["level"][-1]["compute"]
            if parts[1] == "mac_ops_per_cycle_by_dtype":
                compute[parts[1]] = {**compute.get(parts[1], {}), parts[2]: v}
            else:
                compute[parts[1]] = list(v) if isinstance(v, tuple) else v
                if parts[1] == "mac_array" and "compute.mac_ops_per_cycle" not in values:
                    compute["mac_ops_per_cycle"] = 2 * v[0] * v[1]
        else:
            for i in _levels(parts[1], data):
                if parts[2] != "fanout" or i < len(data["level"]) - 1:
                    data["level"][i][parts[2]] = v
    if "compute.mac_ops_per_cycle" in values and "compute.mac_array" not in values:
        data["level"][-1]["compute"].pop("mac_array", None)     # an array of another rate
    return machine_from_dict(data, where)


# ---------------------------------------------------------------- validation

def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _values(raw, at: str, errors: list) -> tuple:
    """A parameter's values: a list, or a range table {from, to, step} or {from, to, factor}."""
    if isinstance(raw, list):
        if not raw:
            errors.append(UserError("no values: give a list of one or more", at))
        if len(raw) > MAX_VALUES:
            errors.append(UserError(f"{len(raw):,} values, over the limit of {MAX_VALUES:,}", at))
            return ()
        bad = [i for i, v in enumerate(raw)
               if isinstance(v, dict) or (isinstance(v, list)
                                          and any(isinstance(x, (dict, list)) for x in v))]
        for i in bad:
            errors.append(UserError(f"a value is a number, a string or a list of numbers, got "
                                    f"{raw[i]!r}", f"{at}[{i}]"))
        if bad:
            return ()
        return tuple(dict.fromkeys(tuple(v) if isinstance(v, list) else v for v in raw))
    if not isinstance(raw, dict):
        errors.append(UserError(f"expected a list of values or a range table {{ from, to, step "
                                f"}} or {{ from, to, factor }}, got {raw!r}", at))
        return ()
    for k in raw:
        if k not in ("from", "to", "step", "factor"):
            errors.append(UserError(f"unknown key '{k}' of a range", f"{at}.{k}",
                                    hint=did_you_mean(k, ["from", "to", "step", "factor"])))
    lo, hi, step, factor = (raw.get(k) for k in ("from", "to", "step", "factor"))
    bad = [k for k, v in (("from", lo), ("to", hi)) if not _number(v)]
    for k in bad:
        errors.append(UserError(f"a range needs '{k}', a number", f"{at}.{k}"))
    if (step is None) == (factor is None):
        errors.append(UserError("a range needs one of 'step' (from, from + step, ...) or "
                                "'factor' (from, from x factor, ...)", at))
        return ()
    if bad:
        return ()
    if lo > hi:
        errors.append(UserError(f"empty range: 'from' ({lo:g}) is above 'to' ({hi:g})", at))
        return ()
    if step is not None and not (_number(step) and step > 0):
        errors.append(UserError(f"'step' must be a positive number, got {step!r}", f"{at}.step"))
        return ()
    if factor is not None and not (_number(factor) and factor > 1 and lo > 0):
        errors.append(UserError(f"'factor' must be a number above 1 (and 'from' positive), got "
                                f"{factor!r}", f"{at}.factor"))
        return ()
    count = (math.floor((hi - lo) / step + 1e-9) if step is not None else
             math.floor(math.log(hi / lo) / math.log(factor) + 1e-9)) + 1
    if count > MAX_VALUES:
        errors.append(UserError(f"the range holds {count:,} values, over the limit of "
                                f"{MAX_VALUES:,}", at))
        return ()
    whole = all(isinstance(v, int) for v in (lo, step if step is not None else factor))
    out = [lo + i * step if step is not None else lo * factor ** i for i in range(count)]
    return tuple(dict.fromkeys(int(round(v)) if whole else float(v) for v in out))


def _parameters(vary, file: str, base: Machine, errors: list) -> list[Parameter]:
    """The [vary] table's parameters, each value checked on the base machine."""
    at = lambda key: f"{file}: vary.{key}"
    if not isinstance(vary, dict):
        errors.append(UserError("'vary' must be a table of machine fields", f"{file}: vary"))
        return []
    raw = {}
    for key, v in vary.items():
        if key == "level":
            if not isinstance(v, dict):
                errors.append(UserError("'vary.level' must hold tables: [vary.level.root], "
                                        "[vary.level.0], [vary.level.all], ...", at(key)))
                continue
            for sel, fields in v.items():
                _level_selector(str(sel), fields, base, at, errors, raw)
        elif key == "compute":
            if not isinstance(fields := v, dict):
                errors.append(UserError("'vary.compute' must be a table of compute fields", at(key)))
                continue
            for k, x in fields.items():
                if k == "mac_ops_per_cycle_by_dtype" and isinstance(x, dict):
                    for d, y in x.items():
                        if d not in DTYPE_NAMES:
                            errors.append(UserError(f"unknown data type '{d}' (one of "
                                                    f"{', '.join(DTYPE_NAMES)})", at(f"compute.{k}.{d}"),
                                                    hint=did_you_mean(d, DTYPE_NAMES)))
                        else:
                            raw[f"compute.{k}.{d}"] = y
                elif k not in COMPUTE_FIELDS:
                    errors.append(UserError(f"unknown compute field '{k}'", at(f"compute.{k}"),
                                            hint=did_you_mean(k, [*COMPUTE_FIELDS,
                                                                  "mac_ops_per_cycle_by_dtype"])))
                else:
                    raw[f"compute.{k}"] = x
        elif key in TOP_FIELDS:
            raw[key] = v
        else:
            errors.append(UserError(f"unknown key '{key}' (vary: {', '.join(TOP_FIELDS)}, "
                                    f"level, compute)", at(key),
                                    hint=did_you_mean(key, [*TOP_FIELDS, "level", "compute"])))
    params = []
    for name, v in raw.items():
        values = _values(v, at(name), errors)
        if values:
            params.append(Parameter(name, values))
    if "compute.mac_array" in raw and "compute.mac_ops_per_cycle" in raw:
        errors.append(UserError("a MAC array sets the MAC rate (2 x rows x columns): vary "
                                "'mac_array' or 'mac_ops_per_cycle', not both",
                                at("compute.mac_ops_per_cycle")))
    _check_values(params, base, at, errors)
    return params


def _level_selector(sel: str, fields, base: Machine, at, errors: list, raw: dict):
    names = [lv.name for lv in base.levels]
    if not (sel in ("root", "leaf", "all") or sel.isdigit() or sel in names):
        errors.append(UserError(f"no level '{sel}': name one by root, leaf, all, its index "
                                f"(0 is the root) or its name ({', '.join(names)})",
                                at(f"level.{sel}"), hint=did_you_mean(sel, [*names, "root", "leaf",
                                                                             "all"])))
        return
    if not isinstance(fields, dict):
        errors.append(UserError("expected a table of level fields", at(f"level.{sel}")))
        return
    for k, x in fields.items():
        if k not in LEVEL_FIELDS:
            errors.append(UserError(f"unknown level field '{k}'", at(f"level.{sel}.{k}"),
                                    hint=did_you_mean(k, LEVEL_FIELDS)))
        elif k == "fanout" and sel == "leaf":
            errors.append(UserError("the leaf level has no children: it has no fan-out",
                                    at(f"level.{sel}.{k}")))
        else:
            raw[f"level.{sel}.{k}"] = x


def _check_values(params: list[Parameter], base: Machine, at, errors: list):
    """Each value on the base machine alone, by the machine file's validation; a numbered level
    exists at every depth of the space."""
    depths = next((p.values for p in params if p.name == "depth"), (base.depth,))
    for p in params:
        if p.name in ("depth", "fanout"):
            most = limit("depth") if p.name == "depth" else None
            for v in p.values:
                if isinstance(v, bool) or not isinstance(v, int) or v < 1 or (most and v > most):
                    errors.append(UserError(f"{p.name} must be whole numbers from 1"
                                            + (f" to {most:,}" if most else "") + f", got {v!r}",
                                            at(p.name)))
            continue
        sel = p.name.split(".")[1] if p.name.startswith("level.") else None
        if sel is not None and sel.isdigit() and int(sel) > min(
                d for d in depths if isinstance(d, int)) - (p.name.endswith(".fanout")):
            errors.append(UserError(f"level {sel} is not a {'stage' if p.name.endswith('fanout') else 'level'} "
                                    f"of every machine of the space (depths "
                                    f"{', '.join(map(str, depths))})", at(p.name)))
            continue
        for v in p.values:
            try:
                apply(base, {p.name: v}, where=f"{at(p.name)}: value {v!r}")
            except UserError as e:
                for one in (e.errors if isinstance(e, ErrorGroup) else [e]):
                    errors.append(UserError(f"value {v!r}: {one.message}", at(p.name),
                                            hint=one.hint))
                break


def _workloads(raw, file: str, folder: Path, errors: list) -> list[Workload]:
    from fractal import api
    from fractal.workloads import generate
    from isa.checker import parse_program
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        errors.append(UserError("a spec needs [[workload]] tables: each a program or a gen "
                                "workload", f"{file}: workload"))
        return []
    out = []
    keys = ("program", "gen", "batch", "dtype", "params", "weight", "name")
    for i, t in enumerate(raw):
        at = f"{file}: workload[{i}]"
        for k in t:
            if k not in keys:
                errors.append(UserError(f"unknown key '{k}'", f"{at}.{k}", hint=did_you_mean(k, keys)))
        weight = t.get("weight", 1.0)
        if not (_number(weight) and weight > 0):
            errors.append(UserError(f"'weight' must be a positive number, got {weight!r}",
                                    f"{at}.weight"))
            continue
        if ("program" in t) == ("gen" in t):
            errors.append(UserError("give one of 'program' (a file) or 'gen' (a workload)", at))
            continue
        try:
            if "program" in t:
                path = t["program"]
                for k in ("batch", "dtype", "params"):
                    if k in t:
                        raise UserError(f"'{k}' is for a gen workload; a program file states its "
                                        f"own", f"{at}.{k}")
                if not isinstance(path, str) or not (folder / path).is_file():
                    raise UserError(f"no program file {path!r} (relative to the spec's folder)",
                                    f"{at}.program")
                program = api.load_program(folder / path)
                label = t.get("name", Path(path).stem)
            else:
                params = t.get("params", {})
                if not isinstance(params, dict):
                    raise UserError("'params' must be a table of the workload's parameters",
                                    f"{at}.params")
                extra = {k: t[k] for k in ("batch", "dtype") if k in t}
                try:
                    text = generate(str(t["gen"]), **extra, **params)
                except UserError as e:
                    raise UserError(e.message, f"{at}.gen", hint=e.hint) from None
                except TypeError as e:      # a parameter given twice
                    raise UserError(str(e), f"{at}.params") from None
                tags = [f"b{extra['batch']}"] if "batch" in extra else []
                tags += [str(extra["dtype"])] if "dtype" in extra else []
                tags += [f"{k}{v}" for k, v in params.items()]
                label = t.get("name", "-".join([str(t["gen"]), *tags]))
                program = parse_program(text, f"{label}.fasm")
            if not isinstance(label, str) or not label:
                raise UserError("'name' must be a non-empty string", f"{at}.name")
            out.append(Workload(label, program, float(weight)))
        except UserError as e:
            errors.append(e)
    labels = [w.label for w in out]
    for label in {x for x in labels if labels.count(x) > 1}:
        errors.append(UserError(f"two workloads are named '{label}': give one a 'name'",
                                f"{file}: workload"))
    return out


def _constraints(raw, file: str, errors: list) -> tuple:
    if not isinstance(raw, dict):
        errors.append(UserError("'constraints' must be a table", f"{file}: constraints"))
        return ()
    out = []
    for k, v in raw.items():
        at = f"{file}: constraints.{k}"
        if k not in CONSTRAINTS:
            errors.append(UserError(f"unknown constraint '{k}' (one of {', '.join(CONSTRAINTS)})",
                                    at, hint=did_you_mean(k, CONSTRAINTS)))
        elif not (v == "base" or (_number(v) and v > 0)):
            errors.append(UserError(f"'{k}' must be a positive number or \"base\" (the base "
                                    f"machine's own), got {v!r}", at))
        else:
            out.append((k, v))
    return tuple(out)


def _search(raw, file: str, size: int, errors: list) -> tuple:
    at = lambda k: f"{file}: search.{k}"
    if not isinstance(raw, dict):
        errors.append(UserError("a spec needs a [search] table with its 'objectives'",
                                f"{file}: search"))
        return (), "grid", 1, 0
    for k in raw:
        if k not in ("objectives", "method", "trials", "seed"):
            errors.append(UserError(f"unknown key '{k}'", at(k),
                                    hint=did_you_mean(k, ["objectives", "method", "trials", "seed"])))
    objectives = raw.get("objectives")
    if not (isinstance(objectives, list) and objectives and all(isinstance(o, str) for o in objectives)):
        errors.append(UserError(f"'objectives' must list one or more of {', '.join(OBJECTIVES)}",
                                at("objectives")))
        objectives = []
    for o in objectives:
        if o not in OBJECTIVES:
            errors.append(UserError(f"unknown objective '{o}' (one of {', '.join(OBJECTIVES)})",
                                    at("objectives"), hint=did_you_mean(o, OBJECTIVES)))
    if len(set(objectives)) != len(objectives):
        errors.append(UserError("an objective is listed twice", at("objectives")))
    method, trials, seed = raw.get("method", "auto"), raw.get("trials", 100), raw.get("seed", 0)
    if method not in METHODS:
        errors.append(UserError(f"unknown method {method!r} (one of {', '.join(METHODS)})",
                                at("method"), hint=did_you_mean(str(method), METHODS)))
    for k, v, top in (("trials", trials, 10**6), ("seed", seed, 2**32 - 1)):
        if isinstance(v, bool) or not isinstance(v, int) or not (k == "seed" or v >= 1) \
                or not 0 <= v <= top:
            errors.append(UserError(f"'{k}' must be a whole number from {int(k == 'trials')} to "
                                    f"{top:,}, got {v!r}", at(k)))
    if method == "auto":
        method = "grid" if size <= (trials if isinstance(trials, int) else 0) else \
            "nsga2" if len(objectives) > 1 else "tpe"
    if method == "grid" and size > MAX_GRID:
        errors.append(UserError(f"the grid holds {size:,} points, over the limit of "
                                f"{MAX_GRID:,}", at("method"),
                                hint="search it with method = \"nsga2\" or \"tpe\""))
    return tuple(objectives), method, trials, seed


def spec_from_dict(data: dict, file: str = "<spec>") -> Spec:
    """Validate a parsed explore spec as a whole and load its base machine and workloads."""
    errors: list[UserError] = []
    for k in data:
        if k not in _TOP_KEYS:
            errors.append(UserError(f"unknown key '{k}'", f"{file}: {k}",
                                    hint=did_you_mean(k, _TOP_KEYS)))
    folder = Path(file).parent
    name = data.get("machine")
    base = None
    if not isinstance(name, str):
        errors.append(UserError("a spec needs 'machine', the base machine: a preset "
                                f"({', '.join(PRESETS)}) or a machine file", f"{file}: machine"))
    else:
        path = str(folder / name) if name not in PRESETS and (name.endswith(".toml") or
                                                          "/" in name) else name
        try:
            base = preset(path)
        except UserError as e:
            errors.append(e if e.where != "--machine" else
                          UserError(e.message, f"{file}: machine", hint=e.hint))
    workloads = _workloads(data.get("workload"), file, folder, errors)
    params = _parameters(data.get("vary", {}), file, base, errors) if base is not None else []
    constraints = _constraints(data.get("constraints", {}), file, errors)
    size = math.prod(len(p.values) for p in params)
    objectives, method, trials, seed = _search(data.get("search"), file, size, errors)
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return Spec(file, base, name, tuple(workloads), tuple(params), constraints, objectives,
                method, trials, seed)


def load_spec(path: str | Path) -> Spec:
    """Read and validate an explore spec (TOML)."""
    return spec_from_dict(read_toml(path, "explore spec", str(path)), str(path))
