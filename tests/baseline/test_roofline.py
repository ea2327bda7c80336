"""The roofline against times derived by hand from the vendor figures (docs/baseline.md), with the
efficiency factors given explicitly so that every number below follows from the spec sheets."""
import math
import textwrap
from pathlib import Path

import pytest

from fractal.baseline import GPUS, estimate, load_gpu
from isa.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
FACTORS = {"compute": {"matmul": 0.5, "elementwise": 0.5, "reduction": 0.5},
           "bandwidth": {"matmul": 0.8, "elementwise": 0.9, "reduction": 0.8},
           "interconnect": 0.75}
LAUNCH = 5e-6          # every preset's launch overhead


def program(body: str) -> str:
    return textwrap.dedent(body).strip() + "\n"


MATMUL = program("""
tensor a : f32[4096, 4096] input
tensor b : f32[4096, 4096] param
tensor c : f32[4096, 4096] output
matmul c, a, b
""")

ADD = program("""
tensor x : f32[16777216] input
tensor y : f32[16777216] param
tensor z : f32[16777216] output
add z, x, y
""")


def test_presets_load_and_match_the_spec_table():
    assert GPUS == ("1080ti", "p100", "v100", "dgx1-p100", "dgx1-v100", "a100", "h100", "h200")
    v100 = load_gpu("v100")
    assert (v100.fp32_flops, v100.fp16_flops, v100.memory_bandwidth, v100.tdp_watts) == \
        (15.7e12, 125e12, 900e9, 300)
    dgx = load_gpu("dgx1-v100")
    assert dgx.gpus == 8 and dgx.interconnect_bandwidth == 150e9
    # DGX-1 (V100): 3.5 kW system = 8 x 300 W GPUs + 1100 W host
    assert dgx.gpus * dgx.tdp_watts + dgx.host_watts == 3500
    for name in GPUS:
        g = load_gpu(name)
        assert all(src.strip() for _, src in g.sources) and len(g.sources) >= 8


@pytest.mark.parametrize("gpu, precision, seconds", [
    # 2 * 4096^3 = 137,438,953,472 ops; V100 fp16 tensor 125 TFLOPS x 0.5 = 62.5e12 ops/s
    ("v100", "fp16", 137_438_953_472 / 62.5e12),
    # 1080 Ti: fp16 data runs at the FP32 rate (its FP16 is 1/64): 11.34e12 x 0.5 = 5.67e12
    ("1080ti", "fp16", 137_438_953_472 / 5.67e12),
    ("v100", "fp32", 137_438_953_472 / (15.7e12 * 0.5)),
    ("a100", "fp16", 137_438_953_472 / (312e12 * 0.5)),
])
def test_compute_bound_matmul(gpu, precision, seconds):
    r = estimate(MATMUL, gpu, precision=precision, factors=FACTORS)
    # bytes: 3 x 4096^2 elements of 2 (fp16) or 4 bytes; on the V100 at fp32 that is
    # 201 MB / (900 GB/s x 0.8) = 0.28 ms, well under the 8.8 ms of arithmetic
    row, = r.instructions
    assert row.bound == "compute" and row.ops == 137_438_953_472
    assert row.bytes == 3 * 4096 ** 2 * (2 if precision == "fp16" else 4)
    assert r.seconds == pytest.approx(LAUNCH + seconds, rel=1e-12)


@pytest.mark.parametrize("gpu, precision, seconds", [
    # 3 x 2^24 elements x 4 bytes = 201,326,592 B at 900 GB/s x 0.9
    ("v100", "fp32", 201_326_592 / 810e9),
    ("v100", "fp16", 100_663_296 / 810e9),
    # H100: 3.35 TB/s x 0.9
    ("h100", "fp32", 201_326_592 / (3.35e12 * 0.9)),
])
def test_bandwidth_bound_add(gpu, precision, seconds):
    r = estimate(ADD, gpu, precision=precision, factors=FACTORS)
    row, = r.instructions
    # arithmetic: 2^24 adds at half the FMA-counted FP32 peak x 0.5, e.g. 16.8M / 3.9e12 = 4 us
    assert row.bound == "bandwidth"
    assert r.seconds == pytest.approx(LAUNCH + seconds, rel=1e-12)


def test_energy_follows_the_activity_power_model():
    r = estimate(ADD, "v100", precision="fp32", factors=FACTORS)
    busy = 201_326_592 / 810e9
    # idle 40 W the whole time, plus (300 - 40) W x activity 0.9 (memory at 90% of peak) while busy
    want = 40 * (LAUNCH + busy) + 260 * 0.9 * busy
    assert r.energy_joules == pytest.approx(want, rel=1e-9)
    assert r.tdp_energy_joules == pytest.approx(300 * (LAUNCH + busy), rel=1e-12)
    assert r.ops_per_joule == pytest.approx(2 ** 24 / want, rel=1e-9)


BATCHED = program("""
tensor x : f32[8192, 4096] input
tensor w : f32[4096, 4096] param
tensor y : f32[8192, 4096]
tensor s : f32[4096] output
matmul y, x, w
reduce_sum s, y, axis=0
""")


def test_eight_gpus_split_the_batch():
    one = estimate(BATCHED, "v100", precision="fp16", factors=FACTORS)
    eight = estimate(BATCHED, "dgx1-v100", precision="fp16", factors=FACTORS)
    ops = 2 * 8192 * 4096 * 4096
    # one V100: all 8192 rows at 125e12 x 0.5
    assert one.instructions[0].seconds == pytest.approx(LAUNCH + ops / 62.5e12, rel=1e-12)
    # DGX-1: 1024 rows per GPU; its bytes (x share 8 MiB + w 32 MiB + y share 8 MiB, fp16) take
    # 50.3 MB / 720 GB/s = 70 us, under the 550 us of arithmetic; y stays split: no transfer
    mm = eight.instructions[0]
    assert (mm.mode, mm.bound) == ("split", "compute")
    assert mm.seconds == pytest.approx(LAUNCH + ops / 8 / 62.5e12, rel=1e-12)
    assert one.instructions[0].seconds / mm.seconds == pytest.approx(7.9, abs=0.1)
    # the sum over the batch: each GPU sums its 1024 rows (bandwidth: (1024 x 4096 + 4096) x 2 B
    # at 720 GB/s), then a ring all-reduce of 4096 x 2 B over NVLink 2 (150 GB/s x 0.75) moving
    # 2 x 7/8 of it, with 2 x 7 steps of 1 us
    red = eight.instructions[1]
    kernel = (1024 * 4096 + 4096) * 2 / 720e9
    allreduce = 2 * 7 / 8 * 4096 * 2 / 112.5e9 + 14 * 1e-6
    assert red.mode == "split" and red.interconnect_bytes == 2 * 7 * 4096 * 2 // 8
    assert red.seconds == pytest.approx(LAUNCH + kernel + allreduce, rel=1e-12)
    assert eight.gpus_used == 8 and eight.batch == 8192
    assert eight.seconds < one.seconds / 7


def test_unsplittable_instruction_runs_on_one_gpu_after_a_gather():
    text = program("""
    tensor x : f32[64] input
    tensor y : f32[64] output
    sort y, x
    """)
    r = estimate(text, "dgx1-p100", precision="fp32", factors=FACTORS)
    row, = r.instructions
    # a sort along the batch axis cannot split: 7/8 of x (64 x 4 B) goes to GPU 0 over NVLink 1
    # (80 GB/s x 0.75) with one step of latency, then GPU 0 sorts all 64
    assert row.mode == "single" and row.interconnect_bytes == 64 * 4 * 7 // 8
    kernel = 2 * 64 * 4 / (732e9 * 0.25)       # irregular bandwidth factor keeps its default
    assert row.seconds == pytest.approx(LAUNCH + kernel + 224 / 60e9 + 1e-6, rel=1e-9)


def test_params_only_instructions_run_replicated_without_transfers():
    text = program("""
    tensor x  : f32[32, 16] input
    tensor w  : f32[16, 16] param
    tensor wt : f32[16, 16]
    tensor y  : f32[32, 16] output
    transpose wt, w, perm=(1, 0)
    matmul y, x, wt
    """)
    r = estimate(text, "dgx1-v100")
    assert [i.mode for i in r.instructions] == ["replicated", "split"]
    assert sum(i.interconnect_bytes for i in r.instructions) == 0


def test_every_shipped_program_estimates():
    paths = sorted((ROOT / "programs").glob("*.fasm"))
    assert paths, f"no programs found in {ROOT / 'programs'}"
    for path in paths:
        for gpu in ("1080ti", "dgx1-v100"):
            r = estimate(path, gpu)
            assert r.seconds > 0 and 0 < r.utilization <= 1 and r.energy_joules > 0
            assert r.ops == sum(i.ops for i in r.instructions)
            assert math.isclose(r.seconds, sum(i.seconds for i in r.instructions), rel_tol=1e-9)


def test_bad_precision_and_factors_are_located():
    with pytest.raises(UserError, match="precision must be one of fp16, fp32") as e:
        estimate(ADD, "v100", precision="bf16")
    assert e.value.where == "--precision"
    with pytest.raises(UserError, match=r"from 1e-06 to 1, got 1.5") as e:
        estimate(ADD, "v100", factors={"compute": {"matmul": 1.5}})
    assert e.value.where == "factors: compute.matmul"
    with pytest.raises(UserError, match="unknown op class 'matmull'") as e:
        estimate(ADD, "v100", factors={"bandwidth": {"matmull": 0.5}})
    assert "did you mean 'matmul'" in e.value.format()


def test_precision_follows_the_program_unless_given():
    f16 = ADD.replace("f32", "f16")
    assert "f16" in f16 and "f32" not in f16
    assert estimate(ADD, "v100").precision == "fp32"
    assert estimate(f16, "v100").precision == "fp16"
    assert estimate(ADD.replace("f32", "bf16"), "v100").precision == "fp16"
    assert estimate(f16, "v100", precision="fp32").precision == "fp32"    # an explicit one wins
    assert estimate(ADD, "v100", precision="fp16").precision == "fp16"
    # the same data at the same precision: the f16 program moves what fp16 moves of the f32 one
    assert estimate(f16, "v100").seconds == pytest.approx(
        estimate(ADD, "v100", precision="fp16").seconds, rel=1e-12)
