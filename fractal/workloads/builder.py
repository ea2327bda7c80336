"""Program text built step by step: tensor declarations, instructions, and the layers that
workloads share (convolution with bias and ReLU, pooling, fully connected layers, softmax,
constants made from data).

Destination shapes are worked out here with the same formulas the checker applies
(`isa.opcodes.conv_out`), so a builder mistake shows up as a checker error on the generated text.
"""
from __future__ import annotations

import math
import textwrap

from isa.opcodes import conv_out
from isa.program import format_value

__all__ = ["ProgramBuilder"]

#: notes after instructions start in this column, or right after a longer instruction
_NOTE_COLUMN = 64


def _type_text(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


class ProgramBuilder:
    """Collects the declarations and instructions of one program and prints its text."""

    def __init__(self, dtype: str = "f32"):
        self.dtype = dtype                  # the float type of data tensors (f32, f16 or bf16)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, str] = {}
        self._decls: list[tuple[str, str, str, str]] = []      # name, type, role, note
        self._body: list[tuple[str, str, str]] = []             # opcode (or "#"), arguments, note
        self._libraries: dict[str, str] = {}                    # name -> its declarations

    # ------------------------------------------------------------ primitives

    def tensor(self, name: str, shape, role: str | None = None, dtype: str | None = None,
               note: str = "") -> str:
        """Declare a tensor (of the program's float type unless `dtype` says otherwise); returns
        its name."""
        dtype = dtype or self.dtype
        if name in self.shapes:
            raise ValueError(f"tensor '{name}' declared twice")
        shape = tuple(int(d) for d in shape)
        self.shapes[name] = shape
        self.dtypes[name] = dtype
        self._decls.append((name, _type_text(dtype, shape), role or "", note))
        return name

    def op(self, opcode: str, *operands: str, note: str = "", **attrs) -> str:
        """Append one instruction; returns its destination."""
        args = list(operands) + [f"{k}={format_value(v)}" for k, v in attrs.items()]
        self._body.append((opcode, ", ".join(args), note))
        return operands[0]

    def scratch(self, name: str, shape, dtype: str | None = None) -> str:
        """An internal tensor that later layers reuse: declared at its first use, and the same
        shape and type at every later one."""
        if name not in self.shapes:
            return self.tensor(name, shape, dtype=dtype)
        if self.shapes[name] != tuple(shape) or self.dtypes[name] != (dtype or self.dtype):
            raise ValueError(f"scratch tensor '{name}' reused at another shape or type")
        return name

    def library(self, name: str):
        """Declare the extensions of the shipped library `programs/lib/NAME.fasm` in the program
        itself, every f32 operand and temporary in the program's float type, so that the text
        needs no include and one program has one width."""
        if name in self._libraries:
            return
        from isa.parser import BUNDLED_LIBRARY    # lazy: the parser loads lark
        lines = []
        for line in (BUNDLED_LIBRARY / f"{name}.fasm").read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line.startswith("include"):
                raise ValueError(f"library {name} includes another: declare that one first")
            lines.append(line.replace("f32[", f"{self.dtype}["))
        self._libraries[name] = "\n".join(
            [f"# programs/lib/{name}.fasm, with its f32 tensors in {self.dtype}"] + lines)

    def section(self, title: str):
        """A comment line before the instructions that follow."""
        self._body.append(("#", title, ""))

    def text(self, header: list[str]) -> str:
        """The program: the header comment, aligned declarations, a blank line, instructions."""
        out = [f"# {part}" for line in header
               for part in textwrap.wrap(line, 96, break_on_hyphens=False)]
        for declarations in self._libraries.values():
            out += ["", declarations]
        names = max(len(d[0]) for d in self._decls)
        types = max(len(d[1]) for d in self._decls)
        out.append("")
        for name, type_, role, note in self._decls:
            line = f"tensor {name.ljust(names)} : {type_.ljust(types)} {role.ljust(6)}"
            out.append((line + (f"  # {note}" if note else "")).rstrip())
        out.append("")
        opcodes = max(len(opcode) for opcode, _, _ in self._body)
        lines = [f"# {args}" if opcode == "#" else f"{opcode.ljust(opcodes)} {args}"
                 for opcode, args, _ in self._body]
        width = min(_NOTE_COLUMN, max(len(line) for line in lines))
        for line, (_, _, note) in zip(lines, self._body):
            out.append(f"{line.ljust(width)}  # {note}" if note else line)
        return "\n".join(out) + "\n"

    # ------------------------------------------------------------ layers

    def conv(self, x: str, name: str, out_channels: int, kernel: int, stride: int = 1,
             pad: int = 0, groups: int = 1, relu: bool = True) -> str:
        """Convolution with a bias per output channel, then ReLU (unless relu=False).

        Params `{name}_w` (OIHW, with C / groups input channels as frameworks store grouped
        weights) and `{name}_b`. A grouped convolution slices the input channels and the weights
        into `groups` parts, convolves each part, and joins the results along the channels.
        """
        n, c, h, w = self.shapes[x]
        ho, wo = conv_out(h, kernel, stride, pad), conv_out(w, kernel, stride, pad)
        weight = self.tensor(f"{name}_w", (out_channels, c // groups, kernel, kernel), "param")
        bias = self.tensor(f"{name}_b", (1, out_channels, 1, 1), "param")
        y = self.tensor(name, (n, out_channels, ho, wo))
        if groups == 1:
            self.op("conv2d", y, x, weight, stride=stride, pad=pad)
        else:
            part_in = self.tensor(f"{name}_x_part", (n, c // groups, h, w))
            part_w = self.tensor(f"{name}_w_part", (out_channels // groups, c // groups, kernel, kernel))
            parts = []
            for g in range(groups):
                self.op("slice", part_in, x, axis=1, start=g * (c // groups), note=f"group {g}")
                self.op("slice", part_w, weight, axis=0, start=g * (out_channels // groups))
                parts.append(self.tensor(f"{name}_g{g}", (n, out_channels // groups, ho, wo)))
                self.op("conv2d", parts[-1], part_in, part_w, stride=stride, pad=pad)
            self.op("concat", y, *parts, axis=1)
        self.op("add", y, y, bias)
        if relu:
            self.op("relu", y, y)
        return y

    def pool(self, opcode: str, x: str, name: str, kernel: int, stride: int, pad: int = 0) -> str:
        n, c, h, w = self.shapes[x]
        y = self.tensor(name, (n, c, conv_out(h, kernel, stride, pad), conv_out(w, kernel, stride, pad)))
        attrs = {"kernel": kernel, "stride": stride} | ({"pad": pad} if pad else {})
        return self.op(opcode, y, x, **attrs)

    def flatten(self, x: str, name: str) -> str:
        shape = self.shapes[x]
        return self.op("reshape", self.tensor(name, (shape[0], math.prod(shape[1:]))), x)

    def linear(self, x: str, name: str, out_features: int, relu: bool = False,
               role: str | None = None, out: str | None = None) -> str:
        """x @ `{name}_w` + `{name}_b`, then ReLU when asked; the result is `out` or `name`."""
        n, k = self.shapes[x]
        weight = self.tensor(f"{name}_w", (k, out_features), "param")
        bias = self.tensor(f"{name}_b", (out_features,), "param")
        y = self.tensor(out or name, (n, out_features), role)
        self.op("matmul", y, x, weight)
        self.op("add", y, y, bias)
        if relu:
            self.op("relu", y, y)
        return y

    def classify(self, logits: str, name: str = "labels") -> str:
        """The index of the largest score of each row (i32, first on ties)."""
        labels = self.tensor(name, self.shapes[logits][:1], "output", "i32",
                             "predicted class of each sample")
        return self.op("argmax", labels, logits, axis=1)

    def softmax(self, x: str, name: str, role: str | None = None) -> str:
        """Softmax along the rows of a matrix, the row maximum subtracted first for range."""
        rows, cols = self.shapes[x]
        m = self.tensor(f"{name}_max", (rows,))
        m_col = self.tensor(f"{name}_max_col", (rows, 1))
        e = self.tensor(f"{name}_exp", (rows, cols))
        s = self.tensor(f"{name}_sum", (rows,))
        s_col = self.tensor(f"{name}_sum_col", (rows, 1))
        y = self.tensor(name, (rows, cols), role)
        self.op("reduce_max", m, x, axis=1)
        self.op("reshape", m_col, m)
        self.op("sub", e, x, m_col)
        self.op("exp", e, e)
        self.op("reduce_sum", s, e, axis=1)
        self.op("reshape", s_col, s)
        return self.op("div", y, e, s_col)

    def scalar(self, source: str, name: str) -> str:
        """One element of `source` as a rank-1 tensor of length 1 (to derive constants from)."""
        flat = self.tensor(f"{name}_flat", (math.prod(self.shapes[source]),), dtype=self.dtypes[source])
        self.op("reshape", flat, source)
        one = self.tensor(name, (1,), dtype=self.dtypes[source])
        return self.op("slice", one, flat, axis=0)

    def zero_and_one(self, source: str) -> tuple[str, str]:
        """[1] tensors of the program's float type holding 0 and 1, made from data: x - x = 0 and exp(0) = 1.

        The language has no literals, so constants come from a finite element of a fed tensor.
        """
        element = self.scalar(source, "element")
        zero = self.tensor("zero", (1,))
        one = self.tensor("one", (1,))
        self.op("sub", zero, element, element, note="0 (x - x of a finite x)")
        self.op("exp", one, zero, note="1 = exp(0)")
        return zero, one
