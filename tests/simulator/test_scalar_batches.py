"""Scalar (rank-0) tensors through the batched leaf kernels: a program of element-wise
instructions on f32[] values equals the numpy reference (found by the fuzzing campaign)."""
import numpy as np

import fractal

SCALARS = """tensor x : f32[] input
tensor y : f16[] output
tensor t : f32[]
mul t, x, x
mul t, t, x
cast y, t
"""


def test_a_scalar_program_matches_numpy():
    program = fractal.load_program(SCALARS)
    x = np.array(1.5, np.float32)
    for machine in ("tiny", "f1"):
        out = fractal.run(program, machine, inputs={"x": x}).outputs["y"]
        assert out.shape == () and out == np.float16(x * x * x)
