"""Semantic checks of a parsed program; every problem in the file is collected and reported.

A program that passes `check` runs: every operand is declared, every instruction has the
operands and attributes its opcode needs with shapes and dtypes that agree, nothing writes an
input or param, nothing reads an internal tensor before it is written, every output is written.

A program is checked against its opcode table: the core opcodes and its extensions. An
extension's entry (`extension_spec`) checks each use by instantiating the declared body at the
use's sizes (`instantiate`) and checking that body like a program, against the table of the
extensions declared before it; so checking and the opcode table live together here.
`parse_program` and `load_program` parse (`isa/parser.py`) and check in one step.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from isa.errors import MAX_ERRORS_COLLECTED, ErrorGroup, SourceLocation, UserError, did_you_mean
from isa.extensions import EXT_LIMITS, ExtDecl, bind_sizes, check_declarations, eval_dim, \
    ext_limits, leaf_pieces, piece_count
from isa.opcodes import OPCODES, REQUIRED, AttrSpec, OpSpec, RuleBroken, instruction_ops
from isa.parser import parse_collect, read_source
from isa.program import Instruction, Program, TensorDecl, TensorType

__all__ = ["check", "check_program", "load_program", "parse_program", "opcode_table",
           "extension_spec", "instantiate", "leaf_work", "program_ops"]


class _Checker:
    def __init__(self, program: Program, opcodes: dict[str, OpSpec]):
        self.p = program
        self.opcodes = opcodes
        self.errors: list[UserError] = []

    def error(self, message: str, loc: SourceLocation | None, hint: str | None = None):
        if len(self.errors) >= MAX_ERRORS_COLLECTED:
            return
        self.errors.append(UserError(message, loc, self.p.source_line(loc), hint))

    def run(self) -> list[UserError]:
        declared = self.declarations()
        written = {t.name for t in self.p.tensors if t.role in ("input", "param")}
        for ins in self.p.instructions:
            self.instruction(ins, declared, written)
        for t in self.p.outputs:
            if t.name not in written:
                self.error(f"output '{t.name}' is never written", t.loc)
        if not self.p.outputs:
            self.error("the program declares no output tensor (add the role 'output' to a "
                       "declaration)", SourceLocation(self.p.file, 1, 1))
        return self.errors

    def declarations(self) -> dict:
        declared = {}
        for t in self.p.tensors:
            if t.name in declared:
                first = declared[t.name].loc
                self.error(f"tensor '{t.name}' is declared twice (first at line {first.line})"
                           if first else f"tensor '{t.name}' is declared twice", t.loc)
                continue
            if t.name in self.opcodes:
                self.error(f"tensor name '{t.name}' is an opcode; choose another name", t.loc)
            declared[t.name] = t
        return declared

    def instruction(self, ins: Instruction, declared: dict, written: set):
        spec = self.opcodes.get(ins.opcode)
        if spec is None:
            hint = did_you_mean(ins.opcode, self.opcodes)
            if ins.opcode in declared:
                hint = "a line starts with its opcode: OPCODE dst, src, ..."
            self.error(f"unknown opcode '{ins.opcode}'", ins.loc, hint)
            written.update(ins.operands[:1])  # assume a destination, to avoid follow-on errors
            return
        ok = self.operand_count(ins, spec)
        for i, name in enumerate(ins.operands):
            if name not in declared:
                self.error(f"undeclared tensor '{name}'", ins.operand_loc(i),
                           did_you_mean(name, declared))
                ok = False
        attrs_ok = self.attributes(ins, spec)
        if not ok:
            written.update(ins.operands[:spec.outputs])
            return
        dsts, srcs = ins.operands[:spec.outputs], ins.operands[spec.outputs:]
        for i, name in enumerate(srcs):
            if name not in written:
                self.error(f"'{name}' is read before it is written (internal tensors start "
                           f"undefined)", ins.operand_loc(spec.outputs + i))
        for i, name in enumerate(dsts):
            role = declared[name].role
            if role in ("input", "param"):
                self.error(f"'{name}' is {'an' if role == 'input' else 'a'} {role}, which "
                           f"instructions may not write",
                           ins.operand_loc(i))
        written.update(dsts)
        if not attrs_ok:
            return
        types = [declared[n].type for n in ins.operands]
        try:
            spec.rule(types[:spec.outputs], types[spec.outputs:], spec.full_attrs(ins.attr))
        except RuleBroken as e:
            if e.attr is not None:
                loc = ins.attr_loc(e.attr)
            elif e.operand is not None:
                loc = ins.operand_loc(e.operand)
            else:
                loc = ins.loc
            prefix = "" if e.message.startswith(ins.opcode) else f"{ins.opcode}: "
            self.error(prefix + e.message, loc)

    def operand_count(self, ins: Instruction, spec: OpSpec) -> bool:
        n = len(ins.operands)
        if spec.inputs is None:
            if n >= spec.outputs + 1:
                return True
            want = f"at least {spec.outputs + 1} operands ({spec.outputs} destination, then sources)"
        elif spec.inputs == 0:
            if n == spec.outputs:
                return True
            want = f"{spec.outputs} operand{'s' if spec.outputs > 1 else ''} (no sources)"
        else:
            if n == spec.outputs + spec.inputs:
                return True
            want = (f"{spec.outputs + spec.inputs} operands ({spec.outputs} destination"
                    f"{'s' if spec.outputs > 1 else ''}, {spec.inputs} source"
                    f"{'s' if spec.inputs > 1 else ''})")
        self.error(f"{ins.opcode} takes {want}, got {n}", ins.loc)
        return False

    def attributes(self, ins: Instruction, spec: OpSpec) -> bool:
        ok = True
        for key, value in ins.attrs:
            aspec = spec.attrs.get(key)
            if aspec is None:
                known = ", ".join(spec.attrs) or "none"
                self.error(f"{ins.opcode} has no attribute '{key}' (its attributes: {known})",
                           ins.attr_loc(key), did_you_mean(key, spec.attrs))
                ok = False
            elif not aspec.accepts(value):
                self.error(f"{ins.opcode} attribute '{key}' must be {aspec.describe()}, "
                           f"got {value!r}", ins.attr_loc(key))
                ok = False
        for key, aspec in spec.attrs.items():
            if aspec.default is REQUIRED and key not in ins.attr:
                self.error(f"{ins.opcode} needs the attribute '{key}' ({aspec.describe()})", ins.loc)
                ok = False
        return ok


# ---------------------------------------------------------------- the opcode table

@lru_cache(maxsize=4096)
def instantiate(decl: ExtDecl, types: tuple, attrs: tuple, earlier: tuple = ()) -> Program:
    """The body of one use as a checked program (operands as inputs and outputs)."""
    sizes = bind_sizes(decl, types)
    attr = dict(attrs)
    tensors = [TensorDecl(o.name, t, "output" if o.output else "input", o.loc)
               for o, t in zip(decl.operands, types)]
    for tmp in decl.temps:
        shape = tuple(eval_dim(x, sizes) for x in tmp.dims)
        if any(n < 1 for n in shape):
            raise RuleBroken(f"{decl.name}: temporary '{tmp.name}' gets shape {list(shape)} for "
                             f"these operands")
        tensors.append(TensorDecl(tmp.name, TensorType(tmp.dtype, shape), None, tmp.loc))
    # a body attribute may name an attribute of the extension, or a size symbol (never a cut one)
    body = tuple(Instruction(i.opcode, i.operands,
                             tuple((k, attr.get(v, sizes.get(v, v)) if isinstance(v, str) else v)
                                   for k, v in i.attrs),
                             i.loc, i.operand_locs, i.attr_locs) for i in decl.body)
    program = Program(tuple(tensors), body, decl.loc.file if decl.loc else "<extension>", decl.source)
    errors = check(program, _table(earlier))
    if errors:
        e = errors[0]
        where = f" (line {e.where.line})" if isinstance(e.where, SourceLocation) else ""
        raise RuleBroken(f"in the body of extension {decl.name}{where}: {e.message}")
    return program


def extension_spec(decl: ExtDecl, earlier: tuple[ExtDecl, ...] = ()) -> OpSpec:
    """The opcode-table entry of a declared extension."""
    entry = _SPECS.get(id(earlier))
    if entry is not None and entry[0] is earlier and entry[1].decl is decl:
        return entry[1]         # the prefix tuple of a table built here (a Task's ext_key)
    return _table(tuple(earlier) + (decl,))[decl.name]


#: id(earlier declarations) -> (that tuple, the entry built with it), for every table built:
#: the tuples are kept, so their ids stay theirs; looking up by identity hashes nothing
_SPECS: dict[int, tuple] = {}
_SPECS_KEPT = 65536


def _make_spec(decl: ExtDecl, earlier: tuple, table: Mapping) -> OpSpec:
    n_out = len(decl.outputs)
    static = []

    def static_expansion() -> int:
        """Core instructions of one piece of the body, each nested use counted by its own
        body (pieces of nested uses not counted): a lower bound, known before any use."""
        if not static:
            n = 0
            for ins in decl.body:
                sub = table.get(ins.opcode)
                n += sub.expansion.static() if sub is not None and sub.decl is not None else 1
            static.append(n)
        return static[0]

    def body(outs, ins, a):
        """The instantiated body for operands of these types (a piece no larger than the caps)."""
        types = tuple(outs) + tuple(ins)
        full = tuple((k, a.get(k, v)) for k, v in decl.attrs)
        return instantiate(decl, types, full, earlier)

    def rule(outs, ins, a):
        types = tuple(outs) + tuple(ins)
        # charged before anything is expanded: the pieces times the body's core instructions
        # (nested uses counted once) is a lower bound of the expansion
        _charge(decl, piece_count(decl, types) * static_expansion())
        for piece, _ in leaf_pieces(decl, types, distinct=True):
            body(piece[:n_out], piece[n_out:], a)
        _charge(decl, expansion(outs, ins, a))
        for s in decl.splits:
            if s.reduce:
                g = table[s.reduce]
                try:
                    g.rule(list(outs), list(outs) * 2, g.full_attrs({}))
                except RuleBroken as e:
                    raise RuleBroken(f"{decl.name}: reduction '{s.reduce}' does not combine its "
                                     f"partial results: {e.message}") from None

    @lru_cache(maxsize=1024)
    def _expansion(types: tuple, attrs: tuple) -> int:
        a = dict(attrs)
        most = 0
        for piece, _ in leaf_pieces(decl, types, distinct=True):
            program = body(piece[:n_out], piece[n_out:], a)
            ptypes = program.types
            n = 0
            for ins in program.instructions:
                sub = table[ins.opcode]
                if sub.decl is None:
                    n += 1
                else:
                    ts = [ptypes[x] for x in ins.operands]
                    n += sub.expansion(ts[:sub.outputs], ts[sub.outputs:], sub.full_attrs(ins.attr))
            most = max(most, n)
        return most * piece_count(decl, types)

    def expansion(outs, ins, a):
        """Core instructions one use runs on a leaf: every piece's body, nested uses expanded."""
        return _expansion(tuple(outs) + tuple(ins), _key(a))
    expansion.static = static_expansion

    @lru_cache(maxsize=1024)
    def _work_of(types: tuple, attrs: tuple) -> tuple:
        a = dict(attrs)
        total = []
        for piece, _ in leaf_pieces(decl, types):
            total += _work(body(piece[:n_out], piece[n_out:], a), table)
        return tuple(total)

    def work(outs, ins, a):
        return list(_work_of(tuple(outs) + tuple(ins), _key(a)))

    def ops(outs, ins, a):
        return sum(n for _, n in _work_of(tuple(outs) + tuple(ins), _key(a)))

    attrs = {k: AttrSpec(_attr_kind(v), v) for k, v in decl.attrs}
    return OpSpec(decl.name, n_out, len(decl.inputs), rule, ops, "extension", attrs,
                  f"extension declared at {decl.loc}" if decl.loc else "extension",
                  decl=decl, ext_key=(decl, earlier), body=body, work=work, table=table,
                  expansion=expansion)


def _key(a: dict) -> tuple:
    return tuple(sorted(a.items()))


def _charge(decl: ExtDecl, n: int):
    caps = ext_limits()
    if n > caps["expansion"]:
        var = EXT_LIMITS["expansion"][0]
        raise RuleBroken(f"one use of extension {decl.name} runs {n:,} core instructions on a "
                         f"leaf (its pieces times its body, nested extensions expanded), over the "
                         f"limit of {caps['expansion']:,} (set {var} to raise it)")


def _attr_kind(v) -> str:
    return "int" if isinstance(v, int) else "ints" if isinstance(v, tuple) else "number"


class _Table(Mapping):
    """The core opcodes and the first `n` extensions of a program's declarations. The tables of
    every prefix share one index of the extensions (a program of n declarations builds n
    tables in O(n), not O(n^2)); callers must not change it."""

    __slots__ = ("_ext", "_n")

    def __init__(self, ext: dict, n: int):
        self._ext = ext         # name -> [(position, spec)], shared, filled in order
        self._n = n

    def __getitem__(self, name):
        for i, spec in reversed(self._ext.get(name, ())):
            if i < self._n:
                return spec
        return OPCODES[name]

    def __contains__(self, name):
        return name in OPCODES or any(i < self._n for i, _ in self._ext.get(name, ()))

    def __iter__(self):
        yield from OPCODES
        for name, entries in self._ext.items():
            if name not in OPCODES and entries[0][0] < self._n:
                yield name

    def __len__(self):
        return sum(1 for _ in self)


@lru_cache(maxsize=64)
def _table(decls: tuple) -> Mapping:
    """The core opcodes and these extensions (shared: callers must not change it)."""
    ext: dict[str, list] = {}
    for i, d in enumerate(decls):
        earlier = decls[:i]
        spec = _make_spec(d, earlier, _Table(ext, i))
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        _SPECS[id(earlier)] = (earlier, spec)
        ext.setdefault(d.name, []).append((i, spec))
    return _Table(ext, len(decls))


def opcode_table(program: Program) -> Mapping:
    """The core opcodes and the program's extensions."""
    return _table(tuple(getattr(program, "extensions", ())))


def _work(program: Program, table: Mapping) -> list[tuple[str, int]]:
    out = []
    types = program.types
    for ins in program.instructions:
        spec = table[ins.opcode]
        if spec.decl is not None:
            ts = [types[n] for n in ins.operands]
            out += spec.work(ts[:spec.outputs], ts[spec.outputs:], spec.full_attrs(ins.attr))
        else:
            out.append((spec.op_class, instruction_ops(ins, types, table)))
    return out


def leaf_work(spec: OpSpec, outs, ins, attrs: dict) -> list[tuple[str, int]]:
    """(op class, ops) of everything a leaf runs for one instruction: the instruction itself, or
    every core instruction of an extension's body (for each piece its caps allow)."""
    if spec.decl is None:
        return [(spec.op_class, int(spec.ops(outs, ins, attrs)))]
    return spec.work(outs, ins, attrs)


def program_ops(program: Program, opcodes: dict | None = None) -> int:
    """Arithmetic ops of a whole checked program (extensions: the ops of their bodies)."""
    if opcodes is None:
        opcodes = opcode_table(program)
    types = program.types
    return sum(instruction_ops(i, types, opcodes) for i in program.instructions)


# ---------------------------------------------------------------- programs

def check(program: Program, opcodes: dict[str, OpSpec] | None = None) -> list[UserError]:
    """Every semantic problem of the program, in source order (empty when it is valid).
    The opcodes are the core table and the program's extensions unless given."""
    if opcodes is None:
        errors = check_declarations(program.extensions)
        if errors:              # a broken declaration makes its uses meaningless: report it alone
            return errors
        opcodes = opcode_table(program)
    return _Checker(program, opcodes).run()


def _raise(errors: list[UserError]):
    errors = sorted(errors, key=lambda e: (e.where.line, e.where.col)
                    if isinstance(e.where, SourceLocation) else (0, 0))
    raise errors[0] if len(errors) == 1 else ErrorGroup(errors)


def check_program(program: Program, opcodes: dict[str, OpSpec] | None = None) -> Program:
    """The program itself when it is valid; otherwise raise every problem found."""
    errors = check(program, opcodes)
    if errors:
        _raise(errors)
    return program


def parse_program(text: str, file: str = "<program>") -> Program:
    """Parse and check program text, reporting the parser's and the checker's problems together."""
    program, errors = parse_collect(text, file)
    errors += check(program)
    if errors:
        _raise(errors)
    return program


def load_program(path: str | Path) -> Program:
    """Read, parse and check a program file."""
    return parse_program(read_source(path), str(path))
