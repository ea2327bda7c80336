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
    used = {i.opcode for p in PROGRAMS for i in load_program(p).instructions}
    assert used == set(OPCODES)


def test_required_programs_exist():
    names = {p.name for p in PROGRAMS}
    assert {"mlp.fasm", "cnn.fasm", "kmeans_step.fasm", "knn.fasm"} <= names
