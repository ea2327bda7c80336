"""Semantic checks of a parsed program; every problem in the file is collected and reported.

A program that passes `check` runs: every operand is declared, every instruction has the
operands and attributes its opcode needs with shapes and dtypes that agree, nothing writes an
input or param, nothing reads an internal tensor before it is written, every output is written.
"""
from __future__ import annotations

from pathlib import Path

from isa.errors import ErrorGroup, SourceLocation, UserError, did_you_mean
from isa.extensions import check_declarations, opcode_table
from isa.opcodes import REQUIRED, OpSpec, RuleBroken
from isa.parser import parse_collect, read_source
from isa.program import Instruction, Program

__all__ = ["check", "check_program", "load_program", "parse_program"]


class _Checker:
    def __init__(self, program: Program, opcodes: dict[str, OpSpec]):
        self.p = program
        self.opcodes = opcodes
        self.errors: list[UserError] = []

    def error(self, message: str, loc: SourceLocation | None, hint: str | None = None):
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
