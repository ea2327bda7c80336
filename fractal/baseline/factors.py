"""Efficiency factors of the roofline: what fraction of a GPU's vendor peak each class of
instruction reaches, in arithmetic and in memory bandwidth, and what fraction of the NVLink peak
a collective reaches. The defaults and the reasoning behind each are in docs/baseline.md; a dict
or a TOML file (`--factors FILE`) overrides any of them:

    [compute]            # fraction of peak arithmetic
    matmul = 0.7
    [bandwidth]          # fraction of peak memory bandwidth
    irregular = 0.25
    interconnect = 0.8   # top level: fraction of the interconnect's peak
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from isa.errors import ErrorGroup, UserError, did_you_mean
from machine import read_toml

__all__ = ["OP_CLASSES", "Factors", "DEFAULT_FACTORS", "factors_from_dict", "load_factors",
           "opcode_class"]

#: the roofline's op classes; "move" has no arithmetic (copies, transposes, slices)
OP_CLASSES = ("matmul", "elementwise", "reduction", "irregular", "move")

_CLASS_OF = {
    **dict.fromkeys(("matmul", "conv2d", "eucdist"), "matmul"),
    **dict.fromkeys(("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp", "lrn", "cast",
                     "sqrt", "rsqrt", "erf", "log", "abs", "neg", "pow", "min", "max", "where",
                     "causal_mask"), "elementwise"),
    **dict.fromkeys(("reduce_sum", "reduce_max", "reduce_mean", "argmax", "argmin", "count",
                     "maxpool", "avgpool"), "reduction"),
    **dict.fromkeys(("sort", "argsort", "mergepos", "gather"), "irregular"),
    **dict.fromkeys(("transpose", "copy", "reshape", "slice", "concat", "fill"), "move"),
}


def opcode_class(opcode: str) -> str:
    """The roofline op class of a core opcode."""
    return _CLASS_OF[opcode]


# defaults: docs/baseline.md gives the reason for every number
_DEFAULT_COMPUTE = {"matmul": 0.7, "elementwise": 0.5, "reduction": 0.5, "irregular": 0.1}
_DEFAULT_BANDWIDTH = {"matmul": 0.8, "elementwise": 0.85, "reduction": 0.8, "irregular": 0.25,
                      "move": 0.85}


@dataclass(frozen=True)
class Factors:
    compute: dict = field(default_factory=lambda: dict(_DEFAULT_COMPUTE))
    bandwidth: dict = field(default_factory=lambda: dict(_DEFAULT_BANDWIDTH))
    interconnect: float = 0.8

    def to_toml(self, comments: dict | None = None) -> str:
        """The factors as a TOML file `load_factors` reads back; `comments` annotate keys."""
        comments = comments or {}

        def line(section, key, value):
            note = comments.get(f"{section}.{key}" if section else key)
            return f"{key} = {value:.6g}" + (f"    # {note}" if note else "")
        out = [line("", "interconnect", self.interconnect), "", "[compute]"]
        out += [line("compute", k, v) for k, v in self.compute.items()]
        out += ["", "[bandwidth]"] + [line("bandwidth", k, v) for k, v in self.bandwidth.items()]
        return "\n".join(out) + "\n"

    def to_json(self) -> dict:
        return {"compute": dict(self.compute), "bandwidth": dict(self.bandwidth),
                "interconnect": self.interconnect}


DEFAULT_FACTORS = Factors()
#: the least efficiency factor: a GPU at a millionth of its roofline is a typing slip, and a
#: smaller one would overflow the times it divides
MIN_FACTOR = 1e-6


def _fraction(v, at: str, errors: list) -> bool:
    ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
          and MIN_FACTOR <= v <= 1)
    if not ok:
        errors.append(UserError(f"an efficiency factor must be a number from {MIN_FACTOR:g} to 1, "
                                f"got {v!r}", at))
    return ok


def factors_from_dict(data: dict | Factors | None, file: str = "factors") -> Factors:
    """The default factors with the given ones overriding them, validated as a whole."""
    if data is None:
        return DEFAULT_FACTORS
    if isinstance(data, Factors):
        return data
    errors: list[UserError] = []
    compute, bandwidth = dict(_DEFAULT_COMPUTE), dict(_DEFAULT_BANDWIDTH)
    interconnect = DEFAULT_FACTORS.interconnect
    if not isinstance(data, dict):
        raise UserError(f"factors must be a table of tables, got {data!r}", file)
    for key, value in data.items():
        at = f"{file}: {key}"
        if key == "interconnect":
            if _fraction(value, at, errors):
                interconnect = float(value)
        elif key in ("compute", "bandwidth"):
            target = compute if key == "compute" else bandwidth
            if not isinstance(value, dict):
                errors.append(UserError(f"'{key}' must be a table of op class = factor", at))
                continue
            for cls, v in value.items():
                if cls not in target:
                    errors.append(UserError(f"unknown op class '{cls}' (classes: "
                                            f"{', '.join(target)})", f"{at}.{cls}",
                                            hint=did_you_mean(cls, target)))
                elif _fraction(v, f"{at}.{cls}", errors):
                    target[cls] = float(v)
        else:
            errors.append(UserError(f"unknown key '{key}' (compute, bandwidth, interconnect)", at,
                                    hint=did_you_mean(key, ("compute", "bandwidth", "interconnect"))))
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return Factors(compute, bandwidth, interconnect)


def load_factors(path: str | Path, where: str = "--factors") -> Factors:
    """Factors from a TOML file (missing entries keep their defaults)."""
    data = read_toml(path, "factors file", where)
    return factors_from_dict(data, str(path))
