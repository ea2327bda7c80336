"""Leaf batches: all the leaves below one node computed in one compiled call.

`LEAF_BATCH_KERNELS[opcode](inputs, attrs, tiles, out)` is the `batch` of `compiler.execute`: the
node's input arrays and attributes, its tile table (one row per leaf: the (start, stop) of every
dimension of every input region, then of the output region, then 1 where the leaf brings the
first partial of its region) and the node's output array, which it fills. Each leaf computes
from its own regions, as `simulator.kernels.LEAF_KERNELS` would on the leaf's copies: a window
cell outside the leaf's input region is the leaf's padding. The regions of one output region are
consecutive rows in the plan's order and distinct regions are disjoint, so the regions run in
parallel on the host's cores.

Each leaf's value is the one its leaf kernel gives, rounded once to the destination type, and it
is stored (the first partial) or added to what its region holds and the sum rounded to the
destination type, exactly as the per-leaf path adds a later partial:
- conv2d and matmul (with batch axes too): im2col (conv2d, per image; the leaves reading the same
  input region share it) and one BLAS product per leaf and batch element, float32 sgemm for the
  float types, float64 dgemm for i8 (exact; the i32 destination wraps around). A 2-d f32 matmul
  runs `simulator.kernels`' batch, whose sgemm adds later partials in place;
- the elementwise opcodes of `ELEMENTWISE` on float data: computed in float64 and rounded once,
  as their leaf kernels do (a float32 sum, product or quotient is the float64 one rounded once);
- maxpool and avgpool, as `_maxpool_k` and `_avgpool_k`.
f16 and bf16 destinations are kept in a float32 buffer (which holds every value of theirs) and
rounded by `_narrow`, to nearest even at their precision, like numpy's and ml_dtypes' casts; a sum
of two f16 or bf16 values rounded so is the sum their own addition gives. Integer elementwise data
runs each leaf's kernel in turn (`_per_leaf`). A batch of fewer than PARALLEL_MACS multiply-adds
runs on one thread.
"""
from __future__ import annotations

import ctypes
import math
from contextlib import contextmanager

import numba
import numpy as np
from llvmlite.binding import add_symbol
from numba import njit, prange, types
from scipy.linalg.cython_blas import __pyx_capi__

from isa.opcodes import pads
from isa.program import TensorType
from isa.reference import NP_DTYPES, dtype_name
from simulator.kernels import LEAF_BATCH_KERNELS as _MATMUL_BATCH
from simulator.kernels import LEAF_KERNELS

__all__ = ["LEAF_BATCH_KERNELS", "warm_up_batches"]

jit = njit(cache=True, error_model="numpy")
pjit = njit(cache=True, error_model="numpy", parallel=True)


def _blas(name: str) -> types.ExternalFunction:
    """scipy's Fortran BLAS `name` (the BLAS numba's own np.dot calls) under a symbol of ours, so
    that kernels calling it can be cached on disk; every argument is an address."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    capsule = __pyx_capi__[name]
    add_symbol(f"fractal_blas_{name}", get_pointer(capsule, get_name(capsule)))
    return types.ExternalFunction(f"fractal_blas_{name}", types.void(*[types.intp] * 13))


_sgemm, _dgemm = _blas("sgemm"), _blas("dgemm")

#: (significant bits, frexp exponent of the smallest normal, largest finite value) of the
#: destinations kept in float32 buffers; 0 bits: float32 itself, rounded by the store
_F32_DEST, _F16_DEST = (0, 0, 0.0), (11, -13, 65504.0)
_BF16_DEST = (8, -125, float(np.finfo(NP_DTYPES["bf16"]).max))


# ---------------------------------------------------------------- rounding and combining

@jit
def _narrow(v, p, emin, top):
    # float64 v rounded to nearest even at p significant bits (subnormals below 2^(emin-1)),
    # +-inf beyond the largest finite value `top`
    if v != v or v == 0.0 or math.isinf(v):
        return v
    q = max(math.frexp(v)[1], emin) - p
    r = math.ldexp(np.rint(math.ldexp(v, -q)), q)
    if abs(r) > top:
        return math.copysign(math.inf, v)
    return r


@jit
def _wrap32(v):
    # an exact float64 integer wrapped around into int32's range, as int32 arithmetic does
    return ((v + 2147483648.0) % 4294967296.0) - 2147483648.0


@jit
def _dest(v, p, emin, top, wrap):
    # a leaf's float64 value as its destination type holds it (f32: the store rounds it)
    if wrap:
        return _wrap32(v)
    if p:
        return _narrow(v, p, emin, top)
    return v


@jit
def _combine(old, v, first, p, emin, top, wrap):
    # the first partial of a region, or `old` plus a later one, each rounded to the destination
    v = _dest(v, p, emin, top, wrap)
    if first:
        return v
    if p or wrap:
        return _dest(old + v, p, emin, top, wrap)
    return np.float32(old) + np.float32(v)


@jit
def _groups(tiles, lo, hi):
    # the first row of each output region (columns lo:hi of `tiles`), and the end
    starts = [0]
    for t in range(1, tiles.shape[0]):
        for j in range(lo, hi):
            if tiles[t, j] != tiles[t - 1, j]:
                starts.append(t)
                break
    starts.append(tiles.shape[0])
    return starts


@jit
def _gemm(args, m, n, k, a, lda, b, ldb, c, ldc, double):
    # C[m, n] = A[m, k] @ B[k, n] at addresses a, b, c, row-major with lda, ldb, ldc elements
    # between rows: column-major C^T = B^T A^T. args: int32[6] and the "N" flag, owned by the
    # caller, alive through the call
    if m == 0 or n == 0:
        return
    ints, scal32, scal64, trans = args
    ints[0], ints[1], ints[2], ints[3], ints[4], ints[5] = n, m, k, ldb, lda, ldc
    ip, tr = ints.ctypes.data, trans.ctypes.data
    if double:
        sp = scal64.ctypes.data
        _dgemm(tr, tr, ip, ip + 4, ip + 8, sp, b, ip + 12, a, ip + 16, sp + 8, c, ip + 20)
    else:
        sp = scal32.ctypes.data
        _sgemm(tr, tr, ip, ip + 4, ip + 8, sp, b, ip + 12, a, ip + 16, sp + 4, c, ip + 20)


@jit
def _gemm_args():
    scal32, scal64 = np.zeros(2, np.float32), np.zeros(2, np.float64)
    scal32[0], scal64[0] = 1.0, 1.0                 # alpha 1, beta 0
    return np.empty(6, np.int32), scal32, scal64, np.array([ord("N")], np.uint8)


# ---------------------------------------------------------------- MAC kernels

@jit
def _at(arr, tiles, t, col, zcol, i0, i1, i2, i3):
    # the element offset of the batch element of `arr` (regions at column `col` of row t) that
    # C's batch index (i0, i1, i2, i3) reads: the same offset into its region, or its one element
    # along a dimension where its region has extent 1 (broadcast)
    at = 0
    for d, i in enumerate((i0, i1, i2, i3)):
        lo, hi = tiles[t, col + 2 * d], tiles[t, col + 2 * d + 1]
        at += (lo if hi - lo == 1 else lo + i - tiles[t, zcol + 2 * d]) * (arr.strides[d] // arr.itemsize)
    return at


@pjit
def _matmul_tiles_k(a, b, out, tiles, p, emin, top, wrap):
    # a [B0..B3, M, K], b [B0..B3, K, N], out [B0..B3, M, N], C-contiguous; rows: the six ranges
    # of A's region, of B's, of C's, first. Per leaf and batch element of its region, one
    # product A[m, k] @ B[k, n] in a scratch block, stored in or added to its region of C
    starts = _groups(tiles, 24, 36)
    double = a.itemsize == 8
    kk, nn, mo, no = a.shape[5], b.shape[5], out.shape[4], out.shape[5]
    flat = out.reshape(-1)
    for g in prange(len(starts) - 1):
        args = _gemm_args()
        t = starts[g]
        m, n = tiles[t, 33] - tiles[t, 32], tiles[t, 35] - tiles[t, 34]
        y = np.empty(m * n, a.dtype)
        for t in range(starts[g], starts[g + 1]):
            m0, k0, k1, n0, first = tiles[t, 8], tiles[t, 10], tiles[t, 11], tiles[t, 22], tiles[t, 36]
            for i0 in range(tiles[t, 24], tiles[t, 25]):
                for i1 in range(tiles[t, 26], tiles[t, 27]):
                    for i2 in range(tiles[t, 28], tiles[t, 29]):
                        for i3 in range(tiles[t, 30], tiles[t, 31]):
                            if k1 > k0:
                                ao = _at(a, tiles, t, 0, 24, i0, i1, i2, i3) + m0 * kk + k0
                                bo = _at(b, tiles, t, 12, 24, i0, i1, i2, i3) + tiles[t, 20] * nn + n0
                                _gemm(args, m, n, k1 - k0, a.ctypes.data + a.itemsize * ao, kk,
                                      b.ctypes.data + b.itemsize * bo, nn, y.ctypes.data, n, double)
                            else:
                                y[:] = 0
                            c = ((((i0 * out.shape[1] + i1) * out.shape[2] + i2) * out.shape[3] + i3) * mo
                                 + tiles[t, 32]) * no + tiles[t, 34]
                            for i in range(m):
                                for j in range(n):
                                    flat[c + j] = _combine(flat[c + j], y[i * n + j], first, p, emin, top, wrap)
                                c += no


@jit
def _shared(tiles, cols):
    # the rows in an order that puts rows equal in columns `cols` together, and the first
    # position of each run of equal rows, and the end
    n = tiles.shape[0]
    key = np.empty(n, np.uint64)
    for t in range(n):
        h = np.uint64(14695981039346656037)
        for c in cols:
            h = (h ^ np.uint64(tiles[t, c] & 0xFFFFFFFF)) * np.uint64(1099511628211)
        key[t] = h
    order = np.argsort(key, kind="mergesort")
    starts = [0]
    for i in range(1, n):
        for c in cols:
            if tiles[order[i], c] != tiles[order[i - 1], c]:
                starts.append(i)
                break
    starts.append(n)
    return order, starts


@jit
def _im2col(x, b, c0, c1, h0, h1, w0, w1, oh0, oh1, ow0, ow1, kh, kw, s, pt, pl, col):
    # col[(c, i, j), (oh, ow)] = X[b, c, oh*s - pt + i, ow*s - pl + j] inside the region
    # [h0, h1) x [w0, w1) of the leaf, 0 outside it (the leaf's padding). x and col
    # C-contiguous, indexed flat
    xf, cf = x.reshape(-1), col.reshape(-1)
    hgt, wid = x.shape[2], x.shape[3]
    wo, pix = ow1 - ow0, (oh1 - oh0) * (ow1 - ow0)
    for ci in range(c1 - c0):
        base = (b * x.shape[1] + c0 + ci) * hgt * wid
        for i in range(kh):
            for j in range(kw):
                # the outputs whose tap j reads inside [w0, w1): [lo, hi), relative to ow0
                lo = min(max(ow0, -((pl + w0 - j) // -s)), ow1) - ow0
                hi = max(min(ow1, -((pl + w1 - j) // -s)), lo + ow0) - ow0
                d = ((ci * kh + i) * kw + j) * pix
                for oh in range(oh0, oh1):
                    hr = oh * s - pt + i
                    if h0 <= hr < h1:
                        at = base + hr * wid + (lo + ow0) * s - pl + j
                        for q in range(lo):
                            cf[d + q] = 0.0
                        for q in range(hi - lo):
                            cf[d + lo + q] = xf[at + q * s]
                        for q in range(hi, wo):
                            cf[d + q] = 0.0
                    else:
                        for q in range(wo):
                            cf[d + q] = 0.0
                    d += wo


@jit
def _conv_offsets(tiles):
    # where each leaf's product starts in the scratch array, and its end
    at = np.empty(tiles.shape[0] + 1, np.int64)
    at[0] = 0
    for t in range(tiles.shape[0]):
        at[t + 1] = at[t] + ((tiles[t, 17] - tiles[t, 16]) * (tiles[t, 9] - tiles[t, 8])
                             * (tiles[t, 21] - tiles[t, 20]) * (tiles[t, 23] - tiles[t, 22]))
    return at


@pjit
def _conv2d_tiles_k(x, w, out, tiles, prod, s, pt, pl, p, emin, top, wrap):
    # rows: (n, c, h, w) ranges of X, (o, c, kh, kw) of W, (n, o, ho, wo) of Y, first. Leaves
    # reading the same X region (channels, cells, images) share its im2col; each leaf's product
    # W[o, c, :, :] @ col is its own BLAS call, kept in `prod`, then stored in or added to its
    # region of Y in plan order
    kh, kw, cw = w.shape[2], w.shape[3], w.shape[1] * w.shape[2] * w.shape[3]
    double = x.itemsize == 8
    at = _conv_offsets(tiles)               # each leaf's product in `prod`
    order, shared = _shared(tiles, np.array([0, 1, 2, 3, 4, 5, 6, 7, 20, 21, 22, 23]))
    for g in prange(len(shared) - 1):
        args = _gemm_args()
        t = order[shared[g]]
        xn0, c0, c1 = tiles[t, 0], tiles[t, 2], tiles[t, 3]
        oh0, oh1, ow0, ow1 = tiles[t, 20], tiles[t, 21], tiles[t, 22], tiles[t, 23]
        rows, pix = (c1 - c0) * kh * kw, (oh1 - oh0) * (ow1 - ow0)
        col = np.empty((rows, pix), x.dtype)
        for b in range(tiles[t, 1] - xn0):
            _im2col(x, xn0 + b, c0, c1, tiles[t, 4], tiles[t, 5], tiles[t, 6], tiles[t, 7],
                    oh0, oh1, ow0, ow1, kh, kw, s, pt, pl, col)
            for q in range(shared[g], shared[g + 1]):
                u = order[q]
                o0, o1 = tiles[u, 8], tiles[u, 9]
                y = prod[at[u] + b * (o1 - o0) * pix:at[u] + (b + 1) * (o1 - o0) * pix]
                if rows:
                    _gemm(args, o1 - o0, pix, rows, w.ctypes.data + w.itemsize * (o0 * cw + tiles[u, 10] * kh * kw),
                          cw, col.ctypes.data, pix, y.ctypes.data, pix, double)
                else:
                    y[:] = 0
    starts = _groups(tiles, 16, 24)
    flat = out.reshape(-1)
    for g in prange(len(starts) - 1):
        for t in range(starts[g], starts[g + 1]):
            n0, n1, o0, o1 = tiles[t, 16], tiles[t, 17], tiles[t, 18], tiles[t, 19]
            oh0, oh1, ow0, ow1, first = tiles[t, 20], tiles[t, 21], tiles[t, 22], tiles[t, 23], tiles[t, 24]
            wo = ow1 - ow0
            k = at[t]
            for b in range(n0, n1):
                for o in range(o0, o1):
                    for oh in range(oh0, oh1):
                        d = ((b * out.shape[1] + o) * out.shape[2] + oh) * out.shape[3] + ow0
                        if first and not p and not wrap:
                            for q in range(wo):
                                flat[d + q] = prod[k + q]
                        elif not p and not wrap:
                            for q in range(wo):
                                flat[d + q] += prod[k + q]
                        else:
                            for q in range(wo):
                                flat[d + q] = _combine(flat[d + q], prod[k + q], first, p, emin, top, wrap)
                        k += wo


# ---------------------------------------------------------------- windows and elementwise

@pjit
def _pool_tiles_k(x, out, tiles, k, s, pt, pl, average, p, emin, top):
    # rows: (n, c, h, w) ranges of X, (n, c, ho, wo) of Y, first. ONNX MaxPool (padding never
    # wins, NaN wins) or AveragePool without the padding, over the leaf's X region
    starts = _groups(tiles, 8, 16)
    for g in prange(len(starts) - 1):
        for t in range(starts[g], starts[g + 1]):
            xn0, xc0, h0, h1, w0, w1 = tiles[t, 0], tiles[t, 2], tiles[t, 4], tiles[t, 5], tiles[t, 6], tiles[t, 7]
            n0, n1, c0, c1 = tiles[t, 8], tiles[t, 9], tiles[t, 10], tiles[t, 11]
            for b in range(n1 - n0):
                for c in range(c1 - c0):
                    for oh in range(tiles[t, 12], tiles[t, 13]):
                        for ow in range(tiles[t, 14], tiles[t, 15]):
                            m = -np.inf
                            acc = 0.0
                            cnt = 0
                            for hi in range(max(oh * s - pt, h0), min(oh * s - pt + k, h1)):
                                for wi in range(max(ow * s - pl, w0), min(ow * s - pl + k, w1)):
                                    v = x[xn0 + b, xc0 + c, hi, wi]
                                    if v > m or v != v:
                                        m = v
                                    acc += v
                                    cnt += 1
                            r = acc / cnt if average else m
                            out[n0 + b, c0 + c, oh, ow] = _dest(r, p, emin, top, False)


@jit
def _apply(op, a, b):
    # the float64 value of elementwise opcode number `op` (ELEMENTWISE order) at a (and b), as
    # the opcode's leaf kernel computes it
    if op == 0:
        return a + b
    if op == 1:
        return a - b
    if op == 2:
        return a * b
    if op == 3:
        return a / b
    if op == 4:
        return 0.0 if a < 0 else a
    if op == 5:
        return 1.0 / (1.0 + np.exp(-a))
    if op == 6:
        return np.tanh(a)
    if op == 7:
        return np.exp(a)
    if op == 8:
        return math.sqrt(a) if a >= 0 else np.nan
    if op == 9:
        return 1.0 / math.sqrt(a) if a >= 0 else np.nan
    if op == 10:
        return math.erf(a)
    if op == 11:
        return np.log(a) if a >= 0 else np.nan
    if op == 12:
        return abs(a)
    if op == 13:
        return -a
    if op == 14:
        return a ** b
    if op == 15:
        return a if (a <= b or a != a) else b
    return a if (a >= b or a != a) else b


@jit
def _run(op, xf, xa, xs, yf, ya, ys, zf, za, n, p, emin, top):
    # Z[za + q] = op(X[xa + q*xs], Y[ya + q*ys]) for q < n, flat; the loop per opcode
    if op == 0:
        for q in range(n):
            zf[za + q] = _dest(np.float64(xf[xa + q * xs]) + np.float64(yf[ya + q * ys]), p, emin, top, False)
    elif op == 4:
        for q in range(n):
            zf[za + q] = _dest(_apply(4, np.float64(xf[xa + q * xs]), 0.0), p, emin, top, False)
    else:
        for q in range(n):
            zf[za + q] = _dest(_apply(op, np.float64(xf[xa + q * xs]), np.float64(yf[ya + q * ys])),
                               p, emin, top, False)


@pjit
def _elementwise_tiles_k(op, x, y, out, tiles, p, emin, top):
    # rows: the 4-d regions of X, Y and Z, first; a source's dimension of extent 1 under a wider
    # one of Z is broadcast. All three C-contiguous, indexed flat
    starts = _groups(tiles, 16, 24)
    xf, yf, zf = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    for g in prange(len(starts) - 1):
        t = starts[g]
        xs, ys, zs = np.empty(4, np.int64), np.empty(4, np.int64), np.empty(4, np.int64)
        xa, ya, za = 0, 0, 0
        for d in range(3, -1, -1):          # element strides; 0 along a broadcast dimension
            xs[d] = x.strides[d] // x.itemsize if tiles[t, 2 * d + 1] - tiles[t, 2 * d] > 1 else 0
            ys[d] = y.strides[d] // y.itemsize if tiles[t, 9 + 2 * d] - tiles[t, 8 + 2 * d] > 1 else 0
            zs[d] = out.strides[d] // out.itemsize
            z0 = tiles[t, 16 + 2 * d]
            xa += tiles[t, 2 * d] * (x.strides[d] // x.itemsize) - z0 * xs[d]
            ya += tiles[t, 8 + 2 * d] * (y.strides[d] // y.itemsize) - z0 * ys[d]
        n = tiles[t, 23] - tiles[t, 22]
        for i0 in range(tiles[t, 16], tiles[t, 17]):
            for i1 in range(tiles[t, 18], tiles[t, 19]):
                for i2 in range(tiles[t, 20], tiles[t, 21]):
                    i3 = tiles[t, 22]
                    _run(op, xf, xa + i0 * xs[0] + i1 * xs[1] + i2 * xs[2] + i3 * xs[3], xs[3],
                         yf, ya + i0 * ys[0] + i1 * ys[1] + i2 * ys[2] + i3 * ys[3], ys[3],
                         zf, i0 * zs[0] + i1 * zs[1] + i2 * zs[2] + i3 * zs[3], n, p, emin, top)


# ---------------------------------------------------------------- wrappers

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
#: the elementwise opcodes `_apply` computes, in its numbering
ELEMENTWISE = ("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf",
               "log", "abs", "neg", "pow", "min", "max")


def _c(a, dtype) -> np.ndarray:
    """`a` as a writeable C-contiguous array of `dtype` (one compiled form per kernel)."""
    a = np.ascontiguousarray(a, dtype)
    return a if a.flags.writeable else a.copy()


def _buffer(out: np.ndarray):
    """(the array a kernel writes, its destination parameters (bits, emin, top, wrap), and a
    function that puts the buffer's values in `out`): `out` itself where it is a C-contiguous
    float32 or int32 array, else a copy, float32 for the float types."""
    kind = dtype_name(out.dtype)
    if kind in ("f32", "i32"):
        buf = out if out.flags.c_contiguous and out.flags.writeable else np.array(out, order="C")
    else:
        buf = out.astype(np.float32, order="C")
    params = {"f32": _F32_DEST, "f16": _F16_DEST, "bf16": _BF16_DEST}.get(kind, (0, 0, 0.0))

    def done():
        if buf is not out:
            out[...] = buf                  # exact: buf holds values of out's type
    return buf, (*params, kind == "i32"), done


#: the least multiply-adds of a batch call run on all the host's threads: starting and joining
#: them costs tens of microseconds, and milliseconds on a host whose cores are busy
PARALLEL_MACS = 1 << 24


@contextmanager
def _threads(macs: int):
    """Kernels inside use the host's threads for `macs` multiply-adds or more, else one."""
    before = numba.get_num_threads()
    numba.set_num_threads(before if macs >= PARALLEL_MACS else 1)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _macs(tiles: np.ndarray, cols: list) -> int:
    """The multiply-adds of the leaves: the product of the extents at `cols` (start columns)."""
    return int(np.prod(tiles[:, [c + 1 for c in cols]] - tiles[:, cols], axis=1).sum())


def _matmul_tiles(ins, a, tiles, out):
    ra, rb = ins[0].ndim, ins[1].ndim
    with _threads(_macs(tiles, [2 * (ra + rb + d) for d in range(out.ndim)] + [2 * ra - 2])):
        if out.ndim == 2 and ins[0].dtype == _F32 and ins[1].dtype == _F32 and out.dtype == _F32:
            return _MATMUL_BATCH["matmul"](ins, a, tiles, out)    # sgemm adding in place
        if out.ndim > 6:
            return _MATMUL_BATCH["matmul"](ins, a, tiles, out)    # each leaf's kernel in turn
        mac = _F64 if ins[0].dtype.kind in "iu" else _F32
        buf, dest, done = _buffer(out)
        _matmul_tiles_k(_six(ins[0], mac), _six(ins[1], mac), _six(buf, buf.dtype),
                        _padded(tiles, [x.ndim for x in (*ins, out)], 6), *dest)
        done()


def _six(x: np.ndarray, dtype) -> np.ndarray:
    """x as a C-contiguous array of `dtype` with four batch dimensions (leading ones of size 1)."""
    return _c(x, dtype).reshape((1,) * (6 - x.ndim) + x.shape)


def _padded(tiles: np.ndarray, ranks: list, rank: int) -> np.ndarray:
    """The tile table with every operand's region given `rank` dimensions: leading (0, 1)."""
    cols, at = [], 0
    for r in ranks:
        pad = np.zeros((len(tiles), 2 * (rank - r)), np.int64)
        pad[:, 1::2] = 1
        cols.append(np.hstack([pad, tiles[:, at:at + 2 * r]]))
        at += 2 * r
    return np.ascontiguousarray(np.hstack(cols + [tiles[:, -1:]]))


def _conv2d_tiles(ins, a, tiles, out):
    mac = _F64 if ins[0].dtype.kind in "iu" else _F32
    top, left, _, _ = pads(a)
    x, w = _c(ins[0], mac), _c(ins[1], mac)
    buf, dest, done = _buffer(out)
    sizes = np.prod(tiles[:, [17, 19, 21, 23]] - tiles[:, [16, 18, 20, 22]], axis=1)
    with _threads(_macs(tiles, [16, 8, 2, 20, 22]) * w.shape[2] * w.shape[3]):
        for lo, hi in _chunks(sizes):
            _conv2d_tiles_k(x, w, buf, tiles[lo:hi], _scratch(int(sizes[lo:hi].sum()), mac),
                            a["stride"], top, left, *dest)
    done()


#: the most elements of leaf products one batch call keeps at once
SCRATCH_ELEMENTS = 1 << 24
_SCRATCH: dict = {}


def _chunks(sizes: np.ndarray) -> list:
    """Consecutive row ranges of the tile table whose products fit SCRATCH_ELEMENTS (one row at
    least): run one after the other, they keep the plan's order in every region."""
    ends = np.cumsum(sizes)
    out, lo = [], 0
    while lo < len(sizes):
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + SCRATCH_ELEMENTS, side="right")))
        out.append((lo, hi))
        lo = hi
    return out


def _scratch(n: int, dtype) -> np.ndarray:
    """n elements of scratch space, kept from call to call (fresh pages cost a fault each)."""
    buf = _SCRATCH.get(dtype)
    if buf is None or len(buf) < n:
        buf = _SCRATCH[dtype] = np.empty(max(n, 1 << 16), dtype)
    return buf


def _floats(ins, out) -> bool:
    return all(x.dtype.kind == "f" or x.dtype == NP_DTYPES["bf16"] for x in (*ins, out))


def _pool_tiles(average: bool):
    def run(ins, a, tiles, out):               # the checker admits float data only
        top, left, _, _ = pads(a)
        buf, (p, emin, hi, _), done = _buffer(out)
        with _threads(_macs(tiles, [8, 10, 12, 14]) * a["kernel"] ** 2):
            _pool_tiles_k(_c(ins[0], _F32), buf, tiles, a["kernel"], a["stride"], top, left,
                          average, p, emin, hi)
        done()
    return run


def _four(x: np.ndarray) -> np.ndarray:
    return _c(x, _F32).reshape((1,) * (4 - x.ndim) + x.shape)


def _elementwise_tiles(op: str):
    def run(ins, a, tiles, out):
        if not _floats(ins, out) or out.ndim > 4:
            return _per_leaf(op, ins, a, tiles, out)
        table = _padded(tiles, [x.ndim for x in (*ins, out)], 4)
        if len(ins) == 1:                           # Y is X
            table = np.ascontiguousarray(np.hstack([table[:, :8], table]))
        x = _four(ins[0])
        y = _four(ins[1]) if len(ins) > 1 else x
        buf, (p, emin, hi, _), done = _buffer(out)
        with _threads(out.size):
            _elementwise_tiles_k(ELEMENTWISE.index(op), x, y,
                                 buf.reshape((1,) * (4 - out.ndim) + out.shape), table, p, emin, hi)
        done()
    return run


def _per_leaf(op: str, ins, a, tiles, out):
    """Each leaf's kernel in turn on its regions (elementwise: no attribute changes with the
    region), its value stored in or added to `out`."""
    ranks = [x.ndim for x in ins] + [out.ndim]
    for row in tiles.tolist():
        regions, col = [], 0
        for r in ranks:
            regions.append([(row[col + 2 * d], row[col + 2 * d + 1]) for d in range(r)])
            col += 2 * r
        leaf_ins = [x[tuple(slice(lo, hi) for lo, hi in reg)] for x, reg in zip(ins, regions)]
        where = tuple(slice(lo, hi) for lo, hi in regions[-1])
        value = LEAF_KERNELS[op](leaf_ins, a, TensorType(dtype_name(out.dtype),
                                                             tuple(hi - lo for lo, hi in regions[-1])))
        if row[-1]:
            out[where] = value
        else:
            out[where] += value


#: the opcodes whose leaves run in one call per node (`compiler.execute`'s `batch`)
LEAF_BATCH_KERNELS = {"matmul": _matmul_tiles, "conv2d": _conv2d_tiles,
                      "maxpool": _pool_tiles(False), "avgpool": _pool_tiles(True),
                      **{op: _elementwise_tiles(op) for op in ELEMENTWISE}}


def warm_up_batches() -> None:
    """Compile (or load from the cache) every batch kernel, for every data type it serves."""
    one = np.array([[0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 1]], np.int64)
    for dt in ("f32", "f16", "i8"):
        m = np.ones((2, 2), NP_DTYPES[dt])
        _matmul_tiles([m, m], {}, one, np.zeros((2, 2), NP_DTYPES["i32" if dt == "i8" else dt]))
    x, w = np.ones((1, 2, 3, 3), np.float32), np.ones((1, 2, 3, 3), np.float32)
    conv = np.array([[0, 1, 0, 2, 0, 3, 0, 3, 0, 1, 0, 2, 0, 3, 0, 3, 0, 1, 0, 1, 0, 3, 0, 3, 1]])
    for dt in ("f32", "i8"):
        y = np.zeros((1, 1, 3, 3), np.float32 if dt == "f32" else np.int32)
        _conv2d_tiles([x.astype(NP_DTYPES[dt]), w.astype(NP_DTYPES[dt])], {"stride": 1, "pad": 1}, conv, y)
    pool = np.array([[0, 1, 0, 2, 0, 3, 0, 3, 0, 1, 0, 2, 0, 2, 0, 2, 1]])
    for op in ("maxpool", "avgpool"):
        LEAF_BATCH_KERNELS[op]([x], {"kernel": 2, "stride": 1, "pad": 0}, pool,
                               np.zeros((1, 2, 2, 2), np.float32))
    v = np.ones((2, 2), np.float32)
    LEAF_BATCH_KERNELS["add"]([v, v], {}, np.array([[0, 2, 0, 2] * 3 + [1]]), np.zeros((2, 2), np.float32))
