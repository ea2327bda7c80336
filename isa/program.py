"""Frozen program objects: tensor declarations, instructions, programs, and their canonical text.

Source locations ride along on every object but take no part in equality, so that
`parse(program.to_text()) == program` holds for every valid program.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Union

from isa.errors import SourceLocation

__all__ = [
    "DTYPES", "FLOAT_DTYPES", "INT_DTYPES", "ROLES", "TensorType", "TensorDecl", "Instruction", "Program", "AttrValue",
    "format_value",
]

#: element types and their sizes in bytes: IEEE binary32 and binary16, bfloat16 (8 exponent bits,
#: 7 fraction bits), and two's-complement 32- and 8-bit integers
DTYPES = {"f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i8": 1}
FLOAT_DTYPES = ("f32", "f16", "bf16")
INT_DTYPES = ("i32", "i8")
#: roles of a declared tensor; None (no role written) means internal
ROLES = ("input", "param", "output")

AttrValue = Union[int, float, str, tuple]


@dataclass(frozen=True)
class TensorType:
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * DTYPES[self.dtype]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class TensorDecl:
    name: str
    type: TensorType
    role: str | None = None
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)

    def to_text(self) -> str:
        role = f" {self.role}" if self.role else ""
        return f"tensor {self.name} : {self.type}{role}"


def format_value(v: AttrValue) -> str:
    """Canonical text of an attribute value; parses back to an equal value."""
    if isinstance(v, bool):
        raise TypeError("boolean attribute values are not part of the language")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        text = repr(v)
        return text if any(c in text for c in ".eEn") else text + ".0"
    if isinstance(v, str):
        return v
    if isinstance(v, tuple):
        inner = ", ".join(format_value(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    raise TypeError(f"not an attribute value: {v!r}")


@dataclass(frozen=True)
class Instruction:
    """`opcode` applied to `operands` (destinations first, as the opcode's table entry says)."""
    opcode: str
    operands: tuple[str, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    loc: SourceLocation | None = field(default=None, compare=False, repr=False)
    operand_locs: tuple[SourceLocation, ...] = field(default=(), compare=False, repr=False)
    attr_locs: tuple[SourceLocation, ...] = field(default=(), compare=False, repr=False)

    @property
    def attr(self) -> dict[str, AttrValue]:
        return dict(self.attrs)

    def operand_loc(self, i: int) -> SourceLocation | None:
        return self.operand_locs[i] if i < len(self.operand_locs) else self.loc

    def attr_loc(self, key: str) -> SourceLocation | None:
        for i, (k, _) in enumerate(self.attrs):
            if k == key and i < len(self.attr_locs):
                return self.attr_locs[i]
        return self.loc

    def to_text(self) -> str:
        args = list(self.operands) + [f"{k}={format_value(v)}" for k, v in self.attrs]
        return f"{self.opcode} {', '.join(args)}" if args else self.opcode


@dataclass(frozen=True)
class Program:
    tensors: tuple[TensorDecl, ...]
    instructions: tuple[Instruction, ...]
    file: str = field(default="<program>", compare=False)
    source: str = field(default="", compare=False, repr=False)
    extensions: tuple = ()          # extension declarations (isa/extensions.py), in order

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def types(self) -> dict[str, TensorType]:
        return {t.name: t.type for t in self.tensors}

    def with_role(self, role: str | None) -> tuple[TensorDecl, ...]:
        return tuple(t for t in self.tensors if t.role == role)

    @property
    def inputs(self) -> tuple[TensorDecl, ...]:
        return self.with_role("input")

    @property
    def params(self) -> tuple[TensorDecl, ...]:
        return self.with_role("param")

    @property
    def outputs(self) -> tuple[TensorDecl, ...]:
        return self.with_role("output")

    def source_line(self, loc: SourceLocation | None) -> str | None:
        if loc is None or not self.source:
            return None
        lines = self.source.splitlines()
        return lines[loc.line - 1] if 0 < loc.line <= len(lines) else None

    def to_text(self) -> str:
        """Canonical text: declarations, a blank line, then instructions."""
        decls = [t.to_text() for t in self.tensors]
        width = max((len(f"tensor {t.name}") for t in self.tensors), default=0)
        aligned = []
        for t, d in zip(self.tensors, decls):
            head = f"tensor {t.name}"
            aligned.append(head.ljust(width) + d[len(head):])
        body = [i.to_text() for i in self.instructions]
        exts = "".join(e.to_text() + "\n\n" for e in self.extensions)
        return exts + "\n".join(aligned) + "\n\n" + "\n".join(body) + "\n"
