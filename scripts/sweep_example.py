"""Sweep machine sizes for one program and plot it against a GPU: one `sweep` call, one `plot`.

    python scripts/sweep_example.py                     # mlp on f1, depth 1..3, fan-out 2..16
    python scripts/sweep_example.py --quick             # four small points, a few seconds
    python scripts/sweep_example.py --out /tmp/sweep    # where the CSV and figures go

Writes DIR/mlp_f1.csv (one row per machine size; run it again and finished rows are kept, not
re-run) and DIR/mlp_f1_speedup.png, DIR/mlp_f1_efficiency.png against the V100 baseline. The
`if __name__ == "__main__":` guard is needed: the sweep starts worker processes with spawn.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fractal.plot import plot  # noqa: E402
from fractal.sweep import sweep  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("sweep_example"), help="output folder")
    ap.add_argument("--quick", action="store_true", help="a 2x2 grid instead of 3x4")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    program = os.path.relpath(ROOT / "programs" / "mlp.fasm")
    results = args.out / "mlp_f1.csv"

    rows = sweep([program], machine="f1",
                 depths=[1, 2] if args.quick else [1, 2, 3],
                 fanouts=[2, 4] if args.quick else [2, 4, 8, 16],
                 gpus=["v100"], out=results)

    for kind in ("speedup", "efficiency"):
        print(f"wrote {plot(results, kind, args.out / f'mlp_f1_{kind}.png', gpu='v100')}")
    best = max((r for r in rows if r["error"] is None), key=lambda r: r["speedup_vs_v100"])
    print(f"{len(rows)} machine sizes in {results}; fastest: {best['leaves']:,} leaves "
          f"(depth {best['depth']}, fan-out {best['fanout']}), {best['speedup_vs_v100']:.2f}x "
          f"the V100 at {best['efficiency_vs_v100']:.2f}x its ops/J")


if __name__ == "__main__":
    main()
