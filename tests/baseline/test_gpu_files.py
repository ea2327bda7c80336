"""GPU description files: every problem reported with the key at fault."""
from pathlib import Path

import pytest

from fractal.baseline import estimate, load_gpu
from fractal.baseline.gpu import GPU_DIR
from isa.errors import ErrorGroup, UserError

MLP = Path(__file__).resolve().parents[2] / "programs" / "mlp.fasm"


def write(tmp_path, text, name="my.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def v100_text():
    return (GPU_DIR / "v100.toml").read_text()


def test_a_copied_preset_loads_by_path_and_estimates(tmp_path):
    path = write(tmp_path, v100_text().replace('name = "v100"', 'name = "my-v100"'))
    gpu = load_gpu(str(path))
    assert gpu.name == "my-v100" and gpu.fp16_flops == 125e12
    r = estimate(MLP, str(path))
    assert r.gpu == "my-v100" and r.seconds == estimate(MLP, "v100").seconds


def test_missing_source_is_located(tmp_path):
    text = v100_text().replace('memory_bandwidth = { value = 900e9, source = ',
                               'memory_bandwidth = { value = 900e9, nosource = ')
    with pytest.raises(ErrorGroup) as e:
        load_gpu(str(write(tmp_path, text)))
    messages = e.value.format()
    assert "my.toml: memory_bandwidth.nosource: error: unknown key 'nosource'" in messages
    assert "my.toml: memory_bandwidth.source: error: 'memory_bandwidth' needs a source" in messages


def test_bad_values_all_reported_together(tmp_path):
    text = (v100_text().replace("value = 15.7e12", "value = -1")
            .replace("value = 300,", 'value = "300",')
            .replace("fp16_tensor_cores = true", "fp16_tensor_corez = true"))
    with pytest.raises(ErrorGroup) as e:
        load_gpu(str(write(tmp_path, text)))
    got = {(err.where, err.message) for err in e.value.errors}
    path = str(tmp_path / "my.toml")
    assert (f"{path}: fp32_flops.value", "'fp32_flops.value' must be positive, got -1") in got
    assert (f"{path}: tdp_watts.value", "'tdp_watts.value' must be a number, got '300'") in got
    assert (f"{path}: fp16_tensor_cores", "missing key 'fp16_tensor_cores'") in got
    unknown = [err for err in e.value.errors if err.where == f"{path}: fp16_tensor_corez"]
    assert unknown and unknown[0].hint == "did you mean 'fp16_tensor_cores'?"


def test_a_system_needs_an_interconnect(tmp_path):
    text = v100_text().replace("gpus = 1", "gpus = 4")
    with pytest.raises(UserError, match=r"a system of 4 GPUs needs an \[interconnect\] table") as e:
        load_gpu(str(write(tmp_path, text)))
    assert e.value.where.endswith("my.toml: interconnect")


def test_idle_above_tdp_and_invalid_toml(tmp_path):
    text = v100_text().replace("idle_watts = { value = 40,", "idle_watts = { value = 400,")
    with pytest.raises(UserError, match=r"'idle_watts' \(400\) exceeds 'tdp_watts' \(300\)"):
        load_gpu(str(write(tmp_path, text)))
    with pytest.raises(UserError, match="invalid TOML") as e:
        load_gpu(str(write(tmp_path, "name = \n", "broken.toml")))
    assert e.value.where.endswith("broken.toml:1:8")


def test_unknown_name_and_missing_file():
    with pytest.raises(UserError, match="unknown GPU 'v1000'") as e:
        load_gpu("v1000")
    assert e.value.where == "--gpu" and e.value.hint == "did you mean 'v100'?"
    with pytest.raises(UserError, match="GPU file not found: nowhere/gpu.toml"):
        load_gpu("nowhere/gpu.toml")
