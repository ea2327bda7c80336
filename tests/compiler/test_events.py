"""The compiler's event kernel (`compiler.events`) against SimPy, the simulator's: the same
processes give the same order of events, and the node model gives the same cycles and
reservation tables on the plans of real programs."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import simpy

import fractal
from compiler import events
from compiler.pipeline import lfu_free, node_cycles
from compiler.plan import PlanKind
from compiler.reservation import Reservation
from compiler.schedule import Schedule

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"


def _story(kernel, resource, all_of, seed: int) -> list:
    """What a random mix of processes does, and when: they contend for resources of capacity 1
    and 2 (zero-length holds make ties), wait on each other's events and on sub-processes."""
    rng = random.Random(seed)
    env = kernel()
    pools = [resource(env, 1), resource(env, 2), resource(env, 1)]
    signals = [env.event() for _ in range(4)]
    log = []

    def child(pid, k):
        yield env.timeout(rng.choice((0, 1, 2)))
        log.append((env.now, pid, "child", k))
        return k * 10

    def proc(pid):
        for step in range(rng.randint(2, 6)):
            what = rng.random()
            if what < 0.55:
                pool = rng.randrange(len(pools))
                with pools[pool].request() as req:
                    yield req
                    log.append((env.now, pid, "got", pool))
                    yield env.timeout(rng.choice((0, 0, 1, 3)))
                log.append((env.now, pid, "released", pool))
            elif what < 0.7:
                value = yield env.process(child(pid, step))
                log.append((env.now, pid, "joined", value))
            elif what < 0.8:
                s = signals[rng.randrange(len(signals))]
                if not s.triggered:
                    s.succeed((pid, step))
                    log.append((env.now, pid, "signalled", step))
            elif what < 0.9:
                kids = [env.process(child(pid, k)) for k in range(rng.randint(0, 3))]
                yield all_of(env, kids)
                log.append((env.now, pid, "all", len(kids)))
            else:
                yield env.timeout(rng.choice((0, 2)))
                log.append((env.now, pid, "waited", step))

    procs = [env.process(proc(i)) for i in range(rng.randint(2, 7))]
    env.run()
    log.append(("done", [p.processed for p in procs]))
    return log


@pytest.mark.parametrize("seed", range(60))
def test_random_processes_see_the_same_events_in_the_same_order_as_under_simpy(seed):
    theirs = _story(simpy.Environment, simpy.Resource, simpy.AllOf, seed)
    ours = _story(events.Environment, events.Resource, events.AllOf, seed)
    assert ours == theirs
    assert len(theirs) > 3


def test_a_released_resource_goes_to_the_oldest_waiting_request():
    env = events.Environment()
    port = events.Resource(env)
    order = []

    def user(name, hold):
        with port.request() as req:
            yield req
            order.append((env.now, name))
            yield env.timeout(hold)

    for name, hold in (("a", 2), ("b", 1), ("c", 0)):
        env.process(user(name, hold))
    env.run()
    assert order == [(0, "a"), (2, "b"), (3, "c")]


def test_a_failure_inside_a_process_is_raised_out_of_run():
    env = events.Environment()

    def broken():
        yield env.timeout(1)
        raise ValueError("inside")

    env.process(broken())
    with pytest.raises(ValueError, match="inside"):
        env.run()


def _same(a: Reservation, b: Reservation) -> bool:
    def rows(d):
        return {k: np.asarray(v).tolist() for k, v in d.items()}

    def slots(r):
        return [np.asarray(s).tolist() for s in r.slots]
    return (a.cycles == b.cycles and rows(a.rows) == rows(b.rows) and slots(a) == slots(b)
            and a.intake == b.intake and a.outflow == b.outflow and rows(a.kids) == rows(b.kids))


@pytest.mark.parametrize("program, machine", [
    ("resnet18.fasm", "f1"), ("attention.fasm", "f1"), ("conv3d.fasm", "tiny"),
    ("alexnet.fasm", "f100"), ("lstm.fasm", "f1"), ("topk.fasm", "tiny"), ("knn.fasm", "f100")])
def test_the_node_model_gives_the_same_cycles_and_tables_on_either_kernel(program, machine):
    plan = fractal.compile(PROGRAMS / program, machine)
    m = plan.machine
    checked = 0
    for (task, level), node in plan.table.items():
        if node.kind != PlanKind.SPLIT:
            continue
        schedule = Schedule.of(node, m.levels[level].broadcast)
        kids = [plan.table[(t, level + 1)] for t, _ in node.children]

        def timing(t, below=level + 1):
            kid = plan.table[(t, below)]
            return kid.est_cycles, kid.reservation or Reservation.whole(kid.est_cycles)
        runs = [node_cycles(schedule, m.levels[level], m.levels[level + 1], timing,
                            lfu_free(kids), node.stream, kernel=k)
                for k in (events.Environment, simpy.Environment)]
        (ours, ours_table), (theirs, theirs_table) = runs
        assert ours == theirs == node.est_cycles, (program, machine, task.text(), level)
        assert _same(ours_table, theirs_table), (program, machine, task.text(), level)
        checked += 1
    assert checked
