"""What the generated programs compute, against numpy, scipy and torch written here: the
reference interpreter's outputs (which the simulator reproduces, test_workload_runs.py) equal an
independent implementation of each model. The CNNs are checked against the numpy layers of
tests/workloads/oracle.py on every run, and against torch too where it is installed
(`pytest -m torch`)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

import fractal
from fractal.workloads import generate
from tests.workloads import oracle
from tests.workloads.helpers import SMALL, feeds


def _run(name, seed=0, change=None, **params):
    """(feeds as float64/int arrays, reference outputs) of a generated program, in f32 (the
    oracles compute in float64; the f16 programs are checked against the simulator in
    test_workload_runs.py)."""
    program = fractal.load_program(generate(name, **(SMALL[name] | {"dtype": "f32"} | params)))
    data = feeds(program, seed)
    if change:
        change(data)
    outputs = fractal.reference(program, inputs=data).outputs
    return {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in data.items()}, outputs


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_logreg_is_sigmoid_of_an_affine_map():
    d, out = _run("logreg")
    _close(out["probs"], expit(d["x"] @ d["w"] + d["b"]))


def test_mlp():
    d, out = _run("mlp_classifier")
    h = d["x"]
    for i in (1, 2):
        h = np.maximum(h @ d[f"fc{i}_w"] + d[f"fc{i}_b"], 0)
    logits = h @ d["fc3_w"] + d["fc3_b"]
    _close(out["logits"], logits)
    np.testing.assert_array_equal(out["labels"], logits.argmax(1))


def test_lstm_matches_a_step_by_step_cell():
    d, out = _run("lstm", steps=4)
    h, c, hs = d["h0"], d["c0"], []
    for x in d["x"]:
        i, f, g, o = np.split(x @ d["w_ih"] + h @ d["w_hh"] + d["bias"], 4, axis=1)
        c = expit(f) * c + expit(i) * np.tanh(g)
        h = expit(o) * np.tanh(c)
        hs.append(h)
    _close(out["h_seq"], np.stack(hs))
    _close(out["c_n"], c)


def test_knn_predicts_the_majority_label_of_the_nearest():
    d, out = _run("knn_classifier", seed=5)
    k, classes = SMALL["knn_classifier"]["k"], SMALL["knn_classifier"]["classes"]
    dist = ((d["queries"][:, None, :] - d["reference"][None, :, :]) ** 2).sum(-1)
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
    votes = np.array([np.bincount(d["reference_labels"][row], minlength=classes) for row in nearest])
    np.testing.assert_array_equal(out["neighbors"], nearest)
    np.testing.assert_array_equal(out["votes"], votes)
    np.testing.assert_array_equal(out["labels"], votes.argmax(1))
    assert len(set(out["labels"].tolist())) > 1


def test_kmeans_iteration_is_one_lloyd_step():
    def far_centroid(data):
        data["centroids"][-1] = 1e3                         # a cluster that gets no point
    d, out = _run("kmeans_iteration", change=far_centroid)
    pts, cen = d["points"], d["centroids"]
    dist = ((pts[:, None, :] - cen[None, :, :]) ** 2).sum(-1)
    labels = dist.argmin(1)
    new = np.array([pts[labels == j].mean(0) if (labels == j).any() else cen[j]
                    for j in range(len(cen))])
    np.testing.assert_array_equal(out["labels"], labels)
    assert not (labels == len(cen) - 1).any()
    _close(out["new_centroids"], new)
    np.testing.assert_allclose(out["inertia"], dist.min(1).sum(), rtol=1e-5)


def test_svm_rbf_decision_function():
    d, out = _run("svm_rbf")
    sq = ((d["x"][:, None, :] - d["support_vectors"][None, :, :]) ** 2).sum(-1)
    decision = np.exp(-d["gamma"][0] * sq) @ d["dual_coef"] + d["intercept"]
    _close(out["decision"], decision)
    np.testing.assert_array_equal(out["labels"], decision.argmax(1))


def test_gaussian_nb_joint_log_likelihood():
    d, out = _run("gaussian_nb")
    std = np.exp(d["log_var"] / 2)
    loglik = norm.logpdf(d["x"][:, None, :], d["means"][None], std[None]).sum(-1)
    features = d["x"].shape[1]
    joint = d["log_prior"] + loglik + features / 2 * np.log(2 * np.pi)
    _close(out["joint"], joint)
    np.testing.assert_array_equal(out["labels"], joint.argmax(1))


# ---------------------------------------------------------------- CNNs against the numpy oracle

def _conv(d, x, name, stride=1, pad=0, groups=1, relu=True):
    y = oracle.conv2d(x, d[f"{name}_w"], d[f"{name}_b"].reshape(-1), stride, pad, groups)
    return oracle.relu(y) if relu else y


def _head(d, x, names):
    for i, name in enumerate(names):
        x = oracle.linear(x, d[f"{name}_w"], d[f"{name}_b"])
        if i < len(names) - 1:
            x = oracle.relu(x)
    return x


def _oracle_logits(name, d):
    x = d["images"]
    if name == "vgg16":
        for stage, convs in enumerate((2, 2, 3, 3, 3), 1):
            for i in range(1, convs + 1):
                x = _conv(d, x, f"conv{stage}_{i}", pad=1)
            x = oracle.maxpool(x, 2, 2)
        return _head(d, x, ["fc6", "fc7", "fc8"])
    if name == "resnet18":
        x = oracle.maxpool(_conv(d, x, "conv1", 2, 3), 3, 2, 1)
        for stage in range(1, 5):
            for block in (1, 2):
                n, stride = f"layer{stage}_{block}", 2 if stage > 1 and block == 1 else 1
                y = _conv(d, x, f"{n}_conv1", stride, 1)
                y = _conv(d, y, f"{n}_conv2", 1, 1, relu=False)
                short = _conv(d, x, f"{n}_down", stride, relu=False) if f"{n}_down_w" in d else x
                x = oracle.relu(y + short)
        return _head(d, oracle.avgpool(x, x.shape[2], 1), ["fc"])
    x = oracle.maxpool(oracle.lrn(_conv(d, x, "conv1", 4, 2), 5, 1e-4, 0.75, 2.0), 3, 2)
    x = oracle.maxpool(oracle.lrn(_conv(d, x, "conv2", 1, 2, groups=2), 5, 1e-4, 0.75, 2.0), 3, 2)
    x = _conv(d, x, "conv3", 1, 1)
    x = _conv(d, x, "conv4", 1, 1, groups=2)
    x = oracle.maxpool(_conv(d, x, "conv5", 1, 1, groups=2), 3, 2)
    return _head(d, x, ["fc6", "fc7", "fc8"])


def _same_logits(out, logits):
    assert np.abs(logits).max() > 0.1                        # the data keeps a signal to compare
    np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-4 * np.abs(logits).max())
    np.testing.assert_array_equal(out["labels"], logits.argmax(1))


@pytest.mark.parametrize("name", ["vgg16", "resnet18", "alexnet"])
def test_cnn_logits_equal_the_numpy_oracle(name):
    d, out = _run(name, seed=1)
    _same_logits(out, _oracle_logits(name, d))


# ---------------------------------------------------------------- CNNs against torch

def _torch_conv(F, torch, d, x, name, stride=1, pad=0, groups=1, relu=True):
    y = F.conv2d(x, torch.from_numpy(d[f"{name}_w"]), torch.from_numpy(d[f"{name}_b"].reshape(-1)),
                 stride=stride, padding=pad, groups=groups)
    return F.relu(y) if relu else y


def _torch_head(torch, d, x, names):
    x = x.flatten(1)
    for i, name in enumerate(names):
        x = x @ torch.from_numpy(d[f"{name}_w"]) + torch.from_numpy(d[f"{name}_b"])
        if i < len(names) - 1:
            x = torch.relu(x)
    return x.numpy()


@pytest.mark.torch
@pytest.mark.parametrize("name", ["vgg16", "resnet18", "alexnet"])
def test_cnn_logits_equal_torch(name):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    d, out = _run(name, seed=1)
    x = torch.from_numpy(d["images"])
    if name == "vgg16":
        for stage, convs in enumerate((2, 2, 3, 3, 3), 1):
            for i in range(1, convs + 1):
                x = _torch_conv(F, torch, d, x, f"conv{stage}_{i}", pad=1)
            x = F.max_pool2d(x, 2, 2)
        logits = _torch_head(torch, d, x, ["fc6", "fc7", "fc8"])
    elif name == "resnet18":
        x = F.max_pool2d(_torch_conv(F, torch, d, x, "conv1", 2, 3), 3, 2, 1)
        for stage in range(1, 5):
            for block in (1, 2):
                n, stride = f"layer{stage}_{block}", 2 if stage > 1 and block == 1 else 1
                y = _torch_conv(F, torch, d, x, f"{n}_conv1", stride, 1)
                y = _torch_conv(F, torch, d, y, f"{n}_conv2", 1, 1, relu=False)
                short = _torch_conv(F, torch, d, x, f"{n}_down", stride, relu=False) \
                    if f"{n}_down_w" in d else x
                x = F.relu(y + short)
        logits = _torch_head(torch, d, F.adaptive_avg_pool2d(x, 1), ["fc"])
    else:
        lrn = lambda t: F.local_response_norm(t, 5, alpha=1e-4, beta=0.75, k=2.0)
        x = F.max_pool2d(lrn(_torch_conv(F, torch, d, x, "conv1", 4, 2)), 3, 2)
        x = F.max_pool2d(lrn(_torch_conv(F, torch, d, x, "conv2", 1, 2, groups=2)), 3, 2)
        x = _torch_conv(F, torch, d, x, "conv3", 1, 1)
        x = _torch_conv(F, torch, d, x, "conv4", 1, 1, groups=2)
        x = F.max_pool2d(_torch_conv(F, torch, d, x, "conv5", 1, 1, groups=2), 3, 2)
        logits = _torch_head(torch, d, x, ["fc6", "fc7", "fc8"])
    _same_logits(out, logits)
