"""Every kind of bad program gets one exact, located message (file:line:col, source, caret)."""
import textwrap

import pytest

from isa import ErrorGroup, UserError, parse_program

HEAD = """\
tensor x  : f32[4, 8]  input
tensor w  : f32[8, 3]  param
tensor y  : f32[4, 3]  output
"""


def errors_of(text: str) -> str:
    with pytest.raises(UserError) as info:
        parse_program(text, "bad.fasm")
    return info.value.format()


def expect(body: str, message: str, head: str = HEAD):
    assert errors_of(head + body) == textwrap.dedent(message).strip("\n")


CASES = {
    "syntax: missing comma": ("matmul y x, w\n", """
        bad.fasm:4:10: error: unexpected 'x', expected ',' or '=' or end of line
            matmul y x, w
                     ^
        """),
    "syntax: bad character": ("matmul y, x, w;\n", """
        bad.fasm:4:15: error: unexpected character ';'
            matmul y, x, w;
                          ^
        """),
    "syntax: unfinished declaration": ("tensor z : f32[4,\n", """
        bad.fasm:4:18: error: unexpected end of line, expected '(' or ']' or a name or an integer
            tensor z : f32[4,
                             ^
        """),
    "unknown opcode with hint": ("matmull y, x, w\n", """
        bad.fasm:4:1: error: unknown opcode 'matmull'
            matmull y, x, w
            ^
            hint: did you mean 'matmul'?
        """),
    "undeclared tensor with hint": ("matmul y, x, ww\n", """
        bad.fasm:4:14: error: undeclared tensor 'ww'
            matmul y, x, ww
                         ^
            hint: did you mean 'w'?
        """),
    "wrong operand count": ("matmul y, x\n", """
        bad.fasm:4:1: error: matmul takes 3 operands (1 destination, 2 sources), got 2
            matmul y, x
            ^
        """),
    "unknown attribute with hint": ("matmul y, x, w\nrelu y, y, strid=1\n", """
        bad.fasm:5:12: error: relu has no attribute 'strid' (its attributes: none)
            relu y, y, strid=1
                       ^
        """),
    "missing attribute": ("tensor s : f32[4]\nreduce_sum s, x\nmatmul y, x, w\n", """
        bad.fasm:5:1: error: reduce_sum needs the attribute 'axis' (an integer)
            reduce_sum s, x
            ^
        """),
    "attribute of the wrong type": ("tensor s : f32[4]\nreduce_sum s, x, axis=1.5\nmatmul y, x, w\n", """
        bad.fasm:5:18: error: reduce_sum attribute 'axis' must be an integer, got 1.5
            reduce_sum s, x, axis=1.5
                             ^
        """),
    "shape mismatch": ("matmul y, w, x\n", """
        bad.fasm:4:11: error: matmul needs A[M,K] and B[K,N] with equal K, found A f32[8, 3] and B f32[4, 8]
            matmul y, w, x
                      ^
        """),
    "destination shape": ("tensor t : f32[4, 8]\nmatmul t, x, w\nmatmul y, x, w\n", """
        bad.fasm:5:8: error: matmul: destination is f32[4, 8] but A f32[4, 8] times B f32[8, 3] gives [4, 3]
            matmul t, x, w
                   ^
        """),
    "dtype mismatch": ("tensor i : i32[4, 3] input\nmatmul y, x, w\nadd y, y, i\n", """
        bad.fasm:6:1: error: add: operands must share one dtype, found f32[4, 3], f32[4, 3], i32[4, 3]
            add y, y, i
            ^
        """),
    "broadcast failure": ("tensor b : f32[4] input\nmatmul y, x, w\nadd y, y, b\n", """
        bad.fasm:6:11: error: add operands do not broadcast: f32[4, 3] and f32[4] (trailing dimensions must be equal or 1)
            add y, y, b
                      ^
        """),
    "writing an input": ("relu x, x\nmatmul y, x, w\n", """
        bad.fasm:4:6: error: 'x' is an input, which instructions may not write
            relu x, x
                 ^
        """),
    "writing a param": ("copy w, w\nmatmul y, x, w\n", """
        bad.fasm:4:6: error: 'w' is a param, which instructions may not write
            copy w, w
                 ^
        """),
    "output never written": ("", """
        bad.fasm:3:8: error: output 'y' is never written
            tensor y  : f32[4, 3]  output
                   ^
        """),
    "read before written": ("tensor t : f32[4, 3]\nrelu y, t\n", """
        bad.fasm:5:9: error: 't' is read before it is written (internal tensors start undefined)
            relu y, t
                    ^
        """),
    "redeclared tensor": ("tensor x : f32[2]\nmatmul y, x, w\n", """
        bad.fasm:4:8: error: tensor 'x' is declared twice (first at line 1)
            tensor x : f32[2]
                   ^
        """),
    "unknown dtype": ("tensor h : u16[2]\nmatmul y, x, w\n", """
        bad.fasm:4:12: error: unknown dtype 'u16' (known: f32, i32, f16, bf16, i8)
            tensor h : u16[2]
                       ^
            hint: did you mean 'f16'?
        """),
    "unknown role": ("tensor h : f32[2] outptu\nmatmul y, x, w\n", """
        bad.fasm:4:19: error: unknown role 'outptu' (known: input, param, output, or none for an internal tensor)
            tensor h : f32[2] outptu
                              ^
            hint: did you mean 'output'?
        """),
    "zero dimension": ("tensor h : f32[2, 0]\nmatmul y, x, w\n", """
        bad.fasm:4:19: error: dimension 0 of tensor 'h' must be at least 1
            tensor h : f32[2, 0]
                              ^
        """),
    "attribute out of range": ("tensor s : f32[4]\nreduce_sum s, x, axis=2\nmatmul y, x, w\n", """
        bad.fasm:5:18: error: reduce_sum: axis=2 is out of range for rank 2 (valid: -2..1)
            reduce_sum s, x, axis=2
                             ^
        """),
    "operand after attribute": ("tensor s : f32[4]\nreduce_sum s, axis=1, x\nmatmul y, x, w\n", """
        bad.fasm:5:23: error: operand 'x' follows an attribute: write operands first, then key=value attributes
            reduce_sum s, axis=1, x
                                  ^
        """),
    "duplicate attribute": ("tensor s : f32[4]\nreduce_sum s, x, axis=1, axis=1\nmatmul y, x, w\n", """
        bad.fasm:5:26: error: attribute 'axis' is given twice
            reduce_sum s, x, axis=1, axis=1
                                     ^
        """),
    "pool window larger than input": ("tensor a : f32[1, 1, 2, 2] input\ntensor b : f32[1, 1, 1, 1]\n"
                                      "maxpool b, a, kernel=3\nmatmul y, x, w\n", """
        bad.fasm:6:15: error: maxpool window 3 does not fit input 2x2 with pad=0
            maxpool b, a, kernel=3
                          ^
        """),
    "slice past the end": ("tensor s : f32[4, 2]\nslice s, x, axis=1, start=7\nmatmul y, x, w\n", """
        bad.fasm:5:21: error: slice start=7 plus 2 elements runs past the end of axis 1 of f32[4, 8] (length 8)
            slice s, x, axis=1, start=7
                                ^
        """),
}


@pytest.mark.parametrize("name", list(CASES))
def test_error_message(name):
    body, message = CASES[name]
    expect(body, message)


def test_every_error_in_a_file_is_reported():
    text = HEAD + "matmull y, x, w\nrelu y, q\ncopy x, x\n"
    with pytest.raises(ErrorGroup) as info:
        parse_program(text, "bad.fasm")
    found = [(e.where.line, e.message) for e in info.value.errors]
    assert found == [
        (4, "unknown opcode 'matmull'"),
        (5, "undeclared tensor 'q'"),
        (6, "'x' is an input, which instructions may not write"),
    ]
    assert info.value.format().endswith("3 errors found")


def test_no_output_declared():
    assert errors_of("tensor x : f32[2] input\n") == (
        "bad.fasm:1:1: error: the program declares no output tensor (add the role 'output' to a "
        "declaration)\n    tensor x : f32[2] input\n    ^")


def test_valid_program_passes():
    p = parse_program(HEAD + "matmul y, x, w\nrelu y, y\n", "ok.fasm")
    assert [i.opcode for i in p.instructions] == ["matmul", "relu"]
    assert p.outputs[0].name == "y"
