"""Destination types in the leaf batches' arithmetic: f16 and bf16 values kept in float32
buffers, each value rounded to its type by its own float64 bits; int32 wrap-around of exact float64
integers; 16-bit floats moved to and from float32 by tables.

`narrow(v, p, emin, top)` rounds a float64 to nearest even at p significant bits, with
subnormals below 2^(emin-1) and +-inf beyond `top`: the rounding of numpy's float16 and of
ml_dtypes' bfloat16 casts (`tests/simulator/test_batch_kernels.py` checks it against them on ties,
subnormals and overflow). A sum of two f16 or bf16 values rounded so is the sum their own addition
gives: float64 (or float32) holds more than twice their precision plus two bits, so rounding its
sum again gives the exactly rounded sum. `combine` stores a leaf's partial or adds it to what its
region holds, each rounded to the destination type, as the per-leaf path does.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

__all__ = ["narrow", "dest", "combine", "combine_run", "upcast_k", "downcast_k", "UPCAST", "NO_TABLE", "f16_table",
           "F32_DEST", "F16_DEST", "BF16_DEST"]

jit = njit(cache=True, error_model="numpy", nogil=True)

#: (significant bits, frexp exponent of the smallest normal, largest finite value) of the
#: destinations kept in float32 buffers; 0 bits: float32 itself, rounded by the store
F32_DEST, F16_DEST = (0, 0, 0.0), (11, -13, 65504.0)
BF16_DEST = (8, -125, float.fromhex("0x1.fep127"))     # bf16's largest: (2 - 2**-7) * 2**127


# ---------------------------------------------------------------- rounding and combining


@intrinsic
def _bits(typingctx, v):
    """The IEEE bit pattern of a float64, as a uint64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@intrinsic
def _float(typingctx, b):
    """The float64 whose IEEE bit pattern is the uint64 b."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.uint64), codegen


@jit
def narrow(v, p, emin, top):
    # float64 v rounded to nearest even at p significant bits (subnormals below 2^(emin-1)),
    # +-inf beyond the largest finite value `top`, without a branch (the loops calling it
    # vectorize): in the normal range, half to even on v's own bits, the carry running into the
    # exponent; below it, the FPU's own half to even at the smallest subnormal 2^(emin - p), by
    # adding and taking away a constant whose last place that is (the sign kept: -0 stays -0);
    # NaN and inf kept
    b = _bits(v)
    drop = np.uint64(53 - p)
    normal = _float((b + ((np.uint64(1) << (drop - np.uint64(1))) - np.uint64(1))
                     + ((b >> drop) & np.uint64(1))) & ~((np.uint64(1) << drop) - np.uint64(1)))
    big = math.copysign(_float(np.uint64(emin - p + 52 + 1023) << np.uint64(52)), v)
    small = math.copysign((v + big) - big, v)
    r = small if np.int64((b >> np.uint64(52)) & np.uint64(0x7FF)) - 1022 < emin else normal
    r = math.copysign(math.inf, v) if abs(r) > top else r
    return v if v != v else r


@jit
def _wrap32(v):
    # an exact float64 integer wrapped around into int32's range, as int32 arithmetic does
    return ((v + 2147483648.0) % 4294967296.0) - 2147483648.0


@jit
def dest(v, p, emin, top, wrap):
    # a leaf's float64 value as its destination type holds it (f32: the store rounds it)
    if wrap:
        return _wrap32(v)
    if p:
        return narrow(v, p, emin, top)
    return v


@jit
def combine(old, v, first, p, emin, top, wrap):
    # the first partial of a region, or `old` plus a later one, each rounded to the destination
    v = dest(v, p, emin, top, wrap)
    if first:
        return v
    if p or wrap:
        return dest(old + v, p, emin, top, wrap)
    return np.float32(old) + np.float32(v)


@njit(cache=True, error_model="numpy", nogil=True, inline="always")
def combine_run(dst, at, src, k, n, first, p, emin, top, wrap):
    # dst[at + q] = combine(dst[at + q], src[k + q], ...) for q < n (flat arrays), each kind of
    # destination its own loop, so that the loops vectorize; inlined where it is called (a run
    # can be a few elements)
    ua, uk = np.uint64(at), np.uint64(k)
    if wrap:
        for q in range(n):
            uq = np.uint64(q)
            dst[ua + uq] = combine(dst[ua + uq], src[uk + uq], first, 0, 0, 0.0, True)
    elif p and first:
        for q in range(n):
            uq = np.uint64(q)
            dst[ua + uq] = narrow(np.float64(src[uk + uq]), p, emin, top)
    elif p:
        for q in range(n):
            uq = np.uint64(q)
            dst[ua + uq] = narrow(np.float64(dst[ua + uq]) + narrow(np.float64(src[uk + uq]), p, emin, top),
                                  p, emin, top)
    elif first:
        for q in range(n):
            uq = np.uint64(q)
            dst[ua + uq] = src[uk + uq]
    else:
        for q in range(n):
            uq = np.uint64(q)
            dst[ua + uq] = np.float32(dst[ua + uq]) + np.float32(src[uk + uq])


@jit
def upcast_k(bits, table, out, part, parts):
    # out = table[bits]: 16-bit floats to float32, exactly; elements part, part + parts, ...
    # in blocks of 4096
    for blk in range(part, (bits.size + 4095) // 4096, parts):
        for i in range(blk * 4096, min(bits.size, blk * 4096 + 4096)):
            out[i] = table[bits[i]]


@jit
def downcast_k(src, bits, table, part, parts):
    # bits = the f16 (a table of 2^19 patterns by the float32's top 19 bits) or bf16 (the
    # float32's top 16 bits) bit patterns of float32 values that the type holds: exact, no
    # rounding; NaN as a quiet NaN. Elements part, part + parts, ... in blocks of 4096
    f = src.view(np.uint32)
    for blk in range(part, (src.size + 4095) // 4096, parts):
        for i in range(blk * 4096, min(src.size, blk * 4096 + 4096)):
            b = f[i]
            if src[i] != src[i]:
                bits[i] = np.uint16((b >> np.uint32(16)) | np.uint32(0x7FC0 if table.size == 0 else 0x7E00))
            elif table.size:
                bits[i] = table[b >> np.uint32(13)]
            else:
                bits[i] = np.uint16(b >> np.uint32(16))


NO_TABLE = np.zeros(0, np.uint16)


def f16_table() -> np.ndarray:
    """The f16 bit pattern of each float32 by its top 19 bits (sign, exponent, 10 bits of
    mantissa: all an f16 value has), made once."""
    if "f16" not in _DOWNCAST:
        with np.errstate(over="ignore"):
            top = (np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)).view(np.float32)
            _DOWNCAST["f16"] = top.astype(np.float16).view(np.uint16)
    return _DOWNCAST["f16"]


_DOWNCAST: dict = {}
#: float32 of every f16 and every bf16 bit pattern, by the numpy dtype's name (a bf16 value
#: is the upper half of a float32's bits)
UPCAST = {"float16": np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32),
          "bfloat16": (np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)).view(np.float32)}
