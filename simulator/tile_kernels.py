"""The numba kernels of the leaf batches. Each runs over a tile table, one row per leaf, and computes
the parts `part, part + parts, ...` of its work (`simulator.batch_kernels` runs the parts on
threads; every kernel is nogil: numba's own parallel loops wait for their threads spinning, which
on a host whose cores are busy costs milliseconds a call).

A row holds the (start, stop) of every dimension of every input region, then of the output
region, then 1 where the leaf brings the first partial of its region; the rows of one output
region are consecutive and in the plan's order. Products are scipy's BLAS sgemm (dgemm for i8,
exact) called on the regions' addresses. Flat arrays are indexed by unsigned offsets, which
spares numba's negative-index check and lets the copies vectorize.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np
from llvmlite.binding import add_symbol
from numba import njit, types
from scipy.linalg.cython_blas import __pyx_capi__

from simulator.narrow import combine, combine_run, dest, narrow

__all__ = ["groups", "join_partials", "matmul_tiles_k", "matmul_folded_k", "conv_units", "conv_products_k", "conv_combine_k",
           "pool_tiles_k", "elementwise_tiles_k", "unary_k"]

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


@jit
def groups(tiles, lo, hi):
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
def _gemm(args, m, n, k, a, lda, b, ldb, c, ldc, double, beta=0.0):
    # C[m, n] = A[m, k] @ B[k, n] + beta C[m, n] at addresses a, b, c, row-major with lda, ldb,
    # ldc elements between rows: column-major C^T = B^T A^T. args: int32[6], the scalars and the
    # "N" flag, owned by the caller, alive through the call
    if m == 0 or n == 0:
        return
    ints, scal32, scal64, trans = args
    ints[0], ints[1], ints[2], ints[3], ints[4], ints[5] = n, m, k, ldb, lda, ldc
    ip, tr = ints.ctypes.data, trans.ctypes.data
    if double:
        scal64[1] = beta
        sp = scal64.ctypes.data
        _dgemm(tr, tr, ip, ip + 4, ip + 8, sp, b, ip + 12, a, ip + 16, sp + 8, c, ip + 20)
    else:
        scal32[1] = beta
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


@jit
def _into(args, m, n, k, pa, lda, pb, ldb, out, c, ldc, first):
    # a float32 sgemm straight into `out` at element c (ldc elements between rows): the first
    # partial stored, a later one added by sgemm itself (beta = 1); no K, a first partial of 0
    if k > 0:
        _gemm(args, m, n, k, pa, lda, pb, ldb, out.ctypes.data + 4 * c, ldc, False,
              0.0 if first else 1.0)
    elif first:
        flat = out.reshape(-1)
        for i in range(m):
            flat[c + i * ldc:c + i * ldc + n] = 0


@jit
def matmul_tiles_k(a, b, out, tiles, starts, p, emin, top, wrap, part, parts):
    # a [B0..B3, M, K], b [B0..B3, K, N], out [B0..B3, M, N], C-contiguous; rows: the six ranges
    # of A's region, of B's, of C's, first. Per leaf and batch element of its region, one
    # product A[m, k] @ B[k, n]: for a float32 destination written by sgemm into C's region, a
    # later partial added there by sgemm itself (beta = 1); otherwise kept in a scratch block,
    # then stored in or added to C's region, rounded to the destination. The output regions
    # (from `starts`) part, part + parts, ...
    double = a.itemsize == 8
    direct = not p and not wrap
    kk, nn, mo, no = a.shape[5], b.shape[5], out.shape[4], out.shape[5]
    flat = out.reshape(-1)
    for g in range(part, len(starts) - 1, parts):
        args = _gemm_args()
        t = starts[g]
        m, n = tiles[t, 33] - tiles[t, 32], tiles[t, 35] - tiles[t, 34]
        y = np.empty(0 if direct else m * n, a.dtype)
        for t in range(starts[g], starts[g + 1]):
            m0, k0, k1, n0, first = tiles[t, 8], tiles[t, 10], tiles[t, 11], tiles[t, 22], tiles[t, 36]
            for i0 in range(tiles[t, 24], tiles[t, 25]):
                for i1 in range(tiles[t, 26], tiles[t, 27]):
                    for i2 in range(tiles[t, 28], tiles[t, 29]):
                        for i3 in range(tiles[t, 30], tiles[t, 31]):
                            c = ((((i0 * out.shape[1] + i1) * out.shape[2] + i2) * out.shape[3] + i3) * mo
                                 + tiles[t, 32]) * no + tiles[t, 34]
                            ao = _at(a, tiles, t, 0, 24, i0, i1, i2, i3) + m0 * kk + k0
                            bo = _at(b, tiles, t, 12, 24, i0, i1, i2, i3) + tiles[t, 20] * nn + n0
                            pa, pb = a.ctypes.data + a.itemsize * ao, b.ctypes.data + b.itemsize * bo
                            if direct:
                                _into(args, m, n, k1 - k0, pa, kk, pb, nn, out, c, no, first)
                                continue
                            if k1 > k0:
                                _gemm(args, m, n, k1 - k0, pa, kk, pb, nn, y.ctypes.data, n, double)
                            else:
                                y[:] = 0
                            for i in range(m):
                                combine_run(flat, c, y, i * n, n, first, p, emin, top, wrap)
                                c += no


@jit
def matmul_folded_k(a, b, out, tiles, starts, batch, p, emin, top, wrap, part, parts):
    # A matmul whose A is one matrix for every batch element: a [M, K]; b [K, N * nb] (its rows
    # perhaps padded) and out [M, N * nb], C-contiguous, the batch index innermost (column
    # n * nb + the flat batch index in out's batch shape `batch`, 4 dimensions). Rows as
    # `matmul_tiles_k`'s. Per leaf, one product of A's region with the B columns of its region's
    # batch elements side by side (n, then the batch elements in order): where they are every
    # batch element, B's and C's columns are read and written in place, else gathered into a
    # block first and the product's values stored in or added to C's columns. The output
    # regions part, part + parts, ...
    double = a.itemsize == 8
    direct = not p and not wrap
    kk, wide, brow = a.shape[1], out.shape[1], b.shape[1]
    nb = batch[0] * batch[1] * batch[2] * batch[3]
    flat = out.reshape(-1)
    for g in range(part, len(starts) - 1, parts):
        args = _gemm_args()
        block = np.empty(0, a.dtype)            # gathered B columns; live through the loop
        for t in range(starts[g], starts[g + 1]):
            m0, m, first = tiles[t, 32], tiles[t, 33] - tiles[t, 32], tiles[t, 36]
            k0, k1 = tiles[t, 10], tiles[t, 11]
            n0, n = tiles[t, 34], tiles[t, 35] - tiles[t, 34]
            box = 1
            for d in range(4):
                box *= tiles[t, 25 + 2 * d] - tiles[t, 24 + 2 * d]
            js = np.empty(box, np.int64)            # the region's batch elements, flat, in order
            j = 0
            for i0 in range(tiles[t, 24], tiles[t, 25]):
                for i1 in range(tiles[t, 26], tiles[t, 27]):
                    for i2 in range(tiles[t, 28], tiles[t, 29]):
                        for i3 in range(tiles[t, 30], tiles[t, 31]):
                            js[j] = ((i0 * batch[1] + i1) * batch[2] + i2) * batch[3] + i3
                            j += 1
            cols, whole = n * box, box == nb
            pa = a.ctypes.data + a.itemsize * (m0 * kk + k0)
            if whole:
                pb, ldb = b.ctypes.data + b.itemsize * (k0 * brow + n0 * nb), brow
            else:
                if block.size < (k1 - k0) * cols:
                    block = np.empty((k1 - k0) * cols, a.dtype)
                for r in range(k1 - k0):
                    for c in range(n):
                        for j in range(box):
                            block[r * cols + c * box + j] = b[k0 + r, (n0 + c) * nb + js[j]]
                pb, ldb = block.ctypes.data, cols
            if direct and whole:
                _into(args, m, cols, k1 - k0, pa, kk, pb, ldb, out, m0 * wide + n0 * nb, wide, first)
                continue
            y = np.zeros(m * cols, a.dtype)
            if k1 > k0:
                _gemm(args, m, cols, k1 - k0, pa, kk, pb, ldb, y.ctypes.data, cols, double)
            for i in range(m):
                for c in range(n):
                    for j in range(box):
                        at = (m0 + i) * wide + (n0 + c) * nb + js[j]
                        flat[at] = combine(flat[at], y[i * cols + c * box + j], first, p, emin, top,
                                           wrap)


@jit
def _im2col(x, b, c0, c1, h0, h1, w0, w1, oh0, oh1, ow0, ow1, kh, kw, s, pt, pl, col, ld, off):
    # col[(c, i, j), off + (oh, ow)] = X[b, c, oh*s - pt + i, ow*s - pl + j] inside the region
    # [h0, h1) x [w0, w1) of the leaf, 0 outside it (the leaf's padding); col's rows are ld
    # elements apart. x and col C-contiguous, indexed flat by unsigned offsets (no negative-index
    # check: the copies vectorize)
    xf, cf = x.reshape(-1), col.reshape(-1)
    hgt, wid = x.shape[2], x.shape[3]
    wo = ow1 - ow0
    for ci in range(c1 - c0):
        base = (b * x.shape[1] + c0 + ci) * hgt * wid
        for i in range(kh):
            for j in range(kw):
                # the outputs whose tap j reads inside [w0, w1): [lo, hi), relative to ow0
                lo = min(max(ow0, -((pl + w0 - j) // -s)), ow1) - ow0
                hi = max(min(ow1, -((pl + w1 - j) // -s)), lo + ow0) - ow0
                d = ((ci * kh + i) * kw + j) * ld + off
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


#: the columns of a conv2d tile row that fix a leaf's pixels: X's cells and the output's
PIXELS = (4, 5, 6, 7, 20, 21, 22, 23)


@jit
def _same(tiles, t, u, cols):
    for c in cols:
        if tiles[t, c] != tiles[u, c]:
            return False
    return True


@jit
def _natural(tiles, t, kh, kw, s, pt, pl, hgt, wid):
    # whether row t's X region holds every input cell its outputs read inside the image, so that
    # its im2col is the image's own (the leaf pads only where the image is padded)
    return (tiles[t, 4] <= max(tiles[t, 20] * s - pt, 0)
            and tiles[t, 5] >= min((tiles[t, 21] - 1) * s - pt + kh, hgt)
            and tiles[t, 6] <= max(tiles[t, 22] * s - pl, 0)
            and tiles[t, 7] >= min((tiles[t, 23] - 1) * s - pl + kw, wid))


@jit
def _same_channels(tiles, order, a0, a1, b0, b1):
    # whether the rows order[a0:a1] and order[b0:b1] have the same output channel ranges
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):
        if not _same(tiles, order[a0 + i], order[b0 + i], (8, 9)):
            return False
    return True


@jit
def conv_units(tiles, order, kh, kw, s, pt, pl, hgt, wid, most_columns):
    # The products of a conv2d leaf batch as few large BLAS products. `order` sorts the rows by
    # (images, channels, W's first channel, pixels, first output channel): the leaves summing the
    # same input channels are consecutive, by pixels. A block is the leaves of one X region and
    # output cells; consecutive blocks of one row of blocks (the same output rows, adjacent
    # columns, the same output channel ranges, X regions that hold all the image cells they
    # read) form a band, whose im2col is one, its rows the band's width. A unit is a run of bands
    # of at most `most_columns` output cells (one band at least) whose im2cols lie side by side;
    # its products are rectangles (output channels x columns). Returns
    #   units [U, 5]: first and end band, first and end output channel, and the offset of its
    #     products in the scratch, [images][output channels][columns];
    #   bands [B, 10]: a row of the band (channels, images), its first column in the unit, its
    #     X cells (h0, h1, w0, w1) and its output cells (oh0, oh1, ow0, ow1);
    #   rects [R, 5]: unit, first and end output channel, first and end column;
    #   at, ld, pitch, img: per row, where its product starts in the scratch, the elements
    #     between its output channels, between its output rows and between its images;
    #   the scratch's size.
    n = len(order)
    key = (0, 1, 2, 3, 10)
    # blocks: runs of equal key and pixels
    bstart = np.empty(n + 1, np.int64)
    nb = 0
    for i in range(n):
        if i == 0 or not (_same(tiles, order[i], order[i - 1], key)
                          and _same(tiles, order[i], order[i - 1], PIXELS)):
            bstart[nb] = i
            nb += 1
    bstart[nb] = n
    # bands: runs of blocks
    bands = np.empty((nb, 10), np.int64)          # row, column, h0, h1, w0, w1, oh0, oh1, ow0, ow1
    band_of = np.empty(nb, np.int64)
    band_first = np.empty(nb + 1, np.int64)       # each band's first block, then the end
    nband = 0
    for b in range(nb):
        t = order[bstart[b]]
        if b and nband:
            p = order[bstart[b - 1]]
            if (_same(tiles, t, p, key) and _same(tiles, t, p, (4, 5, 20, 21))
                    and tiles[t, 22] == tiles[p, 23] and tiles[t, 6] <= tiles[p, 7]
                    and _natural(tiles, t, kh, kw, s, pt, pl, hgt, wid)
                    and _natural(tiles, p, kh, kw, s, pt, pl, hgt, wid)
                    and _same_channels(tiles, order, bstart[b - 1], bstart[b], bstart[b], bstart[b + 1])
                    and band_of[b - 1] == nband - 1):
                bands[nband - 1, 5] = tiles[t, 7]
                bands[nband - 1, 9] = tiles[t, 23]
                band_of[b] = nband - 1
                continue
        bands[nband] = (t, 0, tiles[t, 4], tiles[t, 5], tiles[t, 6], tiles[t, 7],
                        tiles[t, 20], tiles[t, 21], tiles[t, 22], tiles[t, 23])
        band_of[b], band_first[nband] = nband, b
        nband += 1
    bands = bands[:nband]
    band_first[nband] = nb
    # units: runs of bands of one key
    units = np.empty((nband, 5), np.int64)
    nu = 0
    cols = 0
    unit_of = np.empty(nband, np.int64)
    for q in range(nband):
        size = (bands[q, 7] - bands[q, 6]) * (bands[q, 9] - bands[q, 8])
        if nu and _same(tiles, bands[q, 0], bands[q - 1, 0], key) and cols + size <= most_columns:
            units[nu - 1, 1] = q + 1
        else:
            units[nu] = (q, q + 1, 0, 0, 0)
            nu += 1
            cols = 0
        bands[q, 1] = cols
        cols += size
        unit_of[q] = nu - 1
    units = units[:nu]
    # output channels and scratch offsets of the units
    scratch = 0
    for u in range(nu):
        first, last = bstart[band_first[units[u, 0]]], bstart[band_first[units[u, 1]]]
        o_lo, o_hi = tiles[order[first], 8], tiles[order[first], 9]
        for i in range(first, last):
            o_lo, o_hi = min(o_lo, tiles[order[i], 8]), max(o_hi, tiles[order[i], 9])
        units[u, 2], units[u, 3], units[u, 4] = o_lo, o_hi, scratch
        t = bands[units[u, 0], 0]
        scratch += (tiles[t, 1] - tiles[t, 0]) * (o_hi - o_lo) * _columns(bands, units[u, 1])
    # the rows' places, and the rectangles: per band, its first block's runs of contiguous
    # output channels (every block of a band has the same)
    at, ld, pitch, img = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    rects = np.empty((n, 5), np.int64)
    nr = 0
    for b in range(nb):
        q = band_of[b]
        u = unit_of[q]
        columns = _columns(bands, units[u, 1])
        width = bands[q, 9] - bands[q, 8]
        span = units[u, 3] - units[u, 2]
        lead = b == 0 or band_of[b - 1] != q
        for i in range(bstart[b], bstart[b + 1]):
            t = order[i]
            at[t] = (units[u, 4] + (tiles[t, 8] - units[u, 2]) * columns + bands[q, 1]
                     + (tiles[t, 20] - bands[q, 6]) * width + tiles[t, 22] - bands[q, 8])
            ld[t], pitch[t], img[t] = columns, width, span * columns
            if lead:
                c0 = bands[q, 1]
                c1 = c0 + (bands[q, 7] - bands[q, 6]) * width
                if i > bstart[b] and tiles[order[i - 1], 9] == tiles[t, 8]:
                    rects[nr - 1, 2] = tiles[t, 9]
                else:
                    rects[nr] = (u, tiles[t, 8], tiles[t, 9], c0, c1)
                    nr += 1
    return units, bands, _merged(rects[:nr]), at, ld, pitch, img, scratch


@jit
def join_partials(tiles, starts, p, q):
    # the tile table with each output region's partials (rows starts[g]:starts[g + 1]) as one
    # row where they differ only in their reduced ranges, at columns (p, p + 1) and (q, q + 1)
    # (a conv2d's input channels in X and W), which follow each other in plan order: that row's
    # product sums all their terms in one BLAS product
    out = np.empty_like(tiles)
    n = 0
    last = tiles.shape[1] - 1                       # the first-partial flag
    for g in range(len(starts) - 1):
        lo, hi = starts[g], starts[g + 1]
        joined = True
        for t in range(lo + 1, hi):
            if tiles[t, last] or tiles[t, p] != tiles[t - 1, p + 1] or tiles[t, q] != tiles[t - 1, q + 1]:
                joined = False
            for c in range(last):
                if c != p and c != p + 1 and c != q and c != q + 1 and tiles[t, c] != tiles[t - 1, c]:
                    joined = False
            if not joined:
                break
        if joined:
            out[n] = tiles[lo]
            out[n, p + 1], out[n, q + 1] = tiles[hi - 1, p + 1], tiles[hi - 1, q + 1]
            n += 1
        else:
            out[n:n + hi - lo] = tiles[lo:hi]
            n += hi - lo
    return out[:n]


@jit
def _merged(rects):
    # rectangles of one unit with the same output channels over adjacent columns, as one
    out = np.empty_like(rects)
    n = 0
    for r in range(len(rects)):
        u, o0, o1, c0, c1 = rects[r]
        merged = False
        for q in range(n - 1, -1, -1):
            if out[q, 0] != u:
                break
            if out[q, 1] == o0 and out[q, 2] == o1 and out[q, 4] == c0:
                out[q, 4] = c1
                merged = True
                break
        if not merged:
            out[n] = rects[r]
            n += 1
    return out[:n]


@jit
def conv_products_k(x, w, tiles, units, bands, rects, prod, s, pt, pl, by_channels, part, parts):
    # the products of the units (`conv_units`): per image, the im2col of the unit's bands side by
    # side, and one BLAS product W[o0:o1, channels] @ col[:, c0:c1] per rectangle, kept in prod
    # at the unit's offset, [images][output channels][columns]. Part `part` of `parts` computes
    # the units part, part + parts, ..., or, `by_channels`, every unit (its own im2col) and its
    # share of each rectangle's output channels
    kh, kw, cw = w.shape[2], w.shape[3], w.shape[1] * w.shape[2] * w.shape[3]
    double = x.itemsize == 8
    args = _gemm_args()
    first, step = (0, 1) if by_channels else (part, parts)
    most = 1
    for u in range(first, len(units), step):
        t = bands[units[u, 0], 0]
        most = max(most, (tiles[t, 3] - tiles[t, 2]) * kh * kw * _columns(bands, units[u, 1]))
    col = np.empty(most, x.dtype)
    r = 0
    for u in range(first, len(units), step):
        q0, q1, o_lo, o_hi, base = units[u]
        t0 = bands[q0, 0]
        c0, c1 = tiles[t0, 2], tiles[t0, 3]
        rows, cols, span = (c1 - c0) * kh * kw, _columns(bands, q1), o_hi - o_lo
        while rects[r, 0] < u:
            r += 1
        for b in range(tiles[t0, 1] - tiles[t0, 0]):
            for q in range(q0, q1):
                _im2col(x, tiles[t0, 0] + b, c0, c1, bands[q, 2], bands[q, 3], bands[q, 4], bands[q, 5],
                        bands[q, 6], bands[q, 7], bands[q, 8], bands[q, 9], kh, kw, s, pt, pl,
                        col, cols, bands[q, 1])
            g = r
            while g < len(rects) and rects[g, 0] == u:
                o0, o1, k0, k1 = rects[g, 1], rects[g, 2], rects[g, 3], rects[g, 4]
                if by_channels:
                    o0, o1 = o0 + (o1 - o0) * part // parts, o0 + (o1 - o0) * (part + 1) // parts
                dst = base + (b * span + o0 - o_lo) * cols + k0
                if rows and o1 > o0:
                    wa = w.ctypes.data + w.itemsize * (o0 * cw + tiles[t0, 10] * kh * kw)
                    _gemm(args, o1 - o0, k1 - k0, rows, wa, cw, col.ctypes.data + col.itemsize * k0,
                          cols, prod.ctypes.data + prod.itemsize * dst, cols, double)
                else:
                    for o in range(o1 - o0):
                        prod[dst + o * cols:dst + o * cols + k1 - k0] = 0
                g += 1
    return col.size                         # col stays alive through the last product


@jit
def _columns(bands, end):
    # the columns of the unit whose bands end at `end`
    return bands[end - 1, 1] + (bands[end - 1, 7] - bands[end - 1, 6]) * (bands[end - 1, 9] - bands[end - 1, 8])


@jit
def conv_combine_k(out, tiles, starts, at, ld, pitch, img, prod, p, emin, top, wrap, part, parts):
    # each leaf's product (at[t] in prod; ld[t], pitch[t] and img[t] elements between its
    # output channels, output rows and images) stored in (first) or added to its region of Y,
    # the leaves of an output region (runs of `starts`) in plan order; regions part,
    # part + parts, ...
    flat = out.reshape(-1)
    for g in range(part, len(starts) - 1, parts):
        for t in range(starts[g], starts[g + 1]):
            n0, n1, o0, o1 = tiles[t, 16], tiles[t, 17], tiles[t, 18], tiles[t, 19]
            oh0, oh1, ow0, ow1, first = tiles[t, 20], tiles[t, 21], tiles[t, 22], tiles[t, 23], tiles[t, 24]
            wo = ow1 - ow0
            for b in range(n0, n1):
                for o in range(o0, o1):
                    k = at[t] + (b - n0) * img[t] + (o - o0) * ld[t]
                    for oh in range(oh0, oh1):
                        d = ((b * out.shape[1] + o) * out.shape[2] + oh) * out.shape[3] + ow0
                        combine_run(flat, d, prod, k, wo, first, p, emin, top, wrap)
                        k += pitch[t]


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
def pool_tiles_k(x, out, tiles, k, s, pt, pl, average, p, emin, top, part, parts):
    # rows: (n, c, h, w) ranges of X, (n, c, ho, wo) of Y, first. ONNX MaxPool (padding never
    # wins, NaN wins) or AveragePool without the padding, over X's region [h0, h1) x [w0, w1);
    # rows part, part + parts, ...
    xf, yf = x.reshape(-1), out.reshape(-1)
    hgt, wid = x.shape[2], x.shape[3]
    for t in range(part, tiles.shape[0], parts):
        xn0, xc0, h0, h1, w0, w1 = (tiles[t, 0], tiles[t, 2], tiles[t, 4], tiles[t, 5], tiles[t, 6],
                                    tiles[t, 7])
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
                        yf[y + np.uint64(ow)] = dest(r, p, emin, top, False)


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
    if p and op <= 3:                   # add, sub, mul, div: a loop each, which vectorizes
        for q in range(n):
            u = np.uint64(q)
            a, b = np.float64(xf[xa + u * xs]), np.float64(yf[ya + u * ys])
            zf[za + u] = narrow(a + b if op == 0 else a - b if op == 1 else a * b if op == 2 else a / b,
                                p, emin, top)
    elif p:
        for q in range(n):
            u = np.uint64(q)
            zf[za + u] = narrow(_apply(op, np.float64(xf[xa + u * xs]), np.float64(yf[ya + u * ys])),
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
def elementwise_tiles_k(op, x, y, out, tiles, p, emin, top, part, parts):
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


@jit
def unary_k(op, x, out, part, parts):
    # Y = op(X) for elementwise opcode number `op` (ELEMENTWISE order) of one source, flat and
    # C-contiguous, in float64 stored to out's type (one rounding); part `part` of `parts`
    # consecutive ranges
    n = x.size
    lo, hi = n * part // parts, n * (part + 1) // parts
    for i in range(lo, hi):
        out[i] = _apply(op, np.float64(x[i]), 0.0)
