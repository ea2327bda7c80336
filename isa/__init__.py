"""The program side: what a fractal program is and means.

Program text -> `parse` -> `check` -> a frozen, typed `Program`; `run_reference` gives its meaning.

The modules import one way, each only from those before it (none inside a function):
errors -> program -> opcodes -> extensions (declarations) -> parser -> checker (checks, and the
opcode table with each extension's instantiated, checked body) -> limits -> reference (the
numpy semantics, extension bodies included).
"""
from isa.errors import ErrorGroup, FractalError, InternalError, SourceLocation, UserError
from isa.program import DTYPES, Instruction, Program, TensorDecl, TensorType
from isa.opcodes import OPCODES, OpSpec
from isa.parser import parse
from isa.checker import check, check_program, load_program, parse_program

__all__ = ["ErrorGroup", "FractalError", "InternalError", "SourceLocation", "UserError", "DTYPES",
           "Instruction", "Program", "TensorDecl", "TensorType", "OPCODES", "OpSpec", "parse",
           "check", "check_program", "load_program", "parse_program"]
