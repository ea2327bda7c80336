"""Golden decomposition plans: the `fractal compile` listing of five shipped programs on three
machines, and a JSON digest of every distinct task of every plan (the listing shows at most four
per level): its cuts, pieces, bytes, reduction ops and the compiler's cost estimate.

A change to the split search, the cost model or the piece schedule shows up here as a diff of
tests/golden/data/plans/; rewrite the files with `--update-golden` once it is reviewed.
"""
import io
import json
from functools import lru_cache
from pathlib import Path

import pytest

import fractal
from compiler import plan_json, plan_text
from compiler.plan import level_counts

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = ["mlp", "cnn", "knn", "topk", "conv3d"]
MACHINES = {"tiny": ("tiny", None, None), "f1": ("f1", None, None),
            "tiny-d3f3x5x7": ("tiny", 3, (3, 5, 7))}


@lru_cache(maxsize=None)
def machine(key):
    name, depth, fanout = MACHINES[key]
    return fractal.build_machine(name, depth=depth, fanout=fanout)


def relative(text: str) -> str:
    """Program paths as `fractal compile` prints them when run from the repository root."""
    return text.replace(f"{REPO}/", "")


def digest(plan) -> str:
    """Per instruction: the per-level totals, then every distinct task a level receives, one
    JSON object per line."""
    listing = plan_json(plan)
    lines = ["{", f' "program": {json.dumps(relative(listing["program"]))},',
             f' "machine": {json.dumps(listing["machine"])},', ' "instructions": [']
    rows = []
    for ins, root, row in zip(plan.program.instructions, plan.roots, listing["instructions"]):
        levels = [[lv["level"], lv["bytes_in"], lv["bytes_out"], lv["reduction_ops"],
                   lv["local_bytes"]] for lv in row["levels"]]
        tasks = []
        for (task, level), count in level_counts(plan, (root,)).items():
            node = plan.node(task, level)
            tasks.append(json.dumps({
                "level": level, "count": count, "kind": node.kind,
                "receives": task.text(ins.operands),
                "cuts": [s.text() for s in node.splits if s.pieces * s.ways > 1],
                "pieces": node.pieces, "busy": node.busy, "bytes_down": node.bytes_down,
                "bytes_up": node.bytes_up, "local_bytes": node.local_bytes,
                "reduction_ops": node.reduction_ops,
                "child_reduction_ops": node.child_reduction_ops,
                "estimate": f"{node.est_cycles:.9g}"}))
        rows.append("  {" + f'"line": {row["line"]}, "text": {json.dumps(row["text"])}, '
                    f'"ops": {row["ops"]}, "leaf_ops": {row["leaf_ops"]},\n'
                    f'   "levels [level, bytes_in, bytes_out, reduction_ops, local_bytes]": '
                    f'{json.dumps(levels)},\n   "tasks": [\n    '
                    + ",\n    ".join(tasks) + "]}")
    lines.append(",\n".join(rows))
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("key", MACHINES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_plan_listing_and_digest(name, key, golden):
    plan = fractal.compile(REPO / "programs" / f"{name}.fasm", machine(key))
    golden(f"plans/{key}/{name}.txt", relative(plan_text(plan)) + "\n")
    text = digest(plan)
    parsed = json.loads(text)
    assert len(parsed["instructions"]) == len(plan.roots)
    golden(f"plans/{key}/{name}.json", text)


def test_the_listing_is_what_fractal_compile_prints(monkeypatch):
    """The goldens above use the library's listing; the command prints exactly it."""
    from fractal.cli import main as cli_main
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    assert cli_main(["compile", "programs/knn.fasm", "--machine", "tiny", "--depth", "3",
                     "--fanout", "3x5x7"], out) == 0
    plan = fractal.compile(REPO / "programs" / "knn.fasm", machine("tiny-d3f3x5x7"))
    assert out.getvalue() == relative(plan_text(plan)) + "\n"
