"""Dense models: a multi-layer perceptron, logistic regression, and an LSTM unrolled in time."""
from __future__ import annotations

from fractal.workloads.base import Param, Workload, param_error
from fractal.workloads.builder import ProgramBuilder

__all__ = ["MLP", "LOGREG", "LSTM"]


# ---------------------------------------------------------------- MLP

def _mlp(b: ProgramBuilder, batch, layers) -> list[str]:
    x = b.tensor("x", (batch, layers[0]), "input", note=f"{batch} samples of {layers[0]} features")
    for i, units in enumerate(layers[1:-1], 1):
        x = b.linear(x, f"fc{i}", units, relu=True)
    logits = b.linear(x, f"fc{len(layers) - 1}", layers[-1], role="output", out="logits")
    b.classify(logits)
    sizes = " -> ".join(map(str, layers))
    return [f"Multi-layer perceptron inference: fully connected layers {sizes} with bias, ReLU "
            f"between them; {batch} samples, class scores and labels."]


MLP = Workload(
    "mlp_classifier", "multi-layer perceptron: fully connected layers with bias and ReLU, argmax labels",
    {"batch": Param(64, "samples per run"),
     "layers": Param((784, 256, 128, 10), "layer sizes, input features first, classes last")},
    _mlp, dtype="f16")


# ---------------------------------------------------------------- logistic regression

def _logreg(b: ProgramBuilder, batch, features, outputs) -> list[str]:
    x = b.tensor("x", (batch, features), "input", note=f"{batch} samples of {features} features")
    w = b.tensor("w", (features, outputs), "param", note="coefficients")
    bias = b.tensor("b", (outputs,), "param", note="intercepts")
    z = b.tensor("z", (batch, outputs), note="x @ w + b")
    probs = b.tensor("probs", (batch, outputs), "output", note="sigmoid(z): P(class | x)")
    b.op("matmul", z, x, w)
    b.op("add", z, z, bias)
    b.op("sigmoid", probs, z)
    return [f"Logistic regression inference: probs = sigmoid(x @ w + b) for {batch} samples of "
            f"{features} features, {outputs} independent binary output(s)."]


LOGREG = Workload(
    "logreg", "logistic regression: probs = sigmoid(x @ w + b)",
    {"batch": Param(64, "samples per run"),
     "features": Param(128, "features per sample"),
     "outputs": Param(1, "binary outputs (one-vs-rest classes); 1 for plain binary")},
    _logreg)


# ---------------------------------------------------------------- LSTM

def _lstm(b: ProgramBuilder, batch, steps, input_size, hidden) -> list[str]:
    if steps > 512:
        raise param_error("steps", f"steps must be at most 512 (the program holds one block of "
                                   f"instructions per step), got {steps}")
    t_b, h4 = steps * batch, 4 * hidden
    x = b.tensor("x", (steps, batch, input_size), "input", note="the input sequence, time first")
    h = b.tensor("h0", (batch, hidden), "input", note="initial hidden state")
    c0 = b.tensor("c0", (batch, hidden), "input", note="initial cell state")
    w_ih = b.tensor("w_ih", (input_size, h4), "param", note="input weights, gates i, f, g, o")
    w_hh = b.tensor("w_hh", (hidden, h4), "param", note="recurrent weights, gates i, f, g, o")
    bias = b.tensor("bias", (h4,), "param", note="gate biases (b_ih + b_hh)")
    h_seq = b.tensor("h_seq", (steps, batch, hidden), "output", note="hidden state after each step")
    c = b.tensor("c_n", (batch, hidden), "output", note="cell state after the last step")
    x_rows = b.tensor("x_rows", (t_b, input_size))
    x_gates = b.tensor("x_gates", (t_b, h4), note="input part of every step's gates")
    x_step = b.tensor("x_step", (batch, h4))
    gates = b.tensor("gates", (batch, h4))
    gate = {g: b.tensor(f"gate_{g}", (batch, hidden)) for g in "ifgo"}
    keep = b.tensor("keep", (batch, hidden))
    write = b.tensor("write", (batch, hidden))
    c_tanh = b.tensor("c_tanh", (batch, hidden))
    b.section("the input projections of all steps at once")
    b.op("reshape", x_rows, x)
    b.op("matmul", x_gates, x_rows, w_ih)
    b.op("add", x_gates, x_gates, bias)
    states = []
    for t in range(steps):
        b.section(f"step {t + 1}")
        b.op("slice", x_step, x_gates, axis=0, start=t * batch)
        b.op("matmul", gates, h, w_hh)
        b.op("add", gates, gates, x_step)
        for i, g in enumerate("ifgo"):
            b.op("slice", gate[g], gates, axis=1, start=i * hidden)
        b.op("sigmoid", gate["i"], gate["i"], note="input gate")
        b.op("sigmoid", gate["f"], gate["f"], note="forget gate")
        b.op("tanh", gate["g"], gate["g"], note="candidate cell")
        b.op("sigmoid", gate["o"], gate["o"], note="output gate")
        b.op("mul", keep, gate["f"], c0 if t == 0 else c)
        b.op("mul", write, gate["i"], gate["g"])
        b.op("add", c, keep, write, note="c = f * c + i * g")
        b.op("tanh", c_tanh, c)
        h = b.tensor(f"h{t + 1}", (batch, hidden))
        b.op("mul", h, gate["o"], c_tanh, note="h = o * tanh(c)")
        states.append(h)
    b.section("the hidden states of all steps")
    rows = b.tensor("h_rows", (t_b, hidden))
    b.op("concat", rows, *states, axis=0)
    b.op("reshape", h_seq, rows)
    return [f"LSTM inference unrolled over {steps} steps: gates i, f, g, o = x_t @ w_ih + h @ w_hh "
            f"+ bias; batch {batch}, input {input_size}, hidden {hidden}."]


LSTM = Workload(
    "lstm", "LSTM layer unrolled over T steps (PyTorch gate order i, f, g, o)",
    {"batch": Param(16, "sequences per run"),
     "steps": Param(8, "time steps T"),
     "input_size": Param(32, "features of each input x_t"),
     "hidden": Param(64, "units of the hidden and cell state")},
    _lstm, dtype="f16")
