"""The text report a user reads: its outputs, and energy efficiency that small runs do not round
to zero."""
import re

import numpy as np

import fractal

SMALL = "tensor x : f32[4] input\ntensor y : f32[4] output\nrelu y, x\n"


def test_functional_text_report_lists_every_output_with_its_statistics():
    report = fractal.run(fractal.load_program(__import__("pathlib").Path(__file__).resolve()
                                              .parents[2] / "programs" / "mlp.fasm"), "tiny", seed=2)
    text = report.text()
    for name, v in report.outputs.items():
        line = next(l for l in text.splitlines() if l.split()[:1] == [name])
        got = [float(x) for x in line.split()[-3:]]
        want = [v.min(), v.max(), v.mean(dtype=np.float64)]
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert f"[{', '.join(map(str, v.shape))}]" in line


def test_a_small_run_shows_a_nonzero_efficiency():
    report = fractal.run(SMALL, "tiny", functional=False)
    m = re.search(r"\(([0-9.e+-]+) Tops/J", report.text())
    assert m and float(m.group(1)) > 0
    assert abs(float(m.group(1)) - report.ops_per_joule / 1e12) <= 1e-3 * report.ops_per_joule / 1e12
    assert "output" not in report.text().split("instruction")[-1]     # timing only: no outputs
