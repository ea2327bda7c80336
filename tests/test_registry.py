"""Every core opcode has what each stage needs, and no stage knows an opcode the ISA lacks: its
entry in the opcode table (operands, shape rule, op count, op class), its reference semantics, its
access map (every opcode but data movement), its leaf kernel, its GPU-baseline op class and its
measured-baseline (PyTorch) op. Adding an opcode and forgetting one of them
fails here, naming the opcode and the stage."""
import ast
from pathlib import Path

import pytest

from compiler.rules import ACCESS_MAPS
from fractal.baseline.factors import OP_CLASSES as ROOFLINE_CLASSES, opcode_class
from isa.opcodes import OPCODES, OpClass
from isa.reference import SEMANTICS
from isa.program import DTYPES
from machine import DTYPE_NAMES, OP_CLASSES as MACHINE_CLASSES
from simulator.kernels import LEAF_KERNELS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("stage, table", [("reference semantics", SEMANTICS),
                                          ("leaf kernel", LEAF_KERNELS)])
def test_every_opcode_has_each_stage(stage, table):
    assert sorted(set(OPCODES) - set(table)) == [], f"opcodes without a {stage}"
    assert sorted(set(table) - set(OPCODES)) == [], f"{stage} for opcodes the ISA lacks"


def test_every_computing_opcode_has_an_access_map_and_only_those():
    for name, spec in OPCODES.items():
        assert (spec.op_class == OpClass.MOVE) == (name not in ACCESS_MAPS), name
    assert set(ACCESS_MAPS) <= set(OPCODES)


def test_every_opcode_has_a_roofline_class():
    for name in OPCODES:
        assert opcode_class(name) in ROOFLINE_CLASSES, name


def test_op_classes_are_closed():
    assert all(isinstance(spec.op_class, OpClass) for spec in OPCODES.values())
    # a machine prices every arithmetic class; data movement has no arithmetic
    assert set(MACHINE_CLASSES) == {c.value for c in OpClass} - {OpClass.MOVE.value}


def test_a_machine_prices_the_isa_data_types():
    """A machine file's per-type MAC rates name the ISA's data types, and only those."""
    assert set(DTYPE_NAMES) == set(DTYPES)


def test_measured_baseline_table_names_only_known_opcodes():
    """Read without importing PyTorch: the keys of TORCH_SEMANTICS are opcodes of the ISA."""
    tree = ast.parse((ROOT / "fractal" / "baseline" / "torch_ops.py").read_text())
    table = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == "TORCH_SEMANTICS" for t in n.targets))
    keys = {k.value for k in table.keys}
    assert keys == set(OPCODES), sorted(keys ^ set(OPCODES))
