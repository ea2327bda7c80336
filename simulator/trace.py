"""Chrome / Perfetto trace export (JSON trace events) of the node pipelines of a run.

Each level is a process; each node has one thread per pipeline stage, named by the node's path
from the root and the stage ("node 0.2.1 LD"); where slices of one stage overlap (the transfers of
consecutive pieces in flight), the later ones go to further threads ("node 0.2.1 LD #2"), so no
two slices of one thread overlap. Each stage of each piece (ID, LD, EX, AC, WB, RD, or RUN at a
leaf) is a complete event. Each split node also has two counter tracks: "port busy" (1 while
its memory port is held, by a transfer or by its DMA) and "bytes in flight" (the load bytes of its pieces held in its
children's memories, from a piece's first byte loaded to the release of its buffer). An exact run
traces every node; a symmetric run the root and one representative node of each distinct task
("node r3"). Times are in microseconds of simulated time, as the format expects.
"""
from __future__ import annotations

import json
from pathlib import Path

from isa.errors import UserError
from simulator.engine import StageEvent

__all__ = ["trace_json", "write_trace"]


def trace_json(events: list[StageEvent], machine) -> dict:
    us_per_cycle = 1e6 / machine.frequency_hz
    tids: dict[tuple, int] = {}
    out = []
    for lv, level in enumerate(machine.levels):
        out.append({"name": "process_name", "ph": "M", "pid": lv, "tid": 0,
                    "args": {"name": f"level {lv} ({level.name})"}})
    lanes: dict[tuple, list[int]] = {}   # (node, stage) -> end cycle of each of its tracks
    out += _counters([e for e in events if e.value is not None], us_per_cycle)
    for e in sorted((e for e in events if e.value is None),
                    key=lambda e: (e.start, e.node, e.stage, e.end)):
        # one track per stage, and as many as the stage's overlapping slices need (transfers of
        # consecutive pieces overlap on a port): the first whose last slice has ended
        ends = lanes.setdefault((e.node, e.stage), [])
        lane = next((i for i, end in enumerate(ends) if end <= e.start), len(ends))
        if lane == len(ends):
            ends.append(0)
        ends[lane] = e.end
        track = (e.node, e.stage, lane)
        if track not in tids:
            tids[track] = len(tids) + 1
            name = f"node {e.node} {e.stage}" + (f" #{lane + 1}" if lane else "")
            out.append({"name": "thread_name", "ph": "M", "pid": e.level, "tid": tids[track],
                        "args": {"name": name}})
        out.append({"name": e.stage, "cat": e.opcode, "ph": "X", "pid": e.level,
                    "tid": tids[track], "ts": e.start * us_per_cycle,
                    "dur": (e.end - e.start) * us_per_cycle,
                    "args": {"piece": e.piece, "start_cycle": e.start, "end_cycle": e.end}})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"machine": machine.name, "frequency_hz": machine.frequency_hz}}


def _counters(spans, us_per_cycle) -> list[dict]:
    """Counter events ("ph": "C") of each node's counters: the sum of the spans' values at every
    cycle where it changes."""
    steps: dict[tuple, dict[int, int]] = {}
    for e in spans:
        d = steps.setdefault((e.level, e.node, e.stage), {})
        d[e.start] = d.get(e.start, 0) + e.value
        d[e.end] = d.get(e.end, 0) - e.value
    out = []
    for (level, node, name), d in sorted(steps.items()):
        total = 0
        for cycle in sorted(d):
            total += d[cycle]
            out.append({"name": f"node {node} {name}", "ph": "C", "pid": level,
                        "ts": cycle * us_per_cycle, "args": {name: total}})
    return out


def write_trace(events: list[StageEvent], machine, path: str | Path) -> None:
    try:
        Path(path).write_text(json.dumps(trace_json(events, machine), allow_nan=False))
    except OSError as e:
        raise UserError(f"cannot write the trace to {path}: {e.strerror}", "--trace") from None
