"""The meaning of every core opcode in PyTorch, as isa/reference.py gives it in numpy.

`TORCH_SEMANTICS[opcode](inputs, attrs, out_type)` returns the destination as a torch tensor on
the inputs' device. f32 computes in float32 (as a GPU would; the numpy reference accumulates in
float64 and rounds once, so f32 results agree to float32 rounding, not bit for bit); i32
arithmetic wraps around like the reference. Euclidean distances use the matrix-product form
|x|^2 + |c|^2 - 2 x.c (clamped at 0), the form GPU libraries use. Imported only where torch is
installed.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from isa.opcodes import pads
from isa.reference import gather_index_error

__all__ = ["TORCH_SEMANTICS", "TORCH_DTYPES"]

TORCH_DTYPES = {"f32": torch.float32, "i32": torch.int32, "f16": torch.float16,
                "bf16": torch.bfloat16, "i8": torch.int8}
_INT_RANGE = {"i32": (-2**31, 2**31 - 1), "i8": (-128, 127)}


def _cast(ins, a, t):
    """The reference's cast: floats round to nearest even; to an integer type, round half to even,
    saturate, NaN gives 0 (torch's own float-to-int conversion truncates and wraps)."""
    x = ins[0]
    if t.dtype not in _INT_RANGE:
        return x.to(torch.float64).to(TORCH_DTYPES[t.dtype])
    lo, hi = _INT_RANGE[t.dtype]
    v = torch.nan_to_num(torch.round(x.to(torch.float64)), nan=0.0, posinf=hi, neginf=lo)
    return torch.clamp(v, lo, hi).to(TORCH_DTYPES[t.dtype])


def _out(x, t):
    return x.to(TORCH_DTYPES[t.dtype])


def _pad(x, a, value=0.0):
    top, left, bottom, right = pads(a)
    return F.pad(x, (left, right, top, bottom), value=value) if any((top, left, bottom, right)) else x


def _conv2d(ins, a, t):
    return F.conv2d(_pad(ins[0], a), ins[1], stride=a["stride"])


def _maxpool(ins, a, t):
    # padded cells are -inf, so they never win
    return F.max_pool2d(_pad(ins[0], a, float("-inf")), a["kernel"], a["stride"])


def _avgpool(ins, a, t):
    """The mean of the real cells of each window: window sums over the zero-padded input,
    divided by the number of real cells in the window."""
    x, k, s = ins[0], a["kernel"], a["stride"]
    total = F.avg_pool2d(_pad(x, a), k, s, divisor_override=1)
    ones = torch.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
    real = F.avg_pool2d(_pad(ones, a), k, s, divisor_override=1)
    return total / real


def _lrn(ins, a, t):
    """ONNX LRN: channels c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped to [0, C-1]."""
    x, size = ins[0], a["size"]
    c = x.shape[1]
    cum = torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x * x, dim=1)], dim=1)
    ch = torch.arange(c, device=x.device)
    lo = torch.clamp(ch - (size - 1) // 2, min=0)
    hi = torch.clamp(ch + (size - 1 - (size - 1) // 2), max=c - 1)
    square_sum = cum[:, hi + 1] - cum[:, lo]
    return x / (a["k"] + a["alpha"] / size * square_sum) ** a["beta"]


def _reduce_sum(ins, a, t):
    return torch.sum(ins[0], dim=a["axis"], dtype=TORCH_DTYPES[t.dtype])


def _eucdist(ins, a, t):
    x, c = ins
    d = (x * x).sum(1, keepdim=True) + (c * c).sum(1)[None, :] - 2.0 * (x @ c.T)
    return d.clamp_min(0.0)


def _gather(ins, a, t, check=True):
    x, idx = ins
    n = x.shape[-1]
    if check:
        bad = (idx < 0) | (idx >= n)
        if bool(bad.any()):
            raise gather_index_error(int(idx.flatten()[torch.argmax(bad.flatten().to(torch.int8))]), n)
    return torch.gather(x, -1, idx.long())


def _slice(ins, a, t):
    x = ins[0]
    ax = a["axis"] % x.dim()
    return x.narrow(ax, a["start"], t.shape[ax]).contiguous()


def _reduce_mean(ins, a, t):
    x = ins[0]
    count = a["count"] or x.shape[a["axis"]]
    return torch.sum(x, dim=a["axis"], dtype=torch.float32) / count


def _causal_mask(ins, a, t):
    dist = ins[0].long()[:, None] - ins[1].long()[None, :]
    keep = dist >= 0
    if a["window"] > 0:
        keep &= dist < a["window"]
    low = torch.finfo(TORCH_DTYPES[t.dtype]).min
    return torch.where(keep, 0.0, low)


def _fill(ins, a, t):
    """value + step * position along axis (on the host: the caller moves it to the device)."""
    if not t.shape:
        return torch.tensor(float(a["value"]), dtype=torch.float64)
    ax = a["axis"] % len(t.shape)
    view = [1] * len(t.shape)
    view[ax] = t.shape[ax]
    pos = torch.arange(t.shape[ax], dtype=torch.float64) * a["step"] + a["value"]
    return pos.reshape(view).expand(*t.shape).contiguous()


def _stable_order(x):
    return torch.sort(x, dim=-1, stable=True).indices


TORCH_SEMANTICS = {
    "matmul": lambda ins, a, t: ins[0] @ ins[1],
    "conv2d": _conv2d,
    "maxpool": _maxpool,
    "avgpool": _avgpool,
    "add": lambda ins, a, t: ins[0] + ins[1],
    "sub": lambda ins, a, t: ins[0] - ins[1],
    "mul": lambda ins, a, t: ins[0] * ins[1],
    "div": lambda ins, a, t: ins[0] / ins[1],
    "relu": lambda ins, a, t: torch.clamp_min(ins[0], 0),
    "sigmoid": lambda ins, a, t: torch.sigmoid(ins[0]),
    "tanh": lambda ins, a, t: torch.tanh(ins[0]),
    "exp": lambda ins, a, t: torch.exp(ins[0]),
    "lrn": _lrn,
    "reduce_sum": _reduce_sum,
    "reduce_max": lambda ins, a, t: torch.amax(ins[0], dim=a["axis"]),
    "argmax": lambda ins, a, t: torch.argmax(ins[0], dim=a["axis"]),
    "argmin": lambda ins, a, t: torch.argmin(ins[0], dim=a["axis"]),
    "eucdist": _eucdist,
    "sort": lambda ins, a, t: torch.sort(ins[0], dim=-1, stable=True).values,
    "argsort": lambda ins, a, t: _stable_order(ins[0]),
    "mergepos": lambda ins, a, t: _stable_order(torch.cat(ins, dim=-1)),
    "gather": _gather,
    "count": lambda ins, a, t: (ins[0] == a["value"]).sum(dim=-1, dtype=torch.int32),
    "transpose": lambda ins, a, t: ins[0].permute(*a["perm"]).contiguous(),
    "cast": _cast,
    "copy": lambda ins, a, t: ins[0].clone(),
    "reshape": lambda ins, a, t: ins[0].reshape(t.shape).clone(),
    "slice": _slice,
    "concat": lambda ins, a, t: torch.cat(ins, dim=a["axis"]),
    "sqrt": lambda ins, a, t: torch.sqrt(ins[0]),
    "rsqrt": lambda ins, a, t: torch.rsqrt(ins[0]),
    "erf": lambda ins, a, t: torch.erf(ins[0]),
    "log": lambda ins, a, t: torch.log(ins[0]),
    "abs": lambda ins, a, t: torch.abs(ins[0]),
    "neg": lambda ins, a, t: torch.neg(ins[0]),
    "pow": lambda ins, a, t: torch.pow(ins[0], ins[1]),
    "min": lambda ins, a, t: torch.minimum(ins[0], ins[1]),
    "max": lambda ins, a, t: torch.maximum(ins[0], ins[1]),
    "where": lambda ins, a, t: torch.where(ins[0] != 0, ins[1], ins[2]),
    "reduce_mean": _reduce_mean,
    "causal_mask": _causal_mask,
    "fill": _fill,
}


def run_core(opcode: str, ins, attrs, out_type, check: bool = True):
    """One core opcode on torch tensors; `check=False` skips the data checks (gather indices)."""
    if opcode == "gather":
        return _out(_gather(ins, attrs, out_type, check), out_type)
    return _out(TORCH_SEMANTICS[opcode](ins, attrs, out_type), out_type)
