"""The program side: what a fractal program is and means.

Program text -> `parse` -> `check` -> a frozen, typed `Program`; `run_reference` gives its meaning.
"""
from isa.errors import ErrorGroup, FractalError, InternalError, SourceLocation, UserError
from isa.program import DTYPES, Instruction, Program, TensorDecl, TensorType
from isa.opcodes import OPCODES, OpSpec
from isa.parser import parse
from isa.checker import check, check_program, load_program, parse_program

__all__ = ["ErrorGroup", "FractalError", "InternalError", "SourceLocation", "UserError", "DTYPES",
           "Instruction", "Program", "TensorDecl", "TensorType", "OPCODES", "OpSpec", "parse",
           "check", "check_program", "load_program", "parse_program"]
