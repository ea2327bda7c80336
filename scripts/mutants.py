#!/usr/bin/env python3
"""Mutation check of the golden tests (tests/golden/): every mutation below must make them fail.

For each mutation, the repository is copied to a temporary directory (without .git), the
mutation's text replacement is applied there, and `python -m pytest tests/golden -x -q` runs in
the copy with PYTHONPATH set to it, after checking that the copy's packages are the ones
imported. A mutation is *killed* when the tests fail and *survives* when they pass. The unmutated
copy runs first and must pass.

    python scripts/mutants.py                  # every mutation
    python scripts/mutants.py -k energy        # those whose description contains "energy"
    python scripts/mutants.py --jobs 2 -v      # two at a time, with the failing tests' output
    python scripts/mutants.py --tally          # run every test (no -x): failures per test file

Exit status: 0 every mutation killed, 1 some mutation survived, 2 a mutation's old text is not
found exactly once (the source changed: update MUTATIONS) or the unmutated tests fail.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The tiny preset: the first of these paths that exists in the repository.
TINY = ("machine/presets/tiny.toml", "fractal/machines/tiny.toml")

# (description, file, old text, new text). `file` is a path relative to the repository root, or
# a tuple of candidate paths (the first that exists is used). The old text must occur exactly
# once in the file. Consecutive rows with the same description form one mutation, their edits
# applied in order.
MUTATIONS = [
    ("energy: link energy doubled", "simulator/energy.py",
     'levels[s.level]["link"] += moved * child.link_pj_per_byte * PJ',
     'levels[s.level]["link"] += 2 * moved * child.link_pj_per_byte * PJ'),
    ("energy: the parent's memory energy of a transfer dropped", "simulator/energy.py",
     'levels[s.level - 1]["memory"] += moved * parent.memory_pj_per_byte * PJ',
     'levels[s.level - 1]["memory"] += 0.0'),
    ("compiler: no extra serial cuts (EXTRA_CUTS = (0, 0))", "compiler/decompose.py",
     "EXTRA_CUTS = (4, 3)", "EXTRA_CUTS = (0, 0)"),
    # the cost model's per-piece time (Schedule.estimate; formerly _CostModel.cost)
    ("compiler: no memory-port term in the cost model's per-piece time", "compiler/schedule.py",
     "per_piece = max(st.load_port + st.store_port, *links, execute, st.reduce,",
     "per_piece = max(*links, execute, st.reduce,"),
    # the cost tuple ranks by bytes first; the plan still records and prints the estimated cycles
    ("compiler: splits ranked by bytes moved before cycles", "compiler/schedule.py",
     "return (node.decode_cycles + cycles + fill + final, moved + self.final_reduce_ops,",
     "return (moved + self.final_reduce_ops, node.decode_cycles + cycles + fill + final,"),
    ("compiler: splits ranked by bytes moved before cycles", "compiler/decompose.py",
     'f"pieces in flight); chose {cut}: estimated {cost[0]:,.0f} cycles, "',
     'f"pieces in flight); chose {cut}: estimated {cost[1]:,.0f} cycles, "'),
    ("compiler: splits ranked by bytes moved before cycles", "compiler/decompose.py",
     "est_cycles=cost[0],", "est_cycles=cost[1],"),
    ("engine: no link latency on transfers", ("compiler/pipeline.py", "simulator/engine.py"),
     "        yield self.env.timeout(latency)\n",
     "        yield self.env.timeout(0)\n"),
    ("tiny: the leaf level's link_pj_per_byte doubled", TINY,
     "link_pj_per_byte = 2.0", "link_pj_per_byte = 4.0"),
    ("tiny: the root's memory_pj_per_byte doubled", TINY,
     "memory_pj_per_byte = 20.0", "memory_pj_per_byte = 40.0"),
    ("tiny: the leaf link_latency plus 1", TINY,
     "link_latency = 10\n", "link_latency = 11\n"),
    ("tiny: the root's memory_bandwidth doubled", TINY,
     "memory_bandwidth = 64 ", "memory_bandwidth = 128 "),
]

IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".hypothesis",
                                "*.egg-info", "*.pyc")
PYTEST = ["-m", "pytest", "tests/golden", "-x", "-q", "-p", "no:cacheprovider"]

# Run in the copy: every package of ours must be imported from it.
IMPORT_CHECK = """
import importlib, os, sys
root = os.path.realpath(sys.argv[1])
names = [n for n in sys.argv[2:]]
bad = []
for name in names:
    mod = importlib.import_module(name)
    path = os.path.realpath(mod.__file__)
    if not path.startswith(root + os.sep):
        bad.append(f"{name} from {path}")
import fractal
m = fractal.build_machine("tiny")     # a preset read through the copy's loader
if bad:
    sys.exit("imported from outside the copy: " + "; ".join(bad))
"""


class Stale(Exception):
    """A mutation whose old text is not in the source exactly once."""


def resolve(repo: Path, file) -> str:
    candidates = (file,) if isinstance(file, str) else file
    for rel in candidates:
        if (repo / rel).is_file():
            return rel
    raise Stale(f"none of {', '.join(candidates)} exists")


def grouped(rows) -> list[tuple[str, list]]:
    """The mutations: (description, [(file, old, new), ...]), consecutive rows with one
    description together."""
    out: list = []
    for desc, file, old, new in rows:
        if out and out[-1][0] == desc:
            out[-1][1].append((file, old, new))
        else:
            out.append((desc, [(file, old, new)]))
    return out


def apply(root: Path, edits, write: bool) -> None:
    """Apply the edits to the files under `root` (only check them unless `write`)."""
    texts: dict = {}
    for file, old, new in edits:
        rel = resolve(root, file)
        text = texts.get(rel)
        if text is None:
            text = (root / rel).read_text(encoding="utf-8")
        n = text.count(old)
        if n != 1:
            raise Stale(f"{rel}: old text found {n} times, expected exactly once: {old!r}")
        texts[rel] = text.replace(old, new)
    if write:
        for rel, text in texts.items():
            (root / rel).write_text(text, encoding="utf-8")


def check_all(repo: Path) -> list[str]:
    """Problems with the mutation list against the current source, one line each."""
    problems = []
    for desc, edits in grouped(MUTATIONS):
        try:
            apply(repo, edits, write=False)
        except Stale as e:
            problems.append(f"{desc}: {e}")
    return problems


def our_packages(root: Path) -> list[str]:
    """Top-level packages of the repository (directories with an __init__.py), tests aside."""
    return sorted(p.parent.name for p in root.glob("*/__init__.py")
                  if p.parent.name not in ("tests", "scripts", "benchmarks", "docs"))


def tally(out: str) -> str:
    """Failed tests per test file, from pytest's short summary."""
    files: dict = {}
    for ln in out.splitlines():
        if ln.startswith(("FAILED", "ERROR")):
            name = ln.split()[1].split("::")[0]
            files[name] = files.get(name, 0) + 1
    return ", ".join(f"{Path(f).name} {n}" for f, n in sorted(files.items())) or "no failures"


def run_one(repo: Path, mutation, verbose: bool, stop: bool = True) -> tuple[str, str, float]:
    """(status, detail, seconds); status is killed, survived, passed (no mutation) or error."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fractal-mutant-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(repo, copy, ignore=IGNORE)
        if mutation is not None:
            apply(copy, mutation[1], write=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(copy) + (os.pathsep + env["PYTHONPATH"]
                                         if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        check = subprocess.run([sys.executable, "-c", IMPORT_CHECK, str(copy),
                                *our_packages(copy)], cwd=copy, env=env, capture_output=True,
                               text=True)
        if check.returncode != 0:
            return "error", (check.stderr.strip() or check.stdout.strip()), \
                time.perf_counter() - start
        pytest = PYTEST if stop else [a for a in PYTEST if a != "-x"] + ["-rfE"]
        proc = subprocess.run([sys.executable, *pytest], cwd=copy, env=env,
                              capture_output=True, text=True)
    seconds = time.perf_counter() - start
    out = (proc.stdout + proc.stderr).strip()
    failed = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    detail = failed[0] if failed else (out.splitlines()[-1] if out else "")
    if not stop:
        detail = "failed: " + tally(out)
    if verbose and proc.returncode != 0:
        detail = out
    if proc.returncode == 0:
        return ("passed" if mutation is None else "survived"), detail, seconds
    if proc.returncode in (1, 2):       # tests failed, or collection failed (import error)
        return ("error" if mutation is None else "killed"), detail, seconds
    return "error", f"pytest exit status {proc.returncode}: {detail}", seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="repository to copy (default: this one)")
    ap.add_argument("-k", dest="select", default="", help="only mutations whose description "
                    "contains this text")
    ap.add_argument("--jobs", "-j", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--verbose", "-v", action="store_true", help="show pytest's whole output "
                    "for every killed mutation")
    ap.add_argument("--tally", action="store_true", help="run every golden test of each mutant "
                    "(no -x) and count the failures per test file")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()

    problems = check_all(repo)
    if problems:
        print("mutations that no longer apply (update MUTATIONS in scripts/mutants.py):")
        for p in problems:
            print(f"  {p}")
        return 2
    chosen = [m for m in grouped(MUTATIONS) if args.select in m[0]]
    print(f"{len(chosen)} mutations of {repo}, {args.jobs} at a time")

    status, detail, seconds = run_one(repo, None, args.verbose)
    print(f"unmutated: {status} ({seconds:.1f} s)")
    if status != "passed":
        print(detail)
        print("the golden tests must pass on the unmutated copy first")
        return 2

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, repo, m, args.verbose, not args.tally) for m in chosen]
        results = []
        for m, f in zip(chosen, futures):
            status, detail, seconds = f.result()
            results.append(status)
            print(f"{status.upper():9} {m[0]}  ({seconds:.1f} s)")
            if detail:
                print("          " + detail.replace("\n", "\n          "))
    killed = results.count("killed")
    print(f"\n{killed} of {len(results)} mutations killed, {results.count('survived')} survived, "
          f"{results.count('error')} errors")
    if "error" in results:
        return 2
    return 1 if "survived" in results else 0


if __name__ == "__main__":
    sys.exit(main())
