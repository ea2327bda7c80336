"""Random valid programs and machines for property tests (seeded numpy generators).

`random_program(rng, opcode)` writes a one- or two-instruction program exercising `opcode` with
random shapes and attributes; `random_machine(rng, ...)` re-scales `tiny` to a random depth and
fan-outs, with memories from barely enough to roomy.
"""
from dataclasses import replace

import numpy as np

from fractal.machine import preset
from isa import parse_program
from isa.opcodes import OPCODES, conv_out


def _decl(name, dtype, shape, role=""):
    return f"tensor {name} : {dtype}[{', '.join(map(str, shape))}] {role}".rstrip()


def _dims(rng, rank, lo=1, hi=9):
    return [int(rng.integers(lo, hi)) for _ in range(rank)]


def random_program(rng: np.random.Generator, opcode: str):
    """A checked program whose main instruction is `opcode`."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    lines, body = [], ""
    if opcode in ("matmul", "eucdist"):
        m, k, n = r(1, 40), r(1, 70), r(1, 40)
        b = (k, n) if opcode == "matmul" else (n, k)
        lines = [_decl("a", "f32", (m, k), "input"), _decl("b", "f32", b, "param"),
                 _decl("y", "f32", (m, n), "output")]
        body = f"{opcode} y, a, b"
    elif opcode == "conv2d":
        n, c, o, kh, kw, s = r(1, 3), r(1, 6), r(1, 6), r(1, 4), r(1, 4), r(1, 3)
        pad = (r(0, kh - 1), r(0, kw - 1), r(0, kh - 1), r(0, kw - 1)) if r(0, 1) else r(0, min(kh, kw) - 1)
        pt, pl, pb, pr = pad if isinstance(pad, tuple) else (pad,) * 4
        h, w = r(max(1, kh - pt - pb), 14), r(max(1, kw - pl - pr), 14)
        ho, wo = conv_out(h, kh, s, pt, pb), conv_out(w, kw, s, pl, pr)
        lines = [_decl("x", "f32", (n, c, h, w), "input"), _decl("w", "f32", (o, c, kh, kw), "param"),
                 _decl("y", "f32", (n, o, ho, wo), "output")]
        body = f"conv2d y, x, w, stride={s}, pad={pad}".replace(" ", " ")
    elif opcode in ("maxpool", "avgpool"):
        n, c, k, s = r(1, 3), r(1, 5), r(1, 4), r(1, 3)
        p = r(0, k - 1)
        h, w = r(max(1, k - 2 * p), 15), r(max(1, k - 2 * p), 15)
        ho, wo = conv_out(h, k, s, p), conv_out(w, k, s, p)
        lines = [_decl("x", "f32", (n, c, h, w), "input"), _decl("y", "f32", (n, c, ho, wo), "output")]
        body = f"{opcode} y, x, kernel={k}, stride={s}, pad={p}"
    elif opcode == "lrn":
        shape = (r(1, 3), r(1, 9), r(1, 7), r(1, 7))
        lines = [_decl("x", "f32", shape, "input"), _decl("y", "f32", shape, "output")]
        body = f"lrn y, x, size={r(1, 6)}, alpha=0.001, beta=0.75, k=1.0"
    elif opcode in ("add", "sub", "mul", "div"):
        dtype = "f32" if opcode == "div" or r(0, 2) else "i32"
        z = _dims(rng, r(1, 4))
        y = [d if r(0, 2) else 1 for d in z][r(0, len(z) - 1):]
        lines = [_decl("a", dtype, z, "input"), _decl("b", dtype, y, "param"), _decl("z", dtype, z, "output")]
        body = f"{opcode} z, a, b" if r(0, 1) else f"{opcode} z, b, a"
    elif opcode in ("relu", "sigmoid", "tanh", "exp"):
        shape = _dims(rng, r(1, 4))
        lines = [_decl("x", "f32", shape, "input"), _decl("y", "f32", shape, "output")]
        body = f"{opcode} y, x"
    elif opcode in ("reduce_sum", "reduce_max", "argmax", "argmin"):
        shape = _dims(rng, r(1, 3), 1, 30)
        ax = r(-len(shape), len(shape) - 1)
        dtype = "f32" if opcode in ("argmax", "argmin") or r(0, 2) else "i32"
        out = shape[:ax % len(shape)] + shape[ax % len(shape) + 1:]
        odt = "i32" if opcode.startswith("arg") else dtype
        lines = [_decl("x", dtype, shape, "input"), _decl("y", odt, out, "output")]
        body = f"{opcode} y, x, axis={ax}"
    elif opcode in ("sort", "argsort", "count"):
        shape = _dims(rng, r(1, 3), 1, 6)
        shape[-1] = r(1, 300)
        dtype = "i32" if r(0, 1) else "f32"
        if opcode in ("sort", "argsort"):
            lines = [_decl("x", dtype, shape, "input"),
                     _decl("y", dtype if opcode == "sort" else "i32", shape, "output")]
            body = f"{opcode} y, x"
        else:
            lines = [_decl("x", "i32", shape, "input"), _decl("y", "i32", shape[:-1], "output")]
            body = f"count y, x, value={r(0, 9)}"
    elif opcode == "mergepos":
        lead = _dims(rng, r(0, 2), 1, 5)
        a, b = lead + [r(1, 9)], lead + [r(1, 9)]
        dtype = "i32" if r(0, 1) else "f32"
        lines = [_decl("x", dtype, a, "input"), _decl("z", dtype, b, "input"),
                 _decl("sx", dtype, a), _decl("sz", dtype, b),
                 _decl("y", "i32", lead + [a[-1] + b[-1]], "output")]
        body = "sort sx, x\nsort sz, z\nmergepos y, sx, sz"
    elif opcode == "gather":
        shape = _dims(rng, r(1, 3), 1, 6)
        k = r(1, shape[-1])
        lines = [_decl("x", "f32", shape, "input"), _decl("o", "i32", shape),
                 _decl("i", "i32", shape[:-1] + [k]), _decl("y", "f32", shape[:-1] + [k], "output")]
        body = f"argsort o, x\nslice i, o, axis={len(shape) - 1}, start=0\ngather y, x, i"
    else:   # data movement: a transpose, copy, reshape, slice or concat after a relu
        shape = _dims(rng, 3, 1, 6)
        lines = [_decl("x", "f32", shape, "input"), _decl("t", "f32", shape)]
        body = "relu t, x\n"
        if opcode == "transpose":
            perm = tuple(int(i) for i in rng.permutation(3))
            lines.append(_decl("y", "f32", [shape[p] for p in perm], "output"))
            body += f"transpose y, t, perm={perm}"
        elif opcode in ("copy", "reshape"):
            out = shape if opcode == "copy" else [int(np.prod(shape))]
            lines.append(_decl("y", "f32", out, "output"))
            body += f"{opcode} y, t"
        elif opcode == "slice":
            ax = r(0, 2)
            ext = r(1, shape[ax])
            out = shape[:ax] + [ext] + shape[ax + 1:]
            lines.append(_decl("y", "f32", out, "output"))
            body += f"slice y, t, axis={ax}, start={r(0, shape[ax] - ext)}"
        else:
            ax = r(0, 2)
            out = list(shape)
            out[ax] *= 2
            lines.append(_decl("y", "f32", out, "output"))
            body += f"concat y, t, x, axis={ax}"
    return parse_program("\n".join(lines) + "\n" + body + "\n", f"random_{opcode}.fasm")


def random_machine(rng: np.random.Generator, max_leaves: int = 4096, leaf_memory: int | None = None):
    """`tiny` re-scaled to depth 1..4 with fan-outs 1..16 (including 3, 5, 7) and random memories."""
    r = lambda lo, hi: int(rng.integers(lo, hi + 1))
    while True:
        depth = r(1, 4)
        fans = tuple(int(rng.choice([1, 2, 3, 4, 5, 7, 8, 16])) for _ in range(depth))
        if int(np.prod(fans)) <= max_leaves:
            break
    m = preset("tiny").rescaled(depth, fans)
    leaf_mem = leaf_memory or int(rng.choice([2048, 4096, 16384, 65536]))
    levels = list(m.levels)
    for i in range(1, depth):
        levels[i] = replace(levels[i], memory_bytes=leaf_mem * int(rng.choice([4, 16, 64])))
    levels[-1] = replace(levels[-1], memory_bytes=leaf_mem)
    return replace(m, levels=tuple(levels))


CORE_OPCODES = sorted(OPCODES)
