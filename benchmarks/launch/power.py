"""GPU board power while idle and while a chain of small kernels runs (docs/baseline.md, "Energy"):
the roofline charges launch time at idle power, and this measures what a launch-bound chain
draws. Phases of `--seconds` each: no CUDA context; a context and no work; small dependent
kernels launched eagerly through PyTorch; the same chain replayed as a CUDA graph; large bf16
matrix products (near the board's limit). NVML is sampled every 50 ms. Prints JSON. Needs PyTorch
with CUDA and nvidia-ml-py."""
import json
import sys
import threading
import time

import pynvml


def sample(handle, seconds):
    watts, clocks = [], []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        watts.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
        clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        time.sleep(0.05)
    return {"watts": sum(watts) / len(watts), "watts_max": max(watts),
            "sm_mhz": sum(clocks) / len(clocks), "samples": len(watts)}


def during(handle, seconds, work):
    """Run `work(stop)` in a thread while sampling; the first second is left out (ramp)."""
    stop = threading.Event()
    t = threading.Thread(target=work, args=(stop,))
    t.start()
    time.sleep(1.0)
    result = sample(handle, seconds)
    stop.set()
    t.join()
    return result


def main(seconds=5.0):
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    out = {"device": pynvml.nvmlDeviceGetName(handle),
           "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1e3}
    out["no_context"] = sample(handle, seconds)
    import torch
    x = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    time.sleep(1.0)
    out["context_idle"] = sample(handle, seconds)

    def eager(stop):
        while not stop.is_set():
            for _ in range(1000):
                x.mul_(0.999)
            torch.cuda.synchronize()
    out["eager_small_kernels"] = during(handle, seconds, eager)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(10):
            x.mul_(0.999)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(1000):
            x.mul_(0.999)

    def graphs(stop):
        while not stop.is_set():
            g.replay()
            torch.cuda.synchronize()
    out["graph_small_kernels"] = during(handle, seconds, graphs)

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def matmul(stop):
        while not stop.is_set():
            for _ in range(10):
                a @ a
            torch.cuda.synchronize()
    out["bf16_matmul"] = during(handle, seconds, matmul)
    print(json.dumps(out))


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
