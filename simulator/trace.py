"""Chrome / Perfetto trace export (JSON trace events) of the node pipelines of an exact run.

Each level is a process; each node has one thread per pipeline stage, named by the node's path
from the root and the stage ("node 0.2.1 LD"), so that different stages of consecutive pieces,
which overlap, do not share a track (transfers of consecutive pieces may still overlap on the LD
and WB tracks); each stage of each piece (ID, LD, EX, AC, WB, RD, or RUN at a leaf) is a complete
event. Times are in
microseconds of simulated time, as the format expects.
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
    for e in sorted(events, key=lambda e: (e.start, e.node)):
        track = (e.node, e.stage)        # one track per stage: pieces overlap across stages
        if track not in tids:
            tids[track] = len(tids) + 1
            out.append({"name": "thread_name", "ph": "M", "pid": e.level, "tid": tids[track],
                        "args": {"name": f"node {e.node} {e.stage}"}})
        out.append({"name": e.stage, "cat": e.opcode, "ph": "X", "pid": e.level,
                    "tid": tids[track], "ts": e.start * us_per_cycle,
                    "dur": (e.end - e.start) * us_per_cycle,
                    "args": {"piece": e.piece, "start_cycle": e.start, "end_cycle": e.end}})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"machine": machine.name, "frequency_hz": machine.frequency_hz}}


def write_trace(events: list[StageEvent], machine, path: str | Path) -> None:
    try:
        Path(path).write_text(json.dumps(trace_json(events, machine), allow_nan=False))
    except OSError as e:
        raise UserError(f"cannot write the trace to {path}: {e.strerror}", "--trace") from None
