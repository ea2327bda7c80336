"""Kernel-launch latency through PyTorch (docs/baseline.md, "Launch overhead"): a chain of small
dependent element-wise ops run eagerly (each op dispatched from Python and launched on its own,
the stream queued asynchronously), eagerly with a device synchronization after each op (what
timing every instruction on its own sees, as `fractal baseline measure` does), and captured once
as a CUDA graph and replayed. Prints JSON. Needs PyTorch with CUDA."""
import json
import time

import torch


def per_op(fn, chain, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / chain)
    return best * 1e6


def main(chain=2000):
    x = torch.zeros(1024, device="cuda")

    def eager():
        for _ in range(chain):
            x.mul_(0.999)

    def eager_sync():
        for _ in range(chain):
            x.mul_(0.999)
            torch.cuda.synchronize()

    eager()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        eager()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()
    g.replay()
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "cuda": torch.version.cuda, "chain": chain,
                      "eager_us": per_op(eager, chain), "eager_sync_each_us": per_op(eager_sync, chain),
                      "graph_us": per_op(g.replay, chain)}))


if __name__ == "__main__":
    main()
