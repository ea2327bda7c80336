"""LLM inference on `f100` against GPUs: the prefill of a prompt and a decode step of GPT-2 small
and of Llama 3 8B's 32 blocks, on f100 and on a DGX-1 (8 x V100), an H100 and an H200.

Each point is a program of `fractal gen` (gpt2, llama_block --layers 32) run timing-only on f100
(`fractal.run(..., functional=False)`) and through the roofline GPU baseline
(`fractal.baseline.estimate`) with CUDA-graph launches and fused extension kernels (attention as
FlashAttention runs it, LayerNorm, RMSNorm, GELU, SiLU and RoPE as one kernel each; docs/baseline.md),
the way LLM servers run them. Tokens per second are the tokens a run processes (batch x S for a
prefill, batch for a decode step) over its time; energy per token its joules over them. What
bounds each side: on f100 the attainable bound's floor (`Report.bound`: compute, latency, or the
traffic into a level) and the share of the bound each floor sets; on a GPU the roofline's largest
term (launch, compute, bandwidth, interconnect) and the share of the time in each.

    python scripts/llm_study.py                          # docs/llm/: runs.csv, figures, summary.md
    python scripts/llm_study.py --quick --out /tmp/llm   # two Llama blocks, a few points (seconds)

Writes DIR/runs.csv (one row per point and system), DIR/tokens.png (tokens/s and energy per token
of both phases), DIR/decode.png (a decode step against batch and cache length, and the share of
each bound) and DIR/summary.md (also printed).
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import fractal  # noqa: E402
from fractal.baseline import estimate, load_gpu  # noqa: E402
from fractal.workloads import generate  # noqa: E402

#: label -> (workload, parameters): GPT-2 small with its head, Llama 3 8B's blocks (no
#: embeddings, head or final norm: 7.0 of its 8.0 G parameters)
MODELS = {"GPT-2": ("gpt2", {}), "Llama 3 8B": ("llama_block", {"layers": 32})}
QUICK_MODELS = {"Llama 3 8B, 2 blocks": ("llama_block", {"layers": 2})}
MACHINE = "f100"
GPUS = ("dgx1-v100", "h100", "h200")
SYSTEMS = (MACHINE,) + GPUS
#: tokens of the prompt in a prefill, tokens in the KV cache in a decode step
CONTEXT = 1024
BATCHES = (1, 8)
#: the decode sweeps, on the last model
SWEEP_BATCHES = (1, 4, 16, 64)
SWEEP_CONTEXTS = (1024, 4096, 16384, 65536)
QUICK = dict(context=256, batches=(1,), sweep_batches=(1, 4), sweep_contexts=(256,))
#: the GPU runs as an LLM server does: CUDA graphs, fused kernels
LAUNCH, FUSED = "graphs", True

COLUMNS = ["model", "phase", "batch", "context", "system", "tokens", "ops", "param_bytes",
           "seconds", "joules", "tokens_per_s", "joules_per_token", "bound", "bound_share",
           "utilization", "bound_seconds", "fraction_of_bound", "shares", "energy_shares"]


def _shares(parts: dict) -> dict:
    """Each part's share of the whole, largest first."""
    total = sum(parts.values()) or 1.0
    return {k: v / total for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v}


def _shares_text(shares: dict) -> str:
    return "; ".join(f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.005)


def _figure(x: float) -> str:
    """Three significant figures, without an exponent."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _floor(bound: str) -> str:
    return bound if bound in ("compute", "latency", "") else f"traffic into {bound}"


def measure(label: str, workload: str, params: dict, mode: str, batch: int, context: int,
            machine) -> list[dict]:
    """One point: the program on f100 and on every GPU system, a row each."""
    program = fractal.load_program(generate(workload, batch=batch, seq=context, mode=mode, **params))
    tokens = batch * context if mode == "prefill" else batch
    base = dict(model=label, phase=mode, batch=batch, context=context, tokens=tokens,
                param_bytes=sum(t.type.nbytes for t in program.params))
    r = fractal.run(program, machine, functional=False)
    floors: dict[str, float] = {}
    for i in r.instructions:
        floors[_floor(i.bound)] = floors.get(_floor(i.bound), 0.0) + i.bound_seconds
    rows = [base | dict(system=MACHINE, ops=r.ops, seconds=r.seconds, joules=r.energy_joules,
                        bound=_floor(r.bound), bound_share=floors[_floor(r.bound)] / r.bound_seconds,
                        utilization=r.utilization, bound_seconds=r.bound_seconds,
                        fraction_of_bound=r.fraction_of_bound, shares=_shares(floors),
                        energy_shares=_shares(r.energy_breakdown))]
    for gpu in GPUS:
        g = estimate(program, gpu, launch=LAUNCH, fused=FUSED)
        bound = max(g.time_breakdown, key=g.time_breakdown.get)
        rows.append(base | dict(system=gpu, ops=g.ops, seconds=g.seconds, joules=g.energy_joules,
                                bound=bound, bound_share=g.time_breakdown[bound] / g.seconds,
                                utilization=g.utilization, bound_seconds="",
                                fraction_of_bound="", shares=_shares(g.time_breakdown),
                                energy_shares=""))
    for row in rows:
        row.update(tokens_per_s=tokens / row["seconds"], joules_per_token=row["joules"] / tokens)
    return rows


def run_all(quick: bool, log=print) -> tuple[list[dict], list[dict]]:
    """Every point: (the rows of runs.csv, the GPU launch and fusion rows)."""
    models = QUICK_MODELS if quick else MODELS
    context = QUICK["context"] if quick else CONTEXT
    batches = QUICK["batches"] if quick else BATCHES
    sweep_batches = QUICK["sweep_batches"] if quick else SWEEP_BATCHES
    sweep_contexts = QUICK["sweep_contexts"] if quick else SWEEP_CONTEXTS
    machine = fractal.build_machine(MACHINE)
    points = [(label, mode, b, context) for label in models for mode in ("prefill", "decode")
              for b in batches]
    last = list(models)[-1]
    points += [(last, "decode", b, context) for b in sweep_batches]
    points += [(last, "decode", 1, n) for n in sweep_contexts]
    rows = []
    for label, mode, b, n in dict.fromkeys(points):
        t0 = time.perf_counter()
        workload, params = models[label]
        rows += measure(label, workload, params, mode, b, n, machine)
        log(f"  {label} {mode} batch {b} context {n}: {time.perf_counter() - t0:.1f} s")
    launches = []
    for mode in ("prefill", "decode"):
        workload, params = models[last]
        program = fractal.load_program(generate(workload, seq=context, mode=mode, **params))
        for launch in ("eager", "graphs"):
            for fused in (False, True):
                g = estimate(program, "h100", launch=launch, fused=fused)
                launches.append(dict(model=last, phase=mode, launch=launch, fused=fused,
                                     seconds=g.seconds, kernels=sum(i.kernels for i in g.instructions),
                                     shares=_shares(g.time_breakdown)))
    return rows, launches


def write_csv(rows: list[dict], path: Path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else
                            _shares_text(v) if isinstance(v, dict) else v) for k, v in row.items()})


def _pick(rows, **want):
    return [r for r in rows if all(r[k] == v for k, v in want.items())]


def _one(rows, **want):
    found = _pick(rows, **want)
    assert len(found) == 1, (want, len(found))
    return found[0]


def summary(rows: list[dict], launches: list[dict]) -> str:
    models = list(dict.fromkeys(r["model"] for r in rows))
    context = rows[0]["context"]
    batches = sorted({r["batch"] for r in rows if r["phase"] == "prefill"})
    out = [f"LLM inference on {MACHINE} against GPUs: prompts of {context} tokens (prefill) and "
           f"one token against a KV cache of {context} (decode); GPUs with CUDA-graph launches "
           f"and fused extension kernels; f16 on both sides.", "",
           "| model | phase | batch | system | ms per step | tokens/s | mJ per token | bound "
           "(share) | utilization | time by bound |",
           "|---|---|---:|---|---:|---:|---:|---|---:|---|"]
    for m in models:
        for phase in ("prefill", "decode"):
            for b in batches:
                for s in SYSTEMS:
                    r = _one(rows, model=m, phase=phase, batch=b, context=context, system=s)
                    out.append(f"| {m} | {phase} | {b} | {s} | {r['seconds'] * 1e3:,.3f} | "
                               f"{r['tokens_per_s']:,.0f} | {_figure(r['joules_per_token'] * 1e3)} | "
                               f"{r['bound']} ({r['bound_share']:.0%}) | {r['utilization']:.1%} | "
                               f"{_shares_text(r['shares'])} |")
    out += ["", f"{MACHINE}'s energy by part at batch 1:", ""]
    for m in models:
        for phase in ("prefill", "decode"):
            r = _one(rows, model=m, phase=phase, batch=1, context=context, system=MACHINE)
            out.append(f"- {m} {phase}: {_shares_text(r['energy_shares'])} of "
                       f"{r['joules'] / r['seconds']:,.0f} W average; the run reaches "
                       f"{r['fraction_of_bound']:.0%} of its attainable bound")
    out += ["", f"{MACHINE} against each GPU system at batch 1 (speed-up: GPU time over {MACHINE}'s; "
                "efficiency: GPU energy over its):", "",
            "| model | phase | " + " | ".join(f"vs {g}" for g in GPUS) + " |",
            "|---|---|" + "---:|" * len(GPUS)]
    for m in models:
        for phase in ("prefill", "decode"):
            f = _one(rows, model=m, phase=phase, batch=1, context=context, system=MACHINE)
            cells = []
            for g in GPUS:
                r = _one(rows, model=m, phase=phase, batch=1, context=context, system=g)
                cells.append(f"{r['seconds'] / f['seconds']:.2f}x, {r['joules'] / f['joules']:.2f}x")
            out.append(f"| {m} | {phase} | " + " | ".join(cells) + " |")
    last = models[-1]
    sweep = _pick(rows, model=last, phase="decode")
    out += ["", f"{last}, one decode step: ms per step against the batch (cache {context}) and "
                f"the cache length (batch 1), with the bytes of weights and cache:", "",
            "| batch | cache | weight + cache bytes | " + " | ".join(SYSTEMS) + " |",
            "|---:|---:|---:|" + "---:|" * len(SYSTEMS)]
    keys = sorted({(r["batch"], r["context"]) for r in sweep}, key=lambda k: (k[1], k[0]))
    for b, n in keys:
        cells = [f"{_one(sweep, batch=b, context=n, system=s)['seconds'] * 1e3:,.3f}"
                 for s in SYSTEMS]
        out.append(f"| {b} | {n} | {_one(sweep, batch=b, context=n, system=MACHINE)['param_bytes']:,} | "
                   + " | ".join(cells) + " |")
    out += ["", f"{last} on h100, batch 1: the GPU's kernels launched eagerly (5 us each) or as "
                "a CUDA graph (1 us), extensions a kernel per body instruction or fused:", "",
            "| phase | launch | extensions | kernels | ms | time by bound |", "|---|---|---|---:|---:|---|"]
    for r in launches:
        out.append(f"| {r['phase']} | {r['launch']} | {'fused' if r['fused'] else 'unfused'} | "
                   f"{r['kernels']:,} | {r['seconds'] * 1e3:,.3f} | {_shares_text(r['shares'])} |")
    return "\n".join(out) + "\n"


def plot(rows: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models = list(dict.fromkeys(r["model"] for r in rows))
    context = rows[0]["context"]
    colors = dict(zip(SYSTEMS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    groups = [(m, p) for m in models for p in ("prefill", "decode")]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / len(SYSTEMS)
    for ax, key, label in ((axes[0], "tokens_per_s", "tokens per second"),
                           (axes[1], "joules_per_token", "energy per token (J)")):
        for k, s in enumerate(SYSTEMS):
            values = [_one(rows, model=m, phase=p, batch=1, context=context, system=s)[key]
                      for m, p in groups]
            ax.bar(np.arange(len(groups)) + (k - (len(SYSTEMS) - 1) / 2) * width, values, width,
                   color=colors[s], label=s)
        ax.set_xticks(np.arange(len(groups)), [f"{m}\n{p}" for m, p in groups], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{label}, batch 1, {context}-token context")
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "tokens.png", dpi=100)
    plt.close(fig)

    last = models[-1]
    sweep = _pick(rows, model=last, phase="decode")
    fig, axes = plt.subplots(1, 3, figsize=(18, 5))
    for ax, along, fixed, xlabel in ((axes[0], "batch", dict(context=context), "batch (sequences)"),
                                     (axes[1], "context", dict(batch=1), "tokens in the KV cache")):
        pts = sorted({r[along] for r in _pick(sweep, **fixed)})
        for s in SYSTEMS:
            ax.plot(pts, [_one(sweep, system=s, **fixed, **{along: x})["seconds"] * 1e3
                          for x in pts], marker="o", color=colors[s], label=s)
            # dotted: f100's attainable bound; a GPU's weights and cache at its peak bandwidth
            floor = (lambda r: r["bound_seconds"]) if s == MACHINE else \
                (lambda r, bw=load_gpu(s).memory_bandwidth: r["param_bytes"] / bw)
            ax.plot(pts, [floor(_one(sweep, system=s, **fixed, **{along: x})) * 1e3 for x in pts],
                    ":", color=colors[s])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("ms per decode step")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_title(f"{last} decode step against the batch\n(dotted: {MACHINE}'s attainable "
                      f"bound; weights and cache at a GPU's peak bandwidth)", fontsize=10)
    axes[1].set_title(f"{last} decode step against the cache length, batch 1", fontsize=10)
    axes[0].legend(fontsize=8)
    ax = axes[2]
    labels, y = [], 0
    kinds = ["compute", "latency", "launch", "bandwidth", "interconnect"]
    for phase in ("prefill", "decode"):
        for s in SYSTEMS:
            r = _one(rows, model=last, phase=phase, batch=1, context=context, system=s)
            left = 0.0
            for name, share in r["shares"].items():
                kind = "bandwidth" if name.startswith("traffic") else name
                ax.barh(y, share, left=left, color=f"C{kinds.index(kind) + 4}",
                        label=kind if kind not in ax.get_legend_handles_labels()[1] else None)
                if share > 0.12:
                    ax.text(left + share / 2, y, name, ha="center", va="center", fontsize=7)
                left += share
            labels.append(f"{phase} {s}")
            y += 1
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of the time (GPUs) or of the attainable bound ({MACHINE})")
    ax.set_title(f"What bounds {last}, batch 1", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "decode.png", dpi=100)
    plt.close(fig)
    return ["tokens.png", "decode.png"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="two Llama blocks, a few points")
    p.add_argument("--out", "-o", default=str(ROOT / "docs" / "llm"), help="output folder")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows, launches = run_all(args.quick)
    write_csv(rows, out / "runs.csv")
    plot(rows, out)
    text = summary(rows, launches)
    (out / "summary.md").write_text(text)
    print(text)
    print(f"{len(rows)} rows in {time.perf_counter() - t0:.0f} s; wrote {out}/runs.csv, "
          f"tokens.png, decode.png, summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
