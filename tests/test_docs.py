"""Docs that run: every ```sh and ```python block of README.md and docs/*.md is executed, in a
scratch folder holding a copy of programs/ and benchmarks/ and the files the blocks name
(a machine file, a GPU file, data, small ONNX models), so that an example that no longer works
fails here.

Some blocks ask for minutes of work (a million-leaf machine, a sweep over sixteen machines, the
whole reproduction); `SHORTER` rewrites them to smaller sizes of the same commands, and `SKIP`
lists the lines that need what the test environment does not have (a GPU and PyTorch, a Dask
cluster), each with its reason. Python blocks of one file share their names, as a reader running
them in order would.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.S | re.M)

#: the same commands at smaller sizes (exact text -> replacement)
SHORTER = [
    ("--depth 4 --fanout 32", "--depth 2 --fanout 4"),
    ("depth=4, fanout=32", "depth=2, fanout=4"),
    ("--depth 1..4 --fanout 2,4,8,16,32", "--depth 1 --fanout 2 --workers 1"),
    ("--depth 1..4 --fanout 2,4,8,16", "--depth 1 --fanout 2 --workers 1"),
    ("depths=[1, 2, 3], fanouts=[2, 4, 8, 16]", "depths=[1], fanouts=[2]"),
    ("depths=[1, 2, 3], fanouts=[2, 4, 8]", "depths=[1], fanouts=[2]"),
    ("programs/vgg16.fasm programs/lstm.fasm", "programs/mlp.fasm programs/lstm.fasm"),
    ("programs/mlp.fasm programs/cnn.fasm --machine f1", "programs/mlp.fasm --machine f1"),
    ("--gpu 1080ti,v100,h100", "--gpu v100"),
    ("--batch 2 --resolution 64 --width 16", "--batch 1 --resolution 32 --width 4"),
    ("fractal gen --all -o programs/", "mkdir -p generated && fractal gen --all -o generated/"),
    ("resnet18 --batch 8", "resnet18 --batch 1"),
    ('generate("resnet18", batch=4, resolution=96)', 'generate("resnet18", batch=1, resolution=32)'),
    ('"benchmarks/vgg16_layers.fasm"', '"programs/mlp.fasm"'),
]
#: lines not run, and why
SKIP = [
    ("python3 -m venv", "the Quickstart is what CI runs (.ci/run)"),
    ("python -m pytest", "the Quickstart is what CI runs (.ci/run)"),
    ("--device cuda", "needs a CUDA GPU and PyTorch (.[gpu])"),
    ("--device cpu", "needs PyTorch (.[gpu])"),
    ("dask scheduler", "needs a Dask cluster (tests/sweep runs sweeps on a local one)"),
    ("dask worker", "needs a Dask cluster"),
    ("--dask tcp://", "needs a Dask cluster"),
    ("gpt2.onnx", "needs an exported GPT-2 model (scripts/onnx_export_check.py, .[export]); "
                  "tests/onnx imports transformer graphs built in the tests"),
    ("gpt2.fasm", "runs the program the line above imports"),
    ("fractal reproduce -o docs/reproduction.md", "minutes of work; tests/reproduce covers it"),
    ("f1_neighbourhood.toml -o f1-study", "minutes of work (docs/explore.md gives its result); "
                                          "tests/explore covers the explorer"),
]


def blocks():
    for rel in FILES:
        text = (ROOT / rel).read_text(encoding="utf-8")
        for i, m in enumerate(BLOCK.finditer(text)):
            yield pytest.param(rel, m.group(1), m.group(2), id=f"{rel}#{i + 1}-{m.group(1)}")


def _onnx_model(path: Path, name: str, shape, dynamic: bool = False):
    """A small model: a 3x3 convolution and a relu."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    dims = ["N", *shape[1:]] if dynamic else list(shape)
    x = helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [dims[0], 4, *shape[2:]])
    w = numpy_helper.from_array(rng.standard_normal((4, shape[1], 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", [name, "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def scratch(tmp: Path, rel: str) -> Path:
    """A folder with what the blocks of `rel` use."""
    shutil.copytree(ROOT / "programs", tmp / "programs")
    shutil.copytree(ROOT / "benchmarks", tmp / "benchmarks")
    (tmp / "docs").mkdir()
    shutil.copy(ROOT / "machine" / "presets" / "tiny.toml", tmp / "my.toml")
    gpu = (ROOT / "fractal" / "baseline" / "gpus" / "v100.toml").read_text()
    (tmp / "my-gpu.toml").write_text(re.sub(r'(?m)^name = ".*"', 'name = "my-gpu"', gpu))
    (tmp / "my-factors.toml").write_text("[compute]\nmatmul = 0.5\n")
    (tmp / "pins.toml").write_text("[[pin]]\nline = 8\nparallel = { N = 2 }\n")
    rng = np.random.default_rng(1)
    np.save(tmp / "x.npy", rng.standard_normal((64, 784)).astype(np.float32))
    np.save(tmp / "image.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    _onnx_model(tmp / "model.onnx", "image", (1, 3, 8, 8))
    _onnx_model(tmp / "dynamic.onnx", "image", (1, 3, 224, 224), dynamic=True)
    return tmp


def prepare(code: str) -> tuple[str, list[str]]:
    for old, new in SHORTER:
        code = code.replace(old, new)
    kept, skipped = [], []
    lines = code.replace("\\\n", " ").splitlines()
    for line in lines:
        command = line.split("  #")[0]
        why = next((w for s, w in SKIP if s in command), None)
        (skipped.append(f"{line.strip()}: {why}") if why else kept.append(line))
    return "\n".join(kept) + "\n", skipped


_NAMESPACES: dict = {}


@pytest.mark.parametrize("rel, lang, code", list(blocks()))
def test_every_documented_block_runs(rel, lang, code, tmp_path_factory):
    folder = _NAMESPACES.setdefault(("dir", rel), None)
    if folder is None:
        folder = _NAMESPACES[("dir", rel)] = scratch(tmp_path_factory.mktemp("docs"), rel)
    code, skipped = prepare(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    if lang == "sh":
        shell = f'set -e\nfractal() {{ "{sys.executable}" -m fractal "$@"; }}\n' + code
        res = subprocess.run(["bash", "-c", shell], cwd=folder, env=env, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, f"{rel}: {res.stderr[-3000:]}"
        assert "Traceback" not in res.stderr
        return
    names = _NAMESPACES.setdefault(("names", rel), {"__name__": "__main__"})
    if "import_model(model," in code:          # the block's own ModelProto
        import onnx
        names["model"] = onnx.load(folder / "dynamic.onnx")
    if "fractal.run(" in code and "import fractal" not in code:
        names.setdefault("fractal", __import__("fractal"))
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, f"{rel} (code block)", "exec"), names)
    finally:
        os.chdir(cwd)


def test_shorter_sizes_and_skips_still_match_the_docs():
    """Every rewrite and skip names text some block still holds (none is stale)."""
    text = "".join(code for _, _, code in (p.values for p in blocks()))
    text = text.replace("\\\n", " ")
    for old, _ in SHORTER:
        assert old in text, old
    for what, _ in SKIP:
        assert what in text, what
