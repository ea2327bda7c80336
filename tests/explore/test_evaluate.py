"""The explorer's memoized runs give the rows of fresh runs: plans shared between machines with
the same lower levels, and rows derived within a timing class (clock, process node, energy
figures)."""
import dataclasses

from compiler import compile_program
import compiler.decompose as decompose
from compiler.decompose import plan_inputs, pricing_inputs
from compiler.schedule import Schedule
from fractal import api
from fractal.explore.evaluate import Evaluation, Memo
from fractal.sweep import timing_row
from machine import preset

from tests.explore.helpers import ROOT


def _variant(m, root=None, leaf=None, **top):
    levels = (dataclasses.replace(m.levels[0], **(root or {})), *m.levels[1:-1],
              dataclasses.replace(m.levels[-1], **(leaf or {})))
    return dataclasses.replace(m, levels=levels, **top)


def test_plans_of_shared_lower_levels_are_those_of_a_fresh_compile():
    program = api.load_program(ROOT / "programs" / "mlp.fasm")
    base = preset("tiny").rescaled(2, 4)
    memo = Memo()
    memo.compile(program, base)
    before = {suffix: set(tasks) for suffix, tasks in memo.plans.items()}
    other = _variant(base, root={"decode_cycles": 9, "link_latency": 7})
    plan = memo.compile(program, other)
    assert plan == compile_program(program, other)
    # the levels below the root are the same machine's: their plans are the first one's
    below = [(task, lv) for task, lv in plan.table if lv >= 1]
    shared = [(task, lv) for task, lv in below
              if task in before.get(plan_inputs(other, lv), ())]
    assert shared and len(below) > 0
    assert not any(task in before.get(plan_inputs(other, 0), ())
                   for task, lv in plan.table if lv == 0)      # a root of its own


def test_a_level_plans_alike_whatever_its_own_memory_capacity():
    program = api.load_program(ROOT / "programs" / "mlp.fasm")
    base = preset("tiny").rescaled(2, 4)
    mid = base.levels[1]
    small = dataclasses.replace(base, levels=(
        base.levels[0], dataclasses.replace(mid, memory_bytes=mid.memory_bytes // 64),
        base.levels[2]))
    assert plan_inputs(small, 1) == plan_inputs(base, 1)
    assert plan_inputs(small, 0) != plan_inputs(base, 0)    # the root sizes its pieces by it
    fresh = {m: {} for m in (base, small)}
    for m, table in fresh.items():
        compile_program(program, m, table=table)
    common = [k for k in fresh[base] if k[1] >= 1 and k in fresh[small]]
    assert common and all(fresh[base][k] == fresh[small][k] for k in common)
    memo = Memo()
    memo.compile(program, base)
    planned = {lv: set(tasks) for (lv, *_), tasks in memo.plans.items()}
    plan = memo.compile(program, small)
    assert plan == compile_program(program, small)
    # the second machine's level-1 tasks that the first planned are taken, not planned again
    reused = [task for task, lv in plan.table if lv == 1 and task in planned[1]]
    assert reused and len(memo.plans[plan_inputs(small, 1)]) == len(
        {t for t, lv in fresh[base] if lv == 1} | {t for t, lv in fresh[small] if lv == 1})
    got = memo.evaluate(Evaluation("k", "mlp", program, small))
    assert got == timing_row(program, small, "mlp")


def _counting(monkeypatch) -> dict:
    """Count the closed-form prices and the node-model runs of the compiles that follow."""
    calls = {"estimate": 0, "node_cycles": 0}
    estimate, node_cycles = Schedule.estimate, decompose.node_cycles

    def counted_estimate(*args):
        calls["estimate"] += 1
        return estimate(*args)

    def counted_node_cycles(*args, **kw):
        calls["node_cycles"] += 1
        return node_cycles(*args, **kw)
    monkeypatch.setattr(Schedule, "estimate", counted_estimate)
    monkeypatch.setattr(decompose, "node_cycles", counted_node_cycles)
    return calls


def test_a_level_prices_alike_whatever_its_childrens_memory_capacity(monkeypatch):
    program = api.load_program(ROOT / "programs" / "cnn.fasm")
    base = preset("tiny").rescaled(2, 4)
    mid = base.levels[1]

    def with_mid(**kw):
        return dataclasses.replace(base, levels=(
            base.levels[0], dataclasses.replace(mid, **kw), base.levels[2]))
    larger = with_mid(memory_bytes=mid.memory_bytes * 2)
    # the root plans by its children's capacity, but prices its candidates without it
    assert plan_inputs(larger, 0) != plan_inputs(base, 0)
    assert pricing_inputs(larger, 0) == pricing_inputs(base, 0)
    assert pricing_inputs(with_mid(link_bandwidth=mid.link_bandwidth * 2), 0) != \
        pricing_inputs(base, 0)
    calls = _counting(monkeypatch)
    fresh = compile_program(program, larger)
    alone = dict(calls)
    memo = Memo()
    memo.compile(program, base)
    for k in calls:
        calls[k] = 0
    plan = memo.compile(program, larger)
    assert plan == fresh
    # the root's candidates priced for the first machine are not priced again
    assert calls["estimate"] < alone["estimate"] and calls["node_cycles"] < alone["node_cycles"]


def test_rows_within_a_timing_class_are_those_of_fresh_runs():
    program = api.load_program(ROOT / "programs" / "logreg.fasm")
    base = preset("tiny")
    memo = Memo()
    variants = [base, dataclasses.replace(base, frequency_hz=0.7e9, process_nm=7.0),
                _variant(base, root={"static_watts": 2.5, "memory_pj_per_byte": 3.0},
                         leaf={"link_pj_per_byte": 0.5, "memory_technology": "hbm"}),
                dataclasses.replace(base, compute=dataclasses.replace(base.compute,
                                                                      mac_pj_per_op=0.9))]
    for m in variants:
        got = memo.evaluate(Evaluation("k", "logreg", program, m))
        assert got == timing_row(program, m, "logreg"), m
    assert memo.stats == {"runs": 1, "derived": 3}


def test_a_machine_the_program_does_not_fit_gives_the_fresh_message():
    program = api.load_program(ROOT / "programs" / "logreg.fasm")
    small = _variant(preset("tiny"), leaf={"memory_bytes": 16})
    memo = Memo()
    kind, row = memo.evaluate(Evaluation("k", "logreg", program, small))
    assert (kind, row) == timing_row(program, small, "logreg") and "cannot be fitted" in row["error"]


def _pair(slots: int = 1):
    """Two memos linked as two workers of `shared_results` are, in one process."""
    import multiprocessing
    from fractal.explore.share import Channel
    context = multiprocessing.get_context()
    queues, claims = [context.Queue(), context.Queue()], context.Array("i", slots)
    memos = [Memo(), Memo()]
    for i, m in enumerate(memos):
        m.channel = Channel(i, queues, claims)
    return memos, claims


def _neighbours():
    """Machines near tiny with the same levels below the root: two root bandwidths, two
    memory capacities of the middle level, two clocks (one timing class each pair)."""
    base = preset("tiny").rescaled(2, 4)
    out = []
    for bw in (base.levels[0].memory_bandwidth, base.levels[0].memory_bandwidth * 2):
        for mem in (base.levels[1].memory_bytes, base.levels[1].memory_bytes // 4):
            for hz in (1e9, 0.5e9):
                out.append(dataclasses.replace(base, frequency_hz=hz, levels=(
                    dataclasses.replace(base.levels[0], memory_bandwidth=bw),
                    dataclasses.replace(base.levels[1], memory_bytes=mem), base.levels[2])))
    return out


def test_a_machine_planned_by_two_workers_gives_the_fresh_row_and_is_planned_once(monkeypatch):
    from fractal.explore.evaluate import Job
    program = api.load_program(ROOT / "programs" / "cnn.fasm")
    m = preset("tiny").rescaled(2, 4)
    runs = (Evaluation("k", "cnn", program, m),)
    (helper, runner), claims = _pair()
    fresh = timing_row(program, m, "cnn")
    calls = _counting(monkeypatch)
    helper.share(Job(runs, (1, 2), 0))      # the helper happens to claim every instruction
    planned = dict(calls)
    assert planned["estimate"] > 0 and claims[0] > len(program.instructions) // 2
    runner.share(Job(runs, (0, 2), 0))      # ... so the runner only waits for them
    assert runner.evaluate(runs[0]) == ("row", fresh[1])
    assert calls == planned                 # and prices nothing itself
    assert runner.plans == helper.plans


def test_a_runner_waits_for_a_silent_helper_only_so_long(monkeypatch):
    from fractal.explore import share
    from fractal.explore.evaluate import Job
    program = api.load_program(ROOT / "programs" / "mlp.fasm")
    m = preset("tiny")
    runs = (Evaluation("k", "mlp", program, m),)
    (_, runner), claims = _pair()
    claims[0] = 10 ** 6                     # claimed by a helper that never says anything
    monkeypatch.setattr(share, "WAIT_SECONDS", 0.05)
    runner.share(Job(runs, (0, 2), 0))
    assert runner.evaluate(runs[0]) == timing_row(program, m, "mlp")


def test_a_plan_is_taken_only_with_its_subtree():
    program = api.load_program(ROOT / "programs" / "mlp.fasm")
    m = preset("tiny").rescaled(2, 4)
    planner, taker = Memo(), Memo()
    mark = planner.mark()
    planner.compile(program, m)
    plans, priced = planner.since(mark)
    assert plans[plan_inputs(m, 0)] and priced[pricing_inputs(m, 0)]
    child = next(t for node in plans[plan_inputs(m, 0)].values() for t, _ in node.children)
    del plans[plan_inputs(m, 1)][child]     # a message that lost one child's plan
    taker.take(plans, priced)
    assert all(all(t in taker.plans[plan_inputs(m, 1)] for t, _ in node.children)
               for node in taker.plans[plan_inputs(m, 0)].values())
    assert len(taker.plans[plan_inputs(m, 0)]) < len(planner.plans[plan_inputs(m, 0)])
    assert taker.compile(program, m) == compile_program(program, m)


def test_workers_that_share_what_they_plan_give_the_rows_of_fresh_runs():
    from fractal.explore.evaluate import Job, timing_class
    from fractal.explore.share import shared_results
    programs = {name: api.load_program(ROOT / "programs" / f"{name}.fasm")
                for name in ("logreg", "mlp")}
    classes: dict = {}
    small = _variant(_neighbours()[0], leaf={"memory_bytes": 16})   # fits no program
    for m in [*_neighbours(), small]:
        for name, program in programs.items():
            classes.setdefault(timing_class(m), []).append(
                Evaluation(f"{name}@{len(classes)}:{m.frequency_hz}", name, program, m))
    assert len(classes) == 5
    jobs = [Job(tuple(runs), (i, 2), k) for k, runs in enumerate(classes.values())
            for i in range(2)]
    got = dict(row for done in shared_results(jobs, 2) for row in done)
    every = [e for runs in classes.values() for e in runs]
    assert set(got) == {e.key for e in every}
    for e in every:
        assert got[e.key] == timing_row(e.code, e.machine, e.label), e.key
    assert "cannot be fitted" in got[every[-1].key][1]["error"]    # the first failing one's


def test_a_worker_that_forgets_its_prices_plans_alike(monkeypatch):
    from fractal.explore import evaluate
    program = api.load_program(ROOT / "programs" / "mlp.fasm")
    base = preset("tiny").rescaled(2, 4)
    monkeypatch.setattr(evaluate, "MAX_PRICES", 10)
    memo = Memo()
    memo.compile(program, base)
    assert memo.priced                      # the first compile's prices are kept ...
    other = _variant(base, root={"link_latency": 7})
    plan = memo.compile(program, other)     # ... and forgotten before the next one
    assert plan == compile_program(program, other)
    assert pricing_inputs(base, 0) not in memo.priced and pricing_inputs(other, 0) in memo.priced
