"""An independent numpy model of the layers the CNN workloads are made of, written from the
definitions in docs/isa.md (and the frameworks' conventions they follow) in float64, with no code
of the project: the tests compare the reference interpreter's outputs with it.

Tensors are NCHW, convolution weights OIHW. `pad` is one integer for every side or
(top, left, bottom, right); output sizes use floor mode.
"""
from __future__ import annotations

import numpy as np


def _sides(pad) -> tuple[int, int, int, int]:
    return (pad,) * 4 if isinstance(pad, int) else tuple(pad)


def _padded(x: np.ndarray, pad, value: float) -> np.ndarray:
    top, left, bottom, right = _sides(pad)
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _windows(xp: np.ndarray, kh: int, kw: int, stride: int):
    """(u, v, the cells at offset (u, v) of every window) over a padded input."""
    ho = (xp.shape[2] - kh) // stride + 1
    wo = (xp.shape[3] - kw) // stride + 1
    for u in range(kh):
        for v in range(kw):
            yield u, v, xp[:, :, u:u + stride * (ho - 1) + 1:stride, v:v + stride * (wo - 1) + 1:stride]


def conv2d(x, w, bias=None, stride: int = 1, pad=0, groups: int = 1) -> np.ndarray:
    """Cross-correlation over the zero-padded input,
    Y[n, o, i, j] = sum_c sum_u sum_v Xp[n, g*C/groups + c, i*S + u, j*S + v] * W[o, c, u, v]
    for output channel o of group g = o // (O/groups), plus bias[o]."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    assert c == cg * groups and o % groups == 0
    og = o // groups
    xp = _padded(x, pad, 0.0)
    parts = []
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        y = 0.0
        for u, v, cells in _windows(xg, kh, kw, stride):
            y = y + np.einsum("nchw,oc->nohw", cells, wg[:, :, u, v])
        parts.append(y)
    y = np.concatenate(parts, axis=1)
    return y if bias is None else y + np.asarray(bias, np.float64).reshape(1, o, 1, 1)


def maxpool(x, kernel: int, stride: int, pad=0) -> np.ndarray:
    """The largest real cell of each window: padded cells are -inf and never win."""
    y = -np.inf
    for _, _, cells in _windows(_padded(np.asarray(x, np.float64), pad, -np.inf), kernel, kernel,
                                stride):
        y = np.maximum(y, cells)
    return y


def avgpool(x, kernel: int, stride: int, pad=0, count_include_pad: bool = False) -> np.ndarray:
    """The mean of each window. The ISA's avgpool is count_include_pad=False (ONNX's default):
    the sum of the real cells over their number; with True, over kernel * kernel."""
    x = np.asarray(x, np.float64)
    total, real = 0.0, 0.0
    ones = np.ones((1, 1) + x.shape[2:])
    for (_, _, cells), (_, _, mask) in zip(_windows(_padded(x, pad, 0.0), kernel, kernel, stride),
                                           _windows(_padded(ones, pad, 0.0), kernel, kernel, stride)):
        total, real = total + cells, real + mask
    return total / (kernel * kernel if count_include_pad else real)


def lrn(x, size: int = 5, alpha: float = 1e-4, beta: float = 0.75, k: float = 2.0) -> np.ndarray:
    """Local response normalization across channels (ONNX LRN): for channel c, the squares of
    channels max(0, c - (size-1)//2) .. min(C-1, c + ceil((size-1)/2)), and alpha / size even where
    the window is clipped."""
    x = np.asarray(x, np.float64)
    channels = x.shape[1]
    y = np.empty_like(x)
    for c in range(channels):
        lo, hi = max(0, c - (size - 1) // 2), min(channels - 1, c + -(-(size - 1) // 2))
        square_sum = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        y[:, c] = x[:, c] / (k + alpha / size * square_sum) ** beta
    return y


def relu(x) -> np.ndarray:
    return np.maximum(x, 0.0)


def linear(x, w, bias) -> np.ndarray:
    """x @ w + bias over float64, x flattened to rows first."""
    x = np.asarray(x, np.float64).reshape(len(x), -1)
    return x @ np.asarray(w, np.float64) + np.asarray(bias, np.float64)
