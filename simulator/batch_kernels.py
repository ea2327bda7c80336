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
- matmul (with batch axes too): one BLAS product per leaf and batch element, float32 sgemm for
  the float types, float64 dgemm for i8 (exact; the i32 destination wraps around); a matmul
  whose A is one matrix for the whole batch, one product per leaf of A with its batch elements'
  B side by side, as the leaf kernel computes it (`matmul_folded_k`), and one whose A is
  broadcast along only some batch axes, leaf by leaf. An f32 matmul's sgemm writes straight into
  the output region and adds a later partial there itself. Where the destination is f32 and
  every output region is placed and its partials, over consecutive K ranges in plan order, sum
  the whole of K (`_whole_sums`), each leaf's value is its part of A @ B summed in another
  order: the batch is then one BLAS product per batch element, in parts of rows on the threads;
- conv2d: the leaves' products in few large BLAS products (`conv_units`): the leaves that sum the
  same input channels share one im2col per image, laid out by bands of output rows (a band's
  leaves read the image as it is, padded only where the image is; a leaf that pads inside the
  image keeps its own), and each rectangle of output channels x output cells is one product.
  Each leaf's value is the sum of its own channels' and taps' products, as its leaf kernel's,
  but a larger product sums in float32 in BLAS's order for its shape, so a float value can
  differ from the leaf kernel's in its last bits (within the bound of a float32 sum in any
  order; integers are exact). In a wide destination (f32, i32), where no partial is rounded on
  its own, the partials of a region over consecutive input channels are one product
  (`join_partials`): the same sum in another order;
- the elementwise opcodes of `ELEMENTWISE` on float data, and maxpool and avgpool: each output
  element is computed from the same source elements (or window) whichever leaf computes it, and
  the leaves' regions cover the output, so the batch computes their union, the node's output, in
  one pass, in float64 rounded once as the leaf kernels do (f32 add, sub, mul and div by
  numpy's float32 ufuncs: one IEEE float32 operation, the same value);
- f16 and bf16 destinations are kept in float32 buffers and rounded as `simulator.narrow` says;
  integer elementwise data runs each leaf's kernel in turn (`_per_leaf`).
A batch of at least PARALLEL_MACS multiply-adds (or elements) runs in parts on a thread pool
(the kernels are in `simulator.tile_kernels`).
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from isa.errors import InternalError
from isa.opcodes import pads
from isa.program import TensorType
from isa.reference import NP_DTYPES, dtype_name
from simulator.kernels import LEAF_KERNELS
from simulator.narrow import BF16_DEST, F16_DEST, F32_DEST, NO_TABLE, UPCAST, downcast_k, f16_table, upcast_k
from simulator.tile_kernels import (PIXELS, conv_combine_k, conv_products_k, conv_units,
                                    elementwise_tiles_k, groups, join_partials, matmul_folded_k, matmul_tiles_k,
                                    pool_tiles_k, unary_k)

__all__ = ["LEAF_BATCH_KERNELS", "F32_UFUNCS", "warm_up_batches"]

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
#: the elementwise opcodes whose result is one of their sources' values, or its negation
_PICKS = ("relu", "abs", "neg", "min", "max")
#: the elementwise opcodes `_apply` computes, in its numbering
ELEMENTWISE = ("add", "sub", "mul", "div", "relu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "erf",
               "log", "abs", "neg", "pow", "min", "max")


def _c(a, dtype) -> np.ndarray:
    """`a` as a writeable C-contiguous array of `dtype` (one compiled form per kernel); f16 and
    bf16 to float32 through a table of all their values (numpy's f16 cast is 3x slower)."""
    table = UPCAST.get(a.dtype.name)
    if table is not None and dtype == _F32:
        bits = np.ascontiguousarray(a).view(np.uint16).reshape(-1)
        out = np.empty(a.shape, np.float32)
        _parallel(upcast_k, (bits, table, out.reshape(-1)), a.size)
        return out
    a = np.ascontiguousarray(a, dtype)
    return a if a.flags.writeable else a.copy()


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
    params = {"f32": F32_DEST, "f16": F16_DEST, "bf16": BF16_DEST}.get(kind, (0, 0, 0.0))

    def done():
        if buf is out:
            return
        if kind in ("f16", "bf16") and out.flags.c_contiguous:
            _parallel(downcast_k, (buf.reshape(-1), out.view(np.uint16).reshape(-1),
                                    f16_table() if kind == "f16" else NO_TABLE), out.size)
        else:
            out[...] = buf                  # exact: buf holds values of out's type
    return buf, (*params, kind == "i32"), done


#: the least multiply-adds (or elements) of a batch that runs in parts on the host's threads
PARALLEL_MACS = 1 << 24
_POOL: list = []


def _parallel(kernel, args: tuple, work: int, least: int = PARALLEL_MACS) -> None:
    """kernel(*args, part, parts) for every part: one part below `least` work, else one per
    thread (NUMBA_NUM_THREADS), the first on this thread."""
    parts = numba.config.NUMBA_NUM_THREADS if work >= least else 1
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
    batch = out.shape[:-2]
    a_batch = (1,) * (out.ndim - ra) + ins[0].shape[:-2]
    one_a = int(np.prod(a_batch)) == 1
    if out.ndim > 6 or (not one_a and any(e == 1 < n for e, n in zip(a_batch, batch))):
        return _per_leaf("matmul", ins, a, tiles, out)      # A broadcast along some batch axes
    mac = _F64 if ins[0].dtype.kind in "iu" else _F32
    buf, target, done = _buffer(out)
    table = _padded(tiles, [ra, rb, out.ndim], 6)
    work = _macs(tiles, [2 * (ra + rb + d) for d in range(out.ndim)] + [2 * ra - 2])
    if buf.dtype == mac == _F32 and not target[0] and _whole_sums(table, ins[0].shape[-1], out.size):
        a, b = ins[0].astype(_F32, copy=False), ins[1].astype(_F32, copy=False)
        _parallel(_product_rows, (a, b, buf), work)
        done()
        return
    if one_a and int(np.prod(batch)) > 1:
        _folded(ins, mac, buf, table, target, work)
    else:
        _parallel(matmul_tiles_k, (_six(ins[0], mac), _rows_apart(_six(ins[1], mac), work),
                                   _six(buf, buf.dtype), table, groups(table, 24, 36), *target), work)
    done()


def _whole_sums(table: np.ndarray, k: int, size: int) -> bool:
    """Whether every output region of a matmul tile table (padded to six dimensions) is placed
    (not added to what the output holds) and its partials, joined (`join_partials`), sum the
    whole of K, and the regions cover the output's `size` elements: then the leaves' values are
    the product A @ B."""
    joined = join_partials(table, groups(table, 24, 36), 10, 20)
    cells = int(np.prod(joined[:, 25:36:2] - joined[:, 24:36:2], axis=1).sum())
    return bool(np.all(joined[:, 36] == 1) and np.all(joined[:, 10] == 0)
                and np.all(joined[:, 11] == k) and cells == size)


def _product_rows(a: np.ndarray, b: np.ndarray, out: np.ndarray, part: int, parts: int) -> None:
    """Rows part/parts of out = a @ b (batch axes broadcast) by numpy's matmul, which lets other
    threads run while BLAS works."""
    m = out.shape[-2]
    lo, hi = m * part // parts, m * (part + 1) // parts
    np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :])


def _folded(ins, mac, buf, table, target, work: int) -> None:
    """A matmul whose A is one matrix for every batch element (`matmul_folded_k`): B and C with
    the batch index innermost, [K, N * nb] and [M, N * nb], C put back in place after."""
    batch, (m, n) = buf.shape[:-2], buf.shape[-2:]
    nb, k = int(np.prod(batch)), ins[1].shape[-2]
    order = [len(batch), len(batch) + 1] + list(range(len(batch)))
    b = _rows_apart(_c(np.broadcast_to(ins[1], batch + (k, n)).transpose(order), mac).reshape(k, n * nb),
                    work)
    c = np.ascontiguousarray(buf.reshape(nb, m, n).transpose(1, 2, 0)).reshape(m, n * nb)
    four = np.array((1,) * (4 - len(batch)) + batch, np.int64)
    _parallel(matmul_folded_k, (_c(ins[0], mac).reshape(ins[0].shape[-2:]), b, c, table,
                                groups(table, 24, 36), four, *target), work)
    buf[...] = c.reshape(m, n, nb).transpose(2, 0, 1).reshape(buf.shape)


def _six(x: np.ndarray, dtype) -> np.ndarray:
    """x as a C-contiguous array of `dtype` with four batch dimensions (leading ones of size 1)."""
    return _c(x, dtype).reshape((1,) * (6 - x.ndim) + x.shape)


#: Rows this many bytes apart (or a multiple) fall in the same few cache sets, and a leaf's BLAS
#: product reading a narrow column block of such a B runs 2.6x slower (a 64 x 192 x 24 leaf of a
#: 128x768 @ 768x3072 product, 16.6 against 6.3 us; 4 KB rows are every 1024-wide f32 matrix)
_ALIASED_ROWS = 4096


#: the least multiply-adds per element of B for which `_rows_apart` copies B: the copy reads and
#: writes all of B, which a product reading each element of B a few times (a matrix-vector
#: product: once) does not win back (VGG-16's first fully connected layer at batch 1 copied its
#: 411 MB of weights on every run)
_COPY_READS = 8


def _rows_apart(b: np.ndarray, work: int) -> np.ndarray:
    """The C-contiguous `b`, its rows 64 bytes further apart where their distance is a multiple
    of `_ALIASED_ROWS` and the products' `work` (multiply-adds) reads each element of b at least
    `_COPY_READS` times (the kernels read the row length from the array: the padding is never
    read). A BLAS product does not depend on its leading dimension, so the leaves' values are
    the same."""
    if b.shape[-2] < 2 or b.shape[-1] * b.itemsize % _ALIASED_ROWS or work < _COPY_READS * b.size:
        return b
    padded = np.empty(b.shape[:-1] + (b.shape[-1] + 64 // b.itemsize,), b.dtype)
    padded[..., :b.shape[-1]] = b
    return padded


def _padded(tiles: np.ndarray, ranks: list, rank: int) -> np.ndarray:
    """The tile table with every operand's region given `rank` dimensions: leading (0, 1)."""
    out = np.zeros((len(tiles), 2 * rank * len(ranks) + 1), np.int64)
    out[:, 1:-1:2] = 1
    at = 0
    for k, r in enumerate(ranks):
        lo = 2 * (rank * (k + 1) - r)
        out[:, lo:lo + 2 * r] = tiles[:, at:at + 2 * r]
        at += 2 * r
    out[:, -1] = tiles[:, -1]
    return out


def _conv2d_tiles(ins, a, tiles, out):
    mac = _F64 if ins[0].dtype.kind in "iu" else _F32
    top, left, _, _ = pads(a)
    x, w = _c(ins[0], mac), _c(ins[1], mac)
    buf, target, done = _buffer(out)
    if not target[0]:                       # wide destination: no partial is rounded apart
        tiles = join_partials(tiles, groups(tiles, 16, 24), 2, 10)     # X's and W's channels
    sizes = np.prod(tiles[:, [17, 19, 21, 23]] - tiles[:, [16, 18, 20, 22]], axis=1)
    work = int(sizes.sum()) * (tiles[0, 3] - tiles[0, 2] if len(tiles) else 0) * w.shape[2] * w.shape[3]
    for lo, hi in _chunks(sizes):
        part = tiles[lo:hi]
        # by images, channels, W's first channel, pixels, first output channel (the last key first)
        order = np.lexsort(part[:, [8, *PIXELS[::-1], 10, 3, 2, 1, 0]].T)
        units, bands, rects, at, ld, pitch, img, size = conv_units(
            part, order, *w.shape[2:], a["stride"], top, left, *x.shape[2:], UNIT_COLUMNS)
        prod = _scratch(size, mac)
        _parallel(conv_products_k, (x, w, part, units, bands, rects, prod, a["stride"], top, left,
                                    len(units) < UNITS_EACH * numba.config.NUMBA_NUM_THREADS), work)
        _parallel(conv_combine_k, (buf, part, groups(part, 16, 24), at, ld, pitch, img, prod,
                                   *target), work)
    done()


#: the least units per thread for which the threads share out a conv2d batch's units, rather
#: than each unit's output channels (each thread then builds every unit's im2col)
UNITS_EACH = 2


#: the most columns (output cells) of the leaves' im2cols one product unit puts side by side, so
#: that its im2col stays in cache (a unit has one band at least)
UNIT_COLUMNS = 512


#: the most elements of leaf products one batch call keeps at once
SCRATCH_ELEMENTS = 1 << 24
_SCRATCH = threading.local()                # per thread: runs on other threads keep theirs


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
    kept = _SCRATCH.__dict__.setdefault("buffers", {})
    buf = kept.get(dtype)
    if buf is None or len(buf) < n:
        buf = kept[dtype] = np.empty(max(n, 1 << 16), dtype)
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
    length = out.shape[d] if rank else 1            # a scalar output is one part
    rows = []
    for part in np.array_split(np.arange(length), min(parts, length)) if out.size else []:
        row = []
        for x in (*ins, out):
            off = rank - x.ndim                     # a source aligned right against the output
            for i, n in enumerate(x.shape):
                cut = i + off == d and n == length > 1
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
        _parallel(pool_tiles_k, (_c(ins[0], _F32), buf, _union(tiles, ins, out, _parts(work)),
                                  a["kernel"], a["stride"], top, left, average, p, emin, hi), work)
        done()
    return run


def _four(x: np.ndarray) -> np.ndarray:
    return _c(x, _F32).reshape((1,) * (4 - x.ndim) + x.shape)


#: f32 arithmetic as numpy's float32 ufuncs compute it: one IEEE float32 operation, the value
#: the leaf kernels give (their float64 result of two float32 values, rounded once to float32)
F32_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _elementwise_tiles(op: str):
    def run(ins, a, tiles, out):
        tiles = _union(tiles, ins, out, _parts(out.size))
        if (op in F32_UFUNCS and out.dtype == _F32 and all(x.dtype == _F32 for x in ins)
                and out.size < PARALLEL_MACS):       # numpy's loop, one thread, broadcasting
            with np.errstate(all="ignore"):
                F32_UFUNCS[op](*ins, out=out)
            return
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
        _parallel(elementwise_tiles_k, (ELEMENTWISE.index(op), x, y,
                                         buf.reshape((1,) * (4 - out.ndim) + out.shape), table, p, emin, hi),
                  out.size)
        done()
    return run


def _per_leaf(op: str, ins, a, tiles, out):
    """Each leaf's kernel in turn on its regions, its value stored in or added to `out` (for
    opcodes whose attributes do not change with the region: elementwise, matmul)."""
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
    unary_k(ELEMENTWISE.index("exp"), v.reshape(-1), np.empty(4, np.float32), 0, 1)
    LEAF_BATCH_KERNELS["add"]([v, v], {}, np.array([[0, 2, 0, 2] * 3 + [1]]), np.zeros((2, 2), np.float32))
