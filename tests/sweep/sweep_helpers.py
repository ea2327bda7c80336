"""The grid the sweep tests share (two small programs on `tiny` machines of depth 1..2 and
fan-out 2, 4, 8, with the V100 baseline) and the real `fractal` command in a subprocess."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [str(ROOT / "programs" / "mlp.fasm"), str(ROOT / "programs" / "elementwise.fasm")]
GRID = ["--machine", "tiny", "--depth", "1..2", "--fanout", "2,4,8", "--gpu", "v100"]
N_POINTS = 2 * 2 * 3


def fractal(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k != "FRACTAL_DEBUG"}
    return subprocess.run([sys.executable, "-m", "fractal.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=120, **kw)


