"""The sweep every test of this folder compares with, run once through the real command."""
import pytest

from tests.sweep.sweep_helpers import GRID, N_POINTS, PROGRAMS, fractal


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """An uninterrupted sweep through the real command."""
    out = tmp_path_factory.mktemp("ref") / "results.csv"
    res = fractal("sweep", *PROGRAMS, *GRID, "-o", out, "--workers", "2")
    assert res.returncode == 0, res.stderr
    assert f"{N_POINTS} runs in {out}" in res.stdout
    return out
