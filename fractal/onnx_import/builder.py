"""The program being built from an ONNX graph: tensor names, declarations, instructions, params.

A `Value` is what an ONNX value became: either a declared fractal tensor (`name`), or a constant
known at import time (`const`: an initializer, a Constant node, anything folded from them). A
constant is declared as a `param` tensor, its data kept for the .npz, only when an instruction
reads it; constants that only feed shapes (Reshape's shape, Shape -> Gather chains) never appear
in the program. Float data has the model's float type (f32 or f16); integer and boolean data
(token ids, masks) is i32, booleans as 0 and 1.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np

from isa.errors import UserError
from isa.opcodes import OPCODES
from isa.program import TensorType, format_value

__all__ = ["Value", "Builder", "identifier", "onnx_comment", "RESERVED"]

#: names a tensor may not take: opcodes, and the words of the language (keywords, dtypes, roles)
RESERVED = frozenset(OPCODES) | {"tensor", "include", "extension", "end", "split", "reduce",
                                 "window", "kernel", "leaf", "min", "index", "f32", "i32",
                                 "f16", "bf16", "i8",
                                 "input", "param", "output"}


def identifier(name: str) -> str:
    """`name` made into a valid tensor name: other characters become '_', a leading digit gets a
    't' in front, and a reserved word gets a trailing '_'."""
    text = re.sub(r"[^A-Za-z0-9_]", "_", name) or "t"
    if text[0].isdigit():
        text = "t" + text
    return text + "_" if text in RESERVED else text


def onnx_comment(name: str) -> str:
    """The comment that gives a tensor's ONNX name (quoted and escaped as JSON)."""
    return f"onnx {json.dumps(name)}"


@dataclass
class Value:
    shape: tuple[int, ...]
    name: str | None = None             # the fractal tensor that holds it
    const: np.ndarray | None = None     # its value, when known at import time
    hint: str | None = None             # a constant's name for its param tensor
    comment: str = ""                   # where a constant comes from (an initializer's name)
    dtype: str = "f32"                  # the fractal dtype: the model's float type, or i32

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def is_int(self) -> bool:
        return self.dtype == "i32"


class Builder:
    """Collects declarations (with the ONNX name in a comment), instructions and param data.
    Float tensors and params have the model's float type `dtype` (f32 or f16); integer ones
    are i32."""

    def __init__(self, dtype: str = "f32"):
        self.dtype = dtype
        self.np_dtype = np.float16 if dtype == "f16" else np.float32
        self.taken: set[str] = set()
        self.decls: list[tuple[str, tuple, str | None, str, str]] = []  # name, shape, role,
        #                                                                   comment, dtype
        self.lines: list[str] = []
        self.params: dict[str, np.ndarray] = {}
        self.node = ""                     # the ONNX node being converted, for comments

    # ------------------------------------------------------------ names and declarations

    def fresh(self, hint: str) -> str:
        """A unique tensor name derived from `hint` (an ONNX name or a made-up one)."""
        base = identifier(hint)
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    def declare(self, hint: str, shape, role: str | None = None, onnx_name: str | None = None,
                name: str | None = None, comment: str = "", dtype: str | None = None) -> Value:
        """A new tensor named after `hint` (or exactly `name`, taken earlier with `fresh`), with
        a comment that gives its ONNX name; of the model's float type unless `dtype` says."""
        name = name or self.fresh(hint)
        comment = onnx_comment(onnx_name) if onnx_name is not None else comment
        dtype = dtype or self.dtype
        self.decls.append((name, tuple(shape), role, comment, dtype))
        return Value(tuple(shape), name, dtype=dtype)

    def temp(self, hint: str, shape, dtype: str | None = None) -> Value:
        return self.declare(hint, shape, dtype=dtype)

    def const(self, array, hint: str | None = None, comment: str = "") -> Value:
        """A value known at import time: i32 data if its array holds integers or booleans."""
        a = np.asarray(array)
        dtype = "i32" if a.dtype.kind in "biu" else self.dtype
        return Value(tuple(a.shape), const=a, hint=hint, comment=comment, dtype=dtype)

    def operand(self, v: Value, hint: str = "const") -> str:
        """The tensor name of `v`, declaring a constant as a param the first time it is read."""
        if v.name is None:
            a = v.const
            if a.dtype.kind == "f" and a.dtype.itemsize <= 8:
                a = a.astype(self.np_dtype)
            elif a.dtype.kind in "biu":
                if a.size and not (-2**31 <= int(a.min()) and int(a.max()) < 2**31):
                    raise UserError(f"an integer constant holds values outside the range of i32 "
                                    f"({int(a.min())} .. {int(a.max())}), the program's integer "
                                    f"type")
                a = a.astype(np.int32)
            else:
                raise UserError(f"a constant of dtype {a.dtype} is used as data; this program "
                                f"computes {self.dtype} and i32 data")
            v.name = self.declare(v.hint or hint, a.shape, "param", comment=v.comment,
                                  dtype=v.dtype).name
            self.params[v.name] = np.array(a, order="C")
        return v.name

    # ------------------------------------------------------------ instructions

    def emit(self, opcode: str, dst: Value, *srcs: Value, **attrs) -> Value:
        names = [self.operand(dst)] + [self.operand(s) for s in srcs]
        args = names + [f"{k}={format_value(v)}" for k, v in attrs.items()]
        line = f"{opcode:<10} {', '.join(args)}"
        if self.node:
            line = f"{line:<48} # {self.node}"
            self.node = ""                   # the node's name goes on its first instruction only
        self.lines.append(line)
        return dst

    def to(self, dst: Value | None, hint: str, shape, dtype: str | None = None) -> Value:
        """`dst` if given, else a new internal tensor of `shape` (and `dtype`)."""
        return dst if dst is not None else self.temp(hint, shape, dtype)

    def reshape(self, v: Value, shape, dst: Value | None = None) -> Value:
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) != math.prod(v.shape):        # an inferred shape of a bad model
            raise UserError(f"the shape {list(shape)} ({math.prod(shape):,} elements) does not "
                            f"hold the {math.prod(v.shape):,} elements of {list(v.shape)}")
        if v.is_const and dst is None:
            return self.const(v.const.reshape(shape), v.hint, v.comment)
        if v.shape == shape and dst is None:
            return v
        return self.emit("reshape", self.to(dst, f"{v.name}_reshaped", shape, v.dtype), v)

    def slice(self, v: Value, axis: int, start: int, length: int,
              dst: Value | None = None) -> Value:
        if v.is_const and dst is None:
            part = np.take(v.const, range(start, start + length), axis=axis)
            return self.const(part, v.hint and f"{v.hint}_{start}",
                              v.comment and f"{v.comment}, {start}:{start + length} on axis {axis}")
        if start == 0 and length == v.shape[axis] and dst is None:
            return v
        shape = v.shape[:axis] + (length,) + v.shape[axis + 1:]
        return self.emit("slice", self.to(dst, f"{v.name}_{start}", shape, v.dtype), v, axis=axis,
                         start=start)

    def transpose(self, v: Value, perm, dst: Value | None = None) -> Value:
        perm = tuple(int(p) for p in perm)
        if v.is_const and dst is None:
            return self.const(np.transpose(v.const, perm), v.hint,
                              v.comment and f"{v.comment}, transposed {perm}")
        if perm == tuple(range(len(perm))) and dst is None:
            return v
        return self.emit("transpose", self.to(dst, f"{v.name}_t", [v.shape[p] for p in perm],
                                              v.dtype), v, perm=perm)

    # ------------------------------------------------------------ the program text

    def text(self, header: str) -> str:
        """Declarations (inputs, params, internals, outputs) aligned, then the instructions."""
        order = {"input": 0, "param": 1, None: 2, "output": 3}
        decls = sorted(self.decls, key=lambda d: order[d[2]])
        rows = [(f"tensor {n}", f": {TensorType(t, s)}", r or "", c) for n, s, r, c, t in decls]
        widths = [max((len(row[i]) for row in rows), default=0) for i in range(3)]
        out = [f"# {line}" for line in header.splitlines()]
        for row in rows:
            line = "  ".join(cell.ljust(w) for cell, w in zip(row, widths))
            out.append(f"{line}  # {row[3]}" if row[3] else line.rstrip())
        return "\n".join(out + [""] + self.lines) + "\n"
