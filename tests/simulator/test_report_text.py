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


OVERFLOW = """tensor x : f16[4, 8] input
tensor w : f16[8, 4] param
tensor r : f16[4, 8]
tensor y : f16[4, 4]
tensor z : f16[4, 4] output
relu r, x
matmul y, r, w
sub z, y, y
"""


def test_a_run_says_which_instruction_first_gave_nan_or_inf():
    # 8 products of 100 x 100 sum to 80,000, beyond f16's 65,504: y is inf, and z = inf - inf
    feeds = {"x": np.full((4, 8), 100, np.float16), "w": np.full((8, 4), 100, np.float16)}
    report = fractal.run(fractal.load_program(OVERFLOW), "tiny", inputs=feeds)
    assert np.isnan(report.outputs["z"]).all()
    assert report.first_nonfinite == {"line": 7, "instruction": "matmul y, r, w"}
    out = report.to_json()
    assert out["outputs"]["z"]["nan"] == 16 and out["outputs"]["z"]["inf"] == 0
    assert out["first_nonfinite"]["line"] == 7
    text = report.text()
    assert "z holds 16 NaN and 0 infinite values of 16" in text
    assert "line 7, 'matmul y, r, w'" in text


def test_a_fed_nan_is_named_as_the_source_and_a_finite_run_has_no_note():
    x = np.ones((4, 8), np.float16)
    x[1, 2] = np.nan
    report = fractal.run(fractal.load_program(OVERFLOW), "tiny",
                         inputs={"x": x, "w": np.ones((8, 4), np.float16)})
    assert report.first_nonfinite == {"input": "x"}
    assert "the fed tensor x holds NaN or infinite values" in report.text()
    finite = fractal.run(fractal.load_program(OVERFLOW), "tiny",
                         inputs={"x": np.ones((4, 8), np.float16), "w": np.ones((8, 4), np.float16)})
    assert finite.first_nonfinite is None and "note:" not in finite.text()
    assert finite.to_json()["outputs"]["z"]["nan"] == 0


def test_the_reference_run_names_the_same_instruction():
    from fractal import api
    feeds = {"x": np.full((4, 8), 100, np.float16), "w": np.full((8, 4), 100, np.float16)}
    res = api.reference(fractal.load_program(OVERFLOW), inputs=feeds)
    assert res.first_nonfinite == {"line": 7, "instruction": "matmul y, r, w"}
    out = res.to_json()
    assert out["outputs"]["z"]["nan"] == 16 and out["first_nonfinite"]["line"] == 7
