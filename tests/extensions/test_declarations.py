"""Extension declarations: parsed, printed back, checked with located messages, included."""
import textwrap
from pathlib import Path

import pytest

from isa import ErrorGroup, UserError, load_program, parse_program

LIB = Path(__file__).resolve().parents[2] / "programs" / "lib"

SCALE = """\
extension scale2(y: f32[R, C] <- x: f32[R, C])
  split R
  split C
  add y, x, x
end
"""
USE = "tensor a : f32[3, 5] input\ntensor b : f32[3, 5] output\nscale2 b, a\n"


def errors_of(text: str) -> str:
    with pytest.raises(UserError) as info:
        parse_program(text, "ext.fasm")
    return info.value.format()


def test_round_trip_with_extensions():
    p = parse_program(SCALE + USE, "ok.fasm")
    assert [e.name for e in p.extensions] == ["scale2"]
    again = parse_program(p.to_text(), "printed.fasm")
    assert again == p and again.to_text() == p.to_text()


def test_included_library_round_trips(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "scale.fasm").write_text(SCALE)
    (tmp_path / "main.fasm").write_text('include "lib/scale.fasm"\n' + USE)
    p = load_program(tmp_path / "main.fasm")
    assert parse_program(p.to_text(), str(tmp_path / "again.fasm")) == p


CASES = {
    "undefined name in the body": ("extension f(y: f32[R] <- x: f32[R])\n  split R\n  relu y, z\nend\n", """
        ext.fasm:3:11: error: undefined name 'z' in extension 'f' (not an operand or temporary)
              relu y, z
                      ^
        """),
    "recursive definition": ("extension f(y: f32[R] <- x: f32[R])\n  f y, x\nend\n", """
        ext.fasm:2:3: error: extension 'f' uses itself: recursive definitions are not allowed
              f y, x
              ^
        """),
    "split on a missing axis": ("extension f(y: f32[R] <- x: f32[R])\n  split Q\n  relu y, x\nend\n", """
        ext.fasm:2:9: error: split rule on 'Q', which is not a size of any operand of 'f'
              split Q
                    ^
        """),
    "unknown reduction": ("extension f(y: f32[R] <- x: f32[R, N])\n  split N reduce addd\n"
                          "  reduce_sum y, x, axis=1\nend\n", """
        ext.fasm:2:9: error: unknown reduction instruction 'addd'
              split N reduce addd
                    ^
            hint: did you mean 'add'?
        """),
    "reduction declared later": (
        "extension f(y: f32[R] <- x: f32[R, N])\n  split N reduce topk_x\n  reduce_sum y, x, axis=1\nend\n"
        "extension topk_x(a: f32[R], b: f32[R] <- x: f32[R], y: f32[R], z: f32[R], w: f32[R])\n"
        "  add a, x, y\n  add b, z, w\nend\n", """
        ext.fasm:2:9: error: unknown reduction instruction 'topk_x'
              split N reduce topk_x
                    ^
        """),
    "concatenating split missing from an output": (
        "extension f(y: f32[R] <- x: f32[R, N])\n  split N\n  reduce_sum y, x, axis=1\nend\n", """
        ext.fasm:2:9: error: splitting 'N' concatenates results, but not every output has 'N': give a reduction (split N reduce INSTRUCTION)
              split N
                    ^
        """),
    "reduction with the wrong number of results": (
        "extension two(a: f32[R], b: f32[R] <- x: f32[R], y: f32[R], z: f32[R], w: f32[R])\n"
        "  add a, x, y\n  add b, z, w\nend\n"
        "extension f(y: f32[R] <- x: f32[R, N])\n  split N reduce two\n  reduce_sum y, x, axis=1\nend\n", """
        ext.fasm:6:9: error: reduction 'two' takes 2 destination(s) and 4 source(s); it must combine two sets of 1 partial result(s) into one (1 destination(s), 2 sources)
              split N reduce two
                    ^
        """),
    "a later extension used in a body": (
        "extension f(y: f32[R] <- x: f32[R])\n  g y, x\nend\nextension g(y: f32[R] <- x: f32[R])\n  relu y, x\nend\n", """
        ext.fasm:2:3: error: extension 'f' uses 'g', which is declared later: declare it first
              g y, x
              ^
        """),
    "a name taken by a core opcode": ("extension relu(y: f32[R] <- x: f32[R])\n  copy y, x\nend\n", """
        ext.fasm:1:11: error: extension 'relu' is already a core opcode
            extension relu(y: f32[R] <- x: f32[R])
                      ^
        """),
    "unknown size in a temporary": ("extension f(y: f32[R] <- x: f32[R])\n  tensor t : f32[R*Q]\n"
                                    "  relu y, x\nend\n", """
        ext.fasm:2:10: error: size 'Q' of temporary 't' is not a size of the signature
              tensor t : f32[R*Q]
                     ^
        """),
}


@pytest.mark.parametrize("name", list(CASES))
def test_declaration_errors(name):
    text, message = CASES[name]
    use = "tensor a : f32[4] input\ntensor b : f32[4] output\ncopy b, a\n"
    assert errors_of(text + use) == textwrap.dedent(message).strip("\n")


def test_reduction_arity_and_leaf_caps_on_reduced_axes():
    text = ("extension f(y: f32[R] <- x: f32[R, N])\n  split N reduce relu leaf 4\n"
            "  reduce_sum y, x, axis=1\nend\n" + "tensor a : f32[4] input\ntensor b : f32[4] output\n"
            "copy b, a\n")
    with pytest.raises(ErrorGroup) as info:
        parse_program(text, "ext.fasm")
    assert [e.message for e in info.value.errors] == [
        "reduction 'relu' takes 1 destination(s) and 1 source(s); it must combine two sets of 1 "
        "partial result(s) into one (1 destination(s), 2 sources)",
        "'leaf' caps a split whose pieces concatenate; 'N' is reduced"]


def test_a_library_included_twice_is_read_once(tmp_path):
    (tmp_path / "scale.fasm").write_text(SCALE)
    (tmp_path / "other.fasm").write_text('include "scale.fasm"\n')
    (tmp_path / "main.fasm").write_text('include "scale.fasm"\ninclude "other.fasm"\n' + USE)
    assert [e.name for e in load_program(tmp_path / "main.fasm").extensions] == ["scale2"]


def test_use_that_breaks_the_body_is_located_at_the_use():
    text = ("extension mm(c: f32[M, N] <- a: f32[M, K], b: f32[K, N])\n  split M\n  matmul c, a, b\nend\n"
            "tensor a : f32[4, 3] input\ntensor b : f32[5, 2] param\ntensor c : f32[4, 2] output\n"
            "mm c, a, b\n")
    assert errors_of(text) == (
        "ext.fasm:8:10: error: mm: size K is 3 by an earlier operand but 5 in 'b' (f32[5, 2])\n"
        "    mm c, a, b\n             ^")


def test_reduction_whose_shapes_do_not_match():
    text = ("extension f(y: f32[R] <- x: f32[R, N])\n  split N reduce matmul\n"
            "  reduce_sum y, x, axis=1\nend\n"
            "tensor a : f32[4, 6] input\ntensor b : f32[4] output\nf b, a\n")
    message = errors_of(text)
    assert message.startswith("ext.fasm:7:1: error: f: reduction 'matmul' does not combine its "
                              "partial results: matmul A must have rank at least 2 ([..., rows, columns]), found f32[4]")


def test_include_problems(tmp_path):
    (tmp_path / "a.fasm").write_text('include "b.fasm"\n')
    (tmp_path / "b.fasm").write_text('include "a.fasm"\n')
    (tmp_path / "main.fasm").write_text('include "a.fasm"\ninclude "missing.fasm"\n' + USE)
    with pytest.raises(ErrorGroup) as info:
        load_program(tmp_path / "main.fasm")
    messages = [e.message for e in info.value.errors]
    assert any("'a.fasm' includes itself" in m for m in messages)
    assert any("cannot include 'missing.fasm': no such file" in m for m in messages)


def test_library_may_not_hold_instructions(tmp_path):
    (tmp_path / "lib.fasm").write_text(USE)
    (tmp_path / "main.fasm").write_text('include "lib.fasm"\n' + USE)
    with pytest.raises(UserError, match="a library holds only extension declarations"):
        load_program(tmp_path / "main.fasm")


def test_shipped_libraries_parse():
    for lib in LIB.glob("*.fasm"):
        text = lib.read_text() + "tensor q : f32[1] input\ntensor r : f32[1] output\ncopy r, q\n"
        assert parse_program(text, str(lib)).extensions
