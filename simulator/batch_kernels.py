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
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from llvmlite.binding import add_symbol
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic
from scipy.linalg.cython_blas import __pyx_capi__

from isa.errors import InternalError
from isa.opcodes import pads
from isa.program import TensorType
from isa.reference import NP_DTYPES, dtype_name
from simulator.kernels import LEAF_BATCH_KERNELS as _MATMUL_BATCH
from simulator.kernels import LEAF_KERNELS

__all__ = ["LEAF_BATCH_KERNELS", "warm_up_batches"]

# nogil: the parts of a batch run on threads of `_POOL` (waiting on a lock, where numba's own
# parallel loops spin: on a host whose cores are busy that costs milliseconds per call)
jit = njit(cache=True, error_model="numpy", nogil=True)


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
def _narrow(v, p, emin, top):
    # float64 v rounded to nearest even at p significant bits (subnormals below 2^(emin-1)),
    # +-inf beyond the largest finite value `top`: round half to even on v's own bits, the carry
    # running into the exponent
    b = _bits(v)
    e = np.int64((b >> np.uint64(52)) & np.uint64(0x7FF)) - 1022      # frexp's exponent
    if e == 1025 or v == 0.0:                   # inf, NaN, 0
        return v
    if e >= emin:                               # a normal number of the narrow type
        drop = np.uint64(53 - p)
        b = (b + ((np.uint64(1) << (drop - np.uint64(1))) - np.uint64(1)) + ((b >> drop) & np.uint64(1))) \
            & ~((np.uint64(1) << drop) - np.uint64(1))
    else:
        b = _subnormal(b, v, e, p, emin)
    r = _float(b)
    if abs(r) > top:
        return math.copysign(math.inf, v)
    return r


@jit
def _subnormal(b, v, e, p, emin):
    # the bits of v (frexp exponent e, below the narrow type's normal range) rounded half to even
    # to a multiple of its smallest subnormal, 2^(emin - p)
    drop = emin - p - (e - 53)                  # low bits of the 53-bit significand to drop
    if drop >= 54 or drop == 53 and b & np.uint64(0xFFFFFFFFFFFFF) == 0:
        return _bits(math.copysign(0.0, v))     # below half the quantum, or a tie with 0
    if drop == 53:
        return _bits(math.copysign(math.ldexp(1.0, e), v))  # above half the quantum
    one = np.uint64(1) << np.uint64(drop)
    low = b & (one - np.uint64(1))
    b -= low
    half = one >> np.uint64(1)
    odd = drop == 52 or b & one != 0            # at 52 only the implicit leading 1 is kept
    if low > half or low == half and odd:
        b += one
    return b


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
    # the first row of each run of rows equal in columns lo:hi (an output region), and the end
    starts = np.empty(tiles.shape[0] + 1, np.int64)
    n = 1
    starts[0] = 0
    for t in range(1, tiles.shape[0]):
        for j in range(lo, hi):
            if tiles[t, j] != tiles[t - 1, j]:
                starts[n] = t
                n += 1
                break
    starts[n] = tiles.shape[0]
    return starts[:n + 1] if tiles.shape[0] else starts[:1]


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


@jit
def _upcast_k(bits, table, out, part, parts):
    # out = table[bits]: 16-bit floats to float32, exactly; elements part, part + parts, ...
    # in blocks of 4096
    for blk in range(part, (bits.size + 4095) // 4096, parts):
        for i in range(blk * 4096, min(bits.size, blk * 4096 + 4096)):
            out[i] = table[bits[i]]


@jit
def _downcast_k(src, bits, table, part, parts):
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


@jit
def _matmul_tiles_k(a, b, out, tiles, starts, p, emin, top, wrap, part, parts):
    # a [B0..B3, M, K], b [B0..B3, K, N], out [B0..B3, M, N], C-contiguous; rows: the six ranges
    # of A's region, of B's, of C's, first. Per leaf and batch element of its region, one
    # product A[m, k] @ B[k, n] in a scratch block, stored in or added to its region of C. The
    # output regions (from `starts`) part, part + parts, ...
    double = a.itemsize == 8
    kk, nn, mo, no = a.shape[5], b.shape[5], out.shape[4], out.shape[5]
    flat = out.reshape(-1)
    for g in range(part, len(starts) - 1, parts):
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
    starts = np.empty(n + 1, np.int64)
    runs = 1
    starts[0] = 0
    for i in range(1, n):
        for c in cols:
            if tiles[order[i], c] != tiles[order[i - 1], c]:
                starts[runs] = i
                runs += 1
                break
    starts[runs] = n
    return order, starts[:runs + 1] if n else starts[:1]


@jit
def _im2col(x, b, c0, c1, h0, h1, w0, w1, oh0, oh1, ow0, ow1, kh, kw, s, pt, pl, col):
    # col[(c, i, j), (oh, ow)] = X[b, c, oh*s - pt + i, ow*s - pl + j] inside the region
    # [h0, h1) x [w0, w1) of the leaf, 0 outside it (the leaf's padding). x and col
    # C-contiguous, indexed flat by unsigned offsets (no negative-index check: the copies vectorize)
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
                    ud = np.uint64(d)
                    if h0 <= hr < h1:
                        at = np.uint64(base + hr * wid + (lo + ow0) * s - pl + j)
                        for q in range(lo):
                            cf[ud + np.uint64(q)] = 0.0
                        ul = ud + np.uint64(lo)
                        if s == 1:
                            for q in range(hi - lo):
                                cf[ul + np.uint64(q)] = xf[at + np.uint64(q)]
                        else:
                            us = np.uint64(s)
                            for q in range(hi - lo):
                                cf[ul + np.uint64(q)] = xf[at + np.uint64(q) * us]
                        for q in range(hi, wo):
                            cf[ud + np.uint64(q)] = 0.0
                    else:
                        for q in range(wo):
                            cf[ud + np.uint64(q)] = 0.0
                    d += wo


@jit
def _conv_products_k(x, w, tiles, order, shared, at, prod, s, pt, pl, part, parts):
    # rows: (n, c, h, w) ranges of X, (o, c, kh, kw) of W, (n, o, ho, wo) of Y, first. The leaves
    # of each run of `order` from `shared` read the same X region (channels, cells, images) and
    # share its im2col; each leaf's product W[o, c, :, :] @ col is its own BLAS call, kept in
    # prod[at[leaf]:]. Runs part, part + parts, ...
    kh, kw, cw = w.shape[2], w.shape[3], w.shape[1] * w.shape[2] * w.shape[3]
    double = x.itemsize == 8
    for g in range(part, len(shared) - 1, parts):
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


@jit
def _conv_combine_k(out, tiles, starts, at, prod, p, emin, top, wrap, part, parts):
    # each leaf's product stored in (first) or added to its region of Y, the leaves of an output
    # region (runs of `starts`) in plan order; regions part, part + parts, ...
    flat = out.reshape(-1)
    for g in range(part, len(starts) - 1, parts):
        for t in range(starts[g], starts[g + 1]):
            n0, n1, o0, o1 = tiles[t, 16], tiles[t, 17], tiles[t, 18], tiles[t, 19]
            oh0, oh1, ow0, ow1, first = tiles[t, 20], tiles[t, 21], tiles[t, 22], tiles[t, 23], tiles[t, 24]
            wo = ow1 - ow0
            k = at[t]
            for b in range(n0, n1):
                for o in range(o0, o1):
                    for oh in range(oh0, oh1):
                        d = np.uint64(((b * out.shape[1] + o) * out.shape[2] + oh) * out.shape[3] + ow0)
                        uk = np.uint64(k)
                        if first and not p and not wrap:
                            for q in range(wo):
                                flat[d + np.uint64(q)] = prod[uk + np.uint64(q)]
                        elif not p and not wrap:
                            for q in range(wo):
                                flat[d + np.uint64(q)] += prod[uk + np.uint64(q)]
                        else:
                            for q in range(wo):
                                uq = np.uint64(q)
                                flat[d + uq] = _combine(flat[d + uq], prod[uk + uq], first, p, emin, top, wrap)
                        k += wo


# ---------------------------------------------------------------- windows and elementwise

@jit
def _window(xf, at, wid, r0, r1, c0, c1, average):
    # the max (NaN wins) or the mean of X's cells [r0, r1) x [c0, c1) of the plane at `at`
    m, acc = -np.inf, 0.0
    for hi in range(r0, r1):
        row = np.uint64(at + hi * wid)
        for wi in range(c0, c1):
            v = xf[row + np.uint64(wi)]
            if average:
                acc += v
            elif v > m or v != v:
                m = v
    return acc / ((r1 - r0) * (c1 - c0)) if average else m


@jit
def _pool_tiles_k(x, out, tiles, k, s, pt, pl, average, p, emin, top, part, parts):
    # rows: (n, c, h, w) ranges of X, (n, c, ho, wo) of Y, first. ONNX MaxPool (padding never
    # wins, NaN wins) or AveragePool without the padding, over X's region [h0, h1) x [w0, w1);
    # rows part, part + parts, ...
    xf, yf = x.reshape(-1), out.reshape(-1)
    hgt, wid = x.shape[2], x.shape[3]
    for t in range(part, tiles.shape[0], parts):
        xn0, xc0, h0, h1, w0, w1 = tiles[t, 0], tiles[t, 2], tiles[t, 4], tiles[t, 5], tiles[t, 6], tiles[t, 7]
        n0, n1, c0, c1 = tiles[t, 8], tiles[t, 9], tiles[t, 10], tiles[t, 11]
        for b in range(n1 - n0):
            for c in range(c1 - c0):
                at = ((xn0 + b) * x.shape[1] + xc0 + c) * hgt * wid
                for oh in range(tiles[t, 12], tiles[t, 13]):
                    r0, r1 = max(oh * s - pt, h0), min(oh * s - pt + k, h1)
                    y = np.uint64((((n0 + b) * out.shape[1] + c0 + c) * out.shape[2] + oh) * out.shape[3])
                    for ow in range(tiles[t, 14], tiles[t, 15]):
                        r = _window(xf, at, wid, r0, r1, max(ow * s - pl, w0), min(ow * s - pl + k, w1),
                                    average)
                        yf[y + np.uint64(ow)] = _dest(r, p, emin, top, False)


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
def _row(op, xf, xa, xs, yf, ya, ys, zf, za, n, p, emin, top):
    # Z[za + q] = op(X[xa + q*xs], Y[ya + q*ys]) for q < n, flat, by unsigned offsets (no
    # negative-index check); one loop per common opcode
    xa, ya, za, xs, ys = np.uint64(xa), np.uint64(ya), np.uint64(za), np.uint64(xs), np.uint64(ys)
    if p:
        for q in range(n):
            u = np.uint64(q)
            zf[za + u] = _narrow(_apply(op, np.float64(xf[xa + u * xs]), np.float64(yf[ya + u * ys])),
                                 p, emin, top)
    elif op == 0:
        for q in range(n):
            u = np.uint64(q)
            zf[za + u] = np.float64(xf[xa + u * xs]) + np.float64(yf[ya + u * ys])
    elif op == 4:
        for q in range(n):
            u = np.uint64(q)
            v = xf[xa + u * xs]
            zf[za + u] = 0.0 if v < 0 else v
    else:
        for q in range(n):
            u = np.uint64(q)
            zf[za + u] = _apply(op, np.float64(xf[xa + u * xs]), np.float64(yf[ya + u * ys]))


@jit
def _step(arr, tiles, t, col, d):
    # the element stride of arr along d, 0 where its region (at column `col` of row t) has extent
    # 1 (broadcast against Z's, or Z's extent 1 too); and the offset its region start adds
    st = arr.strides[d] // arr.itemsize
    lo = tiles[t, col + 2 * d]
    if tiles[t, col + 2 * d + 1] - lo > 1:
        return st, (lo - tiles[t, 16 + 2 * d]) * st
    return 0, lo * st


@jit
def _reading(arr, tiles, t, col):
    # arr's four strides as Z's index moves (0 where broadcast), and the offset of the element
    # Z's index (0, 0, 0, 0) would read
    s0, a0 = _step(arr, tiles, t, col, 0)
    s1, a1 = _step(arr, tiles, t, col, 1)
    s2, a2 = _step(arr, tiles, t, col, 2)
    s3, a3 = _step(arr, tiles, t, col, 3)
    return s0, s1, s2, s3, a0 + a1 + a2 + a3


@jit
def _elementwise_tiles_k(op, x, y, out, tiles, p, emin, top, part, parts):
    # rows: the 4-d regions of X, Y and Z, first; a source's dimension of extent 1 under a wider
    # one of Z is broadcast. All three C-contiguous, indexed flat; a region's rows that lie end to
    # end in all three run as one
    xf, yf, zf = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    z1, z2 = out.shape[1] * out.shape[2] * out.shape[3], out.shape[2] * out.shape[3]
    for t in range(part, tiles.shape[0], parts):
        x0, x1, x2, x3, xa = _reading(x, tiles, t, 0)
        y0, y1, y2, y3, ya = _reading(y, tiles, t, 8)
        lo0, lo1, lo2, lo3 = tiles[t, 16], tiles[t, 18], tiles[t, 20], tiles[t, 22]
        e1, e2, n = tiles[t, 19] - lo1, tiles[t, 21] - lo2, tiles[t, 23] - lo3
        if n == out.shape[3] and x2 == x3 * n and y2 == y3 * n:        # rows end to end
            n, e2 = n * e2, 1
            if e2 * n == z2 and x1 == x3 * n and y1 == y3 * n:
                n, e1 = n * e1, 1
        for i0 in range(lo0, tiles[t, 17]):
            for i1 in range(lo1, lo1 + e1):
                for i2 in range(lo2, lo2 + e2):
                    _row(op, xf, xa + i0 * x0 + i1 * x1 + i2 * x2 + lo3 * x3, x3,
                         yf, ya + i0 * y0 + i1 * y1 + i2 * y2 + lo3 * y3, y3,
                         zf, i0 * z1 + i1 * z2 + i2 * out.shape[3] + lo3, n, p, emin, top)


# ---------------------------------------------------------------- wrappers

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
#: the elementwise opcodes whose result is one of their sources' values, or its negation
_PICKS = ("relu", "abs", "neg", "min", "max")
#: the elementwise opcodes `_apply` computes, in its numbering
ELEMENTWISE = ("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf",
               "log", "abs", "neg", "pow", "min", "max")


def _c(a, dtype) -> np.ndarray:
    """`a` as a writeable C-contiguous array of `dtype` (one compiled form per kernel); f16 and
    bf16 to float32 through a table of all their values (numpy's f16 cast is 3x slower)."""
    table = _UPCAST.get(a.dtype)
    if table is not None and dtype == _F32:
        bits = np.ascontiguousarray(a).view(np.uint16).reshape(-1)
        out = np.empty(a.shape, np.float32)
        _parallel(_upcast_k, (bits, table, out.reshape(-1)), a.size)
        return out
    a = np.ascontiguousarray(a, dtype)
    return a if a.flags.writeable else a.copy()


_NO_TABLE = np.zeros(0, np.uint16)


def _f16_table() -> np.ndarray:
    """The f16 bit pattern of each float32 by its top 19 bits (sign, exponent, 10 bits of
    mantissa: all an f16 value has), made once."""
    if "f16" not in _DOWNCAST:
        with np.errstate(over="ignore"):
            top = (np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)).view(np.float32)
            _DOWNCAST["f16"] = top.astype(np.float16).view(np.uint16)
    return _DOWNCAST["f16"]


_DOWNCAST: dict = {}
#: float32 of every f16 and every bf16 bit pattern
_UPCAST = {NP_DTYPES[t]: np.arange(1 << 16, dtype=np.uint16).view(NP_DTYPES[t]).astype(np.float32)
           for t in ("f16", "bf16")}


def _buffer(out: np.ndarray, adds: bool = True):
    """(the array a kernel writes, its destination parameters (bits, emin, top, wrap), and a
    function that puts the buffer's values in `out`): `out` itself where it is a C-contiguous
    float32 or int32 array, else a C-contiguous copy, float32 for the float types (a fresh one
    where no leaf adds to what `out` holds)."""
    kind = dtype_name(out.dtype)
    if kind in ("f32", "i32") and out.flags.c_contiguous and out.flags.writeable:
        buf = out
    elif kind in ("f32", "i32"):
        buf = np.array(out, order="C")
    else:
        buf = _c(out, _F32) if adds else np.empty(out.shape, np.float32)
    params = {"f32": _F32_DEST, "f16": _F16_DEST, "bf16": _BF16_DEST}.get(kind, (0, 0, 0.0))

    def done():
        if buf is out:
            return
        if kind in ("f16", "bf16") and out.flags.c_contiguous:
            _parallel(_downcast_k, (buf.reshape(-1), out.view(np.uint16).reshape(-1),
                                    _f16_table() if kind == "f16" else _NO_TABLE), out.size)
        else:
            out[...] = buf                  # exact: buf holds values of out's type
    return buf, (*params, kind == "i32"), done


#: the least multiply-adds (or elements) of a batch that runs in parts on the host's threads
PARALLEL_MACS = 1 << 24
_POOL: list = []


def _parallel(kernel, args: tuple, work: int) -> None:
    """kernel(*args, part, parts) for every part: one part below PARALLEL_MACS, else one per
    thread (NUMBA_NUM_THREADS), the first on this thread."""
    parts = numba.config.NUMBA_NUM_THREADS if work >= PARALLEL_MACS else 1
    if parts == 1:
        kernel(*args, 0, 1)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(parts - 1, thread_name_prefix="fractal-leaves"))
    running = [_POOL[0].submit(kernel, *args, k, parts) for k in range(1, parts)]
    kernel(*args, 0, parts)
    for r in running:
        r.result()


def _macs(tiles: np.ndarray, cols: list) -> int:
    """The multiply-adds of the leaves: the product of the extents at `cols` (start columns)."""
    return int(np.prod(tiles[:, [c + 1 for c in cols]] - tiles[:, cols], axis=1).sum())


def _matmul_tiles(ins, a, tiles, out):
    ra, rb = ins[0].ndim, ins[1].ndim
    if out.ndim == 2 and ins[0].dtype == _F32 and ins[1].dtype == _F32 and out.dtype == _F32:
        return _MATMUL_BATCH["matmul"](ins, a, tiles, out)        # sgemm adding in place
    if out.ndim > 6:
        return _MATMUL_BATCH["matmul"](ins, a, tiles, out)        # each leaf's kernel in turn
    mac = _F64 if ins[0].dtype.kind in "iu" else _F32
    buf, dest, done = _buffer(out)
    table = _padded(tiles, [ra, rb, out.ndim], 6)
    _parallel(_matmul_tiles_k, (_six(ins[0], mac), _six(ins[1], mac), _six(buf, buf.dtype), table,
                                _groups(table, 24, 36), *dest),
              _macs(tiles, [2 * (ra + rb + d) for d in range(out.ndim)] + [2 * ra - 2]))
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
    work = int(sizes.sum()) * (tiles[0, 3] - tiles[0, 2] if len(tiles) else 0) * w.shape[2] * w.shape[3]
    for lo, hi in _chunks(sizes):
        part = tiles[lo:hi]
        at = np.concatenate([[0], np.cumsum(sizes[lo:hi])])
        prod = _scratch(int(at[-1]), mac)
        order, shared = _shared(part, _SHARED_COLUMNS)
        _parallel(_conv_products_k, (x, w, part, order, shared, at, prod, a["stride"], top, left), work)
        _parallel(_conv_combine_k, (buf, part, _groups(part, 16, 24), at, prod, *dest), work)
    done()


#: the columns of a conv2d tile row that fix its im2col: X's region and the output's cells
_SHARED_COLUMNS = np.array([0, 1, 2, 3, 4, 5, 6, 7, 20, 21, 22, 23])


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


def _union(tiles: np.ndarray, ins: list, out: np.ndarray, parts: int) -> np.ndarray:
    """The tile table of a pointwise or window batch computed as the union of its leaves'
    regions: the whole output, cut into `parts` along its first dimension of more elements, with
    every source whole (a broadcast source's extent-1 dimensions stay whole). The leaves' output
    regions are disjoint; they must cover the output."""
    rank = out.ndim
    z = tiles[:, -1 - 2 * rank:-1]
    if int(np.prod(z[:, 1::2] - z[:, 0::2], axis=1).sum()) != out.size:
        raise InternalError("the leaves of a pointwise batch cover its output exactly",
                            f"output {out.shape}", f"{len(tiles)} leaf regions")
    d = next((i for i, n in enumerate(out.shape) if n > 1), 0)
    rows = []
    for part in np.array_split(np.arange(out.shape[d]), min(parts, out.shape[d])) if out.size else []:
        row = []
        for x in (*ins, out):
            off = rank - x.ndim                     # a source aligned right against the output
            for i, n in enumerate(x.shape):
                cut = i + off == d and n == out.shape[d] > 1
                row += [int(part[0]), int(part[-1]) + 1] if cut else [0, n]
        rows.append(row + [1])
    return np.array(rows, np.int64).reshape(-1, tiles.shape[1])


def _parts(work: int) -> int:
    return numba.config.NUMBA_NUM_THREADS if work >= PARALLEL_MACS else 1


def _pool_tiles(average: bool):
    def run(ins, a, tiles, out):               # the checker admits float data only
        top, left, _, _ = pads(a)
        buf, (p, emin, hi, _), done = _buffer(out, adds=False)
        work = out.size * a["kernel"] ** 2
        _parallel(_pool_tiles_k, (_c(ins[0], _F32), buf, _union(tiles, ins, out, _parts(work)),
                                  a["kernel"], a["stride"], top, left, average, p, emin, hi), work)
        done()
    return run


def _four(x: np.ndarray) -> np.ndarray:
    return _c(x, _F32).reshape((1,) * (4 - x.ndim) + x.shape)


def _elementwise_tiles(op: str):
    def run(ins, a, tiles, out):
        tiles = _union(tiles, ins, out, _parts(out.size))
        if not _floats(ins, out) or out.ndim > 4:
            return _per_leaf(op, ins, a, tiles, out)
        table = _padded(tiles, [x.ndim for x in (*ins, out)], 4)
        if len(ins) == 1:                           # Y is X
            table = np.ascontiguousarray(np.hstack([table[:, :8], table]))
        x = _four(ins[0])
        y = _four(ins[1]) if len(ins) > 1 else x
        buf, (p, emin, hi, _), done = _buffer(out, adds=False)
        if op in _PICKS:                            # a value of the sources: no rounding
            p = 0
        _parallel(_elementwise_tiles_k, (ELEMENTWISE.index(op), x, y,
                                         buf.reshape((1,) * (4 - out.ndim) + out.shape), table, p, emin, hi),
                  out.size)
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
