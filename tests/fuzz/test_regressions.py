"""Bugs the reliability campaign found, kept fixed: each was a traceback, an internal error, a
hang or an unlocated message; each must now be a located refusal (status 2) or a quick answer."""
import io
import time
from pathlib import Path

import pytest

from fractal.cli import main
from machine.limits import LIMITS, limit

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "programs" / "mlp.fasm"


def cli(*argv):
    import contextlib
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv], out)
    return status, out.getvalue(), err.getvalue(), time.perf_counter() - start


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reference_of_a_tensor_too_big_for_the_host_is_refused(tmp_path):
    # was: internal error (ValueError: array is too big)
    p = write(tmp_path, "big.fasm", "tensor x : f32[100000, 100000, 100000, 10000] input\n"
              "tensor y : f32[100000, 100000, 100000, 10000] output\nrelu y, x\n")
    status, _, err, _ = cli("run", p, "--reference")
    assert status == 2 and f"{p}:3:1: error:" in err and "FRACTAL_MAX_DATA_BYTES" in err


@pytest.mark.parametrize("op", ["maxpool", "avgpool"])
def test_window_padding_that_explodes_the_reference_is_refused(tmp_path, op):
    # was: internal error (MemoryError / array too big) in np.pad of the reference
    p = write(tmp_path, "pool.fasm", "tensor x : f32[1, 1, 1, 1] input\n"
              "tensor y : f32[1, 1, 1, 1] output\n"
              f"{op} y, x, kernel=1000000000, stride=1000000000, pad=999999999\n")
    for extra in (["--reference"], ["--machine", "tiny"]):
        status, _, err, _ = cli("run", p, *extra)
        assert status == 2 and f"{p}:3:1: error:" in err, err
    status, out, _, _ = cli("run", p, "--machine", "tiny", "--timing-only")
    assert status == 0 and op in out          # timing only is fine


def test_a_machine_deeper_than_the_limit_is_refused():
    # was: internal error (RecursionError) at depth 1500
    status, _, err, _ = cli("compile", MLP, "--machine", "tiny", "--depth", "1500", "--fanout", "1")
    assert status == 2 and err.startswith("--depth: error:") and "FRACTAL_MAX_DEPTH" in err


def test_depth_40_is_accepted_and_quick():
    status, _, _, seconds = cli("run", MLP, "--machine", "tiny", "--depth", "40", "--fanout", "2",
                                "--timing-only")
    assert status == 0 and seconds < 20


def test_huge_fanouts_and_leaf_counts_are_refused_at_once():
    # was: a hang (every parallel split up to the fan-out enumerated)
    status, _, err, seconds = cli("run", MLP, "--machine", "tiny", "--depth", "3", "--fanout",
                                  "10000000000", "--timing-only")
    assert status == 2 and err.startswith("--fanout: error:") and seconds < 5
    status, _, err, _ = cli("run", MLP, "--machine", "tiny", "--depth", "30", "--fanout", "10",
                            "--timing-only")
    assert status == 2 and "leaf count" in err and "FRACTAL_MAX_LEAVES" in err


def test_machine_file_limits_name_the_key(tmp_path):
    from tests.strategies import machine_toml
    from machine import preset
    text = machine_toml(preset("tiny")).replace("fanout = 4", "fanout = 1000000000000")
    path = write(tmp_path, "wide.toml", text)
    status, _, err, _ = cli("compile", MLP, "--machine", path)
    assert status == 2 and err.startswith(f"{path}: level[0].fanout: error:"), err


def test_parallel_split_search_is_exact_and_fast_for_wide_nodes():
    """Only the maximal splits are enumerated; the set is the brute-force one."""
    import itertools
    import math
    from compiler.decompose import _parallel_candidates
    sizes, free, fan = [6, 5, 4], [0, 1, 2], 24
    brute = []
    for w in itertools.product(*[range(1, s + 1) for s in sizes]):
        prod = math.prod(w)
        if prod <= fan and all(w[a] >= sizes[a] or prod // w[a] * (w[a] + 1) > fan for a in free):
            brute.append(list(w))
    assert sorted(_parallel_candidates(sizes, free, fan)) == sorted(brute)
    start = time.perf_counter()
    _parallel_candidates([64, 784, 128], [0, 1, 2], 16384)
    assert time.perf_counter() - start < 5


def test_huge_shapes_in_timing_only_mode_are_refused_not_hung(tmp_path):
    # was: a hang (billions of serial pieces materialized by the planner and the simulator)
    from tests.fuzz.cases import _big_root
    (tmp_path / "big.toml").write_bytes(_big_root())
    p = write(tmp_path, "huge.fasm", "tensor x : f32[1000000, 1000000, 100] input\n"
              "tensor y : f32[1000000, 1000000, 100] output\nrelu y, x\n")
    status, _, err, seconds = cli("run", p, "--machine", tmp_path / "big.toml", "--timing-only")
    assert status == 2 and f"{p}:3:1: error:" in err and "FRACTAL_MAX_PIECES" in err
    assert seconds < 20


def test_truncated_machine_file_error_has_a_line_and_column(tmp_path):
    # was: "m.toml: error: invalid TOML ..." with no position (error at end of document)
    path = write(tmp_path, "m.toml", 'name = "x"\nfrequency_hz')
    status, _, err, _ = cli("compile", MLP, "--machine", path)
    assert status == 2 and err.startswith(f"{path}:2:13: error: invalid TOML"), err


def test_limits_are_overridable_and_bad_overrides_are_located(monkeypatch):
    monkeypatch.setenv("FRACTAL_MAX_DEPTH", "2")
    assert limit("depth") == 2
    status, _, err, _ = cli("compile", MLP, "--machine", "tiny", "--depth", "3")
    assert status == 2 and "limit of 2" in err
    monkeypatch.setenv("FRACTAL_MAX_DEPTH", "many")
    status, _, err, _ = cli("machines")
    assert status == 2 and err.startswith("FRACTAL_MAX_DEPTH: error:")
    monkeypatch.delenv("FRACTAL_MAX_DEPTH")
    assert limit("depth") == LIMITS["depth"][1]


def test_data_limit_is_overridable(monkeypatch, tmp_path):
    status, _, _, _ = cli("run", MLP, "--reference")
    assert status == 0
    monkeypatch.setenv("FRACTAL_MAX_DATA_BYTES", "1000")
    status, _, err, _ = cli("run", MLP, "--reference")
    assert status == 2 and "FRACTAL_MAX_DATA_BYTES" in err and "mlp.fasm:" in err


def test_no_numpy_warning_reaches_the_user(tmp_path):
    # was: "isa/reference.py:44: RuntimeWarning: invalid value encountered in matmul" on stderr
    import warnings
    p = write(tmp_path, "nan.fasm", "tensor x : f32[2, 2] input\ntensor p : f32[2, 2] param\n"
              "tensor z : f32[2, 2]\ntensor q : f32[2, 2]\ntensor y : f32[2, 2] output\n"
              "sub z, x, x\ndiv q, x, z\nmatmul y, q, p\n")
    for extra in (["--reference"], ["--machine", "tiny"]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # any warning fails the run
            status, out, err, _ = cli("run", p, *extra)
        assert status == 0 and "Warning" not in err and "nan" in out, err


def test_exact_and_symmetric_name_the_same_bound():
    # was: exact mode named the first child's bound ("compute"), symmetric the slowest's
    # ("bandwidth") for a softmax on a 3x1x2 machine with roomy memories
    from dataclasses import replace

    from fractal import api
    from machine import preset
    m = preset("tiny").rescaled(3, (3, 1, 2))
    mems = (16777216, 1 << 30, 1 << 30, 1 << 26)
    m = replace(m, levels=tuple(replace(lv, memory_bytes=b) for lv, b in zip(m.levels, mems)))
    text = (f'include "{ROOT / "programs/lib/softmax.fasm"}"\n'
            "tensor x : f32[34, 58] input\ntensor y : f32[34, 58] output\nsoftmax y, x\n")
    exact = api.run(text, m, functional=False, exact=True).to_json()
    sym = api.run(text, m, functional=False).to_json()
    assert exact["instructions"] == sym["instructions"]
    assert exact["cycles"] == sym["cycles"]


def test_reference_json_of_infinite_outputs_prints_no_warning(tmp_path):
    # was: "numpy/_core/_methods.py:132: RuntimeWarning: invalid value encountered in reduce"
    # (the mean of an output holding inf and -inf)
    import warnings
    p = write(tmp_path, "inf.fasm", "tensor x : f32[2, 2] input\ntensor z : f32[2, 2]\n"
              "tensor y : f32[2, 2] output\nsub z, x, x\ndiv y, x, z\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status, out, err, _ = cli("run", p, "--reference", "--json")
    # strict JSON: the non-finite mean is null, and flagged
    assert status == 0 and "Warning" not in err and '"mean": null' in out
    assert "outputs.y.mean" in __import__("json").loads(out)["non_finite"]


def test_scalar_tensors_run_through_the_batched_leaves():
    # was: "IndexError: tuple index out of range" in simulator/batch_kernels._union (a rank-0
    # output of a batched element-wise leaf); campaign seed 5, cases 807 and 1957
    import numpy as np
    import fractal
    program = fractal.load_program("tensor x : f32[] input\ntensor y : f16[] output\n"
                                   "tensor t : f32[]\nmul t, x, x\nmul t, t, x\ncast y, t\n")
    x = np.array(1.5, np.float32)
    for machine in ("tiny", "f1"):
        out = fractal.run(program, machine, inputs={"x": x}).outputs["y"]
        assert out.shape == () and out == np.float16(x * x * x)


def test_a_level_without_decode_cycles_plans_and_runs():
    # was: "IndexError: index -1 is out of bounds for axis 0 with size 0" in
    # compiler/reservation.py (a controller row held for 0 cycles kept as an empty row);
    # campaign seed 2, case 746
    from dataclasses import replace
    import fractal
    from machine import preset
    m = preset("tiny").rescaled(2, (2, 3))
    levels = list(m.levels)
    levels[1] = replace(levels[1], decode_cycles=0)
    program = fractal.load_program(Path("programs/elementwise.fasm").read_text())
    report = fractal.run(program, replace(m, levels=tuple(levels)), functional=False)
    assert report.cycles > 0


def test_a_pinned_piece_count_limits_the_parallel_ways_to_the_axis_least(tmp_path):
    # was: internal error (RuleBroken: a topk part of 8 elements asked for its 11 smallest).
    # The pin cuts N into 6 serial pieces of 37 or 38; the search then shared each among the
    # fan-out's 4 children, 9 or 10 elements each, below topk's `min K`.
    import numpy as np
    import fractal
    lib = ROOT / "programs" / "lib" / "topk.fasm"
    p = write(tmp_path, "p.fasm", f'include "{lib}"\ntensor x : f32[2, 224] input\n'
              "tensor vals : f32[2, 11] output\ntensor idx : i32[2, 11] output\n"
              "topk vals, idx, x\n")
    pins = write(tmp_path, "map.toml", "pin = [{line = 5, serial = {N = 6}}]\n")
    x = np.random.default_rng(3).standard_normal((2, 224)).astype(np.float32)
    report = fractal.run(p, "tiny", mapping=pins, inputs={"x": x})
    root = fractal.compile(p, "tiny", pins).roots[0]
    split = {s.name: s for s in root.splits}["N"]
    assert split.pieces == 6 and 224 // 6 // split.ways >= 11
    order = np.argsort(x, axis=1, kind="stable")[:, :11]
    assert np.array_equal(report.outputs["idx"], order)
    assert np.array_equal(report.outputs["vals"], np.take_along_axis(x, order, axis=1))


@pytest.mark.parametrize("dtype", ["i8", "i32", "f16", "f32", "bf16"])
def test_the_campaigns_dtype_mutation_always_gives_a_type_the_tensor_refuses(tmp_path, dtype):
    # was: an i8 tensor's "dtype" mutation could pick int32, which an i8 tensor takes where its
    # values fit (a wider type, exact): a valid file the campaign expected refused
    import numpy as np
    from fractal import api
    from isa.errors import UserError
    from isa.reference import NP_DTYPES, conform_feed
    from tests.fuzz.mutate import mutate_array
    program = api.load_program(f"tensor a : {dtype}[3] input\ntensor z : {dtype}[3] output\n"
                               f"copy z, a\n")
    arr = np.array([1, -2, 3]).astype(NP_DTYPES[dtype])
    seen = 0
    for seed in range(400):
        data, what, valid = mutate_array(np.random.default_rng(seed), arr)
        if not what.startswith("dtype:"):
            continue
        assert valid is False
        (tmp_path / "x.npy").write_bytes(data)
        try:
            loaded = np.load(tmp_path / "x.npy", allow_pickle=False)
        except ValueError:
            continue                # not even a readable array
        with pytest.raises(UserError):
            conform_feed(program, "a", loaded, "--input", "x.npy")
        seen += 1
    assert seen
