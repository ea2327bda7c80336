"""The measured baseline: PyTorch execution equals the numpy reference; calibration round-trips.
Every test but the one without torch needs the gpu extra and carries the `torch` marker."""
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fractal import api
from fractal.baseline import estimate
from isa.errors import UserError

from fractal.baseline.measure import calibrate, measure

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# every core opcode once, on small shapes, plus the topk extension of programs/lib
EVERY_OPCODE = textwrap.dedent(f"""
    include "{ROOT / 'programs/lib/topk.fasm'}"
    tensor x   : f32[2, 3, 6, 6]  input
    tensor w   : f32[4, 3, 3, 3]  param
    tensor c   : f32[2, 4, 5, 5]
    tensor mp  : f32[2, 4, 3, 3]
    tensor ap  : f32[2, 4, 3, 3]
    tensor ln  : f32[2, 4, 3, 3]
    tensor fl  : f32[2, 36]
    tensor fw  : f32[36, 8]       param
    tensor h   : f32[2, 8]
    tensor e   : f32[2, 8]
    tensor q   : f32[2, 8]
    tensor ht  : f32[8, 2]
    tensor d   : f32[2, 8]
    tensor ds  : f32[2, 2]
    tensor s   : f32[2]
    tensor m   : f32[2]
    tensor am  : i32[2]
    tensor an  : i32[2]
    tensor srt : f32[2, 8]
    tensor ord : i32[2, 8]
    tensor mpos: i32[2, 16]
    tensor g   : f32[2, 8]
    tensor amc : i32[2, 1]
    tensor k   : i32[2, 8]
    tensor kk  : i32[2, 8]
    tensor cnt : i32[2]
    tensor sl  : f32[2, 3]
    tensor cat : f32[2, 11]
    tensor tv  : f32[2, 2]        output
    tensor ti  : i32[2, 2]        output
    tensor out1: f32[2, 11]       output
    tensor out2: i32[2]           output
    tensor out3: f32[2, 4, 3, 3]  output
    tensor out4: i32[2, 16]       output
    tensor out5: f32[2, 2]        output
    tensor out6: i32[2, 8]        output

    conv2d c, x, w, stride=1, pad=(0, 0, 1, 1)
    maxpool mp, c, kernel=3, stride=2, pad=1
    avgpool ap, c, kernel=3, stride=2, pad=1
    lrn ln, mp, size=3
    add out3, ap, ln
    reshape fl, ln
    matmul h, fl, fw
    relu h, h
    sigmoid e, h
    tanh q, h
    sub d, e, q
    div d, d, e
    mul d, d, q
    exp d, d
    transpose ht, d, perm=(1, 0)
    eucdist ds, d, d
    copy out5, ds
    reduce_sum s, d, axis=1
    reduce_max m, d, axis=-1
    argmax am, d, axis=1
    argmin an, q, axis=1
    add out2, am, an
    sort srt, q
    argsort ord, q
    mergepos mpos, ord, ord
    copy out4, mpos
    gather g, q, ord
    reshape amc, am
    sub k, ord, amc
    relu kk, k
    mul out6, kk, ord
    count cnt, kk, value=0
    slice sl, g, axis=1, start=2
    concat cat, sl, srt, axis=1
    copy out1, cat
    topk tv, ti, g
""")


def same(reference: dict, measured: dict):
    assert reference.keys() == measured.keys()
    for name, want in reference.items():
        got = measured[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if want.dtype.kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:   # float32 computation against the reference's float64 accumulation
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1, np.abs(want).max()),
                                       err_msg=name)


@pytest.mark.torch
def test_every_opcode_equals_the_reference(torch):
    m = measure(EVERY_OPCODE, "cpu", repeat=1, warmup=1, seed=3)
    same(api.reference(EVERY_OPCODE, seed=3).outputs, m.outputs)
    assert len(m.instructions) == 36 and all(i.seconds > 0 for i in m.instructions)
    assert m.seconds > 0 and m.ops == api.reference(EVERY_OPCODE, seed=3).ops


@pytest.mark.torch
@pytest.mark.parametrize("name", ["mlp", "cnn", "kmeans_step", "knn", "softmax", "naive_bayes"])
def test_shipped_programs_equal_the_reference(name, torch):
    path = ROOT / "programs" / f"{name}.fasm"
    m = measure(path, "cpu", repeat=1, warmup=1)
    same(api.reference(path).outputs, m.outputs)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["transformer_block", "attention", "attention_core"])
def test_transformer_programs_equal_the_reference(name, torch):
    """Every transformer instruction (batched matmul, fill, causal_mask, where, pow, erf, ...)
    and the attention library, in PyTorch, on the cpu and, where there is one, on a GPU."""
    path = ROOT / "programs" / f"{name}.fasm"
    want = api.reference(path).outputs
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        same(want, measure(path, device, repeat=1, warmup=1).outputs)


@pytest.mark.torch
def test_gather_index_out_of_range_is_located(torch):
    text = textwrap.dedent("""
        tensor x : f32[2, 4] input
        tensor i : i32[2, 2] input
        tensor y : f32[2, 2] output
        gather y, x, i
    """)
    with pytest.raises(UserError, match="gather: index 7 is out of range") as e:
        measure(text, "cpu", repeat=1, warmup=1,
                inputs={"i": np.array([[0, 1], [7, 2]], np.int32)})
    assert e.value.where.line == 5


@pytest.mark.torch
def test_calibrated_factors_reproduce_the_measured_time(torch):
    # the derived factors, used in a fp32 estimate on the same description, give back the
    # measured time of every class (launch overhead included), and so the total
    m = measure(ROOT / "programs/cnn.fasm", "cpu", repeat=2, warmup=1)
    cal = calibrate(m, "v100")
    assert set(cal.classes) == {"matmul", "elementwise", "reduction", "move"}
    r = estimate(ROOT / "programs/cnn.fasm", "v100", precision="fp32", factors=cal.factors)
    assert r.seconds == pytest.approx(m.seconds, rel=0.02)
    for cls in cal.classes:
        est = sum(i.seconds for i in r.instructions if i.op_class == cls)
        assert est == pytest.approx(sum(i.seconds for i in m.instructions if i.op_class == cls),
                                    rel=0.02)


@pytest.mark.torch
def test_no_cuda_and_an_unknown_device_are_user_errors(torch):
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA device") as e:
            measure(ROOT / "programs/mlp.fasm", "cuda")
        assert e.value.where == "--device"
    with pytest.raises(UserError, match="device must be one of cpu, cuda"):
        measure(ROOT / "programs/mlp.fasm", "tpu")


def test_no_torch_is_a_user_error(monkeypatch):
    # runs with or without the gpu extra: a None entry in sys.modules makes `import torch` fail
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(UserError, match=r"install the gpu extra: pip install -e '\.\[gpu\]'"):
        measure(ROOT / "programs/mlp.fasm", "cpu")
