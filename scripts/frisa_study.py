"""The inefficiency-phenomenon study: each FRISA workload as an extension instruction against the
same computation written with core opcodes, swept over problem size and machine size.

Timing-only simulation (`fractal.run(..., functional=False)`): every run records root and leaf
instruction counts, bytes moved down and up between each pair of levels, reduction work on the
local functional units, cycles, energy and what bounds the costliest instruction.

    python scripts/frisa_study.py                             # full sweep into docs/frisa/
    python scripts/frisa_study.py --quick --out /tmp/frisa    # a few points, a smoke test

Writes DIR/runs.csv (one row per run), DIR/topk.png, DIR/topk_machines.png, DIR/conv3d.png,
DIR/conv3d_ratio.png, DIR/attention.png, DIR/attention_ratio.png and DIR/summary.md (also
printed). Ratios are core-only / extension throughout.

Forms: topk `extension` (one topk), `core` (sort + slice, argsort + slice: the shipped twin) and
`core_gather` (argsort + slice + gather, one sorting pass); conv3d `extension` (the library
conv3d), `core` (kd conv2d + add) and, for unpadded uses, `extension_hw` (a conv3d declared in
the program with height and width splits as well); attention `extension` (one causal_attention:
keys cut with the online-softmax merge) and `core` (the same steps as program instructions,
materialising the scores in root memory).
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fractal  # noqa: E402
from frisa_programs import (attention_pair, conv3d_hw_text, conv3d_pair,  # noqa: E402
                            naive_bayes_pair, parse, softmax_pair, topk_core_gather, topk_pair)
from compiler.plan import PlanKind  # noqa: E402
from isa.errors import UserError  # noqa: E402
from simulator.run import simulate  # noqa: E402

K = 16
N_REF = 1 << 20                 # the size at which ratios are reported
REF_MACHINE = "f100"

#: label -> (preset, depth, fanout); None keeps the preset's own
MACHINES = {"f100": ("f100", None, None), "f100-d2": ("f100", 2, None), "f100-d4": ("f100", 4, None),
            "f1-d2": ("f1", 2, None), "f1-d3": ("f1", 3, None), "f1-d4": ("f1", 4, None)}
#: conv3d sizes (C, O, H = W); the output depth is fixed so that only the kernel depth varies
PLOT_MACHINES = ("f100", "f1-d2", "f1-d4")    # the size plots; every machine is in the CSV
CONV_SIZES = [(8, 16, 16), (16, 32, 32), (32, 32, 64)]
CONV_DO = 8
MAX_LEVELS = 5
#: attention: a causal prefill of one head of width 64 (S queries against S keys)
ATTN_HEAD = 64
ATTN_S = [512 << i for i in range(7)]            # 512 .. 32768
ATTN_MACHINES = ("f1-d2", "f1-d3", "f100-d2", "f100", "f100-d4")
ATTN_PLOT = ("f1-d2", "f100", "f100-d4")

COLUMNS = (["workload", "form", "machine", "levels", "leaves", "n", "k", "rows", "c", "o", "d",
            "h", "w", "kd", "pad", "root_instructions", "leaf_instructions", "ops"]
           + [f"bytes_down_l{lv}_B" for lv in range(MAX_LEVELS)]
           + [f"bytes_up_l{lv}_B" for lv in range(MAX_LEVELS)]
           + ["bytes_down_total_B", "bytes_up_total_B", "bytes_total_B", "bytes_root_link_B",
              "local_dma_B", "reduction_ops", "cycles", "energy_J", "bound", "memory_root_B",
              "memory_piece_B", "scores_held_B", "fits", "sim_wall_s"])


def sweep(quick: bool) -> dict:
    if quick:
        return {"topk": [(m, 1 << e) for m in ("f100", "f1-d2") for e in (12, 16, 20)],
                "conv": [("f100", (8, 16, 16), kd, 1) for kd in (1, 3)]
                + [("f100", (32, 32, 64), kd, 0) for kd in (1, 3)],
                "other": ["f100"],
                "attention": [(m, n) for m in ("f100", "f1-d2") for n in (512, 2048)]}
    return {"topk": [(m, 1 << e) for m in MACHINES for e in range(12, 23)],
            "conv": [(m, s, kd, 1) for m in ("f100", "f1-d2") for s in CONV_SIZES for kd in range(1, 6)]
            + [(m, s, kd, 0) for m in ("f100", "f1-d2") for s in CONV_SIZES[1:] for kd in range(1, 6)],
            "other": ["f100", "f1-d2"],
            "attention": [(m, n) for m in ATTN_MACHINES for n in ATTN_S]}


def machine(label: str):
    name, depth, fan = MACHINES[label]
    return fractal.build_machine(name, depth, fan)


def measure(text: str, mlabel: str, scores: bool = False) -> dict:
    """One timing-only run: the metrics of a row. Memory: what the root holds (every tensor of
    the program), the most any node below it holds at once (the operands of its piece; a leaf
    also holds an extension body's temporaries), and with `scores` the largest attention score
    block any node holds (the
    core form's tensor `s` in root memory, the extension's leaf blocks). A program whose
    tensors do not fit the root's memory is a row with fits = 0 and its memory alone."""
    program = parse(text)
    m = machine(mlabel)
    row = {"machine": mlabel, "levels": len(m.levels), "leaves": m.leaves,
           "memory_root_B": sum(t.type.nbytes for t in program.tensors)}
    if scores:
        row["scores_held_B"] = max((t.type.nbytes for t in program.tensors if t.name == "s"),
                                   default="")
    start = time.perf_counter()
    try:
        plan = fractal.compile(program, m)
    except UserError:
        return {**row, "fits": 0}
    r, _ = simulate(plan)
    wall = time.perf_counter() - start
    j = r.to_json()
    down, up = j["bytes_down"], j["bytes_up"]
    costliest = max(j["instructions"], key=lambda i: i["cycles"])
    row.update({"root_instructions": j["root_instructions"], "leaf_instructions": j["leaf_instructions"],
                "ops": j["ops"], "fits": 1,
                "memory_piece_B": max((t.working_set if node.kind == PlanKind.LEAF else t.nbytes
                                       for (t, lv), node in plan.table.items() if lv > 0), default=0)})
    blocks = [_score_block(t) for (t, lv), node in plan.table.items()
              if node.kind == PlanKind.LEAF and t.opcode in ("attention", "causal_attention")]
    if scores and blocks:       # the extension: only its leaves hold scores, one block each
        row["scores_held_B"] = max(blocks)
    for lv in range(MAX_LEVELS):
        row[f"bytes_down_l{lv}_B"] = down[lv] if lv < len(down) else ""
        row[f"bytes_up_l{lv}_B"] = up[lv] if lv < len(up) else ""
    row.update({"bytes_down_total_B": sum(down), "bytes_up_total_B": sum(up),
                "bytes_total_B": sum(down) + sum(up), "bytes_root_link_B": down[1] + up[1],
                "local_dma_B": sum(lv["local_bytes"] for lv in j["levels"]),
                "reduction_ops": j["reduction_ops"], "cycles": j["cycles"],
                "energy_J": j["energy_joules"], "bound": costliest["bottleneck"],
                "sim_wall_s": round(wall, 4)})
    return row


def _score_block(task) -> int:
    """Bytes of the scores s : f32[G, R, S, T] an attention leaf computes (q [G, R, S, D],
    kt [G, 1, D, T])."""
    q, kt = task.inputs[0], task.inputs[1]
    return 4 * q.shape[0] * q.shape[1] * q.shape[2] * kt.shape[3]


#: the parts of the study: TopK, Conv3D, softmax and naive Bayes (runs.csv, summary.md), and
#: attention (attention_runs.csv, attention_summary.md)
PARTS = {"classic": ("topk", "conv", "other"), "attention": ("attention",)}


def run_all(quick: bool, log=print, parts=tuple(PARTS)) -> list[dict]:
    keep = {k for p in parts for k in PARTS[p]}
    pts = {k: (v if k in keep else []) for k, v in sweep(quick).items()}
    rows = []
    for mlabel, n in pts["topk"]:
        ext, core = topk_pair(n, K)
        for form, text in (("extension", ext), ("core", core),
                           ("core_gather", topk_core_gather(n, K))):
            rows.append({"workload": "topk", "form": form, "n": n, "k": K, "rows": 1,
                         **measure(text, mlabel)})
        log(f"  topk {mlabel} n=2^{n.bit_length() - 1}")
    for mlabel, (c, o, hw), kd, pad in pts["conv"]:
        d = CONV_DO + kd - 1
        ext, core = conv3d_pair(1, c, o, d, hw, hw, kd, pad=pad)
        forms = [("extension", ext), ("core", core)]
        if pad == 0:
            forms.append(("extension_hw", conv3d_hw_text(1, c, o, d, hw, hw, kd)))
        for form, text in forms:
            rows.append({"workload": "conv3d", "form": form, "n": 1, "c": c, "o": o, "d": d,
                         "h": hw, "w": hw, "kd": kd, "pad": pad, **measure(text, mlabel)})
        log(f"  conv3d {mlabel} c={c} o={o} h=w={hw} kd={kd} pad={pad}")
    for mlabel in pts["other"]:
        for form, text in zip(("extension", "core"), softmax_pair(256, 1000)):
            rows.append({"workload": "softmax", "form": form, "rows": 256, "n": 1000,
                         **measure(text, mlabel)})
        for form, text in zip(("extension", "core"), naive_bayes_pair(4096, 64, 10)):
            rows.append({"workload": "naive_bayes", "form": form, "n": 4096, "c": 64, "k": 10,
                         **measure(text, mlabel)})
        log(f"  softmax, naive Bayes {mlabel}")
    for mlabel, n in pts["attention"]:
        for form, text in zip(("extension", "core"), attention_pair(n, n, dim=ATTN_HEAD)):
            rows.append({"workload": "attention", "form": form, "n": n, "k": ATTN_HEAD, "rows": 1,
                         **measure(text, mlabel, scores=True)})
        log(f"  attention {mlabel} S={n}")
    return rows


def write_csv(rows: list[dict], path: Path):
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, COLUMNS, extrasaction="raise")
        wr.writeheader()
        for r in rows:
            wr.writerow({c: r.get(c, "") for c in COLUMNS})


# ---------------------------------------------------------------- analysis

def pick(rows, **want):
    return [r for r in rows if all(r.get(k) == v for k, v in want.items())]


def one(rows, **want):
    got = pick(rows, **want)
    if len(got) != 1:
        raise LookupError(f"{len(got)} rows for {want}")
    return got[0]


def distinct(rows, *keys):
    return list(dict.fromkeys(tuple(r.get(k) for k in keys) if len(keys) > 1 else r.get(keys[0])
                              for r in rows))


def ratio(a, b) -> float:
    return a / b if b else float("inf")


def fit_exponent(xs, ys) -> float:
    """The slope of log y against log x (least squares)."""
    return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


def topk_fits(rows) -> list[dict]:
    out = []
    tk = pick(rows, workload="topk")
    for m in distinct(tk, "machine"):
        for form in distinct(tk, "form"):
            pts = sorted(pick(tk, machine=m, form=form), key=lambda r: r["n"])
            if len(pts) < 3:
                continue
            ns = [r["n"] for r in pts]
            big = [r for r in pts if r["n"] >= 1 << 16]
            out.append({"machine": m, "form": form, "n_min": ns[0], "n_max": ns[-1],
                        "up_total": fit_exponent(ns, [r["bytes_up_total_B"] for r in pts]),
                        "up_large": fit_exponent([r["n"] for r in big],
                                                 [r["bytes_up_total_B"] for r in big])
                        if len(big) >= 2 else float("nan"),
                        "up_root_link": fit_exponent(ns, [r["bytes_up_l1_B"] for r in pts]),
                        "down_total": fit_exponent(ns, [r["bytes_down_total_B"] for r in pts]),
                        "reduction": fit_exponent(ns, [max(r["reduction_ops"], 1) for r in pts]),
                        "cycles": fit_exponent(ns, [r["cycles"] for r in pts])})
    return out


def fmt(x) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, (int, np.integer)):
        return f"{x:,}"
    if x != x:
        return ""
    if x == float("inf"):
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 0.1:
        return f"{x:.4g}"
    return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.1f}"


def table(header, body) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(fmt(c) for c in row) + " |" for row in body])


def p2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"


def summary(rows, quick: bool, wall: float) -> str:
    L = ["# FRISA study: extension instructions against core-only programs", "",
         f"Timing-only simulation, {len(rows)} runs in {wall:.0f} s"
         f"{' (quick mode: a few points only)' if quick else ''}, written by "
         "`python scripts/frisa_study.py`; every run is a row of `runs.csv`. Ratios are "
         "core-only / extension: how many times more the core-only form needs.", ""]

    tk = pick(rows, workload="topk")
    ref_n = max(r["n"] for r in pick(tk, machine=REF_MACHINE) if r["n"] <= N_REF)
    e, c, g = (one(tk, machine=REF_MACHINE, n=ref_n, form=f)
               for f in ("extension", "core", "core_gather"))
    L += [f"## TopK, k = {K}, n = {ref_n:,} ({p2(ref_n)}) on {REF_MACHINE}", "",
          "`core` is the shipped twin (sort + slice, argsort + slice); `core_gather` is the "
          "cheapest core-only form (argsort + slice + gather, one sorting pass).", ""]
    metrics = [("root instructions", "root_instructions"), ("leaf instructions", "leaf_instructions"),
               ("bytes down, all levels", "bytes_down_total_B"),
               ("bytes up, all levels", "bytes_up_total_B"),
               ("bytes up into the root", "bytes_up_l1_B"),
               ("bytes of local DMA (slice, gather, ... in a node's memory)", "local_dma_B"),
               ("reduction ops", "reduction_ops"), ("cycles", "cycles"), ("energy (J)", "energy_J")]
    L += table(["metric", "extension", "core", "core / ext", "core_gather", "core_gather / ext"],
               [[name, e[k], c[k], ratio(c[k], e[k]), g[k], ratio(g[k], e[k])] for name, k in metrics]
               + [["bound (costliest instruction)", e["bound"], c["bound"], "", g["bound"], ""]])
    L += ["", "Bytes up per link (level l to level l-1), root first:", ""]
    lv = range(1, e["levels"])
    L += table(["form"] + [f"{i} -> {i - 1}" for i in lv],
               [[f["form"]] + [f[f"bytes_up_l{i}_B"] for i in lv] for f in (e, c, g)])

    L += ["", "## TopK: growth exponents against n (least squares on log-log)", ""]
    fits = topk_fits(rows)
    L += table(["machine", "form", "n", "bytes up", "bytes up, n >= 2^16", "bytes up into root",
                "bytes down", "reduction ops", "cycles"],
               [[f["machine"], f["form"], f"{p2(f['n_min'])}..{p2(f['n_max'])}"]
                + [f"{f[k]:.3f}" if f[k] == f[k] else "" for k in
                   ("up_total", "up_large", "up_root_link", "down_total", "reduction", "cycles")]
                for f in fits])

    L += ["", f"## TopK at n = {p2(ref_n)} on every machine (core / extension)", ""]
    body = []
    for m in distinct(tk, "machine"):
        got = pick(tk, machine=m, n=ref_n)
        if len(got) != 3:
            continue
        e2, c2, g2 = (one(got, form=f) for f in ("extension", "core", "core_gather"))
        body.append([m, e2["leaves"], ratio(c2["bytes_up_total_B"], e2["bytes_up_total_B"]),
                     ratio(c2["bytes_up_l1_B"], e2["bytes_up_l1_B"]),
                     ratio(c2["reduction_ops"], e2["reduction_ops"]),
                     ratio(c2["bytes_down_total_B"], e2["bytes_down_total_B"]),
                     ratio(c2["cycles"], e2["cycles"]), ratio(c2["energy_J"], e2["energy_J"]),
                     ratio(g2["bytes_up_total_B"], e2["bytes_up_total_B"]),
                     ratio(g2["cycles"], e2["cycles"]), e2["cycles"], c2["cycles"]])
    L += table(["machine", "leaves", "bytes up", "bytes up into root", "reduction ops", "bytes down",
                "cycles", "energy", "bytes up (core_gather)", "cycles (core_gather)",
                "cycles ext", "cycles core"], body)

    cv = pick(rows, workload="conv3d")
    for pad in sorted(distinct(cv, "pad"), reverse=True):
        sub = pick(cv, pad=pad)
        hw = pad == 0 and pick(sub, form="extension_hw")
        L += ["", f"## Conv3D, pad = {pad}, output depth {CONV_DO}, 3x3 kernels: core / extension",
              ""]
        if hw:
            L += ["`hw` columns: the program-declared `conv3d_hw` (height and width splits too) "
                  "in place of the library's conv3d.", ""]
        body = []
        for m, cc, oo, h in distinct(sub, "machine", "c", "o", "h"):
            for kd in sorted(distinct(pick(sub, machine=m, c=cc, h=h), "kd")):
                got = pick(sub, machine=m, c=cc, o=oo, h=h, kd=kd)
                e3, c3 = one(got, form="extension"), one(got, form="core")
                line = [m, f"C{cc} O{oo} {h}x{h}", kd, e3["bytes_total_B"], c3["bytes_total_B"],
                        ratio(c3["bytes_total_B"], e3["bytes_total_B"]),
                        ratio(c3["bytes_root_link_B"], e3["bytes_root_link_B"]),
                        ratio(c3["root_instructions"], e3["root_instructions"]),
                        ratio(c3["cycles"], e3["cycles"]), ratio(c3["energy_J"], e3["energy_J"])]
                if hw:
                    h3 = one(got, form="extension_hw")
                    line += [ratio(c3["bytes_total_B"], h3["bytes_total_B"]),
                             ratio(c3["bytes_root_link_B"], h3["bytes_root_link_B"]),
                             ratio(c3["cycles"], h3["cycles"])]
                body.append(line)
        head = ["machine", "size", "kd", "bytes moved ext", "bytes moved core", "bytes moved",
                "root link bytes", "root instructions", "cycles", "energy"]
        if hw:
            head += ["bytes moved (hw)", "root link bytes (hw)", "cycles (hw)"]
        L += table(head, body)

    other = [r for r in rows if r["workload"] in ("softmax", "naive_bayes")]
    if other:
        L += ["", "## Softmax f32[256, 1000] and naive Bayes (4096 x 64, 10 classes)", ""]
        body = []
        for wl in ("softmax", "naive_bayes"):
            for m in distinct(pick(other, workload=wl), "machine"):
                e4, c4 = (one(other, workload=wl, machine=m, form=f) for f in ("extension", "core"))
                body.append([wl, m, e4["root_instructions"], c4["root_instructions"],
                             ratio(c4["bytes_total_B"], e4["bytes_total_B"]),
                             ratio(c4["cycles"], e4["cycles"]), ratio(c4["energy_J"], e4["energy_J"])])
        L += table(["workload", "machine", "root instructions ext", "root instructions core",
                    "bytes moved", "cycles", "energy"], body)
    return "\n".join(L) + "\n"


def attention_document(att, quick: bool, wall: float) -> str:
    L = ["# FRISA study: causal attention as an extension instruction against core-only attention",
         "", f"Timing-only simulation, {len(att)} runs in {wall:.0f} s"
         f"{' (quick mode: a few points only)' if quick else ''}, written by "
         "`python scripts/frisa_study.py --only attention`; every run is a row of "
         "`attention_runs.csv`. Ratios are core-only / extension.", ""]
    return "\n".join(L + attention_summary(att)) + "\n"


def attention_summary(att) -> list[str]:
    if not att:
        return []
    L = [f"## Causal prefill of S queries against S keys, one head of width {ATTN_HEAD}",
         "", "`extension` is one `causal_attention` (keys cut with the online-softmax merge); "
         "`core` the same steps as program instructions, its scores f32[1, 1, S, S] and its "
         "mask f32[S, S] in root memory. Memory: at the root, every tensor of the program; "
         "below it, the most one node holds (the operands of its piece, and at a leaf the "
         "temporaries of the extension's body); "
         "scores held, the largest block of scores any node holds. `fits 0`: the program's "
         "tensors exceed the root's memory.", ""]
    both = [(m, n) for m, n in distinct(att, "machine", "n")
            if all(r["fits"] for r in pick(att, machine=m, n=n))]
    ref = [(m, n) for m, n in both if m == REF_MACHINE]
    if ref:
        m, n = max(ref, key=lambda p: p[1])
        e, c = (one(att, machine=m, n=n, form=f) for f in ("extension", "core"))
        metrics = [("root instructions", "root_instructions"), ("leaf instructions", "leaf_instructions"),
                   ("bytes down, all levels", "bytes_down_total_B"),
                   ("bytes up, all levels", "bytes_up_total_B"), ("bytes up into the root", "bytes_up_l1_B"),
                   ("reduction ops", "reduction_ops"), ("cycles", "cycles"), ("energy (J)", "energy_J"),
                   ("memory at the root (B)", "memory_root_B"),
                   ("most one node below the root holds (B)", "memory_piece_B"),
                   ("largest score block held (B)", "scores_held_B")]
        L += [f"### S = {n:,} on {m}", ""]
        L += table(["metric", "extension", "core", "core / ext"],
                   [[name, e[k], c[k], ratio(c[k], e[k])] for name, k in metrics]
                   + [["bound (costliest instruction)", e["bound"], c["bound"], ""]])
    L += ["", "### Against S on every machine (core / extension)", ""]
    body = []
    for m in distinct(att, "machine"):
        for n in sorted(distinct(pick(att, machine=m), "n")):
            e, c = (one(att, machine=m, n=n, form=f) for f in ("extension", "core"))
            if not c["fits"]:
                body.append([m, e["leaves"], n, "", "", "", "", "", e["memory_root_B"],
                             c["memory_root_B"], "core does not fit", e["cycles"], ""])
                continue
            body.append([m, e["leaves"], n, ratio(c["bytes_up_total_B"], e["bytes_up_total_B"]),
                         ratio(c["bytes_up_l1_B"], e["bytes_up_l1_B"]),
                         ratio(c["reduction_ops"], e["reduction_ops"]),
                         ratio(c["cycles"], e["cycles"]), ratio(c["energy_J"], e["energy_J"]),
                         e["memory_root_B"], c["memory_root_B"],
                         ratio(c["scores_held_B"], e["scores_held_B"]), e["cycles"], c["cycles"]])
    L += table(["machine", "leaves", "S", "bytes up", "bytes up into root", "reduction ops", "cycles",
                "energy", "root memory ext (B)", "root memory core (B)", "scores held",
                "cycles ext", "cycles core"], body)
    L += ["", "### Growth exponents against S (least squares on log-log, where both forms run)", ""]
    body = []
    for m in distinct(att, "machine"):
        ns = sorted(n for mm, n in both if mm == m)
        if len(ns) < 3:
            continue
        for form in ("extension", "core"):
            pts = [one(att, machine=m, n=n, form=form) for n in ns]
            body.append([m, form, f"{ns[0]:,}..{ns[-1]:,}"]
                        + [f"{fit_exponent(ns, [max(r[k], 1) for r in pts]):.3f}" for k in
                           ("bytes_up_total_B", "bytes_up_l1_B", "reduction_ops", "cycles",
                            "memory_root_B", "scores_held_B")])
    L += table(["machine", "form", "S", "bytes up", "bytes up into root", "reduction ops", "cycles",
                "root memory", "scores held"], body)
    return L


# ---------------------------------------------------------------- plots

METRICS = [("root_instructions", "root instructions"), ("leaf_instructions", "leaf instructions"),
           ("bytes_down_total_B", "bytes down, all levels (B)"),
           ("bytes_up_total_B", "bytes up, all levels (B)"),
           ("reduction_ops", "reduction ops on the LFUs"), ("cycles", "cycles")]
STYLE = {"extension": "-", "core": "--", "core_gather": ":", "extension_hw": "-."}


def plot(rows, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    files = []

    tk = pick(rows, workload="topk")
    if tk:
        names = {"extension": "topk", "core": "sort+argsort", "core_gather": "argsort+gather"}
        machines = [m for m in PLOT_MACHINES if pick(tk, machine=m)]
        colors = dict(zip(machines, palette))
        panels = METRICS[:4] + [("bytes_up_l1_B", "bytes up into the root (B)")] + METRICS[4:] \
            + [("energy_J", "energy (J)")]
        fig, axes = plt.subplots(2, 4, figsize=(19, 9))
        for ax, (key, label) in zip(axes.flat, panels):
            for m in machines:
                for form in ("extension", "core"):
                    pts = sorted(pick(tk, machine=m, form=form), key=lambda r: r["n"])
                    ax.plot([r["n"] for r in pts], [r[key] if r[key] > 0 else np.nan for r in pts],
                            STYLE[form], marker="o", ms=3, color=colors[m], label=f"{m} {names[form]}")
            ax.set_xscale("log", base=2)
            if key != "root_instructions":
                ax.set_yscale("log")
            ax.set_xlabel("n (row length)")
            ax.set_title(label)
            ax.grid(True, which="both", alpha=0.3)
        axes.flat[1].legend(fontsize=7, ncol=1)
        fig.suptitle(f"TopK, k = {K}: extension topk (solid) against sort + slice, argsort + slice "
                     "(dashed)")
        fig.tight_layout()
        fig.savefig(out / "topk.png", dpi=100)
        plt.close(fig)
        files.append("topk.png")

        at = [m for m in MACHINES if len(pick(tk, machine=m, n=N_REF)) == 3]
        if at:
            fig, ax = plt.subplots(figsize=(9, 5))
            keys = [("bytes_up_total_B", "bytes up, all levels"), ("reduction_ops", "reduction ops"),
                    ("cycles", "cycles"), ("energy_J", "energy")]
            x = np.arange(len(at))
            for i, (key, label) in enumerate(keys):
                ys = [ratio(one(tk, machine=m, n=N_REF, form="core")[key],
                            one(tk, machine=m, n=N_REF, form="extension")[key]) for m in at]
                ax.bar(x + (i - 1.5) * 0.2, ys, 0.2, label=label)
            ax.set_xticks(x, [f"{m}\n{one(tk, machine=m, n=N_REF, form='extension')['leaves']} leaves"
                              for m in at])
            ax.set_yscale("log")
            ax.set_ylabel("core / extension")
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=8)
            ax.set_title(f"TopK at n = {p2(N_REF)}, k = {K}: sort + argsort form over the topk "
                         "extension, per machine")
            fig.tight_layout()
            fig.savefig(out / "topk_machines.png", dpi=100)
            plt.close(fig)
            files.append("topk_machines.png")

    cv = pick(rows, workload="conv3d", pad=1)
    if cv:
        series = distinct(cv, "machine", "c", "o", "h")
        colors = dict(zip(series, palette))
        fig, axes = plt.subplots(2, 3, figsize=(16, 9))
        for ax, (key, label) in zip(axes.flat, METRICS):
            for s in series:
                m, cc, oo, h = s
                for form in ("extension", "core"):
                    pts = sorted(pick(cv, machine=m, c=cc, o=oo, h=h, form=form), key=lambda r: r["kd"])
                    ax.plot([r["kd"] for r in pts], [r[key] if r[key] > 0 else np.nan for r in pts],
                            STYLE[form], marker="o", ms=3, color=colors[s],
                            label=f"{m} C{cc} O{oo} {h}x{h} {'conv3d' if form == 'extension' else 'conv2d+add'}")
            if key != "root_instructions":
                ax.set_yscale("log")
            ax.set_xticks(range(1, 6))
            ax.set_xlabel("kernel depth kd")
            ax.set_title(label)
            ax.grid(True, which="both", alpha=0.3)
        axes.flat[0].legend(fontsize=6)
        fig.suptitle(f"Conv3D (output depth {CONV_DO}, 3x3 kernels, pad 1): extension conv3d (solid) "
                     "against kd conv2d + add (dashed)")
        fig.tight_layout()
        fig.savefig(out / "conv3d.png", dpi=100)
        plt.close(fig)
        files.append("conv3d.png")

    cv = pick(rows, workload="conv3d")
    if cv:
        fig, axes = plt.subplots(1, 3, figsize=(17, 6.5))
        keys = [("bytes_total_B", "bytes moved, all levels"), ("bytes_root_link_B", "bytes on the root link"),
                ("cycles", "cycles")]
        series = distinct(cv, "machine", "c", "o", "h", "pad")
        colors = dict(zip(distinct(cv, "machine", "c", "o", "h"), palette))
        for s in series:
            m, cc, oo, h, pad = s
            sub = pick(cv, machine=m, c=cc, o=oo, h=h, pad=pad)
            kds = sorted(distinct(sub, "kd"))
            for form in ("extension", "extension_hw"):
                if not pick(sub, form=form):
                    continue
                for ax, (key, _) in zip(axes, keys):
                    ys = [ratio(one(sub, kd=kd, form="core")[key], one(sub, kd=kd, form=form)[key])
                          for kd in kds]
                    style = "-" if pad else STYLE[form] if form == "extension_hw" else ":"
                    what = "conv3d" if form == "extension" else "conv3d_hw"
                    ax.plot(kds, ys, style, marker="o", ms=3, color=colors[(m, cc, oo, h)],
                            label=f"{m} C{cc} O{oo} {h}x{h} pad {pad}, {what}")
        for ax, (_, t) in zip(axes, keys):
            ax.axhline(1, color="grey", lw=0.8)
            ax.set_xticks(range(1, 6))
            ax.set_xlabel("kernel depth kd")
            ax.set_title(f"{t}: core / extension")
            ax.grid(True, alpha=0.3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
        fig.suptitle("Conv3D: how many times more the kd conv2d + add form needs (solid: pad 1 with "
                     "the library conv3d; dotted: pad 0 with it; dash-dot: pad 0 with conv3d_hw)")
        fig.tight_layout(rect=(0, 0.17, 1, 1))
        fig.savefig(out / "conv3d_ratio.png", dpi=100)
        plt.close(fig)
        files.append("conv3d_ratio.png")
    return files


def plot_attention_files(att, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if not att:
        return []
    files = []
    machines = [m for m in ATTN_PLOT if pick(att, machine=m)] or distinct(att, "machine")
    colors = dict(zip(distinct(att, "machine"), palette))
    panels = [("bytes_up_total_B", "bytes up, all levels (B)"), ("bytes_up_l1_B", "bytes up into the root (B)"),
              ("reduction_ops", "reduction ops on the LFUs"), ("cycles", "cycles"),
              ("memory_root_B", "memory at the root (B)"), ("scores_held_B", "largest score block held (B)")]
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    for ax, (key, label) in zip(axes.flat, panels):
        for m in machines:
            for form in ("extension", "core"):
                pts = sorted((r for r in pick(att, machine=m, form=form)
                              if r["fits"] or key in ("memory_root_B", "scores_held_B")),
                             key=lambda r: r["n"])
                ax.plot([r["n"] for r in pts], [r[key] if r[key] not in ("", 0) else np.nan for r in pts],
                        STYLE[form], marker="o", ms=3, color=colors[m],
                        label=f"{m} {'causal_attention' if form == 'extension' else 'core'}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length S")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Causal attention, one head of width {ATTN_HEAD}: the causal_attention extension "
                 "(solid) against the core-only form that materialises the scores (dashed)")
    fig.tight_layout()
    fig.savefig(out / "attention.png", dpi=100)
    plt.close(fig)
    files.append("attention.png")

    fig, axes = plt.subplots(1, 3, figsize=(17, 5.5))
    keys = [("bytes_up_total_B", "bytes up, all levels"), ("cycles", "cycles"), ("energy_J", "energy")]
    for m in distinct(att, "machine"):
        ns = sorted(n for n in distinct(pick(att, machine=m), "n")
                    if all(r["fits"] for r in pick(att, machine=m, n=n)))
        for ax, (key, _) in zip(axes, keys):
            ys = [ratio(one(att, machine=m, n=n, form="core")[key], one(att, machine=m, n=n, form="extension")[key])
                  for n in ns]
            ax.plot(ns, ys, "-", marker="o", ms=3, color=colors[m],
                    label=f"{m} ({one(att, machine=m, n=ns[0], form='extension')['leaves']} leaves)" if ns else m)
    for ax, (_, t) in zip(axes, keys):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length S")
        ax.set_title(f"{t}: core / extension")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Causal attention: how many times more the core-only form needs, against S")
    fig.tight_layout()
    fig.savefig(out / "attention_ratio.png", dpi=100)
    plt.close(fig)
    files.append("attention_ratio.png")
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "docs" / "frisa"), help="output folder (default docs/frisa/)")
    ap.add_argument("--quick", action="store_true", help="a few points only (a smoke test)")
    ap.add_argument("--only", choices=sorted(PARTS), action="append",
                    help="run one part of the study: classic (TopK, Conv3D, softmax, naive Bayes: "
                         "runs.csv, summary.md) or attention (attention_runs.csv, "
                         "attention_summary.md); repeatable; default both")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = tuple(dict.fromkeys(args.only or PARTS))
    written = []
    for part in parts:
        start = time.perf_counter()
        rows = run_all(args.quick, lambda s: print(s, file=sys.stderr, flush=True), (part,))
        wall = time.perf_counter() - start
        if part == "attention":
            names = ("attention_runs.csv", "attention_summary.md")
            files = plot_attention_files(rows, out)
            text = attention_document(rows, args.quick, wall)
        else:
            names = ("runs.csv", "summary.md")
            files = plot(rows, out)
            text = summary(rows, args.quick, wall)
        write_csv(rows, out / names[0])
        (out / names[1]).write_text(text)
        print(text)
        written += [names[0], *files, names[1]]
    print("wrote " + ", ".join(str(out / f) for f in written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
