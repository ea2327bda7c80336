"""Op counts of the generated programs against derivations written here from the published layer
lists. `isa.checker.program_ops` counts a multiply-accumulate as 2 ops (docs/isa.md), so a
network of M multiply-accumulates has 2*M ops of class `mac`; every other op (bias, ReLU,
pooling windows, LRN, argmax) is counted on top as the opcode table says."""
from __future__ import annotations

import pytest

import fractal
from fractal.workloads import generate
from isa.checker import program_ops
from isa.opcodes import OPCODES, instruction_ops


def _program(name, **params):
    return fractal.load_program(generate(name, **params))


def _mac_ops(program) -> int:
    return sum(instruction_ops(i, program.types) for i in program.instructions
               if OPCODES[i.opcode].op_class == "mac")


def _out(size, kernel, stride, pad):
    return (size + 2 * pad - kernel) // stride + 1


def vgg16_counts(batch=1, resolution=224, width=64, fc=4096, classes=1000):
    """(multiply-accumulates, other ops) of VGG-16 configuration D, Simonyan & Zisserman Table 1."""
    layers = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    macs = other = 0
    c, s = 3, resolution
    for layer in layers:
        if layer == "M":
            s //= 2
            other += c * s * s * 4                          # 2x2 windows
            continue
        o = layer * width // 64
        macs += s * s * 9 * c * o
        other += 2 * s * s * o                              # bias, ReLU
        c = o
    for k, n in [(c * s * s, fc), (fc, fc), (fc, classes)]:
        macs += k * n
        other += n                                          # bias
    other += 2 * fc + classes                               # ReLU of fc6, fc7; argmax
    return batch * macs, batch * other


def resnet18_counts(batch=1, resolution=224, width=64, classes=1000):
    """He et al. 2016, Table 1, 18-layer column; batch normalization folded into a bias."""
    s = _out(resolution, 7, 2, 3)
    macs, other = s * s * 49 * 3 * width, 2 * s * s * width
    s = _out(s, 3, 2, 1)
    other += 9 * width * s * s                              # 3x3 max pool
    c = width
    for stage in range(4):
        o = width * 2 ** stage
        for block in range(2):
            stride = 2 if stage and not block else 1
            s = _out(s, 3, stride, 1)
            macs += s * s * 9 * c * o + s * s * 9 * o * o
            other += 3 * s * s * o                          # bias, ReLU; bias
            if stride != 1 or c != o:
                macs += s * s * c * o                       # 1x1 projection shortcut
                other += s * s * o
            other += 2 * s * s * o                          # residual add, ReLU
            c = o
    other += c * s * s                                      # global average pool
    macs += c * classes
    other += 2 * classes                                    # bias, argmax
    return batch * macs, batch * other


def alexnet_counts(batch=1, resolution=224, fc=4096, classes=1000):
    """Krizhevsky et al. 2012, section 3.5: conv2, conv4, conv5 see only their own group's half."""
    convs = [(96, 11, 4, 2, 1, True, True), (256, 5, 1, 2, 2, True, True),
             (384, 3, 1, 1, 1, False, False), (384, 3, 1, 1, 2, False, False),
             (256, 3, 1, 1, 2, False, True)]
    macs = other = 0
    c, s = 3, resolution
    for o, k, stride, pad, groups, lrn, pool in convs:
        s = _out(s, k, stride, pad)
        macs += s * s * k * k * (c // groups) * o
        other += 2 * s * s * o + (s * s * o * (2 * 5 + 4) if lrn else 0)
        if pool:
            s = _out(s, 3, 2, 0)
            other += 9 * o * s * s
        c = o
    for k, n in [(c * s * s, fc), (fc, fc), (fc, classes)]:
        macs += k * n
        other += n
    other += 2 * fc + classes
    return batch * macs, batch * other


@pytest.mark.parametrize("name, derive, params, about", [
    ("vgg16", vgg16_counts, {}, 15.47e9),
    ("resnet18", resnet18_counts, {}, 1.81e9),
    ("alexnet", alexnet_counts, {}, 0.72e9),
    ("vgg16", vgg16_counts, dict(batch=2, resolution=64, width=16, fc=256, classes=10), None),
    ("resnet18", resnet18_counts, dict(batch=3, resolution=96, width=8, classes=7), None),
    ("alexnet", alexnet_counts, dict(batch=2, resolution=127, fc=512, classes=5), None),
])
def test_cnn_counts(name, derive, params, about):
    program = _program(name, **params)
    macs, other = derive(**params)
    if about:
        assert macs == pytest.approx(about, rel=0.01)       # the published totals
    assert _mac_ops(program) == 2 * macs
    assert program_ops(program) == 2 * macs + other


def test_alexnet_narrow_counts():
    """width scales every convolution: 6 channels in conv1 are 1/16 of the paper's 96."""
    program = _program("alexnet", resolution=224, width=6)
    full = _program("alexnet")
    conv = lambda p: sum(instruction_ops(i, p.types) for i in p.instructions if i.opcode == "conv2d")
    # conv1 has 3 input channels either way: 1/16 of the work; the others 1/256
    c1 = lambda p: instruction_ops(next(i for i in p.instructions if i.opcode == "conv2d"), p.types)
    assert c1(program) * 16 == c1(full)
    assert (conv(program) - c1(program)) * 256 == conv(full) - c1(full)


@pytest.mark.parametrize("params", [{}, dict(batch=3, steps=5, input_size=7, hidden=11)])
def test_lstm_macs(params):
    """4 gates x (input + hidden) x hidden multiply-accumulates per sequence and step."""
    values = {"batch": 16, "steps": 8, "input_size": 32, "hidden": 64} | params
    b, t, i, h = values["batch"], values["steps"], values["input_size"], values["hidden"]
    program = _program("lstm", **params)
    assert _mac_ops(program) == 2 * 4 * (i + h) * h * t * b
    gates = 4 * h * t * b
    # per gate element: bias, recurrent add, activation; per state element: f * c, i * g,
    # their sum, tanh(c), o * tanh(c)
    assert program_ops(program) - _mac_ops(program) == 3 * gates + 5 * h * t * b


def test_classic_counts():
    """eucdist is 3 ops per term (a subtract and a multiply-accumulate), matmul 2."""
    mlp = _program("mlp_classifier", batch=4, layers=(20, 30, 5))
    assert _mac_ops(mlp) == 2 * 4 * (20 * 30 + 30 * 5)
    assert program_ops(_program("logreg", batch=4, features=9, outputs=2)) == 2 * 4 * 9 * 2 + 4 * 2 * 2
    knn = _program("knn_classifier", batch=6, points=50, features=3)
    assert _mac_ops(knn) == 3 * 6 * 50 * 3
    kmeans = _program("kmeans_iteration", batch=40, features=5, clusters=3)
    assert _mac_ops(kmeans) == 3 * 40 * 3 * 5 + 2 * 3 * 40 * 5   # distances, then the sums
    svm = _program("svm_rbf", batch=7, features=4, support_vectors=9, classes=2)
    assert _mac_ops(svm) == 3 * 7 * 9 * 4 + 2 * 7 * 9 * 2
    nb = _program("gaussian_nb", batch=10, features=6, classes=4)
    assert _mac_ops(nb) == 2 * (2 * 10 * 6 * 4)                  # x^2 @ P' and x @ (mean P)'
