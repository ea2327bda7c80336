"""Consecutive tasks on one node overlap where their reservation tables allow
(compiler.reservation): the next task's decode and first loads run while the previous one
finishes, and no resource ever serves two at once."""
import pytest

import fractal
import compiler.pipeline
from compiler.reservation import Reservation, earliest_start, slot_rows
from isa.errors import InternalError
from simulator.engine import Engine

MLP = "programs/mlp.fasm"


def table(cycles, slots=(), **rows):
    return Reservation.of(cycles, {k.replace("_", " "): v for k, v in rows.items()}, slots)


def test_a_shift_is_forbidden_while_any_resource_would_serve_both():
    """A holds the port over [2, 6) and [10, 12) of its 16 cycles; B over [1, 5). B at shift s
    holds it over [s+1, s+5): clear of [2, 6) needs s+5 <= 2 or s+1 >= 6, of [10, 12) needs
    s+5 <= 10 or s+1 >= 12. From 0: s = 5 (meets [2, 6) at its end, ends at 10 where [10, 12)
    starts). From 6: 6+1 = 7 < 12 and 6+5 = 11 > 10, so s = 11."""
    a = table(16, memory_port=[(2, 6), (10, 12)])
    b = table(8, memory_port=[(1, 5)])
    assert a.next_allowed(b, 0) == 5
    assert a.next_allowed(b, 6) == 11
    assert a.next_allowed(b, 16) == 16        # after A's end anything goes


def test_an_opaque_task_holds_everything_to_its_end():
    """A leaf (opaque) runs one task at a time; a split task after an opaque one may start so
    that its first use comes at the opaque one's end."""
    leaf = Reservation.whole(30)
    split = table(20, controller=[(3, 4)], memory_port=[(4, 9)])
    assert leaf.next_allowed(Reservation.whole(5), 0) == 30
    assert leaf.next_allowed(split, 0) == 27
    assert split.next_allowed(leaf, 0) == 9     # after the split task's last use


def test_buffer_slots_rotate_for_the_next_task():
    """Two slots, and two pieces in each of A and B: the first holds slot 0 over [0, 12), the
    second slot 1 over [4, 20). Unrotated, B's slots clear A's at s >= 12 (slot 0) and
    s + 4 >= 20 (slot 1): 16. Rotated by one, B's first piece takes slot 1, clear of A's
    [4, 20) at s >= 20. `earliest_start` picks the better rotation."""
    a = table(20, slots=slot_rows([(0, 12), (4, 20)], 2))
    b = table(20, slots=slot_rows([(0, 12), (4, 20)], 2))
    assert a.next_allowed(b, 0, rotation=0) == 16   # B's slot 1 [4, 20) after A's [4, 20)
    assert a.next_allowed(b, 0, rotation=1) == 20
    start, rotation = earliest_start([(100, (a,), 0)], (b,), 100)
    assert (start, rotation) == (116, 0)


def test_interval_colouring_never_exceeds_the_slots():
    assert slot_rows([(0, 5), (1, 6), (5, 9)], 2) == [[(0, 5), (5, 9)], [(1, 6)]]
    with pytest.raises(ValueError):
        slot_rows([(0, 5), (1, 6), (2, 7)], 2)


def three_levels():
    return fractal.build_machine("tiny", depth=3, fanout=(3, 5, 7))


def test_middle_tasks_overlap_and_both_modes_agree():
    """On a three-level machine a middle node's next task starts (its ID) before its previous
    one has ended; the exact run checks that no port, link, LFU, controller, leaf or buffer of
    any node served two tasks at once, and gives the symmetric mode's and the compiler's
    cycles."""
    plan = fractal.compile(MLP, three_levels())
    exact = Engine(plan, "exact", trace=True)
    cycles = exact.instruction_cycles()
    assert cycles == Engine(plan, "symmetric").instruction_cycles()
    assert cycles == [r.est_cycles for r in plan.roots]
    by_node: dict = {}
    for e in exact.events:
        if e.level == 1 and e.value is None:
            by_node.setdefault(e.node, []).append(e)
    # a task's ID starts while an event of a task begun before it is still running
    overlapped = sum(any(e.start < s < e.end for e in events if e.stage != "ID")
                     for events in by_node.values()
                     for s in sorted(e.start for e in events if e.stage == "ID")[1:])
    assert overlapped > 0


def test_placing_tasks_without_their_tables_is_caught(monkeypatch):
    """A fault injected into the node model: child tasks start as soon as the piece is loaded,
    whatever their tables say. The exact run finds a resource serving two tasks at once."""
    monkeypatch.setattr(compiler.pipeline, "earliest_start", lambda active, tasks, now: (now, 0))
    plan = fractal.compile(MLP, three_levels())
    with pytest.raises(InternalError, match="no more tasks at once than its capacity"):
        Engine(plan, "exact").instruction_cycles()
