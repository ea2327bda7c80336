"""A small space on `tiny` that every explorer test searches: two workloads, a grid of 16 points
whose runs take milliseconds, some of them infeasible in each way."""
import dataclasses
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MATMUL = """\
tensor a : f32[48, 96] input
tensor w : f32[96, 40] param
tensor y : f32[48, 40] output
matmul y, a, w
"""

SPEC = """\
machine = "tiny"

[[workload]]
program = "logreg.fasm"

[[workload]]
program = "matmul.fasm"
weight = 2

[vary]
frequency_hz = [0.5e9, 1e9]
fanout = [2, 4, 8]

[vary.level.root]
memory_bandwidth = [8, 64]
memory_bytes = [65536]

[vary.level.leaf]
memory_bytes = [16, 4096]

[constraints]
area_mm2 = 0.6
power_w = 1.5

[search]
objectives = ["latency", "area"]
"""


def folder(tmp_path: Path, spec: str = SPEC) -> Path:
    """A folder holding the spec and its programs."""
    shutil.copy(ROOT / "programs" / "logreg.fasm", tmp_path / "logreg.fasm")
    (tmp_path / "matmul.fasm").write_text(MATMUL)
    (tmp_path / "spec.toml").write_text(spec)
    return tmp_path / "spec.toml"


def machine_at(values: dict):
    """The design point's machine, built here from `tiny` field by field (not by the explorer's
    own `spec.apply`)."""
    from machine import preset
    m = preset("tiny")
    root = dataclasses.replace(m.levels[0], memory_bandwidth=values["level.root.memory_bandwidth"],
                               memory_bytes=values["level.root.memory_bytes"],
                               fanout=values["fanout"])
    leaf = dataclasses.replace(m.levels[1], memory_bytes=values["level.leaf.memory_bytes"])
    return dataclasses.replace(m, frequency_hz=float(values["frequency_hz"]), levels=(root, leaf))
