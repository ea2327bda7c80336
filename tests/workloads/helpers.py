"""Small variants of every workload, and data that keeps their values in a sane range."""
from __future__ import annotations

import io
import math

import numpy as np

from fractal.cli import main

#: parameters of a small variant of each workload: a few thousand leaf pieces at most on `tiny`
SMALL = {
    "vgg16": dict(batch=1, resolution=32, width=4, fc=16, classes=10),
    "resnet18": dict(batch=2, resolution=32, width=4, classes=10),
    "alexnet": dict(batch=1, resolution=63, width=6, fc=16, classes=10),
    "mlp_classifier": dict(batch=8, layers=(32, 16, 8, 4)),
    "lstm": dict(batch=2, steps=3, input_size=4, hidden=8),
    "knn_classifier": dict(batch=8, points=64, features=4, k=5, classes=4),
    "kmeans_iteration": dict(batch=64, features=4, clusters=4),
    "svm_rbf": dict(batch=8, features=4, support_vectors=16, classes=3),
    "logreg": dict(batch=8, features=16, outputs=2),
    "gaussian_nb": dict(batch=16, features=4, classes=3),
    "bert_base": dict(batch=2, layers=2, seq=8, hidden=16, heads=2, ffn=32),
    "gpt2": dict(batch=2, layers=2, seq=8, hidden=16, heads=2, ffn=32, vocab=24),
    "llama_block": dict(batch=2, layers=2, seq=8, hidden=32, heads=4, kv_heads=2, ffn=48),
}


def gen_args(name: str, params: dict) -> list[str]:
    """`fractal gen` arguments for these parameters."""
    args = ["gen", name]
    for k, v in params.items():
        args += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, tuple) else str(v)]
    return args


def cli(*args) -> str:
    """Run `fractal` in this process; returns its standard output, fails on a non-zero status."""
    out = io.StringIO()
    status = main([str(a) for a in args], out)
    assert status == 0, (args, status, out.getvalue())
    return out.getvalue()


def feeds(program, seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs standard normal (float16 for f16 tensors, else float32); weights scaled by 1/sqrt(fan-in) (He scaling before a ReLU) so
    activations stay near 1 through deep networks; biases small; labels within the classes;
    a positive RBF width."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in (*program.inputs, *program.params):
        shape = t.type.shape
        if t.type.dtype == "i32":                       # reference labels of k-NN
            classes = program.tensor("votes").type.shape[1]
            out[t.name] = rng.integers(0, classes, shape, dtype=np.int32)
            continue
        value = rng.standard_normal(shape)
        if t.role == "param" and t.name.endswith("_w") and len(shape) == 4:
            value *= math.sqrt(2 / math.prod(shape[1:]))
        elif t.role == "param" and len(shape) == 3:            # per-head projections [n, H, d]
            value *= math.sqrt(1 / shape[1])
        elif t.role == "param" and len(shape) == 2 and t.name not in ("centroids", "means",
                                                                         "support_vectors"):
            value *= math.sqrt(1 / shape[0])
        elif t.role == "param" and (t.name.endswith("_b") or t.name == "bias"):
            value *= 0.1
        if t.name == "gamma":
            value = np.array([0.3])
        out[t.name] = value.astype(np.float16 if t.type.dtype == "f16" else np.float32)
    return out
