"""Workload generators: fractal assembly for classic networks and machine learning kernels.

    from fractal.workloads import WORKLOADS, generate
    text = generate("vgg16", batch=2, resolution=64, width=8)   # program text
    program = fractal.load_program(text)

Every program is inference only. Weights and other model constants are `param` tensors, which
the runtime fills with seeded random data unless given (`fractal run --inputs weights.npz`);
docs/workloads.md lists each workload's tensors, parameters and op counts.
"""
from __future__ import annotations

from isa.errors import UserError, did_you_mean
from fractal.workloads.base import Param, Workload, param_error
from fractal.workloads.builder import ProgramBuilder
from fractal.workloads.cnn import ALEXNET, RESNET18, VGG16
from fractal.workloads.classic import GAUSSIAN_NB, KMEANS, KNN, SVM_RBF
from fractal.workloads.dense import LOGREG, LSTM, MLP
from fractal.workloads.transformer import BERT_BASE, GPT2, LLAMA_BLOCK

__all__ = ["WORKLOADS", "Workload", "Param", "ProgramBuilder", "generate", "workload",
           "param_error"]

#: every workload by name
WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    VGG16, RESNET18, ALEXNET, MLP, LSTM, KNN, KMEANS, SVM_RBF, LOGREG, GAUSSIAN_NB,
    BERT_BASE, GPT2, LLAMA_BLOCK]}


def workload(name: str) -> Workload:
    """The workload called `name`, or a UserError with a did-you-mean."""
    if name not in WORKLOADS:
        longer = [w for w in WORKLOADS if w.startswith(name)]
        hint = (f"did you mean '{longer[0]}'?" if len(longer) == 1 else did_you_mean(name, WORKLOADS))
        raise UserError(f"unknown workload '{name}'", "fractal gen",
                        hint=hint or "workloads: " + ", ".join(WORKLOADS))
    return WORKLOADS[name]


def generate(name: str, batch: int | None = None, **params) -> str:
    """The program text of workload `name`; parameters not given take their defaults."""
    w = workload(name)
    if batch is not None:
        params["batch"] = batch
    return w.program(w.checked(params))
