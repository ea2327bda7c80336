"""Traces a viewer draws right: no two slices of one thread overlap (Perfetto misdraws slices
that overlap without nesting), in exact and in symmetric mode, where a large machine is traced
through one representative node per distinct task."""
import json
from pathlib import Path

import pytest

import fractal

ROOT = Path(__file__).resolve().parents[2]


def slices_by_thread(path):
    trace = json.loads(Path(path).read_text())
    threads: dict = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            threads.setdefault((e["pid"], e["tid"]), []).append((e["args"]["start_cycle"],
                                                                 e["args"]["end_cycle"]))
    return trace, threads


def assert_no_overlap(threads):
    for key, spans in threads.items():
        spans.sort()
        for (a, b), (c, d) in zip(spans, spans[1:]):
            assert b <= c, f"thread {key}: [{a}, {b}) overlaps [{c}, {d})"


@pytest.mark.parametrize("exact", [True, False])
def test_no_two_slices_of_a_thread_overlap(tmp_path, exact):
    path = tmp_path / "t.json"
    report = fractal.run(ROOT / "programs" / "cnn.fasm", "tiny", functional=False, exact=exact,
                         trace=path)
    trace, threads = slices_by_thread(path)
    assert_no_overlap(threads)
    ends = [d for spans in threads.values() for _, d in spans]
    assert max(ends) == report.cycles          # the root's last slice ends the run
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert any(n.endswith("#2") for n in names)    # loads of pieces in flight got a second thread
    assert any(n.startswith("node r") for n in names) != exact


def test_a_symmetric_trace_of_65536_leaves(tmp_path):
    m = fractal.build_machine("f1", depth=4, fanout=16)
    assert m.leaves == 65_536
    path = tmp_path / "big.json"
    report = fractal.run(ROOT / "programs" / "mlp.fasm", m, functional=False, trace=path)
    trace, threads = slices_by_thread(path)
    assert_no_overlap(threads)
    assert {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"} == set(range(m.depth + 1))
    assert max(d for spans in threads.values() for _, d in spans) == report.cycles


def test_counter_tracks_of_the_port_and_the_bytes_in_flight(tmp_path):
    """Each split node has a "port busy" counter (0 or 1: one transfer holds the port at a time)
    and a "bytes in flight" counter: every piece's load bytes, from its first byte loaded until
    its buffer is given back. At tiny's root, the port counter's area is the port's busy time of
    the report, and the bytes in flight never exceed what the four leaves' 4 KiB memories hold.
    Both end at 0."""
    path = tmp_path / "t.json"
    report = fractal.run(ROOT / "programs" / "cnn.fasm", "tiny", functional=False, exact=True,
                         trace=path)
    series: dict = {}
    for e in json.loads(path.read_text())["traceEvents"]:
        if e["ph"] == "C":
            (key, value), = e["args"].items()
            series.setdefault(e["name"], []).append((round(e["ts"] * 1e3), value))  # cycles
    port, held = series["node 0 port busy"], series["node 0 bytes in flight"]
    assert {v for _, v in port} == {0, 1} and port[-1][1] == 0
    area = sum((b - a) * v for (a, v), (b, _) in zip(port, port[1:]))
    assert area == round(report.levels[0]["busy"]["port"] * report.cycles)
    assert all(0 <= v <= 4 * 4096 for _, v in held) and held[-1][1] == 0
    assert max(v for _, v in held) > 0
