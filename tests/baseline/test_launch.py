"""`--launch eager|graphs`: the launch overhead per kernel, and its sources."""
from pathlib import Path

import pytest

from fractal.baseline import estimate, load_gpu
from fractal.baseline.gpu import GRAPH_LAUNCH_OVERHEAD_S, GPUS, with_launch
from fractal.cli import main

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "programs/mlp.fasm")


def test_graphs_cost_one_graph_launch_per_kernel():
    eager, graphs = (estimate(MLP, "1080ti", launch=m) for m in ("eager", "graphs"))
    kernels = sum(i.kernels for i in eager.instructions)
    gpu = load_gpu("1080ti")
    # hand derivation: only the launch term of each kernel changes
    assert eager.seconds - graphs.seconds == pytest.approx(
        kernels * (gpu.launch_overhead_s - GRAPH_LAUNCH_OVERHEAD_S))
    assert graphs.time_breakdown["launch"] == pytest.approx(kernels * GRAPH_LAUNCH_OVERHEAD_S)
    assert estimate(MLP, "1080ti").seconds == eager.seconds        # eager is the default


def test_every_gpu_file_cites_measured_launch_latencies():
    for name in GPUS:
        source = load_gpu(name).source("launch_overhead_s")
        assert "CUDA Graphs" in source and "benchmarks/launch/" in source


def test_bad_launch_mode_is_located(capsys):
    status = main(["baseline", "estimate", MLP, "--launch", "graph"])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("fractal baseline estimate: error:") and "--launch" in err
    with pytest.raises(Exception, match="launch must be one of eager, graphs"):
        with_launch(load_gpu("v100"), "lazy")


def test_an_estimate_records_how_its_kernels_were_launched():
    program = Path(__file__).resolve().parents[2] / "programs" / "mlp.fasm"
    eager, graphs = (estimate(program, "v100", launch=m).to_json() for m in ("eager", "graphs"))
    assert (eager["launch"], graphs["launch"]) == ("eager", "graphs")
    assert eager["launch_overhead_s"] == load_gpu("v100").launch_overhead_s
    assert graphs["launch_overhead_s"] == GRAPH_LAUNCH_OVERHEAD_S
    assert estimate(program, "v100").to_json()["launch"] == "eager"
