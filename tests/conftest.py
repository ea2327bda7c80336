"""Shared test options and fixtures.

`golden(name, text)` compares `text` with the file `tests/golden/data/<name>`. With
`--update-golden`, it writes `text` there instead and the run ends with the list of the files it
created or changed, to be reviewed with `git diff tests/golden/data` before they are committed.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest

GOLDEN_DATA = Path(__file__).resolve().parent / "golden" / "data"
MAX_DIFF_LINES = 200

_UPDATED = pytest.StashKey[list]()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files under tests/golden/data from the current "
                          "results instead of comparing with them")


def pytest_configure(config):
    config.stash[_UPDATED] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    updated = config.stash.get(_UPDATED, [])
    if updated:
        terminalreporter.section("golden files written")
        for how, name in updated:
            terminalreporter.write_line(f"{how}: tests/golden/data/{name}")
        terminalreporter.write_line(f"{len(updated)} golden file(s) written; review them with "
                                    f"`git diff tests/golden/data`")


def _diff(expected: str, got: str, name: str) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(), got.splitlines(),
                                      f"tests/golden/data/{name} (golden)", f"{name} (now)",
                                      lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        lines = lines[:MAX_DIFF_LINES] + [f"... {len(lines) - MAX_DIFF_LINES} more diff lines"]
    return "\n".join(lines)


@pytest.fixture
def golden(request):
    """`golden(name, text)`: `text` must equal tests/golden/data/<name> (or, with
    --update-golden, becomes it)."""
    config = request.config
    update = config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        if not text.endswith("\n"):
            text += "\n"
        path = GOLDEN_DATA / name
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if update:
            if old != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                config.stash[_UPDATED].append(("created" if old is None else "updated", name))
            return
        if old is None:
            pytest.fail(f"golden file tests/golden/data/{name} does not exist; create it with\n"
                        f"    python -m pytest '{request.node.nodeid}' --update-golden\n"
                        f"and review it before committing it", pytrace=False)
        if text != old:
            pytest.fail(f"the result differs from tests/golden/data/{name}. If the change is "
                        f"intended, rewrite the file with --update-golden and review the diff.\n"
                        + _diff(old, text, name), pytrace=False)

    return check
