"""Random valid programs and machines (seeded numpy generators), for property tests and for
the reliability campaign (scripts/campaign.py).

`random_program(rng, opcode)` writes a small program exercising one core opcode or one extension
of programs/lib/ with random shapes and attributes; `random_chain(rng)` chains several
instructions (broadcasting, matrix products, reductions, data movement); `any_program(rng)` picks
one of those. `random_machine(rng, ...)` re-scales `tiny` to a random depth and fan-outs
(1, primes, powers of two) with memories from barely enough to huge; `machine_toml` writes a
machine back as a machine file. Every generator is a function of a numpy Generator, so one
integer seed reproduces a case; `programs()` and `machines()` wrap them as hypothesis strategies.
"""
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from machine import Compute, Machine, preset
from machine.area import DEFAULT_PROCESS_NM
from isa import parse_program
from isa.opcodes import OPCODES, conv_out

LIB = Path(__file__).resolve().parents[1] / "programs" / "lib"


def _decl(name, dtype, shape, role=""):
    return f"tensor {name} : {dtype}[{', '.join(map(str, shape))}] {role}".rstrip()


FLOATS = ("f32", "f16", "bf16")
ALL_DTYPES = ("f32", "i32", "f16", "bf16", "i8")


#: how closely a float output of the leaves must match the reference's, relative to the output's
#: largest magnitude: f32 2e-4 (float32 BLAS against a float64 reference); f16 and bf16 eight
#: units of rounding (u = 2^-11, 2^-8): the reference rounds each result once, while a decomposed
#: reduction also rounds every leaf's partial and every partial sum to the destination type
TOLERANCE = {"f32": 2e-4, "f16": 8 * 2.0**-11, "bf16": 8 * 2.0**-8}


def close_to_reference(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per element: does `got` match the reference's `want`? Integers exactly; floats within
    TOLERANCE of their type (relative, and absolute against the output's scale); NaN where NaN."""
    from isa.reference import dtype_name
    name = dtype_name(want.dtype)
    if name not in TOLERANCE:
        return np.asarray(got) == np.asarray(want)
    g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    finite = np.isfinite(w)
    scale = float(np.abs(w[finite]).max()) if finite.any() else 1.0
    tol = TOLERANCE[name]
    return np.isclose(g, w, rtol=tol, atol=tol * max(1.0, scale), equal_nan=True)


def _dtype(rng, choices):
    """One of `choices`: the first (the classic f32 or i32) half the time, else any other."""
    if len(choices) == 1 or rng.integers(0, 2) == 0:
        return choices[0]
    return choices[int(rng.integers(1, len(choices)))]


def _dims(rng, rank, lo=1, hi=9):
    return [int(rng.integers(lo, hi)) for _ in range(rank)]


def random_program(rng: np.random.Generator, opcode: str):
    """A checked program whose main instruction is `opcode`."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    lines, body = [], ""
    if opcode == "matmul" and r(0, 1):     # batch axes, each source's broadcast or not
        m, k, n = r(1, 12), r(1, 20), r(1, 12)
        batch = _dims(rng, r(1, 2), 1, 5)
        ab = [d if r(0, 2) else 1 for d in batch][r(0, len(batch)):]
        bb = [d if r(0, 2) else 1 for d in batch][r(0, len(batch)):]
        if len(ab) < len(batch) and len(bb) < len(batch):
            ab = [d if r(0, 1) else 1 for d in batch]
        out_batch = list(np.broadcast_shapes(tuple(ab), tuple(bb)))
        dt = _dtype(rng, ("f32", "f16", "bf16", "i8"))
        lines = [_decl("a", dt, ab + [m, k], "input"), _decl("b", dt, bb + [k, n], "param"),
                 _decl("y", "i32" if dt == "i8" else dt, out_batch + [m, n], "output")]
        body = "matmul y, a, b"
    elif opcode in ("matmul", "eucdist"):
        m, k, n = r(1, 40), r(1, 70), r(1, 40)
        b = (k, n) if opcode == "matmul" else (n, k)
        dt = _dtype(rng, ("f32", "f16", "bf16", "i8"))
        out = "i32" if dt == "i8" else dt           # i8 products accumulate in i32
        lines = [_decl("a", dt, (m, k), "input"), _decl("b", dt, b, "param"),
                 _decl("y", out, (m, n), "output")]
        body = f"{opcode} y, a, b"
    elif opcode == "conv2d":
        n, c, o, kh, kw, s = r(1, 3), r(1, 6), r(1, 6), r(1, 4), r(1, 4), r(1, 3)
        pad = (r(0, kh - 1), r(0, kw - 1), r(0, kh - 1), r(0, kw - 1)) if r(0, 1) else r(0, min(kh, kw) - 1)
        pt, pl, pb, pr = pad if isinstance(pad, tuple) else (pad,) * 4
        h, w = r(max(1, kh - pt - pb), 14), r(max(1, kw - pl - pr), 14)
        ho, wo = conv_out(h, kh, s, pt, pb), conv_out(w, kw, s, pl, pr)
        dt = _dtype(rng, ("f32", "f16", "bf16", "i8"))
        lines = [_decl("x", dt, (n, c, h, w), "input"), _decl("w", dt, (o, c, kh, kw), "param"),
                 _decl("y", "i32" if dt == "i8" else dt, (n, o, ho, wo), "output")]
        body = f"conv2d y, x, w, stride={s}, pad={pad}".replace(" ", " ")
    elif opcode in ("maxpool", "avgpool"):
        n, c, k, s = r(1, 3), r(1, 5), r(1, 4), r(1, 3)
        p = r(0, k - 1)
        h, w = r(max(1, k - 2 * p), 15), r(max(1, k - 2 * p), 15)
        ho, wo = conv_out(h, k, s, p), conv_out(w, k, s, p)
        dt = _dtype(rng, FLOATS)
        lines = [_decl("x", dt, (n, c, h, w), "input"), _decl("y", dt, (n, c, ho, wo), "output")]
        body = f"{opcode} y, x, kernel={k}, stride={s}, pad={p}"
    elif opcode == "lrn":
        shape = (r(1, 3), r(1, 9), r(1, 7), r(1, 7))
        dt = _dtype(rng, FLOATS)
        lines = [_decl("x", dt, shape, "input"), _decl("y", dt, shape, "output")]
        body = f"lrn y, x, size={r(1, 6)}, alpha=0.001, beta=0.75, k=1.0"
    elif opcode in ("add", "sub", "mul", "div"):
        dtype = "f32" if opcode == "div" or r(0, 2) else "i32"
        if dtype == "f32":
            dtype = _dtype(rng, FLOATS)
        z = _dims(rng, r(1, 4))
        y = [d if r(0, 2) else 1 for d in z][r(0, len(z) - 1):]
        lines = [_decl("a", dtype, z, "input"), _decl("b", dtype, y, "param"), _decl("z", dtype, z, "output")]
        body = f"{opcode} z, a, b" if r(0, 1) else f"{opcode} z, b, a"
    elif opcode in ("relu", "sigmoid", "tanh", "exp", "erf", "abs", "neg"):
        shape = _dims(rng, r(1, 4))
        dt = _dtype(rng, FLOATS + (("i32",) if opcode in ("abs", "neg") else ()))
        lines = [_decl("x", dt, shape, "input"), _decl("y", dt, shape, "output")]
        body = f"{opcode} y, x"
    elif opcode in ("sqrt", "rsqrt", "log"):     # mostly of |x|; a negative draw gives NaN
        shape = _dims(rng, r(1, 4))
        dt = _dtype(rng, FLOATS)
        lines = [_decl("x", dt, shape, "input"), _decl("t", dt, shape), _decl("y", dt, shape, "output")]
        body = f"abs t, x\n{opcode} y, t" if r(0, 3) else f"{opcode} y, x"
    elif opcode in ("pow", "min", "max", "where"):
        dtype = _dtype(rng, FLOATS) if opcode == "pow" or r(0, 2) else _dtype(rng, ("i32", "i8"))
        if opcode == "where" and dtype == "i8":
            dtype = "i32"
        z = _dims(rng, r(1, 4))
        y = [d if r(0, 2) else 1 for d in z][r(0, len(z) - 1):]
        c = [d if r(0, 1) else 1 for d in z][r(0, len(z) - 1):]
        lines = [_decl("a", dtype, z, "input"), _decl("b", dtype, y, "param"), _decl("z", dtype, z, "output")]
        if opcode == "pow":         # a positive base: a real power of every exponent
            lines.append(_decl("t", dtype, z))
            body = "abs t, a\npow z, t, b"
        elif opcode == "where":
            lines.append(_decl("c", _dtype(rng, ("i32",) + FLOATS), c, "input"))
            body = "where z, c, a, b" if r(0, 1) else "where z, c, b, a"
        else:
            body = f"{opcode} z, a, b" if r(0, 1) else f"{opcode} z, b, a"
    elif opcode == "reduce_mean":
        shape = _dims(rng, r(1, 3), 1, 30)
        ax = r(-len(shape), len(shape) - 1)
        dt = _dtype(rng, FLOATS)
        out = shape[:ax % len(shape)] + shape[ax % len(shape) + 1:]
        count = f", count={r(1, 40)}" if r(0, 3) == 0 else ""
        lines = [_decl("x", dt, shape, "input"), _decl("y", dt, out, "output")]
        body = f"reduce_mean y, x, axis={ax}{count}"
    elif opcode == "causal_mask":
        s, t = r(1, 40), r(1, 40)
        dt = _dtype(rng, FLOATS)
        lines = [_decl("qp", "i32", (s,)), _decl("kp", "i32", (t,), "input"),
                 _decl("m", dt, (s, t), "output")]
        body = (f"fill qp, value={r(-5, 30)}, step={r(0, 2)}\n"
                f"causal_mask m, qp, kp, window={r(0, 3) and r(1, 12)}")
    elif opcode == "fill":
        shape = _dims(rng, r(0, 3), 1, 9)
        dt = _dtype(rng, ("f32", "i32") + FLOATS[1:] + ("i8",))
        ax = r(-len(shape), len(shape) - 1) if shape else -1
        value = r(-9, 9) if dt in ("i32", "i8") else round(float(rng.normal(0, 3)), 3)
        step = r(-2, 2) if dt in ("i32", "i8") else round(float(rng.normal(0, 1)), 3)
        lines = [_decl("y", dt, shape, "output")]
        body = f"fill y, value={value}, step={step}, axis={ax}"
    elif opcode in ("reduce_sum", "reduce_max", "argmax", "argmin"):
        shape = _dims(rng, r(1, 3), 1, 30)
        ax = r(-len(shape), len(shape) - 1)
        dtype = "f32" if opcode in ("argmax", "argmin") or r(0, 2) else "i32"
        if dtype == "f32":      # reduce_sum takes every type but i8; the compares take all
            dtype = _dtype(rng, FLOATS if opcode == "reduce_sum" else FLOATS + ("i8",))
        out = shape[:ax % len(shape)] + shape[ax % len(shape) + 1:]
        odt = "i32" if opcode.startswith("arg") else dtype
        lines = [_decl("x", dtype, shape, "input"), _decl("y", odt, out, "output")]
        body = f"{opcode} y, x, axis={ax}"
    elif opcode in ("sort", "argsort", "count"):
        shape = _dims(rng, r(1, 3), 1, 6)
        shape[-1] = r(1, 300)
        dtype = _dtype(rng, ("i32",) + FLOATS + ("i8",)) if r(0, 1) else "f32"
        if opcode in ("sort", "argsort"):
            lines = [_decl("x", dtype, shape, "input"),
                     _decl("y", dtype if opcode == "sort" else "i32", shape, "output")]
            body = f"{opcode} y, x"
        else:
            dtype = "i8" if dtype == "i8" else "i32"
            lines = [_decl("x", dtype, shape, "input"), _decl("y", "i32", shape[:-1], "output")]
            body = f"count y, x, value={r(0, 9)}"
    elif opcode == "mergepos":
        lead = _dims(rng, r(0, 2), 1, 5)
        a, b = lead + [r(1, 9)], lead + [r(1, 9)]
        dtype = _dtype(rng, ALL_DTYPES) if r(0, 1) else "f32"
        lines = [_decl("x", dtype, a, "input"), _decl("z", dtype, b, "input"),
                 _decl("sx", dtype, a), _decl("sz", dtype, b),
                 _decl("y", "i32", lead + [a[-1] + b[-1]], "output")]
        body = "sort sx, x\nsort sz, z\nmergepos y, sx, sz"
    elif opcode == "gather":
        shape = _dims(rng, r(1, 3), 1, 6)
        k = r(1, shape[-1])
        dt = _dtype(rng, ALL_DTYPES)
        lines = [_decl("x", dt, shape, "input"), _decl("o", "i32", shape),
                 _decl("i", "i32", shape[:-1] + [k]), _decl("y", dt, shape[:-1] + [k], "output")]
        body = f"argsort o, x\nslice i, o, axis={len(shape) - 1}, start=0\ngather y, x, i"
    elif opcode == "cast":      # any type to any type; floats raised to the 9th power, so that
        shape = _dims(rng, r(0, 3), 1, 9)     # narrowing saturates (and f16 overflows) too
        src, dst = str(rng.choice(ALL_DTYPES)), str(rng.choice(ALL_DTYPES))
        lines = [_decl("x", src, shape, "input"), _decl("y", dst, shape, "output")]
        body = "cast y, x"
        if src in FLOATS:
            lines.append(_decl("t", src, shape))
            body = "mul t, x, x\nmul t, t, t\nmul t, t, t\nmul t, t, x\ncast y, t"
    elif opcode in EXTENSION_OPCODES:
        return _extension_program(rng, opcode)
    else:   # data movement: a transpose, copy, reshape, slice or concat after a relu
        shape = _dims(rng, 3, 1, 6)
        mdt = _dtype(rng, FLOATS)
        lines = [_decl("x", mdt, shape, "input"), _decl("t", mdt, shape)]
        body = "relu t, x\n"
        if opcode == "transpose":
            perm = tuple(int(i) for i in rng.permutation(3))
            lines.append(_decl("y", mdt, [shape[p] for p in perm], "output"))
            body += f"transpose y, t, perm={perm}"
        elif opcode in ("copy", "reshape"):
            out = shape if opcode == "copy" else [int(np.prod(shape))]
            lines.append(_decl("y", mdt, out, "output"))
            body += f"{opcode} y, t"
        elif opcode == "slice":
            ax = r(0, 2)
            ext = r(1, shape[ax])
            out = shape[:ax] + [ext] + shape[ax + 1:]
            lines.append(_decl("y", mdt, out, "output"))
            body += f"slice y, t, axis={ax}, start={r(0, shape[ax] - ext)}"
        else:
            ax = r(0, 2)
            out = list(shape)
            out[ax] *= 2
            lines.append(_decl("y", mdt, out, "output"))
            body += f"concat y, t, x, axis={ax}"
    return parse_program("\n".join(lines) + "\n" + body + "\n", f"random_{opcode}.fasm")


def _extension_program(rng, opcode: str):
    """A program whose one instruction is an extension of programs/lib/ (included by path)."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    body = ""
    if opcode == "softmax":
        shape = (r(1, 40), r(1, 60))
        lines = [_decl("x", "f32", shape, "input"), _decl("y", "f32", shape, "output")]
        body = "softmax y, x"
    elif opcode == "topk":
        rows, n = r(1, 4), r(1, 400)
        k = r(1, min(n, 16))
        lines = [_decl("x", "f32", (rows, n), "input"), _decl("vals", "f32", (rows, k), "output"),
                 _decl("idx", "i32", (rows, k), "output")]
        body = "topk vals, idx, x"
    elif opcode == "conv3d":
        n, c, o, kd, kh, kw, s = r(1, 2), r(1, 3), r(1, 4), r(1, 3), r(1, 3), r(1, 3), r(1, 2)
        p = r(0, min(kh, kw) - 1)
        d, h, w = r(kd, kd + 4), r(max(1, kh - 2 * p), 9), r(max(1, kw - 2 * p), 9)
        out = (n, o, d - kd + 1, conv_out(h, kh, s, p), conv_out(w, kw, s, p))
        lines = [_decl("x", "f32", (n, c, d, h, w), "input"),
                 _decl("w", "f32", (o, c, kd, kh, kw), "param"), _decl("y", "f32", out, "output")]
        body = f"conv3d y, x, w, stride={s}, pad={p}"
    elif opcode in ("layernorm", "rmsnorm"):
        rows, c = r(1, 30), r(1, 64)
        lines = [_decl("x", "f32", (rows, c), "input"), _decl("g", "f32", (c,), "param"),
                 _decl("y", "f32", (rows, c), "output")]
        if opcode == "layernorm":
            lines.append(_decl("b", "f32", (c,), "param"))
        eps = f", eps={r(1, 9)}e-{r(1, 6)}" if r(0, 1) else ""
        body = f"{opcode} y, x, g{', b' if opcode == 'layernorm' else ''}{eps}"
    elif opcode in ("gelu", "gelu_tanh", "silu"):
        shape = (r(1, 30), r(1, 60))
        lines = [_decl("x", "f32", shape, "input"), _decl("y", "f32", shape, "output")]
        body = f"{opcode} y, x"
    elif opcode == "rope":
        rows, s, h = r(1, 6), r(1, 12), r(1, 8)
        lines = [_decl("x", "f32", (rows, s, 2 * h), "input"), _decl("cos", "f32", (s, h), "param"),
                 _decl("sin", "f32", (s, h), "param"), _decl("y", "f32", (rows, s, 2 * h), "output")]
        body = "rope y, x, cos, sin"
    elif opcode in ("attention", "causal_attention"):
        g, heads, t, d, e = r(1, 3), r(1, 3), r(1, 40), r(1, 12), r(1, 12)
        s = r(1, t)
        lines = [_decl("q", "f32", (g, heads, s, d), "input"), _decl("kt", "f32", (g, 1, d, t), "input"),
                 _decl("v", "f32", (g, 1, t, e), "input"), _decl("o", "f32", (g, heads, s, e), "output"),
                 _decl("m", "f32", (g, heads, s), "output"), _decl("l", "f32", (g, heads, s), "output")]
        body = "attention o, m, l, q, kt, v"
        if opcode == "causal_attention":
            lines += [_decl("qp", "i32", (s,)), _decl("kp", "i32", (t,))]
            window = f", window={r(1, t)}" if r(0, 2) == 0 else ""
            body = (f"fill qp, value={t - s}, step=1\nfill kp, value=0, step=1\n"
                    f"causal_attention o, m, l, q, kt, v, qp, kp{window}")
    else:   # nb_classify
        n, f, k = r(1, 60), r(1, 20), r(1, 10)
        lines = [_decl("x", "f32", (n, f), "input"), _decl("loglik", "f32", (f, k), "param"),
                 _decl("logprior", "f32", (1, k), "param"), _decl("label", "i32", (n,), "output")]
        body = "nb_classify label, x, loglik, logprior"
    lib = LIB / f"{LIBRARY_OF[opcode]}.fasm"
    text = f'include "{lib}"\n' + "\n".join(lines) + "\n" + body + "\n"
    return parse_program(text, f"random_{opcode}.fasm")


def random_chain(rng: np.random.Generator, length: int | None = None):
    """A chain of f32 instructions, each reading the previous result: unary maps, broadcasting
    binaries with params, matrix products, reductions to a column, transposes and softmax."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    length = length or r(2, 6)
    shape = [r(1, 24), r(1, 24)]
    decls = [_decl("t0", "f32", shape, "input")]
    body = [] if r(0, 3) else [f'include "{LIB / "softmax.fasm"}"']
    uses_softmax = bool(body)
    for i in range(1, length + 1):
        src, dst = f"t{i - 1}", f"t{i}"
        kind = r(0, 6 if uses_softmax else 5)
        if kind == 0:
            body.append(f"{['relu', 'sigmoid', 'tanh', 'exp'][r(0, 3)]} {dst}, {src}")
        elif kind == 1:
            pshape = [[shape[1]], [1, shape[1]], [shape[0], 1], list(shape), [1]][r(0, 4)]
            decls.append(_decl(f"p{i}", "f32", pshape, "param"))
            op = ["add", "sub", "mul", "div"][r(0, 3)]
            body.append(f"{op} {dst}, {src}, p{i}" if r(0, 1) else f"{op} {dst}, p{i}, {src}")
        elif kind == 2:
            n = r(1, 24)
            decls.append(_decl(f"p{i}", "f32", (shape[1], n), "param"))
            body.append(f"matmul {dst}, {src}, p{i}")
            shape = [shape[0], n]
        elif kind == 3:     # a reduction over the rows' length, kept as a column
            decls.append(_decl(f"r{i}", "f32", shape[:1]))
            body.append(f"{['reduce_sum', 'reduce_max'][r(0, 1)]} r{i}, {src}, axis=1")
            body.append(f"reshape {dst}, r{i}")
            shape = [shape[0], 1]
        elif kind == 4:
            body.append(f"transpose {dst}, {src}, perm=(1, 0)")
            shape = shape[::-1]
        elif kind == 5:
            body.append(f"copy {dst}, {src}")
        else:
            body.append(f"softmax {dst}, {src}")
        decls.append(_decl(dst, "f32", shape, "output" if i == length else ""))
    includes = [b for b in body if b.startswith("include")]
    instrs = [b for b in body if not b.startswith("include")]
    text = "\n".join(includes + decls + instrs) + "\n"
    return parse_program(text, "random_chain.fasm")


def any_program(rng: np.random.Generator):
    """One opcode's program (core or extension) or a chain."""
    if rng.integers(0, 4) == 0:
        return random_chain(rng)
    return random_program(rng, str(rng.choice(ALL_OPCODES)))


def random_machine(rng: np.random.Generator, max_leaves: int = 4096, leaf_memory: int | None = None,
                   huge: bool = False):
    """`tiny` re-scaled to depth 1..4 with fan-outs 1..16 (including 3, 5, 7) and random memories;
    `huge` adds fan-outs 11 and 13, memories up to 64 MiB per leaf, half-duplex links and leaf
    MAC arrays."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    fan_choices = [1, 2, 3, 4, 5, 7, 8, 16] + ([11, 13] if huge else [])
    while True:
        depth = r(1, 4)
        fans = tuple(int(rng.choice(fan_choices)) for _ in range(depth))
        if int(np.prod(fans)) <= max_leaves:
            break
    m = preset("tiny").rescaled(depth, fans)
    mems = [2048, 4096, 16384, 65536] + ([1 << 20, 1 << 26] if huge else [])
    leaf_mem = leaf_memory or int(rng.choice(mems))
    levels = list(m.levels)
    for i in range(1, depth):
        levels[i] = replace(levels[i], memory_bytes=leaf_mem * int(rng.choice([4, 16, 64])))
    levels[-1] = replace(levels[-1], memory_bytes=leaf_mem)
    compute = m.compute
    if huge:                            # and links of either duplex, leaves with a MAC array
        levels = [replace(lv, duplex=str(rng.choice(["full", "half"]))) for lv in levels]
        if rng.integers(0, 2):          # tiny's 32 MAC ops per cycle: a 4 x 4 or 2 x 8 array
            compute = replace(compute, mac_array=((4, 4), (2, 8))[int(rng.integers(0, 2))],
                              vector_width=int(rng.choice([1, 4, 8, 16])),
                              array_fill_cycles=int(rng.integers(0, 8)))
        if depth > 1 and rng.integers(0, 3) == 0:   # the root's memory: shares of its children's
            levels[0] = replace(levels[0], memory="distributed",
                                memory_share=float(rng.choice([0.25, 0.5, 0.75])),
                                bandwidth_share=float(rng.choice([0.25, 0.5])))
        if rng.integers(0, 2):          # the area model's keys: a process node, a DRAM memory
            m = replace(m, process_nm=float(rng.choice([5, 7, 10, 12, 16, 28, 40])))
        i = int(rng.integers(0, depth))
        if levels[i].memory == "local" and rng.integers(0, 3) == 0:
            levels[i] = replace(levels[i], memory_technology=str(rng.choice(["hbm", "ddr"])))
    return replace(m, levels=tuple(levels), compute=compute)


def machine_toml(m: Machine) -> str:
    """A machine file that loads back to `m`."""
    lines = [f"name = {_toml_value(m.name)}", f"description = {_toml_value(m.description)}",
             f"frequency_hz = {float(m.frequency_hz)!r}"]
    if m.process_nm != DEFAULT_PROCESS_NM:
        lines.append(f"process_nm = {m.process_nm!r}")
    for i, lv in enumerate(m.levels):
        lines.append("\n[[level]]")
        for f in fields(lv):
            v = getattr(lv, f.name)
            if f.name == "fanout" and i == len(m.levels) - 1:
                continue
            if f.name == "physical_memory":
                continue                # a carved child: its file states the whole memory
            if lv.physical_memory and f.name in ("memory_bytes", "memory_bandwidth"):
                v = lv.physical_memory[0 if f.name == "memory_bytes" else 1]
            if lv.memory == "distributed" and f.name in ("memory_bytes", "memory_bandwidth",
                                                         "memory_pj_per_byte"):
                continue                # derived from the children's memories
            if lv.memory == "local" and f.name in ("memory_share", "bandwidth_share"):
                continue
            if f.name == "memory_technology" and v == f.default:
                continue                # optional: present only where it is not SRAM
            lines.append(f"{f.name} = {_toml_value(v)}")
    lines.append("\n[level.compute]")
    for f in fields(Compute):
        v = getattr(m.compute, f.name)
        if f.name == "mac_ops_per_cycle_by_dtype":
            if v:
                lines.append(f"{f.name} = {{ " + ", ".join(f"{k} = {r!r}" for k, r in v) + " }")
        elif f.name == "mac_array":
            if v:
                lines.append(f"{f.name} = [{v[0]}, {v[1]}]")
        elif v != f.default:
            lines.append(f"{f.name} = {_toml_value(v)}")
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def programs():
    """A hypothesis strategy of random valid programs (any opcode, extension or chain)."""
    from hypothesis import strategies as st
    return st.integers(0, 2**32 - 1).map(lambda s: any_program(np.random.default_rng(s)))


def machines(**kw):
    """A hypothesis strategy of random valid machines (see random_machine)."""
    from hypothesis import strategies as st
    return st.integers(0, 2**32 - 1).map(lambda s: random_machine(np.random.default_rng(s), **kw))


CORE_OPCODES = sorted(OPCODES)
#: extension instructions of programs/lib/ and the library declaring each
LIBRARY_OF = {"softmax": "softmax", "topk": "topk", "conv3d": "conv3d",
              "nb_classify": "naive_bayes", "layernorm": "layernorm", "rmsnorm": "rmsnorm",
              "gelu": "gelu", "gelu_tanh": "gelu", "silu": "silu", "rope": "rope",
              "attention": "attention", "causal_attention": "attention"}
EXTENSION_OPCODES = sorted(LIBRARY_OF)
ALL_OPCODES = CORE_OPCODES + EXTENSION_OPCODES
