#!/bin/sh
# Build and run both launch-latency benchmarks on a CUDA machine; JSON lines on stdout.
set -e
cd "$(dirname "$0")"
nvcc -O2 -o /tmp/launch_latency launch_latency.cu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
for i in 1 2 3; do /tmp/launch_latency; done
for i in 1 2 3; do python3 launch_latency_torch.py; done
