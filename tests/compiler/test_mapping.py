"""Pinned mappings (compiler.mapping): a pin constrains the plan, never the bound; the answers
stay the reference's; a pin that cannot hold is an error located at its table in the file."""
import numpy as np
import pytest

import fractal
from compiler.bounds import plan_bounds
from fractal.cli import main

# c[64,128] = a[64,8] b[8,128] in f32 on tiny (4 leaves of 4 KiB, 2 pieces in flight: 2,048 B a
# piece). Pinned at the root to 2 x 2 parallel parts and 2 x 4 serial pieces, a leaf holds
# a[16,8] 512 B + b[8,16] 512 B + c[16,16] 1,024 B = 2,048 B: it fits, exactly.
PROGRAM = """tensor a : f32[64, 8] input
tensor b : f32[8, 128] input
tensor c : f32[64, 128] output
matmul c, a, b
"""
PIN = """[[pin]]
line = 4
parallel = {{ M = 2, N = 2 }}
serial = {{ M = 2, N = 4 }}
order = [{order}]
"""


def mapping(tmp_path, text, name="map.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def pinned(tmp_path, order):
    return fractal.compile(PROGRAM, "tiny", mapping(tmp_path, PIN.format(order=order)))


def test_the_loop_order_decides_which_operand_stays(tmp_path):
    """A piece covers 32 rows of M and 32 columns of N. An operand loads in a piece only when an
    axis it depends on has moved (docs/compiler.md, "Loop order and operand reuse"): with N
    innermost, a (rows of M) loads once per M piece, 2 times; b (columns of N) every piece, 8
    times. tiny's root broadcasts, so one send of a piece's operand serves both children that
    share it: a 32 x 8 x 4 B = 1,024 B a load, b 8 x 32 x 4 B = 1,024 B a load.

        M, N, K:  a 2 x 1,024 + b 8 x 1,024 = 10,240 B down
        N, M, K:  a 8 x 1,024 + b 4 x 1,024 = 12,288 B down
    and c comes back once per piece either way: 8 x 32 x 32 x 4 B = 32,768 B up."""
    mn, nm = pinned(tmp_path, '"M", "N", "K"').roots[0], pinned(tmp_path, '"N", "M", "K"').roots[0]
    for root in (mn, nm):
        assert [(s.name, s.pieces, s.ways) for s in root.splits] == [("M", 2, 2), ("N", 4, 2),
                                                                      ("K", 1, 1)]
        assert root.bytes_up == 32_768
    assert (mn.bytes_down, nm.bytes_down) == (10_240, 12_288)


def test_two_plans_of_one_instruction_share_one_bound(tmp_path):
    plans = [pinned(tmp_path, '"M", "N", "K"'), pinned(tmp_path, '"N", "M", "K"'),
             fractal.compile(PROGRAM, "tiny")]
    bounds = [plan_bounds(p)[0] for p in plans]
    assert bounds[0] == bounds[1] == bounds[2]
    for order in ('"M", "N", "K"', '"N", "M", "K"'):
        report = fractal.run(PROGRAM, "tiny", functional=False,
                             mapping=mapping(tmp_path, PIN.format(order=order)))
        assert 0 < report.to_json()["fraction_of_bound"] <= 1


def test_pinned_plans_compute_the_reference(tmp_path):
    for order in ('"M", "N", "K"', '"N", "M", "K"'):
        report = fractal.run(PROGRAM, "tiny", seed=3,
                             mapping=mapping(tmp_path, PIN.format(order=order)))
        ref = fractal.reference(PROGRAM, seed=3)
        a, b = (fractal.reference(PROGRAM, seed=3).program.tensor(n) for n in "ab")
        assert a.type.shape == (64, 8) and b.type.shape == (8, 128)
        np.testing.assert_allclose(report.outputs["c"], ref.outputs["c"], rtol=1e-5, atol=1e-5)


def test_a_pin_deeper_down_holds_for_every_node_of_its_level(tmp_path):
    """On tiny at depth 2 (fan-outs 2, 2), a pin at level 1 constrains every level-1 node of the
    instruction, and leaves level 0 to the search."""
    m = fractal.build_machine("tiny", depth=2, fanout=2)
    text = "[[pin]]\nline = 4\nlevel = 1\nparallel = { N = 2 }\n"
    plan = fractal.compile(PROGRAM, m, mapping(tmp_path, text))
    level1 = [n for (t, lv), n in plan.table.items() if lv == 1 and n.splits]
    assert level1 and all({s.name: s.ways for s in n.splits}["N"] == 2 for n in level1)


def cli(tmp_path, text, *extra):
    import contextlib
    import io
    prog = tmp_path / "p.fasm"
    prog.write_text(PROGRAM)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(["compile", str(prog), "--machine", "tiny", "--mapping",
                       str(mapping(tmp_path, text)), "--summary", *extra], io.StringIO())
    return status, err.getvalue()


@pytest.mark.parametrize("text, where, words", [
    ("[[pin]]\nline = 4\nparallel = { X = 2 }\n", "pin[1].parallel.X", "no axis 'X'"),
    ("[[pin]]\nline = 4\nparallel = { M = 4, N = 2 }\n", "pin[1].parallel", "more than the fan-out"),
    ("[[pin]]\nline = 4\nserial = { M = 128 }\n", "pin[1].serial.M", "cut into 128 parts"),
    ("[[pin]]\nline = 4\nserial = { M = 1, N = 1 }\nparallel = { M = 1, N = 1, K = 1 }\n",
     "pin[1]", "does not fit"),
    ("[[pin]]\nline = 3\n", "pin[1].line", "holds no instruction"),
    ("[[pin]]\nline = 4\nlevel = 1\n", "pin[1].level", "splits at levels 0 to 0"),
    ("[[pin]]\nline = 4\nserial = { M = 0 }\n", "pin[1].serial.M", "whole number"),
    ("[[pin]]\nline = 4\nserial = { M = 2 }\n[[pin]]\nline = 4\n", "pin[2]", "pinned already"),
    ("[[pin]]\nline = 4\norder = [\"M\", \"K\"]\n", "pin[1].order", "every axis once"),
    ("[[pin]]\nline = 4\nserial = { K = 2, M = 2 }\norder = [\"K\", \"M\", \"N\"]\n",
     "pin[1].order", "reduction axis is outside"),
    ("[[pin]]\nline = 4\nsplit = { M = 2 }\n", "pin[1].split", "unknown key"),
    ("[pin]\nline = 4\n", "pin", "array of tables"),
    ("[[pin]\n", "map.toml:1", "invalid TOML"),
])
def test_an_impossible_pin_is_a_located_error(tmp_path, text, where, words):
    status, err = cli(tmp_path, text)
    assert status == 2, err
    assert "Traceback" not in err and "internal error" not in err
    assert where in err and words in err, err


def test_a_pin_on_data_movement_and_a_missing_file_are_located(tmp_path):
    prog = tmp_path / "cp.fasm"
    prog.write_text("tensor a : f32[4, 4] input\ntensor b : f32[4, 4] output\ncopy b, a\n")
    import contextlib
    import io
    for path, where, words in ((mapping(tmp_path, "[[pin]]\nline = 3\n"), "pin[1]", "no cuts to pin"),
                               (tmp_path / "none.toml", "--mapping", "not found")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = main(["compile", str(prog), "--machine", "tiny", "--mapping", str(path)],
                          io.StringIO())
        assert status == 2 and where in err.getvalue() and words in err.getvalue(), err.getvalue()
