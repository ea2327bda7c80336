"""The numpy oracle of tests/workloads/oracle.py on cases worked out by hand, then the ISA's window
operations in the reference interpreter against it where the CNN workloads do not reach: padding
that differs per side, padded cells in a max over negative values and in an average, an LRN of
even size."""
from __future__ import annotations

import numpy as np

import fractal
from tests.workloads import oracle


def test_conv2d_is_a_cross_correlation_over_the_zero_padded_input():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    w = np.zeros((1, 1, 3, 3))
    w[0, 0, 2, 0] = 1.0
    # pad (top 1, left 0, bottom 0, right 1), stride 2: Y[i, j] = Xp[2i + 2, 2j] = X[2i + 1, 2j]
    np.testing.assert_array_equal(oracle.conv2d(x, w, stride=2, pad=(1, 0, 0, 1))[0, 0],
                                  [[4, 6], [12, 14]])
    # all ones, 2 channels, pad 1: 18 taps in the middle, 2 x 4 in a corner, 2 x 6 on an edge
    y = oracle.conv2d(np.ones((1, 2, 3, 3)), np.ones((1, 2, 3, 3)), bias=[0.5], pad=1)[0, 0]
    np.testing.assert_array_equal(y, [[8.5, 12.5, 8.5], [12.5, 18.5, 12.5], [8.5, 12.5, 8.5]])


def test_a_grouped_conv2d_is_a_block_diagonal_one():
    # group g: output channels 3g..3g+2 read input channels 2g..2g+1 only
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((6, 2, 3, 3))
    full = np.zeros((6, 4, 3, 3))
    full[:3, :2], full[3:, 2:] = w[:3], w[3:]
    np.testing.assert_allclose(oracle.conv2d(x, w, stride=2, pad=1, groups=2),
                               oracle.conv2d(x, full, stride=2, pad=1), rtol=1e-12, atol=1e-12)


def test_pooling_by_hand():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    # kernel 3, stride 2, pad 1: windows over rows/cols -1..1 and 1..3
    np.testing.assert_array_equal(oracle.maxpool(-1 - x, 3, 2, 1)[0, 0], [[-1, -2], [-5, -6]])
    np.testing.assert_array_equal(oracle.avgpool(x, 3, 2, 1)[0, 0],
                                  [[(0 + 1 + 4 + 5) / 4, (1 + 2 + 3 + 5 + 6 + 7) / 6],
                                   [(4 + 5 + 8 + 9 + 12 + 13) / 6, 90 / 9]])
    np.testing.assert_allclose(oracle.avgpool(x, 3, 2, 1, count_include_pad=True)[0, 0],
                               [[10 / 9, 24 / 9], [51 / 9, 90 / 9]])


def test_lrn_by_hand():
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)
    # size 5: every window clipped to all 3 channels, squares 14, alpha / 5 all the same
    np.testing.assert_allclose(oracle.lrn(x, 5, 1.0, 1.0, 1.0).ravel(), np.array([1, 2, 3]) / 3.8)
    # size 2: channels c..c+1; squares 5, 13, 9
    np.testing.assert_allclose(oracle.lrn(x, 2, 1.0, 1.0, 1.0).ravel(),
                               [1 / 3.5, 2 / 7.5, 3 / 5.5])


WINDOWS = """
tensor x  : f32[2, 4, 9, 9] input
tensor w  : f32[6, 4, 3, 3] param
tensor c  : f32[2, 6, 5, 4]
tensor mp : f32[2, 6, 3, 2] output
tensor ap : f32[2, 6, 2, 3] output
tensor ln : f32[2, 6, 5, 4] output

conv2d  c, x, w, stride=2, pad=(1, 0, 2, 1)
maxpool mp, c, kernel=3, stride=2, pad=1
avgpool ap, c, kernel=3, stride=2, pad=(1, 1, 0, 2)
lrn     ln, c, size=4, alpha=0.5, beta=0.6, k=1.5
"""


def test_window_instructions_equal_the_oracle():
    rng = np.random.default_rng(7)
    data = {"x": rng.standard_normal((2, 4, 9, 9)).astype(np.float32),
            "w": (rng.standard_normal((6, 4, 3, 3)) / 6).astype(np.float32)}
    out = fractal.reference(fractal.load_program(WINDOWS), inputs=data).outputs
    c = oracle.conv2d(data["x"], data["w"], stride=2, pad=(1, 0, 2, 1))
    assert (c < 0).mean() > 0.3                 # negative values: padding must not win the max
    want = {"mp": oracle.maxpool(c, 3, 2, 1), "ap": oracle.avgpool(c, 3, 2, (1, 1, 0, 2)),
            "ln": oracle.lrn(c, 4, 0.5, 0.6, 1.5)}
    assert out.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
