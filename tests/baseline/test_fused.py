"""Fused extension kernels in the roofline (`estimate(..., fused=True)`, `--fused`): an extension
instruction is one kernel that moves only its operands and does all its body's ops, each class at
its own rate; without `fused`, one kernel per body instruction, its temporaries in memory. Times
derived here by hand from the vendor figures of the GPU file."""
import io
import json
import textwrap
from pathlib import Path

import pytest

from fractal.baseline import estimate, load_gpu
from fractal.cli import main

ROOT = Path(__file__).resolve().parents[2]
FACTORS = {"compute": {"matmul": 0.5, "elementwise": 0.25},
           "bandwidth": {"matmul": 0.8, "elementwise": 0.9}}
M, K, N = 256, 8192, 256
#: y = exp(x @ w): a product of 2 M K N ops and M N exponentials; the product's result t is a
#: temporary: in memory when the body's kernels run one by one, on chip when fused
PROGRAM = textwrap.dedent(f"""\
    extension expmm(y: f32[M, N] <- x: f32[M, K], w: f32[K, N])
      split M
      split N
      tensor t : f32[M, N]
      matmul t, x, w
      exp y, t
    end

    tensor x : f32[{M}, {K}] input
    tensor w : f32[{K}, {N}] param
    tensor y : f32[{M}, {N}] output
    expmm y, x, w
    """)


@pytest.mark.parametrize("launch", ["eager", "graphs"])
def test_a_fused_extension_is_one_kernel_over_its_operands(launch):
    gpu = load_gpu("h100")
    overhead = 5e-6 if launch == "eager" else 1e-6
    macs, exps = 2 * M * K * N, M * N
    operands = 4 * (M * K + K * N + M * N)                    # f32 at fp32
    compute = macs / (gpu.fp32_flops * 0.5) + exps / (gpu.fp32_flops / 2 * 0.25)
    fused = estimate(PROGRAM, "h100", factors=FACTORS, launch=launch, fused=True)
    row, = fused.instructions
    assert (row.kernels, row.bytes, row.ops) == (1, operands, macs + exps)
    assert row.seconds == pytest.approx(overhead + max(compute, operands / (gpu.memory_bandwidth * 0.8)))
    assert row.bound == "compute" and fused.fused
    # one by one: the product writes t, the exponential reads it back and writes y
    unfused = estimate(PROGRAM, "h100", factors=FACTORS, launch=launch)
    row, = unfused.instructions
    t = 4 * M * N
    assert (row.kernels, row.bytes) == (2, operands + 2 * t)
    product = max(macs / (gpu.fp32_flops * 0.5),
                  (4 * (M * K + K * N) + t) / (gpu.memory_bandwidth * 0.8))
    exp = max(exps / (gpu.fp32_flops / 2 * 0.25), 2 * t / (gpu.memory_bandwidth * 0.9))
    assert row.seconds == pytest.approx(2 * overhead + product + exp)
    assert not unfused.fused


def test_fused_attention_holds_no_scores():
    """A causal attention over 256 keys: fused, its bytes are q, kt, v, the positions and the
    outputs; unfused, the 2 x 2 x 256 x 256 scores go to memory and back at every step."""
    g, r, s, d = 2, 2, 256, 16
    operands = 4 * (g * r * s * d + 2 * g * s * d + 2 * s + g * r * s * d + 2 * g * r * s)
    path = ROOT / "programs" / "attention.fasm"
    fused = estimate(path, "h200", fused=True).instructions[-1]
    unfused = estimate(path, "h200").instructions[-1]
    assert fused.text.startswith("causal_attention") and fused.kernels == 1
    assert fused.bytes == operands
    assert unfused.bytes > operands + 8 * 4 * g * r * s * s            # the scores, many times
    assert fused.ops == unfused.ops and fused.seconds < unfused.seconds


def test_cli_flag():
    out = io.StringIO()
    assert main(["baseline", "estimate", str(ROOT / "programs" / "attention.fasm"), "--gpu", "h100", "--fused",
                 "--json"], out) == 0
    report = json.loads(out.getvalue())
    assert report["fused"] is True and report["instructions"][-1]["kernels"] == 1
