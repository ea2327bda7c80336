"""Program text -> frozen Program.

The grammar lives in `fractal.lark` and is parsed with lark's LALR parser with positions kept.
A syntax error stops the parse with one located error (line, column, caret, what was expected);
problems the grammar lets through (unknown dtype or role, zero dimensions, an operand written
after an attribute, a repeated attribute) are collected, so that `load_program` can report them
together with the checker's.

Sources are read under limits (docs/reliability.md): a program or library is a regular file of
at most FRACTAL_MAX_SOURCE_BYTES; an include resolves inside the root program's folder tree or
on the library path (`library_path`, FRACTAL_LIB_PATH, the bundled `programs/lib/`); each
library is read once per program however many paths reach it; include chains are at most
FRACTAL_MAX_INCLUDE_DEPTH deep; a line holds at most MAX_LINE characters, a statement nests at
most MAX_NESTING levels and an integer has at most MAX_DIGITS digits.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat

from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from isa.errors import MAX_ERRORS_COLLECTED, ErrorGroup, SourceLocation, UserError, did_you_mean, \
    env_limit
from isa import extensions as ext
from isa.program import DTYPES, ROLES, Instruction, Program, TensorDecl, TensorType

__all__ = ["parse", "parse_collect", "read_source", "library_path", "source_limits",
           "BUNDLED_LIBRARY", "MAX_NESTING", "MAX_DIGITS", "MAX_LINE"]

_TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "SIGNED_INT": "an integer", "SIGNED_FLOAT": "a number",
    "STRING": "a quoted path", "_NL": "end of line", "$END": "end of file",
}

#: the extension libraries shipped with the project: always on the library path
BUNDLED_LIBRARY = Path(__file__).resolve().parent.parent / "programs" / "lib"
#: the deepest a statement's parse tree may nest (parentheses, chained + - *)
MAX_NESTING = 64
#: the most digits of an integer literal
MAX_DIGITS = 30
#: the longest line a program may hold (no statement comes near it)
MAX_LINE = 10_000

#: name -> (environment variable, default, what it bounds)
SOURCE_LIMITS = {
    "source_bytes": ("FRACTAL_MAX_SOURCE_BYTES", 2**20, "bytes of one program or library file"),
    "include_depth": ("FRACTAL_MAX_INCLUDE_DEPTH", 32, "libraries in one chain of includes"),
    "include_files": ("FRACTAL_MAX_INCLUDE_FILES", 256, "distinct libraries one program includes"),
    "source_tokens": ("FRACTAL_MAX_SOURCE_TOKENS", 100_000,
                      "tokens (names, numbers, punctuation) of one program or library file"),
}

#: what counts as a token for the limit: a word or number, or one other visible character
_TOKEN = re.compile(r"[A-Za-z0-9_.]+|[^\sA-Za-z0-9_.#]")
_COMMENT = re.compile(r"#[^\n]*")


def source_limits() -> dict[str, int]:
    """The source limits in force (environment variables, else defaults)."""
    return {k: env_limit(var, default) for k, (var, default, _) in SOURCE_LIMITS.items()}


def _over(name: str, what: str) -> str:
    var, _, bounds = SOURCE_LIMITS[name]
    return f"{what}, over the limit of {source_limits()[name]:,} ({bounds}; set {var} to raise it)"


_LIBRARY: list[tuple[Path, str]] = []       # the folders of --lib, with the argument naming them


@contextlib.contextmanager
def library_path(folders, where: str = "--lib"):
    """Add folders to the library path while the block runs (the command's `--lib DIR`).
    A folder that is not one is a located error."""
    added = []
    for f in folders or ():
        path = Path(f)
        if not path.is_dir():
            raise UserError(f"not a folder: {f}", f"{where} {f}")
        added.append((path.resolve(), f"{where} {f}"))
    _LIBRARY[:0] = added
    try:
        yield
    finally:
        del _LIBRARY[:len(added)]


def _library_folders() -> list[Path]:
    """The library path in search order: --lib folders, FRACTAL_LIB_PATH, the bundled library."""
    folders = [p for p, _ in _LIBRARY]
    for f in os.environ.get("FRACTAL_LIB_PATH", "").split(os.pathsep):
        if f.strip():
            folders.append(Path(f.strip()).resolve())
    if BUNDLED_LIBRARY.is_dir():
        folders.append(BUNDLED_LIBRARY)
    return folders


def _terminal(name: str) -> str:
    """What a parser terminal means to a reader (never the grammar's internal name)."""
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        term = _lark().get_terminal(name)
    except KeyError:
        return "a token"
    return f"'{term.pattern.value}'" if term.pattern.type == "str" else "a token"


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
        if len(self.errors) >= MAX_ERRORS_COLLECTED:
            return
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
        expected = sorted({_terminal(t) for t in e.expected})
        msg = f"unexpected {found}, expected {' or '.join(expected)}"
    elif isinstance(e, UnexpectedEOF):
        msg = "unexpected end of file"
    else:  # pragma: no cover - lark has no other kinds
        msg = "syntax error"
    return UserError(msg, where, src)


class _Sources:
    """What one program's parse has read: the folders includes may resolve in, each library
    read (by real path) with what it brought, and the limits in force."""

    def __init__(self, file: str):
        base = Path.cwd() if file.startswith("<") else Path(file).resolve().parent
        self.roots = [base] + _library_folders()
        self.read: dict[str, tuple[list, list]] = {}
        self.limits = source_limits()


def parse_collect(text: str, file: str = "<program>", _including: tuple = (),
                  _sources: "_Sources | None" = None) -> tuple[Program, list[UserError]]:
    """Parse program text; return the program and the non-syntax problems found on the way.

    Included libraries are read and their extensions take the include's place. A syntax error
    raises a UserError at once (the rest of the file cannot be trusted).
    """
    sources = _sources or _Sources(file)
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_LINE:
            raise UserError(f"line {n} has {len(line):,} characters; lines hold at most "
                            f"{MAX_LINE:,}", SourceLocation(file, n, MAX_LINE + 1), line)
    most = sources.limits["source_tokens"]
    if len(text) > most:        # a cheap count before the parser, which takes ~30 us a token
        tokens = 0
        for n, line in enumerate(lines, 1):
            tokens += len(_TOKEN.findall(_COMMENT.sub("", line)))
            if tokens > most:
                var, _, bounds = SOURCE_LIMITS["source_tokens"]
                raise UserError(f"the file passes the limit of {most:,} tokens at line {n} "
                                f"({bounds}; set {var} to raise it)",
                                SourceLocation(file, n, 1), line)
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, file, lines) from None
    _check_tree(tree, file, lines)
    builder = _Builder(file, text)
    try:
        items = builder.transform(tree)
    except VisitError as e:  # a bug of ours inside a callback: re-raise the original
        raise e.orig_exc from None
    errors = builder.errors
    extensions, seen = [], set()
    here = _including + (str(Path(file).resolve()) if not file.startswith("<") else file,)
    for item in items:
        found = [item] if isinstance(item, ext.ExtDecl) else _include(
            item, file, builder, here, sources) if isinstance(item, _Include) else []
        # a library reached twice (directly and through another) brings the same declarations
        for d in found:
            if d not in seen:
                seen.add(d)
                extensions.append(d)
    tensors = tuple(x for x in items if isinstance(x, TensorDecl))
    instrs = tuple(x for x in items if isinstance(x, Instruction))
    if _including and (tensors or instrs):
        builder.error("a library holds only extension declarations and includes, not tensors or "
                      "instructions", (tensors or instrs)[0].loc)
    return Program(tensors, instrs, file, text, tuple(extensions)), errors


def _check_tree(tree, file: str, lines: list[str]):
    """Refuse, located, what the grammar accepts but nothing should hold: statements nested
    deeper than MAX_NESTING (they would exhaust the recursion of every later pass) and integers
    of more than MAX_DIGITS digits. The walk is iterative."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Token):
            if node.type in ("INT", "SIGNED_INT") and len(node.lstrip("+-").replace("_", "")) > MAX_DIGITS:
                raise UserError(f"an integer of {len(node):,} digits: integers here have at most "
                                f"{MAX_DIGITS} digits", SourceLocation(file, node.line, node.column),
                                _line(lines, node.line))
            continue
        if node is None:
            continue
        if depth > MAX_NESTING:
            line, col = _tree_position(node)
            raise UserError(f"nested more than {MAX_NESTING} levels deep (parentheses or chained "
                            f"operators)", SourceLocation(file, line, col), _line(lines, line))
        stack.extend((c, depth + 1) for c in node.children)


def _tree_position(node) -> tuple[int, int]:
    while not isinstance(node, Token):
        meta = getattr(node, "meta", None)
        if meta is not None and not meta.empty:
            return meta.line, meta.column
        kids = [c for c in node.children if c is not None]
        if not kids:
            return 1, 1
        node = kids[0]
    return node.line, node.column


def _line(lines: list[str], n: int) -> str | None:
    return lines[n - 1] if 0 < n <= len(lines) else None


def _resolve(item: "_Include", file: str, sources: _Sources) -> tuple[Path | None, str | None]:
    """The real path of an include, or None and why it is refused. Relative paths are tried
    beside the including file, then in each library folder; the file found must lie inside the
    root program's folder tree or a library folder once every symbolic link is followed, and be
    a regular file."""
    text = item.path
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return None, "the path holds a control character"
    if not text.strip():
        return None, "the path is empty"
    path = Path(text)
    here = Path.cwd() if file.startswith("<") else Path(file).parent
    candidates = [path] if path.is_absolute() else \
        [here / path] + [lib / path for lib in _library_folders()]
    try:
        found = next((c for c in candidates if os.path.lexists(c)), None)
        if found is None:
            return None, "no such file (looked beside the including file and on the library " \
                         "path: --lib DIR or FRACTAL_LIB_PATH)"
        real = Path(os.path.realpath(found))
        if not any(real == root or root in real.parents for root in sources.roots):
            return None, ("outside the program's folder and the library path (includes resolve "
                          "inside the including program's folder tree, or in a --lib DIR or "
                          "FRACTAL_LIB_PATH folder)")
        mode = os.stat(real).st_mode
    except (OSError, ValueError) as e:
        return None, f"cannot read it: {getattr(e, 'strerror', None) or e}"
    if stat.S_ISDIR(mode):
        return None, "is a directory, not a library file"
    if not stat.S_ISREG(mode):
        return None, "not a regular file (a device, pipe or socket)"
    return real, None


def _include(item: "_Include", file: str, builder: "_Builder", including: tuple,
             sources: _Sources) -> list:
    """The extensions of an included library, read once per program."""
    path, why = _resolve(item, file, sources)
    if path is None:
        builder.error(f"cannot include '{_short(item.path)}': {why}", item.token)
        return []
    key = str(path)
    if key in including:
        builder.error(f"'{_short(item.path)}' includes itself (through {len(including)} file(s))",
                      item.token)
        return []
    if key in sources.read:
        return sources.read[key][0]
    if len(including) > sources.limits["include_depth"]:
        builder.error("cannot include '" + _short(item.path) + "': " + _over(
            "include_depth", f"a chain of {len(including)} includes"), item.token)
        return []
    if len(sources.read) >= sources.limits["include_files"]:
        builder.error("cannot include '" + _short(item.path) + "': " + _over(
            "include_files", f"more than {len(sources.read):,} libraries"), item.token)
        return []
    try:
        text = read_source(path, sources.limits["source_bytes"])
    except UserError as e:
        builder.error(f"cannot include '{_short(item.path)}': {e.message}", item.token)
        return []
    sources.read[key] = ([], [])
    library, errors = parse_collect(text, str(path), including, sources)
    sources.read[key] = (list(library.extensions), errors)
    builder.errors.extend(errors)
    return list(library.extensions)


def _short(text: str, most: int = 80) -> str:
    """An include path as a message quotes it: control characters as '?', at most `most`."""
    text = "".join("?" if ord(c) < 32 or ord(c) == 127 else c for c in text[:most + 1])
    return text if len(text) <= most else text[:most] + "..."


def parse(text: str, file: str = "<program>") -> Program:
    """Parse program text into a Program; any problem raises a UserError (or ErrorGroup)."""
    program, errors = parse_collect(text, file)
    if errors:
        raise errors[0] if len(errors) == 1 else ErrorGroup(errors)
    return program


def read_source(path: str | Path, max_bytes: int | None = None) -> str:
    """Read a program file, turning I/O and encoding problems into located user errors. Only a
    regular file of at most FRACTAL_MAX_SOURCE_BYTES is read (a pipe or device is refused before
    it is opened for reading; it could block or never end); a UTF-8 byte-order mark is dropped."""
    path = Path(path)
    where = str(path)
    if max_bytes is None:
        max_bytes = source_limits()["source_bytes"]
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise UserError(f"no such file: {path}", where) from None
    except IsADirectoryError:
        raise UserError(f"is a directory, not a program file: {path}", where) from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}", where) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise UserError(f"is a directory, not a program file: {path}", where)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"cannot read {path}: not a regular file (a device, pipe or socket)",
                            where)
        if info.st_size > max_bytes:
            raise UserError(f"cannot read {path}: it has {info.st_size:,} bytes, " + _over(
                "source_bytes", "too large").removeprefix("too large, "), where)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}", where) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserError(f"cannot read {path}: it has more than {max_bytes:,} bytes, " + _over(
            "source_bytes", "too large").removeprefix("too large, "), where)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"not UTF-8 text (byte {e.start}): {path}", where) from None
