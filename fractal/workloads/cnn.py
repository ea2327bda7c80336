"""Image classifiers: VGG-16, ResNet-18 and AlexNet, inference on NCHW RGB images.

Every network takes `resolution` (the image side) and `width` (the channels of its first
convolution; later layers scale with it) so that small variants keep the layer structure.
Convolutions and fully connected layers carry a bias; the outputs are the class scores
(`logits`) and the best class of each image (`labels`).
"""
from __future__ import annotations

from fractal.workloads.base import Param, Workload
from fractal.workloads.builder import ProgramBuilder

__all__ = ["VGG16", "RESNET18", "ALEXNET"]


def _images(b: ProgramBuilder, batch: int, resolution: int) -> str:
    return b.tensor("images", (batch, 3, resolution, resolution), "input",
                    note=f"{_images_of(batch, resolution)}, RGB, NCHW")


def _images_of(batch: int, resolution: int) -> str:
    return f"{batch} image{'s' if batch > 1 else ''} of {resolution}x{resolution}"


def _head(b: ProgramBuilder, x: str, hidden: tuple[int, ...], classes: int):
    """Flatten, fully connected layers with ReLU, the class scores and labels."""
    x = b.flatten(x, "features")
    for i, units in enumerate(hidden):
        x = b.linear(x, f"fc{6 + i}", units, relu=True)
    logits = b.linear(x, f"fc{6 + len(hidden)}" if hidden else "fc", classes, role="output",
                      out="logits")
    b.classify(logits)


# ---------------------------------------------------------------- VGG-16

#: (convolutions, channels as a multiple of `width`) of the five stages of configuration D
VGG16_STAGES = ((2, 1), (2, 2), (3, 4), (3, 8), (3, 8))


def _vgg16(b: ProgramBuilder, batch, resolution, width, fc, classes) -> list[str]:
    x = _images(b, batch, resolution)
    for stage, (convs, mult) in enumerate(VGG16_STAGES, 1):
        b.section(f"stage {stage}: {convs} x conv 3x3 ({width * mult} channels) + bias + ReLU, "
                  f"max pool 2/2")
        for i in range(1, convs + 1):
            x = b.conv(x, f"conv{stage}_{i}", width * mult, 3, pad=1)
        x = b.pool("maxpool", x, f"pool{stage}", 2, 2)
    b.section("classifier: fc6, fc7 with ReLU (dropout is the identity at inference), fc8")
    _head(b, x, (fc, fc), classes)
    return [f"VGG-16 inference (configuration D): 13 conv 3x3 + bias + ReLU in 5 stages with "
            f"max pooling, 3 fully connected layers; {_images_of(batch, resolution)}, "
            f"{classes} classes."]


VGG16 = Workload(
    "vgg16", "VGG-16 (configuration D): 13 3x3 convolutions, 5 max pools, 3 fully connected layers",
    {"batch": Param(1, "images per run"),
     "resolution": Param(224, "image height and width", minimum=32),
     "width": Param(64, "channels of the first stage (then x2, x4, x8, x8)"),
     "fc": Param(4096, "units of the hidden fully connected layers fc6 and fc7"),
     "classes": Param(1000, "output classes")},
    _vgg16, dtype="f16")


# ---------------------------------------------------------------- ResNet-18

def _basic_block(b: ProgramBuilder, x: str, name: str, channels: int, stride: int) -> str:
    """Two 3x3 convolutions and a shortcut (a 1x1 projection where the shape changes)."""
    y = b.conv(x, f"{name}_conv1", channels, 3, stride, pad=1)
    y = b.conv(y, f"{name}_conv2", channels, 3, pad=1, relu=False)
    shortcut = x
    if stride != 1 or b.shapes[x][1] != channels:
        shortcut = b.conv(x, f"{name}_down", channels, 1, stride, relu=False)
    b.op("add", y, y, shortcut, note="residual connection")
    return b.op("relu", y, y)


def _resnet18(b: ProgramBuilder, batch, resolution, width, classes) -> list[str]:
    x = _images(b, batch, resolution)
    b.section("stem: conv 7x7/2 + bias + ReLU, max pool 3/2")
    x = b.conv(x, "conv1", width, 7, stride=2, pad=3)
    x = b.pool("maxpool", x, "pool1", 3, 2, pad=1)
    for stage in range(1, 5):
        channels = width * 2 ** (stage - 1)
        b.section(f"layer{stage}: 2 basic blocks of {channels} channels")
        for block in range(1, 3):
            stride = 2 if stage > 1 and block == 1 else 1
            x = _basic_block(b, x, f"layer{stage}_{block}", channels, stride)
    b.section("global average pool, fully connected classifier")
    x = b.pool("avgpool", x, "pool5", b.shapes[x][2], 1)
    _head(b, x, (), classes)
    return [f"ResNet-18 inference: conv 7x7/2, max pool, 8 basic blocks with residual additions, "
            f"global average pool, fully connected; {_images_of(batch, resolution)}, "
            f"{classes} classes.",
            "Batch normalization is folded into each convolution's weights and bias (its "
            "inference form)."]


RESNET18 = Workload(
    "resnet18", "ResNet-18: 7x7 stem, 8 basic blocks with residual additions, global average pool",
    {"batch": Param(1, "images per run"),
     "resolution": Param(224, "image height and width", minimum=32),
     "width": Param(64, "channels of the stem and layer1 (then x2, x4, x8)"),
     "classes": Param(1000, "output classes")},
    _resnet18, dtype="f16")


# ---------------------------------------------------------------- AlexNet

def _lrn(b: ProgramBuilder, x: str, name: str) -> str:
    y = b.tensor(name, b.shapes[x])
    return b.op("lrn", y, x, size=5, alpha=0.0001, beta=0.75, k=2.0)


def _alexnet(b: ProgramBuilder, batch, resolution, width, fc, classes) -> list[str]:
    x = _images(b, batch, resolution)
    b.section("conv1 11x11/4 + ReLU, LRN, overlapping max pool 3/2")
    x = b.conv(x, "conv1", width, 11, stride=4, pad=2)
    x = b.pool("maxpool", _lrn(b, x, "norm1"), "pool1", 3, 2)
    b.section("conv2 5x5 in 2 groups + ReLU, LRN, max pool 3/2")
    x = b.conv(x, "conv2", width * 8 // 3, 5, pad=2, groups=2)
    x = b.pool("maxpool", _lrn(b, x, "norm2"), "pool2", 3, 2)
    b.section("conv3 3x3 (both groups' inputs), conv4 and conv5 3x3 in 2 groups, max pool 3/2")
    x = b.conv(x, "conv3", width * 4, 3, pad=1)
    x = b.conv(x, "conv4", width * 4, 3, pad=1, groups=2)
    x = b.conv(x, "conv5", width * 8 // 3, 3, pad=1, groups=2)
    x = b.pool("maxpool", x, "pool5", 3, 2)
    b.section("classifier: fc6, fc7 with ReLU (dropout is the identity at inference), fc8")
    _head(b, x, (fc, fc), classes)
    return [f"AlexNet inference (Krizhevsky, Sutskever and Hinton, 2012): 5 convolutions, conv2/4/5 in 2 groups, "
            f"local response normalization, overlapping max pooling, 3 fully connected layers; "
            f"{_images_of(batch, resolution)}, {classes} classes."]


ALEXNET = Workload(
    "alexnet", "AlexNet: grouped convolutions, LRN, overlapping max pooling, 3 fully connected layers",
    {"batch": Param(1, "images per run"),
     "resolution": Param(224, "image height and width", minimum=63),
     "width": Param(96, "channels of conv1 (conv2, conv5: 8/3 of it; conv3, conv4: 4 times)",
                    multiple_of=6),
     "fc": Param(4096, "units of the hidden fully connected layers fc6 and fc7"),
     "classes": Param(1000, "output classes")},
    _alexnet, dtype="f16")
