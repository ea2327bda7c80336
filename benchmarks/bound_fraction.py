"""How close the compiler's plans come to the attainable bound: `fraction_of_bound` (the bound
over the simulated time, docs/compiler.md "Attainable bounds") for the cases of the mapping
targets, on f1 and f100, in f16.

    python benchmarks/bound_fraction.py                  # under a minute
    python benchmarks/bound_fraction.py --out bound_fraction.md

Cases: a 4096^3 matmul (and, on f100, square matmuls from 2048^3 to 16384^3); VGG-16's conv3_2
(256 -> 256 channels, 3x3 pad 1, 56x56) at batch 32; ResNet-18 at batch 32 (`fractal gen
resnet18 --batch 32`), whose fraction is reported for the whole program and as the geometric
mean over its instructions. On f100 the matmul also runs under other root mappings, pinned, and
with a larger first root piece (an experiment on the schedule, `first_piece`).
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fractal                                   # noqa: E402
from fractal.workloads import generate           # noqa: E402
from host import header, report                  # noqa: E402


def square_matmul(n: int) -> str:
    """An n^3 matmul in f16."""
    return (f"tensor a : f16[{n}, {n}] input\ntensor b : f16[{n}, {n}] input\n"
            f"tensor c : f16[{n}, {n}] output\nmatmul c, a, b\n")


MATMUL = square_matmul(4096)
#: sizes of the square matmul whose fraction on f100 shows its first load being amortised
SIZES = (2048, 4096, 8192, 16384)
CONV3_2 = """tensor x : f16[32, 256, 56, 56] input
tensor w : f16[256, 256, 3, 3] input
tensor y : f16[32, 256, 56, 56] output
conv2d y, x, w, stride=1, pad=1
"""
TARGETS = {"matmul 4096^3": 0.90, "VGG-16 conv3_2, batch 32": 0.85,
           "ResNet-18, batch 32 (geomean)": 0.80}


#: other root mappings of the matmul on f100, pinned (docs/compiler.md, "Pinned mappings"): none
#: beats the searched plan, so what keeps it from the bound is not the choice of split
PINS = {"32 serial pieces of M": "serial = { M = 32 }",
        "8 parallel parts of M": "parallel = { M = 8 }",
        "2 x 4 parallel parts of M and N": "parallel = { M = 2, N = 4 }",
        # the chips' own split pinned under the searched root (searched: K in 4 serial pieces)
        **{f"searched root; the chips' K in {k} serial pieces":
           "parallel = { M = 1, N = 4, K = 2 }\nserial = { M = 8, N = 1, K = 1 }\n[[pin]]\n"
           f"line = 4\nlevel = 1\nparallel = {{ M = 2, N = 4 }}\nserial = {{ M = 1, N = 1, K = {k} }}"
           for k in (1, 2, 8)},
        # each chip's whole task at once (no K split across chips: no partial sums to add at
        # the root), its K slices streamed in and added into partials its clusters keep
        **{f"4 x 2 parallel parts of M and N, one piece; the chips' K in {k} serial pieces":
           "parallel = { M = 4, N = 2 }\nserial = { M = 1, N = 1, K = 1 }\n[[pin]]\nline = 4\n"
           f"level = 1\nparallel = {{ M = 2, N = 4 }}\nserial = {{ M = 1, N = 1, K = {k} }}"
           for k in (16, 32, 64)}}


def pinned(machine: str = "f100") -> list[str]:
    """The matmul's cycles on `machine` under each pin of PINS, beside the searched plan's."""
    program = fractal.load_program(MATMUL)
    rows = [f"| searched | {fractal.run(program, machine, functional=False).cycles:,} |"]
    with tempfile.TemporaryDirectory() as d:
        for name, pin in PINS.items():
            path = Path(d) / "pin.toml"
            path.write_text(f"[[pin]]\nline = 4\n{pin}\n")
            r = fractal.run(program, machine, functional=False, mapping=path)
            rows.append(f"| {name} | {r.cycles:,} |")
    return [f"matmul 4096^3 on {machine}, other mappings pinned:", "",
            "| mapping | cycles |", "|---|---|", *rows]


def where_time_goes(machine: str = "f100") -> list[str]:
    """The 4096^3 matmul's plan on `machine`, level by level: a task's cycles, the interval at
    which the same task can follow itself on a node (its reservation table against its own),
    and its leaves' compute over each; and how long the root's first load takes."""
    from compiler.reservation import Reservation
    from simulator.engine import Engine
    plan = fractal.compile(fractal.load_program(MATMUL), machine)
    m = plan.machine
    rows = ["| level | task cycles | next task after | compute / task | compute / interval |",
            "|---|---|---|---|---|"]
    for (task, level), node in sorted(plan.table.items(), key=lambda kv: kv[0][1]):
        res = node.reservation or Reservation.whole(node.est_cycles)
        leaves = m.leaves // m.nodes_at(level)
        compute = sum(ops / m.compute.ops_per_cycle(k, task.inputs[0].dtype)
                      for k, ops in task.work) / leaves
        interval = res.next_allowed(res, 0)
        rows.append(f"| {level} ({m.levels[level].name}) | {node.est_cycles:,.0f} | "
                    f"{interval:,} | {compute / node.est_cycles:.3f} | {compute / interval:.3f} |")
    engine = Engine(plan, trace=True)
    total, = engine.instruction_cycles()
    first = next(e for e in engine.events if e.node == "0" and e.stage == "LD" and e.piece == 0)
    root = plan.roots[0]
    return [f"Where the matmul's time goes on {machine}:", "", *rows, "",
            f"The root's first load: {first.end - first.start:,} cycles, "
            f"{(first.end - first.start) / total:.1%} of the run; after it, a root piece every "
            f"{(total - first.end) / root.pieces:,.0f} cycles."]


def what_binds(machine: str = "f100") -> list[str]:
    """Per split level below the root of the matmul's plan on `machine`, the interval at which a
    task can follow itself (`Reservation.next_allowed`) with every row of its reservation
    table, and with some left out: which resource sets it."""
    from compiler.reservation import Reservation
    plan = fractal.compile(fractal.load_program(MATMUL), machine)

    def interval(res, drop_rows=(), drop_slots=False):
        def lists(rows):
            return {k: v.tolist() for k, v in rows.items() if k not in drop_rows}
        slots = () if drop_slots else [s.tolist() for s in res.slots]
        copy = Reservation.of(res.cycles, lists(res.rows), slots, res.intake, res.outflow,
                              {k: v.tolist() for k, v in res.kids.items()})
        return copy.next_allowed(copy, 0)
    rows = ["| level | every row | without the buffer slots | without the memory port | "
            "without both | the children alone |", "|---|---:|---:|---:|---:|---:|"]
    for (task, level), node in sorted(plan.table.items(), key=lambda kv: kv[0][1]):
        res = node.reservation
        if res is None or level == 0:
            continue
        own = [k for k in res.rows if k != "children"]       # the children's rows stay
        rows.append(f"| {level} ({plan.machine.levels[level].name}) | {interval(res):,} | "
                    f"{interval(res, drop_slots=True):,} | "
                    f"{interval(res, ['memory port']):,} | "
                    f"{interval(res, ['memory port'], True):,} | "
                    f"{interval(res, own, True):,} |")
    return [f"What sets the interval of the matmul's tasks on {machine} (cycles after which "
            "the same task may start again on a node):", "", *rows]


#: a larger first root piece of the matmul on f100: (rows of its first M piece, M pieces in
#: all, the others equal; chips pinned to K slices outermost, or searched)
FIRST_PIECES = ((2048, 5, True), (2048, 5, False), (1024, 7, True), (1024, 7, False))


@contextlib.contextmanager
def first_piece(size: int, pieces: int, first: int):
    """An experiment the compiler does not search: an axis of `size` cut into `pieces` serial
    pieces of one way each is cut with a first piece of `first` and the rest equal, by
    patching the schedule's ranges (`compiler.schedule._Axis`)."""
    from compiler import schedule
    init, ranges = schedule._Axis.__init__, schedule._Axis._range

    def patched_init(self, amap, a, n, ways):
        self.first = first if (amap.axes[a].size, n, ways) == (size, pieces, 1) else None
        init(self, amap, a, n, ways)

    def patched_range(self, i):
        if self.first is None:
            return ranges(self, i)
        rest = (size - self.first) // (pieces - 1)
        return (0, self.first) if i == 0 else (self.first + (i - 1) * rest, rest)
    schedule._Axis.__init__, schedule._Axis._range = patched_init, patched_range
    try:
        yield
    finally:
        schedule._Axis.__init__, schedule._Axis._range = init, ranges


def larger_first_piece(machine: str = "f100") -> list[str]:
    """The matmul on `machine` with the root's first M piece larger than the others (the root
    otherwise as searched: 4 parallel parts of N, 2 of K), and, for the first case, when the
    server's third piece loads against when the chips end the second and start the third."""
    from simulator.engine import Engine
    program = fractal.load_program(MATMUL)
    rows, detail = [], ""
    with tempfile.TemporaryDirectory() as d:
        for first, pieces, k_outer in FIRST_PIECES:
            path = Path(d) / "pin.toml"
            pin = (f"[[pin]]\nline = 4\nserial = {{ M = {pieces}, N = 1, K = 1 }}\n"
                   f"parallel = {{ N = 4, K = 2 }}\n")
            if k_outer:
                pin += ("[[pin]]\nline = 4\nlevel = 1\nserial = { M = 1, N = 1, K = 4 }\n"
                        "parallel = { M = 2, N = 4 }\n")
            path.write_text(pin)
            with first_piece(4096, pieces, first):
                engine = Engine(fractal.compile(program, machine, mapping=path), trace=True)
                cycles, = engine.instruction_cycles()
            rows.append(f"| {first:,} then {pieces - 1} x {(4096 - first) // (pieces - 1):,} | "
                        f"{'K slices outermost' if k_outer else 'searched'} | {cycles:,} |")
            if not detail:
                at = {(e.piece, e.stage): e for e in engine.events
                      if e.node == "0" and e.value is None}
                detail = (f"In the first, the server writes back the first piece's partial "
                          f"products over {at[0, 'WB'].end - at[0, 'WB'].start:,} cycles; the "
                          f"third piece loads from cycle {at[2, 'LD'].start:,}, the chips "
                          f"having ended the second at {at[1, 'EX'].end:,}, and start it at "
                          f"{at[2, 'EX'].start:,}.")
    return [f"matmul 4096^3 on {machine} with a larger first root piece of M (an experiment on "
            "the schedule; the compiler cuts equal pieces):", "",
            "| root M pieces | chips | cycles |", "|---|---|---|", *rows, "", detail]


def bound_cycles(r) -> float:
    """A report's attainable bound in cycles."""
    return r.bound_seconds * r.cycles / r.seconds


def by_size(machine: str = "f100") -> list[str]:
    """The square matmul's fraction of its bound on `machine` at each of SIZES."""
    rows = []
    for n in SIZES:
        r = fractal.run(fractal.load_program(square_matmul(n)), machine, functional=False)
        rows.append(f"| {n:,} | {r.cycles:,} | {bound_cycles(r):,.0f} ({r.bound}) | "
                    f"{r.fraction_of_bound:.3f} |")
    return [f"The n^3 matmul on {machine} by size:", "",
            "| n | cycles | bound cycles | fraction_of_bound |", "|---:|---:|---:|---:|", *rows]


def cases():
    resnet = generate("resnet18", batch=32, dtype="f16")
    return [("matmul 4096^3", MATMUL), ("VGG-16 conv3_2, batch 32", CONV3_2),
            ("ResNet-18, batch 32 (geomean)", resnet)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", default="f1,f100")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    lines = [*header("fraction_of_bound", "symmetric simulation, timing only, f16"),
             "| case | machine | cycles | bound cycles | bound set by | fraction_of_bound | target |",
             "|---|---|---|---|---|---|---|"]
    fractions = []
    start = time.perf_counter()
    for name, text in cases():
        program = fractal.load_program(text)
        for machine in args.machines.split(","):
            r = fractal.run(program, machine, functional=False)
            f = r.fraction_of_bound
            if "geomean" in name:
                f = statistics.geometric_mean([i.fraction_of_bound for i in r.instructions])
            fractions.append(f)
            cycles = sum(i.cycles for i in r.instructions)
            lines.append(f"| {name} | {machine} | {cycles:,} | {bound_cycles(r):,.0f} | "
                         f"{r.bound} | {f:.3f} | {TARGETS[name]:.2f} |")
            print(lines[-1], file=sys.stderr)
    lines += ["", f"Geometric mean of the fractions: {statistics.geometric_mean(fractions):.3f}.",
              "", *pinned(), "", *larger_first_piece(), "", *where_time_goes(), "",
              *what_binds(), "",
              *by_size(), "",
              f"Took {time.perf_counter() - start:.0f} s."]
    report(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
