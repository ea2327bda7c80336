"""Mutations that turn valid inputs into (mostly) invalid ones, each a function of a numpy Generator.

Text (programs, machine files): token deletion, duplication and swaps, numbers out of range,
values of the wrong type, truncation, random bytes, invalid UTF-8. Machine tables: a key deleted,
renamed, or given a value of the wrong type or out of range, levels removed. Data files: a wrong
dtype or shape, a corrupt or truncated file, a pickled object array, an archive where an array is
expected and the reverse. Each mutation returns the new input and the name of the mutation, so
that a campaign can count what it tried.
"""
from __future__ import annotations

import io
import re

import numpy as np

TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[+-]?[0-9][0-9_.eE+-]*|\s+|.", re.S)
NUMBER = re.compile(r"[+-]?[0-9][0-9_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?")

#: numbers a field may not hold: zero, negative, overflowing, not finite, fractional
BAD_NUMBERS = ["0", "-1", "-0", "2147483648", "9223372036854775808", "1" + "0" * 30, "1e400",
               "1.5", "0.0", "-7", "nan", "inf", "1e-300", "65536", "100000000000"]
#: values of the wrong type for a number or a name
WRONG_TYPES = ['"text"', "true", "(1, 2)", "[1, 2]", "x", "f64", "{}", "()", "1,", "'a'"]
JUNK = ["\x00", "\t", "\r", "\u00e9", "\u202e", "\ufeff", "#", ",", "=", "(", ")", "[", "]", ":",
        "<-", "end", "tensor", "include", "extension", "\n", "\\", '"']


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _word_indices(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if not t.isspace()]


def mutate_text(rng: np.random.Generator, text: str) -> tuple[bytes, str]:
    """One random mutation of source text; the result is bytes (it may not be UTF-8)."""
    toks = _tokens(text)
    words = _word_indices(toks) or [0]
    pick = lambda seq: seq[int(rng.integers(len(seq)))]
    kind = pick(["delete", "duplicate", "swap", "number", "wrong-type", "truncate", "junk",
                 "random-bytes", "invalid-utf8", "line-delete", "line-duplicate", "empty"])
    if kind == "delete":
        del toks[pick(words)]
    elif kind == "duplicate":
        i = pick(words)
        toks.insert(i, toks[i] + pick([" ", "", ", "]))
    elif kind == "swap":
        i, j = pick(words), pick(words)
        toks[i], toks[j] = toks[j], toks[i]
    elif kind in ("number", "wrong-type"):
        nums = [i for i in words if NUMBER.fullmatch(toks[i])]
        i = pick(nums or words)
        toks[i] = pick(BAD_NUMBERS if kind == "number" else WRONG_TYPES)
    elif kind == "junk":
        toks.insert(int(rng.integers(len(toks) + 1)), pick(JUNK))
    elif kind == "line-delete" or kind == "line-duplicate":
        lines = "".join(toks).splitlines(keepends=True) or [""]
        i = int(rng.integers(len(lines)))
        lines[i:i + 1] = [] if kind == "line-delete" else [lines[i], lines[i]]
        toks = lines
    data = "".join(toks).encode("utf-8")
    if kind == "truncate":
        data = data[:int(rng.integers(len(data) + 1))]
    elif kind == "random-bytes":
        at = int(rng.integers(len(data) + 1))
        data = data[:at] + rng.bytes(int(rng.integers(1, 9))) + data[at:]
    elif kind == "invalid-utf8":
        at = int(rng.integers(len(data) + 1))
        data = data[:at] + pick([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80"]) + data[at:]
    elif kind == "empty":
        data = pick([b"", b"\n", b"   ", b"\xef\xbb\xbf"])
    return data, kind


# ---------------------------------------------------------------- machine tables

def mutate_table(rng: np.random.Generator, data: dict) -> tuple[dict, str]:
    """One structural mutation of a parsed machine file (a deep copy is changed)."""
    import copy
    data = copy.deepcopy(data)
    pick = lambda seq: seq[int(rng.integers(len(seq)))]
    tables = [("", data)] + [(f"level[{i}].", lv) for i, lv in enumerate(data.get("level", []))]
    tables += [(f"level[{i}].compute.", lv["compute"]) for i, lv in enumerate(data.get("level", []))
               if isinstance(lv.get("compute"), dict)]
    path, table = pick(tables)
    keys = [k for k in table if k != "level"] or ["name"]
    key = pick(keys)
    kind = pick(["delete-key", "unknown-key", "wrong-type", "out-of-range", "huge", "drop-levels",
                 "level-not-table", "swap-levels"])
    if kind == "delete-key":
        table.pop(key, None)
    elif kind == "unknown-key":
        table[key + pick(["_", "s", "x"])] = table.pop(key, 1)
    elif kind == "wrong-type":
        table[key] = pick(["text", True, [1, 2], {"a": 1}, 1.5, 3])
    elif kind == "out-of-range":
        table[key] = pick([0, -1, -0.5, float("inf"), float("nan"), 0.0])
    elif kind == "huge":
        table[key] = pick([10**30, 2**63, 10**6, 2**40, 1e300, 10**100])
    elif kind == "drop-levels":
        data["level"] = data.get("level", [])[:int(rng.integers(0, 2))]
    elif kind == "level-not-table":
        data["level"] = pick([[1, 2], "level", [data["level"][0], 5]])
    else:
        lv = data.get("level", [])
        if len(lv) > 1:
            lv[0], lv[-1] = lv[-1], lv[0]
    return data, f"{kind}:{path}{key}" if kind not in ("drop-levels", "level-not-table",
                                                        "swap-levels") else kind


def toml_text(data: dict) -> str:
    """A machine table written as TOML (the inverse of tomllib for what machine files hold)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, float):
            return "nan" if v != v else "inf" if v == float("inf") else "-inf" if v == -float(
                "inf") else repr(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        raise TypeError(v)
    lines = [f"{k} = {value(v)}" for k, v in data.items()
             if k != "level" or not (isinstance(v, list) and all(isinstance(x, dict) for x in v))]
    level = data.get("level")
    if isinstance(level, list) and all(isinstance(x, dict) for x in level):
        for lv in level:
            lines.append("\n[[level]]")
            lines += [f"{k} = {value(v)}" for k, v in lv.items() if not isinstance(v, dict)]
            for k, v in lv.items():
                if isinstance(v, dict):
                    lines.append(f"\n[level.{k}]")
                    lines += [f"{kk} = {value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- data files

def npy_bytes(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def npz_bytes(arrays: dict, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    if allow_pickle:
        np.savez(buf, **arrays)
    else:
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def on_disk(arr: np.ndarray) -> np.ndarray:
    """An array as a .npy file holds it: bf16 as its uint16 bit patterns, every other type as is."""
    from isa.reference import BF16_ON_DISK, NP_DTYPES
    return arr.view(BF16_ON_DISK) if arr.dtype == NP_DTYPES["bf16"] else arr


def mutate_array(rng: np.random.Generator, arr: np.ndarray) -> tuple[bytes, str, bool]:
    """A .npy file's bytes made from a valid array, the mutation, and whether it stays valid."""
    pick = lambda seq: seq[int(rng.integers(len(seq)))]
    kind = pick(["dtype", "shape", "scalar", "empty", "truncate", "header", "random-bytes",
                 "pickled-object", "wider-exact", "wider-inexact", "nan", "fortran", "npz"])
    is_float = arr.dtype.kind != "i"              # f32, f16, and bf16 (numpy kind "V")
    values = arr.astype(np.float32) if arr.dtype.kind == "V" else arr
    if kind == "dtype":                           # a type the tensor's dtype does not accept
        own = {np.dtype(np.float16): np.int16, np.dtype(np.int8): np.uint8}.get(arr.dtype)
        dt = pick([own or np.float16, np.int8 if arr.dtype != np.int8 else np.int16, np.uint64,
                   np.complex64, np.bool_, np.int16, "U3",
                   np.float32 if arr.dtype == np.int32 else
                   np.uint32 if arr.dtype == np.int8 else np.int32])   # an i8 tensor takes int32
        return npy_bytes(values.astype(dt)), f"dtype:{np.dtype(dt).name}", False
    typed, arr = arr, on_disk(arr)
    if kind == "shape":
        shapes = [arr.shape + (1,), arr.shape[::-1] + (2,), (arr.size + 1,), (1,) + arr.shape]
        if arr.ndim > 1 and arr.shape[::-1] != arr.shape:
            shapes.append(arr.shape[::-1])
        shape = pick(shapes)
        return npy_bytes(np.resize(arr, shape)), "shape", False
    if kind == "scalar":
        return npy_bytes(np.asarray(arr.flat[0])), "scalar", arr.shape == ()
    if kind == "empty":
        return npy_bytes(np.zeros((0,), arr.dtype)), "empty", False
    data = npy_bytes(arr)
    if kind == "truncate":
        return data[:int(rng.integers(0, len(data)))], "truncate", False
    if kind == "header":
        i = int(rng.integers(0, min(len(data), 128)))
        return data[:i] + bytes([int(rng.integers(256))]) + data[i + 1:], "header-byte", None
    if kind == "random-bytes":
        return rng.bytes(int(rng.integers(0, 200))), "random-bytes", False
    if kind == "pickled-object":
        obj = np.empty(arr.shape, object)
        obj.flat[:] = [{"a": 1}] * arr.size if arr.size else []
        return npy_bytes(obj, allow_pickle=True), "pickled-object", False
    if kind == "wider-exact":
        wide = values.astype(np.float64 if is_float else np.int64)
        return npy_bytes(wide), "wider-exact", True
    if kind == "wider-inexact":
        if is_float:
            wide = values.astype(np.float64) + 1e-12
            wide.flat[0] = 1 / 3
        else:
            wide = values.astype(np.int64)
            wide.flat[0] = 2**40
        return npy_bytes(wide), "wider-inexact", False
    if kind == "nan":
        if is_float:
            bad = typed.copy()
            bad.flat[0] = np.nan
            return npy_bytes(on_disk(bad)), "nan", True
        return npy_bytes(arr), "same", True
    if kind == "fortran":
        return npy_bytes(np.array(arr, order="F")), "fortran-order", True   # keeps 0-d arrays 0-d
    return npz_bytes({"a": arr}), "npz-as-npy", False
