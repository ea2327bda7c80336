"""erf rounded to float32, the value the leaf kernels give (`math.erf` in float64, rounded once),
in about 70% of the time `math.erf` takes (393,216 elements: 3.3 against 4.6 ms on one thread).

`erf32_k(x, out, lo, hi)` computes out[i] = float32(erf(float64(x[i]))) for lo <= i < hi from
polynomials, and falls back on `math.erf` itself wherever the polynomial's value is too close
to a float32 rounding boundary to decide which way `math.erf` rounds:

- |x| < 1/2: erf(x) = x P(x^2), P the Maclaurin series of erf(x)/x,
  2/sqrt(pi) sum (-1)^n t^n / (n! (2n + 1)), to t^12 (the first term left out is below 2^-60
  of the sum at t = 1/4);
- 1/2 <= |x| < 6: the Taylor polynomial of degree 11 about the centre c of the interval of
  width 1/8 that holds |x| (|x - c| <= 1/16): the n-th derivative of erf is
  2/sqrt(pi) (-1)^(n-1) H_{n-1}(x) e^(-x^2), with H the physicists' Hermite polynomials
  (H_{n+1} = 2x H_n - 2n H_{n-1}), and erf(c) from `math.erf`;
- |x| >= 6: 1 (erf(6) is 1 - 2e-17, which float64 already rounds to 1); erf(-x) = -erf(x).

The fallback makes the result exact: where `math.erf` differs from the polynomial by at most
`TOLERANCE` of its magnitude, a value whose interval of that width rounds to one float32 is
that float32 of `math.erf` too. Over every finite float32 input the polynomial's largest
relative difference from this host's `math.erf` is 3.1e-16 (`python scripts/check_erf32.py`,
all 2^32 inputs, docs/performance.md), 46 times below `TOLERANCE`; inputs that fall back are
about one in two million.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["erf32_k", "erf32_parts", "TOLERANCE", "polynomial"]

#: how far from `math.erf` the polynomial may be, relative to its value (2^-46)
TOLERANCE = 2.0 ** -46
_SMALL_TERMS = 13
_DEGREE = 11
_STEP = 0.125
_CELLS = 48                                     # [0, 6) in steps of 1/8; the first 4 unused


def _tables() -> tuple[np.ndarray, np.ndarray]:
    small = np.array([2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                      for n in range(_SMALL_TERMS)])
    taylor = np.zeros((_DEGREE + 1, _CELLS))    # coefficient-major: taylor[n, cell]
    for j in range(int(0.5 / _STEP), _CELLS):
        c = (j + 0.5) * _STEP
        h = [1.0, 2 * c]
        for n in range(1, _DEGREE):
            h.append(2 * c * h[n] - 2 * n * h[n - 1])
        g = 2 / math.sqrt(math.pi) * math.exp(-c * c)
        taylor[0, j] = math.erf(c)
        for n in range(1, _DEGREE + 1):
            taylor[n, j] = g * (-1) ** (n - 1) * h[n - 1] / math.factorial(n)
    return small, taylor


_SMALL, _TAYLOR = _tables()


@njit(cache=True, error_model="numpy", nogil=True, inline="always")
def polynomial(v):
    """The polynomial's erf(v), float64; NaN for NaN."""
    a = abs(v)
    t = a * a
    p = _SMALL[_SMALL_TERMS - 1]
    for n in range(_SMALL_TERMS - 2, -1, -1):
        p = p * t + _SMALL[n]
    j = np.int64(a * 8.0 if a < 6.0 else _CELLS - 1.0)      # NaN too: no cell outside
    h = a - (j + 0.5) * _STEP
    q = _TAYLOR[_DEGREE, j]
    for n in range(_DEGREE - 1, -1, -1):
        q = q * h + _TAYLOR[n, j]
    r = a * p if a < 0.5 else (q if a < 6.0 else (1.0 if a >= 6.0 else a))
    return math.copysign(r, v)


@njit(cache=True, error_model="numpy", nogil=True)
def erf32_k(x, out, lo, hi):
    # out[i] = float32(math.erf(float64(x[i]))) for lo <= i < hi; x and out flat. In blocks:
    # the polynomials first, then the roundings with their rare calls of math.erf (a loop
    # holding both runs at half the speed)
    r = np.empty(1024)
    for b in range(lo, hi, 1024):
        m = min(1024, hi - b)
        for i in range(m):
            r[i] = polynomial(np.float64(x[b + i]))
        for i in range(m):
            e = abs(r[i]) * TOLERANCE
            below, above = np.float32(r[i] - e), np.float32(r[i] + e)
            out[b + i] = below if below == above else np.float32(math.erf(np.float64(x[b + i])))


@njit(cache=True, error_model="numpy", nogil=True)
def erf32_parts(x, out, part, parts):
    # erf32_k on part `part` of `parts` consecutive ranges (a thread's share)
    n = x.size
    erf32_k(x, out, n * part // parts, n * (part + 1) // parts)
