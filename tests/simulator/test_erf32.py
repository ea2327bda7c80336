"""The fast float32 erf equals the leaf kernel's (math.erf in float64, rounded once) bit for bit;
scripts/check_erf32.py checks every float32 input, this a sample and the edges."""
import math

import numpy as np

from simulator.erf32 import erf32_k, polynomial
from simulator.kernels import _erf_k


def _edges() -> np.ndarray:
    cells = np.arange(0, 6.25, 0.125)
    near = np.concatenate([cells, np.nextafter(cells, 0), np.nextafter(cells, 7), [6.0, 7.0, 1e30]])
    tiny = [0.0, 1e-45, 1.4e-45, 1.2e-38, 1e-30, 1e-10, 2 ** -12]
    x = np.concatenate([near, tiny, [np.inf, np.nan]]).astype(np.float32)
    return np.concatenate([x, -x])


def test_erf32_equals_the_leaf_kernel_bit_for_bit():
    rng = np.random.default_rng(0)
    sample = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = (rng.standard_normal(1 << 18) * 3).astype(np.float32)
    x = np.concatenate([_edges(), sample, normal])
    got, want = np.empty_like(x), np.empty(x.size, np.float64)
    erf32_k(x, got, 0, x.size)
    _erf_k(x, want)
    want = want.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan) and nan.sum() > 0
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))   # -0 too


def test_the_polynomial_is_erf_to_the_last_bits():
    # within a few float64 ulps of math.erf (itself within 1 of erf), odd, 1 from 6 on
    for v in (0.1, 0.49999, 0.5, 1.0, 2.5, 3.9, 5.99):
        assert abs(polynomial(v) - math.erf(v)) <= 4 * math.ulp(math.erf(v))
        assert polynomial(-v) == -polynomial(v)
    assert polynomial(6.0) == 1.0 and polynomial(50.0) == 1.0
    assert math.isnan(polynomial(math.nan))
