"""Leaf compute kernels: what a leaf of the simulated machine actually computes, compiled by numba.

`LEAF_KERNELS[opcode](inputs, attrs, out_type)` has the signature of, and returns the same values
as, `isa.reference.SEMANTICS[opcode]`, which is the numpy reference for every kernel here: a
fresh C-contiguous array of the destination's shape and dtype (`isa.reference.NP_DTYPES`).
Each entry is a thin Python wrapper that makes the sources contiguous arrays of the right dtype,
turns attributes into plain numbers and calls an `@njit(cache=True)` kernel. Data movement
(copy, reshape, transpose, slice, concat) does no arithmetic and stays plain numpy; gather is a
kernel because it checks every index (one outside the last axis raises the reference's
`UserError`, `isa.reference.gather_index_error`).

16- and 8-bit data: numba has no bfloat16 and little float16, so a wrapper upcasts the region
copies exactly (f16 and bf16 to float32 or float64, i8 to int32 or float64), the kernel computes in
that type, and the wrapper rounds once to the destination type (`_finish`). matmul and conv2d of
f16/bf16 multiply and accumulate in float32 (BLAS sgemm, as tensor cores do); every other f16/bf16
sum, quotient or transcendental is computed in float64 and rounded once, like the reference. i8
matmul, conv2d and eucdist compute in float64, which holds every product and sum below 2^53
exactly, and wrap into their i32 destination like the reference's int64 products. Compare and
move opcodes only move values, so they are exact for every type. `cast` rounds to nearest even;
to an integer type it also saturates, and NaN gives 0.

Numerics: i32 add/sub/mul/reduce_sum wrap around like int32 arithmetic. matmul and conv2d
multiply in float32 through BLAS (`np.dot`), so they agree with the float64-accumulating
reference to about 1e-5 relative; every other f32 sum or transcendental is computed in float64
and rounded once, like the reference. NaN propagates through max/argmax/argmin as in numpy, and
sort/argsort put it last.
Pooling and LRN follow ONNX (padded cells never win a max and are not counted by avgpool).

`warm_up()` compiles (or loads from the on-disk cache) every kernel once on tiny inputs.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numba import njit

from isa.opcodes import OPCODES, conv_out, pads
from isa.program import TensorType
from isa.reference import NP_DTYPES, count_value, gather_index_error

__all__ = ["LEAF_KERNELS", "warm_up"]

# error_model="numpy": x / 0 gives inf / nan (like numpy) instead of raising ZeroDivisionError
jit = njit(cache=True, error_model="numpy")


# ---------------------------------------------------------------- mac kernels

@jit
def _matmul_k(a, b):
    # C[M,N] = A[M,K] @ B[K,N], float32 BLAS sgemm
    return np.dot(a, b)


@jit
def _conv2d_k(x, w, s, pt, pl, ho, wo):
    # Y[N,O,Ho,Wo] = X (*) W with zero padding: im2col per image, then one BLAS product W2 @ col
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    w2 = w.reshape(o, c * kh * kw)
    col = np.empty((c * kh * kw, ho * wo), x.dtype)
    y = np.empty((n, o, ho * wo), x.dtype)
    for b in range(n):
        for ci in range(c):
            for i in range(kh):
                for j in range(kw):
                    r = (ci * kh + i) * kw + j
                    for oh in range(ho):
                        hi = oh * s - pt + i
                        for ow in range(wo):
                            wi = ow * s - pl + j
                            if 0 <= hi < h and 0 <= wi < wd:
                                col[r, oh * wo + ow] = x[b, ci, hi, wi]
                            else:
                                col[r, oh * wo + ow] = 0.0
        np.dot(w2, col, y[b])
    return y.reshape(n, o, ho, wo)


@jit
def _eucdist_k(x, cen):
    # D[m,n] = sum_k (X[m,k] - C[n,k])^2, differences taken directly, float64 accumulator
    m, k = x.shape
    d = np.empty((m, cen.shape[0]), x.dtype)
    for i in range(m):
        for j in range(cen.shape[0]):
            acc = 0.0
            for q in range(k):
                diff = np.float64(x[i, q]) - np.float64(cen[j, q])
                acc += diff * diff
            d[i, j] = acc
    return d


# ---------------------------------------------------------------- windows and channels

@jit
def _maxpool_k(x, k, s, pt, pl, ho, wo):
    # ONNX MaxPool: max over the real cells of each k x k window (padding never wins); NaN wins
    n, c, h, wd = x.shape
    y = np.empty((n, c, ho, wo), x.dtype)
    for b in range(n):
        for ch in range(c):
            for oh in range(ho):
                for ow in range(wo):
                    m = -np.inf
                    for hi in range(max(oh * s - pt, 0), min(oh * s - pt + k, h)):
                        for wi in range(max(ow * s - pl, 0), min(ow * s - pl + k, wd)):
                            v = x[b, ch, hi, wi]
                            if v > m or v != v:
                                m = v
                    y[b, ch, oh, ow] = m
    return y


@jit
def _avgpool_k(x, k, s, pt, pl, ho, wo):
    # ONNX AveragePool, count_include_pad=0: sum of the real cells / number of real cells
    n, c, h, wd = x.shape
    y = np.empty((n, c, ho, wo), x.dtype)
    for b in range(n):
        for ch in range(c):
            for oh in range(ho):
                for ow in range(wo):
                    acc = 0.0
                    cnt = 0
                    for hi in range(max(oh * s - pt, 0), min(oh * s - pt + k, h)):
                        for wi in range(max(ow * s - pl, 0), min(ow * s - pl + k, wd)):
                            acc += x[b, ch, hi, wi]
                            cnt += 1
                    y[b, ch, oh, ow] = acc / cnt
    return y


@jit
def _lrn_k(x, size, alpha, beta, k):
    # ONNX LRN: x / (k + alpha/size * sum x^2 over channels c-floor((size-1)/2)..c+ceil((size-1)/2))^beta
    n, c, h, w = x.shape
    y = np.empty_like(x)
    below = (size - 1) // 2
    above = size - 1 - below
    for b in range(n):
        for ch in range(c):
            lo, hi = max(0, ch - below), min(c - 1, ch + above)
            for i in range(h):
                for j in range(w):
                    ss = 0.0
                    for q in range(lo, hi + 1):
                        v = np.float64(x[b, q, i, j])
                        ss += v * v
                    y[b, ch, i, j] = x[b, ch, i, j] / (k + alpha / size * ss) ** beta
    return y


# ---------------------------------------------------------------- elementwise (flat, pre-broadcast)

@jit
def _add_k(x, y, out):
    # Z = X + Y (int32 wraps)
    for i in range(out.size):
        out[i] = x[i] + y[i]


@jit
def _sub_k(x, y, out):
    # Z = X - Y (int32 wraps)
    for i in range(out.size):
        out[i] = x[i] - y[i]


@jit
def _mul_k(x, y, out):
    # Z = X * Y (int32 wraps)
    for i in range(out.size):
        out[i] = x[i] * y[i]


@jit
def _div_k(x, y, out):
    # Z = X / Y in float32 (x/0 gives inf or nan)
    for i in range(out.size):
        out[i] = x[i] / y[i]


@jit
def _relu_k(x, out):
    # Y = max(X, 0) (NaN stays NaN, as np.maximum)
    for i in range(out.size):
        out[i] = 0 if x[i] < 0 else x[i]


@jit
def _sigmoid_k(x, out):
    # Y = 1 / (1 + exp(-X)), in float64
    for i in range(out.size):
        out[i] = 1.0 / (1.0 + np.exp(-np.float64(x[i])))


@jit
def _tanh_k(x, out):
    # Y = tanh(X), in float64
    for i in range(out.size):
        out[i] = np.tanh(np.float64(x[i]))


@jit
def _exp_k(x, out):
    # Y = exp(X), in float64
    for i in range(out.size):
        out[i] = np.exp(np.float64(x[i]))


@jit
def _cast_int_k(x, lo, hi, out):
    # Y = X to an integer type: round half to even, saturate at [lo, hi], NaN gives 0 (x float64)
    for i in range(out.size):
        v = x[i]
        if v != v:
            out[i] = 0
        elif v <= lo:
            out[i] = lo
        elif v >= hi:
            out[i] = hi
        else:
            out[i] = np.rint(v)


@jit
def _cast_float_k(x, out):
    # Y = X to a float type: one rounding to nearest even (x float64, which holds every source
    # value exactly; out float32, or float64 that the wrapper rounds once to f16 / bf16)
    for i in range(out.size):
        out[i] = x[i]


# ---------------------------------------------------------------- over the last axis of [rows, n]

@jit
def _reduce_sum_k(x, zero, out):
    # Y[r] = sum of row r; `zero` is float64 0 for f32 (round once) or int64 0 for i32 (wraps)
    for r in range(x.shape[0]):
        acc = zero
        for i in range(x.shape[1]):
            acc += x[r, i]
        out[r] = acc


@jit
def _reduce_max_k(x, out):
    # Y[r] = max of row r (NaN wins, as in numpy)
    for r in range(x.shape[0]):
        m = x[r, 0]
        for i in range(1, x.shape[1]):
            v = x[r, i]
            if v > m or v != v:
                m = v
        out[r] = m


@jit
def _argbest_k(x, largest, out):
    # Y[r] = index of the first maximum (largest) or minimum of row r; the first NaN wins, as in numpy
    for r in range(x.shape[0]):
        best, at = x[r, 0], 0
        if best == best:
            for i in range(1, x.shape[1]):
                v = x[r, i]
                if v != v:
                    at = i
                    break
                if (v > best) if largest else (v < best):
                    best, at = v, i
        out[r] = at


@jit
def _before(a, b):
    # a sorts strictly before b: smaller, or a number against a NaN (NaN is the largest)
    return a < b or (b != b and a == a)


@jit
def _sort_k(x, out):
    # Y[r] = row r sorted ascending, stable, NaN last (np.sort kind="stable"): bottom-up merge sort
    n = x.shape[1]
    buf = np.empty(n, x.dtype)
    for r in range(x.shape[0]):
        src, dst = out[r], buf
        for i in range(n):
            src[i] = x[r, i]
        width = 1
        while width < n:
            for lo in range(0, n, 2 * width):
                mid, hi = min(lo + width, n), min(lo + 2 * width, n)
                i, j = lo, mid
                for k in range(lo, hi):
                    # the right run goes first only when strictly before: ties keep their order
                    if j < hi and (i >= mid or _before(src[j], src[i])):
                        dst[k] = src[j]
                        j += 1
                    else:
                        dst[k] = src[i]
                        i += 1
            src, dst = dst, src
            width *= 2
        if src is buf:
            for i in range(n):
                out[r, i] = buf[i]


@jit
def _argsort_k(x, out):
    # Y[r] = positions that sort row r (np.argsort kind="stable"): _sort_k's merge sort, on indices
    n = x.shape[1]
    buf = np.empty(n, np.int32)
    for r in range(x.shape[0]):
        row, src, dst = x[r], out[r], buf
        for i in range(n):
            src[i] = i
        width = 1
        while width < n:
            for lo in range(0, n, 2 * width):
                mid, hi = min(lo + width, n), min(lo + 2 * width, n)
                i, j = lo, mid
                for k in range(lo, hi):
                    if j < hi and (i >= mid or _before(row[src[j]], row[src[i]])):
                        dst[k] = src[j]
                        j += 1
                    else:
                        dst[k] = src[i]
                        i += 1
            src, dst = dst, src
            width *= 2
        if src is buf:
            for i in range(n):
                out[r, i] = buf[i]


@jit
def _count_k(x, value, out):
    # Y[r] = number of elements of row r equal to value
    for r in range(x.shape[0]):
        cnt = 0
        for i in range(x.shape[1]):
            if x[r, i] == value:
                cnt += 1
        out[r] = cnt


@jit
def _gather_k(x, idx, out):
    # Y[r, j] = X[r, I[r, j]]; returns the flat position of the first index outside [0, n), or -1
    n, m = x.shape[1], idx.shape[1]
    for r in range(idx.shape[0]):
        for j in range(m):
            i = idx[r, j]
            if i < 0 or i >= n:
                return r * m + j
            out[r, j] = x[r, i]
    return -1


# ---------------------------------------------------------------- transformer math

@jit
def _matmul_batch_k(a, b, out):
    # C[i] = A[i] @ B[i] for every batch element i of [batch, M, K] and [batch, K, N], BLAS each
    for i in range(a.shape[0]):
        np.dot(a[i], b[i], out[i])


@jit
def _sqrt_k(x, out):
    # Y = sqrt(X), in float64 (NaN below 0)
    for i in range(out.size):
        out[i] = math.sqrt(np.float64(x[i])) if x[i] >= 0 else np.nan


@jit
def _rsqrt_k(x, out):
    # Y = 1 / sqrt(X), in float64 (+inf at 0, NaN below 0)
    for i in range(out.size):
        v = np.float64(x[i])
        out[i] = 1.0 / math.sqrt(v) if v >= 0 else np.nan


@jit
def _erf_k(x, out):
    # Y = erf(X), in float64
    for i in range(out.size):
        out[i] = math.erf(np.float64(x[i]))


@jit
def _log_k(x, out):
    # Y = ln(X), in float64 (-inf at 0, NaN below 0)
    for i in range(out.size):
        v = np.float64(x[i])
        out[i] = np.log(v) if v >= 0 else np.nan


@jit
def _abs_k(x, out):
    # Y = |X| (int32: |-2^31| wraps to -2^31)
    for i in range(out.size):
        out[i] = abs(x[i])


@jit
def _neg_k(x, out):
    # Y = -X (int32 wraps)
    for i in range(out.size):
        out[i] = -x[i]


@jit
def _pow_k(x, y, out):
    # Z = X ** Y, in float64
    for i in range(out.size):
        out[i] = np.float64(x[i]) ** np.float64(y[i])


@jit
def _min_k(x, y, out):
    # Z = the smaller of X and Y, X on ties; NaN if either is (np.minimum)
    for i in range(out.size):
        a, b = x[i], y[i]
        out[i] = a if (a <= b or a != a) else b


@jit
def _max_k(x, y, out):
    # Z = the larger of X and Y, X on ties; NaN if either is (np.maximum)
    for i in range(out.size):
        a, b = x[i], y[i]
        out[i] = a if (a >= b or a != a) else b


@jit
def _where_k(c, x, y, out):
    # Y = X where the mask C is nonzero (NaN counts as nonzero), else Y
    for i in range(out.size):
        out[i] = x[i] if c[i] != 0 else y[i]


@jit
def _reduce_mean_k(x, count, out):
    # Y[r] = (sum of row r) / count, the sum in float64
    for r in range(x.shape[0]):
        acc = 0.0
        for i in range(x.shape[1]):
            acc += x[r, i]
        out[r] = acc / count


@jit
def _causal_mask_k(qp, kp, window, low, out):
    # M[i, j] = 0 where KP[j] <= QP[i] (and QP[i] - KP[j] < window when window > 0), else low
    for i in range(qp.size):
        for j in range(kp.size):
            d = np.int64(qp[i]) - np.int64(kp[j])
            out[i, j] = 0.0 if d >= 0 and (window == 0 or d < window) else low


# ---------------------------------------------------------------- wrappers

def _c(a, dtype) -> np.ndarray:
    """`a` as a writeable C-contiguous array of `dtype` (read-only arrays would compile anew)."""
    a = np.ascontiguousarray(a, dtype)
    return a if a.flags.writeable else a.copy()


def _dt(t: TensorType) -> np.dtype:
    return NP_DTYPES[t.dtype]


def _src_dt(x: np.ndarray) -> np.dtype:
    """The type a kernel reads x in: int32 or float32, which hold every value of x exactly."""
    return np.dtype(np.int32) if x.dtype.kind in "iub" else np.dtype(np.float32)


_F32, _F64, _I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)


def _calc_dt(t: TensorType) -> np.dtype:
    """The type a kernel computes a `t` destination in: its own for f32 and i32; float64 for f16
    and bf16 (rounded once by `_finish`); int32 for i8."""
    return {"f32": _F32, "i32": _I32, "i8": _I32}.get(t.dtype, _F64)


def _mac_dt(x: np.ndarray) -> np.dtype:
    """The type a MAC kernel reads its sources in: float32 for every float type (float32
    accumulation, as tensor cores do), float64 for i8 (exact integer sums below 2^53)."""
    return _F64 if x.dtype.kind in "iu" else _F32


def _finish(y: np.ndarray, t: TensorType) -> np.ndarray:
    """A kernel's result rounded once to the destination's type; an i32 destination of an exact
    float64 integer sum wraps around like int32 arithmetic."""
    target = _dt(t)
    if y.dtype == target:
        return y
    if t.dtype == "i32":
        return y.astype(np.int64).astype(np.int32)
    return y.astype(target)


def _matmul(ins, a, t):
    dt = _mac_dt(np.asarray(ins[0]))
    if np.ndim(ins[0]) == 2 and np.ndim(ins[1]) == 2:
        return _finish(_matmul_k(_c(ins[0], dt), _c(ins[1], dt)), t)
    return _matmul_batched(ins, dt, t)


def _matmul_batched(ins, dt, t):
    """A matmul with batch axes, the sources broadcast to the destination's batch shape: one BLAS
    product per matrix of A, of A with the B matrices of every batch element that reads it side by
    side, the batch index innermost (columns n * count + j); one product per batch element where A
    is not broadcast."""
    x, w = np.asarray(ins[0]), np.asarray(ins[1])
    batch = t.shape[:-2]
    (m, k), n = x.shape[-2:], w.shape[-1]
    a_batch = (1,) * (len(batch) - x.ndim + 2) + x.shape[:-2]
    shared = [d for d, e in enumerate(batch) if e > 1 and a_batch[d] == 1]
    own = [d for d in range(len(batch)) if d not in shared]
    count = int(np.prod([batch[d] for d in shared], dtype=np.int64))
    outer = int(np.prod([batch[d] for d in own], dtype=np.int64))
    # A per outer index; B as [outer, K, N, shared...] -> [outer, K, N * count]
    x = _c(np.broadcast_to(x.reshape(a_batch + (m, k)),
                           tuple(1 if d in shared else e for d, e in enumerate(batch)) + (m, k)),
           dt).reshape(outer, m, k)
    order = own + [len(batch), len(batch) + 1] + shared
    w = np.broadcast_to(w, batch + w.shape[-2:]).transpose(order)
    w = _c(w, dt).reshape(outer, k, n * count)
    out = np.empty((outer, m, n * count), dt)
    _matmul_batch_k(x, w, out)
    out = out.reshape(tuple(batch[d] for d in own) + (m, n) + tuple(batch[d] for d in shared))
    out = np.ascontiguousarray(out.transpose(np.argsort(order)))
    return _finish(out, t)


def _conv2d(ins, a, t):
    dt = _mac_dt(np.asarray(ins[0]))
    x, w = _c(ins[0], dt), _c(ins[1], dt)
    s, (pt, pl, pb, pr) = a["stride"], pads(a)
    ho = conv_out(x.shape[2], w.shape[2], s, pt, pb)
    wo = conv_out(x.shape[3], w.shape[3], s, pl, pr)
    return _finish(_conv2d_k(x, w, s, pt, pl, ho, wo), t)


def _eucdist(ins, a, t):
    # f32 keeps float32 sources (float64 accumulator, one rounding); f16/bf16 and i8 read
    # float64 copies, so the float64 sum is rounded once to f16/bf16, or is exact for i8
    dt = _F32 if t.dtype == "f32" else _F64
    return _finish(_eucdist_k(_c(ins[0], dt), _c(ins[1], dt)), t)


def _pool(kernel, exact=False):
    """`exact`: the kernel only picks values (maxpool), so float32 holds every f16/bf16 result."""
    def run(ins, a, t):
        x = _c(ins[0], _F32 if exact else _calc_dt(t))
        k, s, (pt, pl, pb, pr) = a["kernel"], a["stride"], pads(a)
        ho, wo = conv_out(x.shape[2], k, s, pt, pb), conv_out(x.shape[3], k, s, pl, pr)
        return _finish(kernel(x, k, s, pt, pl, ho, wo), t)
    return run


def _lrn(ins, a, t):
    return _finish(_lrn_k(_c(ins[0], _calc_dt(t)), int(a["size"]), float(a["alpha"]),
                          float(a["beta"]), float(a["k"])), t)


def _binary(kernel):
    def run(ins, a, t):
        dt = _calc_dt(t)
        shape = np.broadcast_shapes(np.shape(ins[0]), np.shape(ins[1]))
        x, y = (_c(np.broadcast_to(np.asarray(v).astype(dt), shape), dt).reshape(-1) for v in ins)
        out = np.empty(x.size, dt)
        kernel(x, y, out)
        return _finish(out, t).reshape(t.shape)
    return run


def _unary(kernel):
    def run(ins, a, t):
        dt = _calc_dt(t)
        x = _c(np.asarray(ins[0]).astype(dt), dt).reshape(-1)
        out = np.empty(x.size, dt)
        kernel(x, out)
        return _finish(out, t).reshape(t.shape)
    return run


def _cast(ins, a, t):
    x = _c(np.asarray(ins[0]).astype(np.float64), np.float64).reshape(-1)
    if t.dtype in ("i32", "i8"):
        info = np.iinfo(_dt(t))
        out = np.empty(x.size, np.int64)
        _cast_int_k(x, float(info.min), float(info.max), out)
    else:
        out = np.empty(x.size, _F32 if t.dtype == "f32" else _F64)
        _cast_float_k(x, out)
    return out.astype(_dt(t)).reshape(t.shape)


def _rows(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """x with `axis` moved last, as a C-contiguous [rows, n] array of f32 or i32."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    return _c(x, _src_dt(x)).reshape(-1, x.shape[-1])


def _over_rows(kernel, needs_elements=False, extra=None):
    """Wrapper: rows of x along attrs["axis"], then kernel(rows, *extra(rows, attrs), out)."""
    def run(ins, a, t):
        x = _rows(ins[0], a.get("axis", -1))
        if needs_elements and x.shape[1] == 0 and x.shape[0] > 0:
            raise ValueError("attempt to reduce over an empty axis")
        out = np.empty(x.shape[0], _calc_dt(t))
        kernel(x, *(extra(x, a) if extra else ()), out)
        return _finish(out, t).reshape(t.shape)
    return run


def _sum_zero(x, a):
    return (np.int64(0) if x.dtype == np.int32 else np.float64(0.0),)


def _count(ins, a, t):
    src = np.asarray(ins[0])
    x, v = _rows(src), a["value"]
    out = np.zeros(x.shape[0], np.int32)
    if x.dtype == np.float32:                     # value rounded to the source's float type
        _count_k(x, np.float32(count_value(v, src.dtype)), out)
    elif -2**31 <= v < 2**31 and float(v).is_integer():   # i32 data: no other value can match
        _count_k(x, np.int32(v), out)
    return out.reshape(t.shape)


def _sort(ins, a, t):
    x = _rows(ins[0])
    out = np.empty_like(x)
    _sort_k(x, out)
    return _finish(out, t).reshape(t.shape)


def _argsort(ins, a, t):
    x = _rows(ins[0])
    out = np.empty(x.shape, np.int32)
    _argsort_k(x, out)
    return out.reshape(t.shape)


def _mergepos(ins, a, t):
    # positions of the merge of two runs: the stable order of the runs placed end to end
    return _argsort([np.concatenate([np.asarray(x) for x in ins], axis=-1)], a, t)


def _gather(ins, a, t):
    x, idx = np.asarray(ins[0]), np.asarray(ins[1])
    rows, n, m = math.prod(idx.shape[:-1]), x.shape[-1], idx.shape[-1]
    dt = _src_dt(x)                              # exact for every type: values are only moved
    x, idx = _c(x, dt).reshape(rows, n), _c(idx, np.int32).reshape(rows, m)
    out = np.empty((rows, m), dt)
    bad = _gather_k(x, idx, out)
    if bad >= 0:
        raise gather_index_error(int(idx.flat[bad]), n)
    return _finish(out, t).reshape(t.shape)


def _slice(ins, a, t):
    x = np.asarray(ins[0])
    ax = a["axis"] % x.ndim
    index = [slice(None)] * x.ndim
    index[ax] = slice(a["start"], a["start"] + t.shape[ax])
    return np.array(x[tuple(index)], _dt(t), order="C")


def _where(ins, a, t):
    dt = _calc_dt(t)
    shape = t.shape
    c = np.asarray(ins[0])
    c = _c(np.broadcast_to(c, shape), _src_dt(c)).reshape(-1)   # exact: only tested against 0
    x, y = (_c(np.broadcast_to(np.asarray(v).astype(dt), shape), dt).reshape(-1) for v in ins[1:])
    out = np.empty(x.size, dt)
    _where_k(c, x, y, out)
    return _finish(out, t).reshape(t.shape)


def _mean_count(x, a):
    return (float(a["count"] or x.shape[1]),)


def _causal_mask(ins, a, t):
    qp, kp = (_c(np.asarray(v), np.int32) for v in ins)
    out = np.empty(t.shape, _calc_dt(t))
    _causal_mask_k(qp, kp, int(a["window"]), float(np.finfo(_dt(t)).min), out)
    return _finish(out, t)


def _fill(ins, a, t):
    # data movement: value + step * position along axis, in float64, rounded once
    if not t.shape:
        return np.array(a["value"], np.float64).astype(_dt(t))
    ax = a["axis"] % len(t.shape)
    pos = np.arange(t.shape[ax], dtype=np.float64) * a["step"] + a["value"]
    view = [1] * len(t.shape)
    view[ax] = t.shape[ax]
    return np.ascontiguousarray(np.broadcast_to(pos.reshape(view), t.shape).astype(_dt(t)))


LEAF_KERNELS: dict[str, Callable[[list, dict, TensorType], np.ndarray]] = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "maxpool": _pool(_maxpool_k, exact=True),
    "avgpool": _pool(_avgpool_k),
    "add": _binary(_add_k),
    "sub": _binary(_sub_k),
    "mul": _binary(_mul_k),
    "div": _binary(_div_k),
    "relu": _unary(_relu_k),
    "sigmoid": _unary(_sigmoid_k),
    "tanh": _unary(_tanh_k),
    "exp": _unary(_exp_k),
    "lrn": _lrn,
    "reduce_sum": _over_rows(_reduce_sum_k, extra=_sum_zero),
    "reduce_max": _over_rows(_reduce_max_k, needs_elements=True),
    "argmax": _over_rows(_argbest_k, needs_elements=True, extra=lambda x, a: (True,)),
    "argmin": _over_rows(_argbest_k, needs_elements=True, extra=lambda x, a: (False,)),
    "eucdist": _eucdist,
    "sort": _sort,
    "argsort": _argsort,
    "mergepos": _mergepos,
    "gather": _gather,
    "count": _count,
    "cast": _cast,
    "transpose": lambda ins, a, t: np.array(np.transpose(ins[0], a["perm"]), _dt(t), order="C"),
    "copy": lambda ins, a, t: np.array(ins[0], _dt(t), order="C"),
    "reshape": lambda ins, a, t: np.array(ins[0], _dt(t), order="C").reshape(t.shape),
    "slice": _slice,
    "concat": lambda ins, a, t: np.ascontiguousarray(np.concatenate(ins, axis=a["axis"]), _dt(t)),
    "sqrt": _unary(_sqrt_k),
    "rsqrt": _unary(_rsqrt_k),
    "erf": _unary(_erf_k),
    "log": _unary(_log_k),
    "abs": _unary(_abs_k),
    "neg": _unary(_neg_k),
    "pow": _binary(_pow_k),
    "min": _binary(_min_k),
    "max": _binary(_max_k),
    "where": _where,
    "reduce_mean": _over_rows(_reduce_mean_k, extra=_mean_count),
    "causal_mask": _causal_mask,
    "fill": _fill,
}
assert LEAF_KERNELS.keys() == OPCODES.keys(), "every opcode needs a leaf kernel"



def warm_up() -> None:
    """Compile every kernel once, for every dtype it serves, on tiny inputs (or load the cache)."""
    f = np.ones((1, 2, 3, 3), np.float32)
    f2, i2 = np.ones((2, 2), np.float32), np.ones((2, 2), np.int32)
    cases = [("matmul", [f2, f2], {}, "f32", (2, 2)),
             ("conv2d", [f, f], {"stride": 1, "pad": 1}, "f32", (1, 1, 3, 3)),
             ("maxpool", [f], {"kernel": 2, "stride": 1, "pad": 0}, "f32", (1, 2, 2, 2)),
             ("avgpool", [f], {"kernel": 2, "stride": 1, "pad": 0}, "f32", (1, 2, 2, 2)),
             ("lrn", [f], {"size": 3, "alpha": 1e-4, "beta": 0.75, "k": 2.0}, "f32", f.shape),
             ("eucdist", [f2, f2], {}, "f32", (2, 2))]
    for op in ("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp"):
        ins = [f2, f2] if op in ("add", "sub", "mul", "div") else [f2]
        cases.append((op, ins, {}, "f32", (2, 2)))
        if op in ("add", "sub", "mul", "relu"):                 # the ops that also take i32
            cases.append((op, [i2] * len(ins), {}, "i32", (2, 2)))
    for x, dt in ((f2, "f32"), (i2, "i32")):
        for op in ("reduce_sum", "reduce_max", "argmax", "argmin"):
            cases.append((op, [x], {"axis": 0}, dt if op.startswith("reduce") else "i32", (2,)))
        cases += [("sort", [x], {}, dt, (2, 2)), ("argsort", [x], {}, "i32", (2, 2)),
                  ("gather", [x, i2], {}, dt, (2, 2)), ("count", [x], {"value": 1}, "i32", (2,))]
    # 16- and 8-bit data: the float64 / int32 specializations their wrappers compute in
    h, b16, q = f.astype(np.float16), f.astype(NP_DTYPES["bf16"]), f.astype(np.int8)
    h2, q2 = f2.astype(np.float16), f2.astype(np.int8)
    cases += [("matmul", [q2, q2], {}, "i32", (2, 2)), ("eucdist", [h2, h2], {}, "f16", (2, 2)),
              ("conv2d", [q, q], {"stride": 1, "pad": 1}, "i32", (1, 1, 3, 3)),
              ("avgpool", [h], {"kernel": 2, "stride": 1, "pad": 0}, "f16", (1, 2, 2, 2)),
              ("lrn", [b16], {"size": 3, "alpha": 1e-4, "beta": 0.75, "k": 2.0}, "bf16", f.shape),
              ("reduce_sum", [h2], {"axis": 0}, "f16", (2,))]
    for op in ("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp"):
        cases.append((op, [h2, h2] if op in ("add", "sub", "mul", "div") else [h2], {}, "f16", (2, 2)))
    for src in (f2, i2, h2, q2):
        for dt in ("f32", "i32", "f16", "i8"):
            cases.append(("cast", [src], {}, dt, (2, 2)))
    f3, q1 = np.ones((2, 2, 2), np.float32), np.arange(2, dtype=np.int32)
    cases += [("matmul", [f3, f2], {}, "f32", (2, 2, 2)), ("matmul", [f3.astype(np.int8), q2], {}, "i32", (2, 2, 2)),
              ("reduce_mean", [f2], {"axis": 0, "count": 0}, "f32", (2,)),
              ("reduce_mean", [h2], {"axis": 0, "count": 0}, "f16", (2,)),
              ("causal_mask", [q1, q1], {"window": 0}, "f32", (2, 2)),
              ("causal_mask", [q1, q1], {"window": 0}, "f16", (2, 2))]
    for op in ("sqrt", "rsqrt", "erf", "log", "abs", "neg", "pow", "min", "max"):
        binary = op in ("pow", "min", "max")
        for x, dt in ((f2, "f32"), (h2, "f16")) + (((i2, "i32"),) if op in ("abs", "neg", "min", "max") else ()):
            cases.append((op, [x, x] if binary else [x], {}, dt, (2, 2)))
    for c in (f2, i2):
        cases += [("where", [c, f2, f2], {}, "f32", (2, 2)), ("where", [c, i2, i2], {}, "i32", (2, 2)),
                  ("where", [c, h2, h2], {}, "f16", (2, 2))]
    for op, ins, attrs, dt, shape in cases:
        LEAF_KERNELS[op](ins, attrs, TensorType(dt, tuple(shape)))
