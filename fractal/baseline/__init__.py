"""The GPU baseline that fractal machines are compared with: sourced GPU descriptions
(`GPUS`, `load_gpu`), a roofline estimate of a program (`estimate`), and a measured baseline that
runs a program with PyTorch (`fractal.baseline.measure`, needs the `gpu` extra)."""
from fractal.baseline.factors import DEFAULT_FACTORS, OP_CLASSES, Factors, load_factors
from fractal.baseline.gpu import GPUS, LAUNCH_MODES, Gpu, load_gpu, with_launch
from fractal.baseline.roofline import (PRECISIONS, BaselineReport, InstructionEstimate, estimate,
                                       program_precision)

__all__ = ["GPUS", "Gpu", "load_gpu", "estimate", "BaselineReport", "InstructionEstimate",
           "PRECISIONS", "Factors", "DEFAULT_FACTORS", "OP_CLASSES", "load_factors",
           "program_precision", "LAUNCH_MODES", "with_launch"]
