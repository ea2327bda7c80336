"""Every shipped program parses, checks, and prints back to text that parses to an equal program."""
from pathlib import Path

import pytest

from isa import load_program, parse_program
from isa.opcodes import OPCODES

PROGRAMS = sorted((Path(__file__).resolve().parents[2] / "programs").glob("*.fasm"))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_round_trip(path):
    program = load_program(path)
    text = program.to_text()
    again = parse_program(text, "printed.fasm")
    assert again == program
    assert again.to_text() == text        # the canonical text is a fixed point


def test_programs_cover_every_core_opcode():
    """Directly, or in the body of an extension they use."""
    used = set()
    for path in PROGRAMS:
        program = load_program(path)
        used |= {i.opcode for i in program.instructions}
        used |= {i.opcode for e in program.extensions for i in e.body}
    assert set(OPCODES) <= used


def test_required_programs_exist():
    names = {p.name for p in PROGRAMS}
    assert {"mlp.fasm", "cnn.fasm", "kmeans_step.fasm", "knn.fasm"} <= names
