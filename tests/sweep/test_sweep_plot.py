"""`fractal plot`: an image for every kind, the best point per machine size, and every bad CSV
named with its file and column."""
import csv
from pathlib import Path

import pytest

from fractal.cli import main
from fractal.plot import KINDS, _series

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_writes_png_and_svg(kind, reference, tmp_path, capsys):
    for suffix in (".png", ".svg"):
        out = tmp_path / f"fig{suffix}"
        assert main(["plot", str(reference), "--kind", kind, "--gpu", "v100", "-o", str(out)]) == 0
        assert f"{kind} figure written to {out}" in capsys.readouterr().out
        data = out.read_bytes()
        if suffix == ".png":
            assert data.startswith(PNG) and len(data) > 10_000
        else:
            assert b"<svg" in data[:1000] and data.rstrip().endswith(b"</svg>")


def test_the_gpu_is_the_only_one_in_the_file_by_default(reference, tmp_path):
    assert main(["plot", str(reference), "--kind", "speedup", "-o", str(tmp_path / "f.png")]) == 0


def test_a_machine_size_reached_two_ways_plots_the_best(tmp_path):
    # 16 leaves as depth 1 fan-out 16 and as depth 2 fan-out 4; an error row is left out
    rows = [("p.fasm", "f1", "16", "3.0", ""), ("p.fasm", "f1", "16", "5.0", ""),
            ("p.fasm", "f1", "4", "2.0", ""), ("p.fasm", "f1", "64", "9.0", "does not fit"),
            ("q.fasm", "f1", "4", "1.5", "")]
    series = _series([(i + 2, dict(zip(("program", "machine", "leaves", "speedup_vs_v100",
                                        "error"), r))) for i, r in enumerate(rows)],
                     "speedup_vs_v100", tmp_path / "r.csv")
    assert series == {("p.fasm", "f1"): {16: 5.0, 4: 2.0}, ("q.fasm", "f1"): {4: 1.5}}


def write_csv(path: Path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def plot_error(capsys, *argv) -> str:
    assert main(["plot", *map(str, argv)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_bad_csvs_are_named_with_file_and_column(reference, tmp_path, capsys):
    fig = tmp_path / "fig.png"
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert f"{empty}: error: the file is empty" in plot_error(capsys, empty, "--kind", "scaling",
                                                              "-o", fig)
    missing = tmp_path / "missing.csv"
    assert f"{missing}: error: cannot read the sweep results" in plot_error(
        capsys, missing, "--kind", "scaling", "-o", fig)
    no_leaves = tmp_path / "no_leaves.csv"
    write_csv(no_leaves, ["program", "machine", "utilization"], [["p", "f1", "0.5"]])
    assert f"{no_leaves}: error: no column 'leaves'" in plot_error(
        capsys, no_leaves, "--kind", "utilization", "-o", fig)
    err = plot_error(capsys, reference, "--kind", "efficiency", "--gpu", "h100", "-o", fig)
    assert f"{reference}: error: no column 'speedup_vs_h100'" in err and "GPUs in the file: v100" in err
    all_failed = tmp_path / "failed.csv"
    write_csv(all_failed, ["program", "machine", "leaves", "speedup_vs_v100", "error"],
              [["p", "f1", "4", "", "does not fit"]])
    assert f"{all_failed}: error: no rows with a value in column 'speedup_vs_v100'" in plot_error(
        capsys, all_failed, "--kind", "speedup", "-o", fig)
    bad_number = tmp_path / "bad.csv"
    write_csv(bad_number, ["program", "machine", "leaves", "utilization", "error"],
              [["p", "f1", "4", "0.5", ""], ["p", "f1", "8", "lots", ""]])
    assert f"{bad_number}:3: error: column 'utilization' holds 'lots', not a number" in plot_error(
        capsys, bad_number, "--kind", "utilization", "-o", fig)
    no_gpu = tmp_path / "no_gpu.csv"
    write_csv(no_gpu, ["program", "machine", "leaves", "utilization"], [["p", "f1", "4", "0.5"]])
    assert "the sweep was run without --gpu" in plot_error(capsys, no_gpu, "--kind", "speedup",
                                                            "-o", fig)
    assert not fig.exists()


def test_bad_outputs(reference, tmp_path, capsys):
    assert "name it .png, .svg or .pdf" in plot_error(capsys, reference, "--kind", "scaling",
                                                      "-o", tmp_path / "fig.jpgg")
    out = tmp_path / "nowhere" / "fig.png"
    assert f"-o {out}: error: cannot write the figure" in plot_error(
        capsys, reference, "--kind", "scaling", "-o", out)
    assert "invalid choice: 'speed'" in plot_error(capsys, reference, "--kind", "speed", "-o",
                                                   tmp_path / "f.png")
