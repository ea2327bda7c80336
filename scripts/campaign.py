"""The reliability campaign: thousands of generated cases through every `fractal` command.

    python3 scripts/campaign.py --cases 10000 --seed 1 --workers 2

Each case is drawn from tests/fuzz/cases.py by its index and the seed alone (valid programs on
random machines, mutated programs, machine files, data files and arguments, resource-limit
cases, ONNX models from tests/fuzz/onnx_cases.py) or tests/fuzz/exhaust.py (the exhaustion
class: crafted inputs against the resource contract), run in process through `fractal.cli.main`
with its output captured, and checked against every property listed there; every `--json`
output must be strict JSON. Exhaustion cases run in a forked child whose time and peak memory
are measured against the contract. Every 100th case runs again through a real
`python -m fractal.cli` subprocess. The results are written to docs/reliability.md (or --out).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz.cases import KINDS as CASE_KINDS, check_case, make_case, run_case  # noqa: E402
from tests.fuzz.exhaust import (CONTRACT_BYTES, CONTRACT_SECONDS, contract_problems,  # noqa: E402
                                exhaust_case, run_contract, strict_json_problem)

KINDS = CASE_KINDS + ("exhaust",)
#: share of each kind in the campaign
WEIGHTS = {"valid": 0.11, "program": 0.11, "machine": 0.12, "data": 0.11, "args": 0.11,
           "files": 0.08, "limits": 0.08, "mapping": 0.06, "store": 0.03, "explore": 0.03,
           "onnx": 0.04, "exhaust": 0.12}
REAL_EVERY = 100


def kind_of(seed: int, index: int) -> str:
    rng = np.random.default_rng([seed, 1, index])     # a stream apart from the case's
    return str(rng.choice(list(WEIGHTS), p=list(WEIGHTS.values())))


def one(job) -> dict:
    seed, index, scratch = job
    kind = kind_of(seed, index)
    rng = np.random.default_rng([seed, 0, index])
    try:
        case = exhaust_case(rng) if kind == "exhaust" else make_case(rng, kind)
    except Exception as e:          # a generator bug: counted, never hidden
        return {"index": index, "kind": kind, "detail": "generator", "status": None,
                "problems": [f"generator raised {type(e).__name__}: {e}"], "real": False,
                "seconds": 0.0, "argv": []}
    real = index % REAL_EVERY == 0 and kind != "exhaust"
    peak = None
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        if kind == "exhaust":
            outcome, peak = run_contract(case, Path(d))
            problems = check_case(case, outcome) + contract_problems(case, outcome, peak)
        else:
            outcome = run_case(case, Path(d), real=real)
            problems = check_case(case, outcome)
            bad = strict_json_problem(case.argv, outcome.status, outcome.stdout)
            problems += [bad] if bad else []
    return {"index": index, "kind": kind, "detail": case.detail.split(":")[0],
            "status": outcome.status, "problems": problems, "real": real,
            "seconds": outcome.seconds, "argv": case.argv, "peak": peak,
            "stderr": outcome.stderr[-400:] if problems else ""}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "docs" / "reliability.md"))
    args = ap.parse_args(argv)
    os.environ.pop("FRACTAL_DEBUG", None)
    scratch = tempfile.mkdtemp(prefix="fractal-campaign-")
    jobs = [(args.seed, i, scratch) for i in range(args.cases)]
    start = time.time()
    results = []
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.workers, maxtasksperchild=500) as pool:
        for n, r in enumerate(pool.imap_unordered(one, jobs, chunksize=4), 1):
            results.append(r)
            if r["problems"]:
                print(f"case {r['index']} ({r['kind']}): {r['problems']}", flush=True)
            if n % 250 == 0:
                print(f"{n}/{args.cases} cases, {time.time() - start:.0f} s", flush=True)
    results.sort(key=lambda r: r["index"])
    Path(args.out).write_text(report(results, args, time.time() - start))
    failures = sum(1 for r in results if r["problems"])
    print(f"{len(results)} cases, {failures} failing; written to {args.out}")
    return 1 if failures else 0


def report(results, args, seconds) -> str:
    by_kind = Counter(r["kind"] for r in results)
    status = defaultdict(Counter)
    details = defaultdict(Counter)
    failing = Counter()
    for r in results:
        status[r["kind"]][r["status"]] += 1
        details[r["kind"]][r["detail"]] += 1
        if r["problems"]:
            failing[r["kind"]] += 1
    real = sum(r["real"] for r in results)
    real_failing = sum(1 for r in results if r["real"] and r["problems"])
    slowest = max(results, key=lambda r: r["seconds"])
    lines: list[str] = [
        "## Latest campaign",
        "",
        f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- host: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {args.workers} worker(s)",
        f"- cases: {len(results):,} in {seconds / 60:.1f} minutes (seed {args.seed}); "
        f"{real} of them also through a real subprocess",
        f"- reproduce: `python3 scripts/campaign.py --cases {args.cases} --seed {args.seed} "
        f"--workers {args.workers}`",
        f"- slowest case: {slowest['seconds']:.1f} s (`fractal {' '.join(slowest['argv'])[:100]}`)",
    ]
    exhaust = [r for r in results if r["kind"] == "exhaust"]
    if exhaust:
        slow = max(exhaust, key=lambda r: r["seconds"])
        big = max(exhaust, key=lambda r: r["peak"] or 0)
        over = sum(1 for r in exhaust if any(p.startswith("contract") for p in r["problems"]))
        lines += [
            f"- exhaustion cases: {len(exhaust):,}, each in a forked child against the contract "
            f"({CONTRACT_SECONDS} s, {CONTRACT_BYTES // 2**20:,} MiB above the process's own "
            f"memory); {over} over it",
            f"- slowest exhaustion case: {slow['seconds']:.2f} s ({slow['detail']}: "
            f"`fractal {' '.join(map(str, slow['argv']))[:80]}`)",
            f"- most memory of an exhaustion case: {(big['peak'] or 0) / 2**20:,.0f} MiB "
            f"({big['detail']}: `fractal {' '.join(map(str, big['argv']))[:80]}`)",
        ]
    strict = sum(1 for r in results for p in r["problems"] if p.startswith("not strict JSON"))
    json_cases = sum(1 for r in results if "--json" in r["argv"] and r["status"] == 0)
    lines += [
        f"- strict JSON: {json_cases:,} `--json` outputs parsed with a strict parser, "
        f"{strict} failing",
        "",
        "| kind | cases | exit 0 | exit 2 | other | failing |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for k in KINDS:
        s = status[k]
        other = by_kind[k] - s[0] - s[2]
        lines.append(f"| {k} | {by_kind[k]:,} | {s[0]:,} | {s[2]:,} | {other:,} | {failing[k]:,} |")
    total_fail = sum(failing.values())
    lines += [f"| all | {len(results):,} | {sum(s[0] for s in status.values()):,} | "
              f"{sum(s[2] for s in status.values()):,} | "
              f"{len(results) - sum(s[0] + s[2] for s in status.values()):,} | {total_fail:,} |",
              "", f"Subprocess sample: {real} cases, {real_failing} failing.", "",
              "Mutations and generators tried, per kind:", ""]
    for k in KINDS:
        top = ", ".join(f"{d} {n}" for d, n in sorted(details[k].items(), key=lambda x: -x[1]))
        lines.append(f"- {k}: {top}")
    if total_fail:
        lines += ["", "Failing cases (first 40):", ""]
        for r in [r for r in results if r["problems"]][:40]:
            lines.append(f"- case {r['index']} ({r['kind']}, {r['detail']}): `fractal "
                         f"{' '.join(map(str, r['argv']))[:120]}`: {'; '.join(r['problems'])[:300]}")
    text = (ROOT / "docs" / "reliability.md").read_text() if (ROOT / "docs" / "reliability.md").exists() else ""
    head = text.split("## Latest campaign")[0].rstrip() + "\n\n" if text else "# Reliability\n\n"
    return head + "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
