"""`fractal reproduce`: the suite against the GPU baselines, ratios beside the paper's."""
import io
import json
import math
import re

import numpy as np
import pytest

import fractal
from fractal import cli
from fractal import reproduce as rp
from fractal.baseline import estimate
from fractal.workloads import generate


def _main(*argv):
    out = io.StringIO()
    return cli.main(list(argv), out), out.getvalue()


def test_rows_are_the_two_simulators_ratios():
    text = generate("logreg")
    rows = rp.compare({"logreg": text})
    assert [(r.machine, r.gpu) for r in rows] == [("f1", "1080ti"), ("f100", "dgx1-v100")]
    for r in rows:
        f = fractal.run(text, r.machine, functional=False)
        g = estimate(text, r.gpu)
        assert r.speedup == pytest.approx(g.seconds / f.seconds)
        assert r.efficiency == pytest.approx((f.ops / f.energy_joules) / (g.ops / g.energy_joules))
        # the explanation's factors multiply back to the ratios
        peak = f.peak_ops_per_second / g.peak_ops_per_second
        assert r.speedup == pytest.approx(peak * r.fractal_utilization / r.gpu_utilization)
        assert r.efficiency == pytest.approx(r.speedup * r.gpu_watts / r.fractal_watts)


def test_geometric_means_and_paper_ratios():
    rows = rp.compare({n: generate(n) for n in ("logreg", "svm_rbf")})
    for c in rp.COMPARISONS:
        s = rp.summary(rows, c)
        mine = [r for r in rows if r.machine == c.machine]
        assert s["speedup"] == pytest.approx(math.prod(r.speedup for r in mine) ** (1 / len(mine)))
        assert s["speedup"] == pytest.approx(s["peak_ratio"] * s["utilization_ratio"])
        assert s["efficiency"] == pytest.approx(np.exp(np.mean(np.log([r.efficiency for r in mine]))))
    assert [(c.paper_speedup, c.paper_efficiency) for c in rp.COMPARISONS] == [(5.14, 11.39),
                                                                               (2.82, 8.37)]


def test_command_writes_the_report_and_figure(tmp_path):
    md = tmp_path / "docs" / "reproduction.md"
    code, text = _main("reproduce", "--programs", "logreg", "gaussian_nb", "-o", str(md))
    assert code == 0
    assert "geometric mean" in text and "paper" in text
    body = md.read_text()
    assert "## Cambricon-F1 vs GTX 1080 Ti" in body and "## Cambricon-F100 vs DGX-1" in body
    assert "| logreg |" in body and "| gaussian_nb |" in body
    folder = tmp_path / "docs" / "reproduction"
    for png in ("cambricon_f.png", "f1_scaling.png", "f100_scaling.png"):
        assert (folder / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(reproduction/{png})" in body
    # the scaling sweep: every machine shape of each comparison, for each program
    rows = (folder / "f1_scaling.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * len(rp.SCALING_DEPTHS) * len(rp.SCALING_FANOUTS)


def test_json_and_other_baseline():
    code, text = _main("reproduce", "--programs", "logreg", "--gpu-f100", "dgx1-p100", "--json")
    assert code == 0
    data = json.loads(text)
    assert {r["gpu"] for r in data["rows"]} == {"1080ti", "dgx1-p100"}
    assert len(data["summaries"]) == 2


@pytest.mark.parametrize("argv", [["--programs", "vgg61"], ["--gpu-f1", "gtx9000"],
                                  ["--batch", "0"]])
def test_bad_arguments_exit_2(argv, capsys):
    code, _ = _main("reproduce", *argv)
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error" in err


CONCLUSION = re.compile(
    r"^- (\S+) vs (\S+): (speed-up|efficiency) \*\*([\d.]+)x\*\*, from ([\d.]+)x to ([\d.]+)x with "
    r"one constant at a time .*?from ([\d.]+)x to ([\d.]+)x with all at once; the paper's "
    r"([\d.]+)x lies (inside|outside) the one-at-a-time range and (inside|outside) the "
    r"all-at-once range\.$", re.M)


def test_the_conclusion_is_true_to_the_tables_beside_it(tmp_path):
    md = tmp_path / "reproduction.md"
    code, _ = _main("reproduce", "--programs", "logreg", "lstm", "--no-scaling", "-o", str(md))
    assert code == 0
    body = md.read_text()
    claims = CONCLUSION.findall(body)
    assert len(claims) == 4                     # two ratios of two comparisons
    sections = body.split("\n## ")
    for machine, gpu, ratio, value, lo, hi, jlo, jhi, paper, inside, joint_inside in claims:
        section = next(s for s in sections if s.startswith("Cambricon-" + machine.upper()))
        column = 0 if ratio == "speed-up" else 1
        geo = re.search(r"\| geometric mean \|.*\| ([\d.]+)x \| ([\d.]+)x \|", section).groups()
        assert geo[column] == value
        one = re.search(r"\| one at a time \|.*\| ([\d.]+)x to ([\d.]+)x \| ([\d.]+)x to ([\d.]+)x \|",
                        section).groups()
        assert (lo, hi) == one[2 * column:2 * column + 2]
        joint = re.search(r"\| all at once \|.*\| ([\d.]+)x to ([\d.]+)x \| ([\d.]+)x to ([\d.]+)x \|",
                          section).groups()
        assert (jlo, jhi) == joint[2 * column:2 * column + 2]
        c = next(c for c in rp.COMPARISONS if c.machine == machine)
        assert float(paper) == (c.paper_speedup if column == 0 else c.paper_efficiency)
        assert float(lo) <= float(value) <= float(hi)
        assert inside == ("inside" if float(lo) <= float(paper) <= float(hi) else "outside")
        assert joint_inside == ("inside" if float(jlo) <= float(paper) <= float(jhi) else "outside")
        assert f"reproduction/{machine}_sensitivity.png" in section
    # the same runs with CUDA-graph launches: the table and the conclusion agree
    for c in rp.COMPARISONS:
        section = next(s for s in sections if s.startswith("Cambricon-" + c.machine.upper()))
        speedup, efficiency = re.search(r"\| graphs \| 1 us \| ([\d.]+)x \| ([\d.]+)x \|",
                                        section).groups()
        assert (f"- {c.machine} vs {c.gpu} with the GPU's kernels replayed as CUDA graphs "
                f"(`--launch graphs`): speed-up {speedup}x, efficiency {efficiency}x") in body
    # the per-class means, the batch table and the area check are there
    assert "| RNN | lstm |" in body and "| classic ML | logreg |" in body
    for batch in rp.BATCHES:
        assert f"| lstm | {batch} |" in body
    assert "## Area" in body and "| f1 vs 1080ti |" in body
