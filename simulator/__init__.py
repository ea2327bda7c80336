"""The fractal machine simulator: leaf compute kernels and the machine model."""
