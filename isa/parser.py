"""Program text -> frozen Program.

The grammar lives in `fractal.lark` and is parsed with lark's LALR parser with positions kept.
A syntax error stops the parse with one located error (line, column, caret, what was expected);
problems the grammar lets through (unknown dtype or role, zero dimensions, an operand written
after an attribute, a repeated attribute) are collected, so that `load_program` can report them
together with the checker's.
"""
from __future__ import annotations

import dataclasses

from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from isa.errors import ErrorGroup, SourceLocation, UserError, did_you_mean
from isa import extensions as ext
from isa.program import DTYPES, ROLES, Instruction, Program, TensorDecl, TensorType

__all__ = ["parse", "parse_collect", "read_source"]

_TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "SIGNED_INT": "an integer", "SIGNED_FLOAT": "a number",
    "COMMA": "','", "COLON": "':'", "LSQB": "'['", "RSQB": "']'", "LPAR": "'('", "RPAR": "')'",
    "EQUAL": "'='", "TENSOR": "'tensor'", "_NL": "end of line", "$END": "end of file",
}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "fractal.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


class _Builder(Transformer):
    """Builds typed objects from the parse tree; collects the problems it finds."""

    def __init__(self, file: str, source: str):
        super().__init__()
        self.file = file
        self.source = source
        self.lines = source.splitlines()
        self.errors: list[UserError] = []

    def loc(self, tok) -> SourceLocation:
        return SourceLocation(self.file, tok.line, tok.column)

    def error(self, message: str, where, hint: str | None = None):
        loc = where if isinstance(where, SourceLocation) else self.loc(where)
        line = self.lines[loc.line - 1] if 0 < loc.line <= len(self.lines) else None
        self.errors.append(UserError(message, loc, line, hint))

    # values
    def int_value(self, c):
        return int(c[0])

    def float_value(self, c):
        return float(c[0])

    def name_value(self, c):
        return str(c[0])

    def tuple_value(self, c):
        return tuple(x for x in c if x is not None)

    def dims(self, c):
        return [d for d in c if d is not None]

    def dim_add(self, c):
        return ("+", c[0], c[1])

    def dim_sub(self, c):
        return ("-", c[0], c[1])

    def dim_mul(self, c):
        return ("*", c[0], c[1])

    def operand(self, c):
        return ("operand", c[0], None)

    def attr(self, c):
        return ("attr", c[0], c[1])

    def decl(self, c):
        return _RawDecl(*c)

    def tensor_decl(self, raw: "_RawDecl") -> TensorDecl:
        """A program-level declaration: integer dimensions, a known dtype and role."""
        name, dtype, role = raw.name, raw.dtype, raw.role
        self.check_dtype(dtype)
        shape = []
        for d in raw.dims or []:
            if not isinstance(d, Token) or d.type != "INT":
                self.error(f"dimensions of tensor '{name}' must be integers (size symbols and "
                           f"expressions belong in extension declarations)", _first_token(d) or name)
                shape.append(1)
            elif int(d) < 1:
                self.error(f"dimension {int(d)} of tensor '{name}' must be at least 1", d)
                shape.append(1)
            else:
                shape.append(int(d))
        if role is not None and str(role) not in ROLES:
            self.error(f"unknown role '{role}' (known: {', '.join(ROLES)}, or none for an "
                       f"internal tensor)", role, did_you_mean(str(role), ROLES))
        ttype = TensorType(str(dtype) if str(dtype) in DTYPES else "f32", tuple(shape))
        return TensorDecl(str(name), ttype, str(role) if role is not None and str(role) in ROLES
                          else None, self.loc(name))

    def check_dtype(self, dtype):
        if str(dtype) not in DTYPES:
            self.error(f"unknown dtype '{dtype}' (known: {', '.join(DTYPES)})", dtype,
                       did_you_mean(str(dtype), DTYPES))

    # extensions
    def include(self, c):
        return _Include(str(c[0])[1:-1], c[0])

    def sig(self, c):
        name, dtype, dims, index = c
        return ext.SigOperand(str(name), str(dtype), tuple(_dim(d) for d in dims or []), False,
                              str(index) if index is not None else None, self.loc(name))

    def sig_list(self, c):
        return list(c)

    def attr_default(self, c):
        return (str(c[0]), c[1])

    def ext_attrs(self, c):
        return tuple(c)

    def least(self, c):
        return c[0]

    def split(self, c):
        axis, reduce, src, kernel, leaf, least = c
        return ext.SplitRule(str(axis), str(reduce) if reduce is not None else None,
                             (str(src), str(kernel)) if src is not None else None,
                             int(leaf) if leaf is not None else None,
                             None if least is None else _dim(least), self.loc(axis))

    def extension(self, c):
        name, outs, ins, attrs, *lines = c
        for o in ins:
            if o.index is not None:
                self.error(f"'{o.name}' is an input; only outputs hold positions ('index')", o.loc)
        operands = tuple(dataclasses.replace(o, output=True) for o in outs or []) + tuple(ins)
        temps, splits, body = [], [], []
        for item in lines:
            if isinstance(item, ext.SplitRule):
                splits.append(item)
            elif isinstance(item, _RawDecl):
                if item.role is not None:
                    self.error(f"temporary '{item.name}' of an extension takes no role", item.role)
                temps.append(ext.Temp(str(item.name), str(item.dtype),
                                      tuple(_dim(d) for d in item.dims or []), self.loc(item.name)))
            elif isinstance(item, Instruction):
                body.append(item)
        if not outs:
            self.error(f"extension '{name}' needs at least one output before '<-'", name)
        return ext.ExtDecl(str(name), operands, attrs or (), tuple(splits), tuple(temps),
                           tuple(body), self.loc(name), self.source)

    def instr(self, c):
        opcode, args = c[0], [a for a in c[1:] if a is not None]
        operands, olocs, attrs, alocs, seen = [], [], [], [], set()
        for kind, tok, value in args:
            if kind == "operand":
                if attrs:
                    self.error(f"operand '{tok}' follows an attribute: write operands first, "
                               f"then key=value attributes", tok)
                operands.append(str(tok))
                olocs.append(self.loc(tok))
            else:
                if str(tok) in seen:
                    self.error(f"attribute '{tok}' is given twice", tok)
                    continue
                seen.add(str(tok))
                attrs.append((str(tok), value))
                alocs.append(self.loc(tok))
        return Instruction(str(opcode), tuple(operands), tuple(attrs), self.loc(opcode),
                           tuple(olocs), tuple(alocs))

    def start(self, c):
        return [self.tensor_decl(x) if isinstance(x, _RawDecl) else x for x in c if x is not None]


@dataclasses.dataclass
class _RawDecl:
    name: Token
    dtype: Token
    dims: list | None
    role: Token | None


@dataclasses.dataclass
class _Include:
    path: str
    token: Token


def _dim(d):
    """A dimension as an int, a size symbol (str) or (op, left, right)."""
    if isinstance(d, Token):
        return int(d) if d.type == "INT" else str(d)
    return (d[0], _dim(d[1]), _dim(d[2]))


def _first_token(d):
    return d if isinstance(d, Token) else _first_token(d[1]) if isinstance(d, tuple) else None


def _syntax_error(e: UnexpectedInput, file: str, lines: list[str]) -> UserError:
    line, col = max(e.line, 1), max(e.column, 1)
    if isinstance(e, UnexpectedToken) and e.token.type == "$END":
        line, col = len(lines) or 1, len(lines[-1]) + 1 if lines else 1
    where = SourceLocation(file, line, col)
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    if isinstance(e, UnexpectedCharacters):
        ch = src[col - 1] if col - 1 < len(src) else "?"
        msg = f"unexpected character {ch!r}"
    elif isinstance(e, UnexpectedToken):
        tok = e.token
        found = "end of line" if tok.type == "_NL" else (
            "end of file" if tok.type == "$END" else f"'{tok}'")
        expected = sorted({_TERMINAL_NAMES.get(t, t) for t in e.expected})
        msg = f"unexpected {found}, expected {' or '.join(expected)}"
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of file"
    else:  # pragma: no cover - lark has no other kinds
        msg = "syntax error"
    return UserError(msg, where, src)


def parse_collect(text: str, file: str = "<program>", _including: tuple = ()) -> tuple[Program, list[UserError]]:
    """Parse program text; return the program and the non-syntax problems found on the way.

    Included libraries are read and their extensions take the include's place. A syntax error
    raises a UserError at once (the rest of the file cannot be trusted).
    """
    lines = text.splitlines()
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, file, lines) from None
    builder = _Builder(file, text)
    try:
        items = builder.transform(tree)
    except VisitError as e:  # a bug of ours inside a callback: re-raise the original
        raise e.orig_exc from None
    errors = builder.errors
    extensions = []
    for item in items:
        found = [item] if isinstance(item, ext.ExtDecl) else _include(
            item, file, builder, _including + (str(Path(file).resolve()),)) if isinstance(
            item, _Include) else []
        # a library reached twice (directly and through another) brings the same declarations
        extensions += [d for d in found if d not in extensions]
    tensors = tuple(x for x in items if isinstance(x, TensorDecl))
    instrs = tuple(x for x in items if isinstance(x, Instruction))
    if _including and (tensors or instrs):
        builder.error("a library holds only extension declarations and includes, not tensors or "
                      "instructions", (tensors or instrs)[0].loc)
    return Program(tensors, instrs, file, text, tuple(extensions)), errors


def _include(item: "_Include", file: str, builder: "_Builder", including: tuple) -> list:
    """The extensions of an included library (path relative to the including file)."""
    path = (Path(file).parent / item.path) if file not in ("<program>", "<string>") else Path(item.path)
    if str(path.resolve()) in including:
        builder.error(f"'{item.path}' includes itself (through {len(including)} file(s))", item.token)
        return []
    try:
        text = read_source(path)
    except UserError as e:
        builder.error(f"cannot include '{item.path}': {e.message}", item.token)
        return []
    library, errors = parse_collect(text, str(path), including)
    builder.errors.extend(errors)
    return list(library.extensions)


def parse(text: str, file: str = "<program>") -> Program:
    """Parse program text into a Program; any problem raises a UserError (or ErrorGroup)."""
    program, errors = parse_collect(text, file)
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return program


def read_source(path: str | Path) -> str:
    """Read a program file, turning I/O and encoding problems into located user errors."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"no such file: {path}", str(path)) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, not a program file: {path}", str(path)) from None
    except UnicodeDecodeError as e:
        raise UserError(f"not UTF-8 text (byte {e.start}): {path}", str(path)) from None
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}", str(path)) from None
