"""scripts/llm_study.py (docs/llm.md) from one command, on its quick points (two Llama 3 8B
blocks): its table, figures and summary, and what they show: a decode step is bound by memory
traffic on f100 and on every GPU, its time hardly moves with the batch, and it streams at least
the weights."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_llm_study_runs_from_one_command(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import llm_study
    assert llm_study.main(["--quick", "--out", str(tmp_path)]) == 0
    for name in ("runs.csv", "tokens.png", "decode.png", "summary.md"):
        assert (tmp_path / name).stat().st_size > 0
    with open(tmp_path / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    at = {(r["phase"], int(r["batch"]), int(r["context"]), r["system"]): r for r in rows}
    for system in llm_study.SYSTEMS:
        one, four = at["decode", 1, 256, system], at["decode", 4, 256, system]
        assert one["bound"] in ("bandwidth", "traffic into chip"), (system, one["bound"])
        # four sequences read the same weights: the step takes barely longer, 4x the tokens
        assert float(four["seconds"]) < 1.1 * float(one["seconds"])
        assert float(four["tokens_per_s"]) > 3.6 * float(one["tokens_per_s"])
        # a decode step reads every weight at least once: no faster than the bytes allow
        # (on f100: interleaved over its 8 chips, 7/8 of the bytes cross the chips' links of
        # 150 GB/s each, machine/presets/f100.toml)
        bandwidth = (8 * 150e9 * 8 / 7 if system == "f100"
                     else llm_study.load_gpu(system).memory_bandwidth)
        assert float(one["seconds"]) >= int(one["param_bytes"]) / bandwidth
        prefill = at["prefill", 1, 256, system]
        assert float(prefill["tokens_per_s"]) > 50 * float(one["tokens_per_s"])
    f100 = at["decode", 1, 256, "f100"]
    assert float(f100["fraction_of_bound"]) > 0.5 and float(f100["bound_share"]) > 0.8
    summary = (tmp_path / "summary.md").read_text()
    assert "| Llama 3 8B, 2 blocks | decode | 1 | h100 |" in summary
    assert "| decode | graphs | fused |" in summary
