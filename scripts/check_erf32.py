"""Check `simulator.erf32` against `math.erf` on every float32 input (2^32 of them, about a
minute on two cores): the largest relative difference of its polynomial from `math.erf`, which
must stay below `TOLERANCE` for its results to be exact, and that every result equals
float32(math.erf(x)) bit for bit (NaN for NaN).

    python scripts/check_erf32.py [--step-bits 24]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from simulator.erf32 import TOLERANCE, erf32_k, polynomial   # noqa: E402


@njit(parallel=True, error_model="numpy")
def _chunk(bits):
    x = bits.view(np.float32)
    n = x.size
    out = np.empty(n, np.float32)
    erf32_k(x, out, 0, n)
    worst = np.zeros(n)
    wrong = np.zeros(n, np.int8)
    fell_back = np.zeros(n, np.int8)
    for i in prange(n):
        v = np.float64(x[i])
        want = np.float32(math.erf(v))
        if want != want:
            wrong[i] = out[i] == out[i]
            continue
        wrong[i] = out[i] != want or (out[i] == 0 and np.signbit(out[i]) != np.signbit(want))
        r = polynomial(v)
        e = abs(r) * TOLERANCE
        fell_back[i] = np.float32(r - e) != np.float32(r + e)
        worst[i] = abs(r - math.erf(v)) / abs(r) if r != 0 else abs(math.erf(v))
    return worst.max(), wrong.sum(), fell_back.sum()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-bits", type=int, default=24, help="inputs per chunk, as a power of 2")
    args = ap.parse_args(argv)
    start, step = time.perf_counter(), 1 << args.step_bits
    worst = wrong = fell_back = 0
    for lo in range(0, 1 << 32, step):
        w, bad, fb = _chunk(np.arange(lo, lo + step, dtype=np.uint64).astype(np.uint32))
        worst, wrong, fell_back = max(worst, w), wrong + int(bad), fell_back + int(fb)
    print(f"inputs: all 2^32 float32 bit patterns ({time.perf_counter() - start:.0f} s)")
    print(f"largest relative difference of the polynomial from math.erf: {worst:.3g} "
          f"(tolerance {TOLERANCE:.3g}, {TOLERANCE / worst:.0f}x above it)")
    print(f"inputs that fell back on math.erf: {fell_back:,}")
    print(f"results unequal to float32(math.erf(x)): {wrong:,}")
    return 0 if wrong == 0 and worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
