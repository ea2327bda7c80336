"""The energy breakdown of a run on a hand-built machine, derived by hand from the bytes each
level moves and the machine's pJ per byte and per op (docs/simulator.md, section 5)."""
from pathlib import Path

import pytest

import fractal

MACHINES = Path(__file__).resolve().parent / "machines"
PJ = 1e-12

PROGRAM = """\
tensor a : f32[1, 200] input
tensor b : f32[200, 1] param
tensor c : f32[1, 1]
tensor f : f32[1] output
tensor x : f32[1, 96] input
tensor y : f32[1, 96] output
matmul c, a, b
reshape f, c
sort y, x
"""


def test_energy_breakdown_by_hand():
    """Three instructions on `keep` (tests/golden/machines/keep.toml): root memory 3 pJ/B,
    static 0.5 W; two leaves with memory 0.5 pJ/B, link 2 pJ/B, static 0.25 W each, 0.25 pJ
    per mac op, 0.75 per compare, 1.5 per element-wise op (also every LFU op).

    matmul c[1,1] = a[1,200] b[200,1]: K in 4 serial pieces x 2 leaves (see test_traces): 8 leaf
      tasks of a[1,25] 100 B + b[25,1] 100 B + c 4 B = 204 B and 2 x 25 = 50 mac ops; 1,600 B
      down, 8 B up; 1 LFU op at the root and 6 at the leaves; 125 cycles.
    reshape f, c: the root's DMA reads and writes f: 2 x 4 = 8 B; decode 2 + 8 / 16 -> 1 = 3
      cycles.
    sort y, x[1,96]: 2 serial pieces x 2 leaves (see test_traces): 4 leaf tasks of 24 + 24
      values = 192 B and 24 x 5 = 120 compares; 384 B down, 384 B up; a 192-op merge at the
      root; 148 cycles.

    compute   8 x 50 x 0.25 + 4 x 120 x 0.75                        =  100 +  360 =   460 pJ
    reduction (1 + 6 + 192) x 1.5                                                  = 298.5 pJ
    memory    leaf operands (8 x 204 + 4 x 192) B x 0.5                            = 1,200 pJ
              level 1 <-> root: (1,600 + 8 + 384 + 384) B x (3 + 0.5)              = 8,316 pJ
              the root's DMA: 8 B x 3                                              =    24 pJ
                                                                         in all      9,540 pJ
    link      level 1: 2,376 B x 2                                                 = 4,752 pJ
    static    (0.5 + 2 x 0.25) W x (125 + 3 + 148) ns                          = 276,000 pJ
    """
    report = fractal.run(PROGRAM, fractal.build_machine(str(MACHINES / "keep.toml")),
                         functional=False)
    assert [row.cycles for row in report.instructions] == [125, 3, 148]
    assert report.traffic_bytes == [0, 2376]
    expected = {"compute": 460 * PJ, "reduction": 298.5 * PJ, "memory": 9540 * PJ,
                "link": 4752 * PJ, "static": 276_000 * PJ}
    assert report.energy_breakdown.keys() == expected.keys()
    for key, joules in expected.items():
        assert report.energy_breakdown[key] == pytest.approx(joules, rel=1e-12), key
    assert report.energy_joules == pytest.approx(sum(expected.values()), rel=1e-12)
    # each instruction's row: its own share, with static power over its own cycles
    rows = [100 + 7 * 1.5 + 8 * 204 * 0.5 + 1608 * 3.5 + 1608 * 2 + 125_000,
            8 * 3 + 3_000,
            360 + 192 * 1.5 + 4 * 192 * 0.5 + 768 * 3.5 + 768 * 2 + 148_000]
    assert [row.energy_joules for row in report.instructions] == [
        pytest.approx(pj * PJ, rel=1e-12) for pj in rows]
