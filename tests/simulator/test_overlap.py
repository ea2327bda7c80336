"""Consecutive tasks on one node overlap where their reservation tables allow
(compiler.reservation): the next task's decode and first loads run while the previous one
finishes, and no resource ever serves two at once."""
import pytest

import fractal
import compiler.pipeline
from compiler.reservation import Reservation, compose, earliest_start, slot_rows
from isa.errors import InternalError
from simulator.engine import Engine

MLP = "programs/mlp.fasm"
CONV3D = "programs/conv3d.fasm"


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


def test_children_of_consecutive_tasks_overlap_where_their_own_tables_allow():
    """A child task K of 10 cycles holds its port over [0, 2) and its own children over [2, 10).
    Parent task P (15 cycles) decodes over [0, 1), loads over [1, 5) and starts K at 5. With
    its children as one row ([5, 15)), the next P waits until s >= 10. With K's own rows
    composed (port [5, 7), children [7, 15)), the next P's K may start its load while this
    one's K still runs: port needs s >= 2, children s >= 8, the load s >= 4: s = 8."""
    kid = table(10, memory_port=[(0, 2)], children=[(2, 10)])
    own = {"controller": [(0, 1)], "links in": [(1, 5)], "children": [(5, 15)]}
    whole = Reservation.of(15, own)
    composed = Reservation.of(15, own, kids=compose([(5, (kid,), 0)]))
    assert composed.kids.keys() == {"memory port", "children"}
    assert whole.next_allowed(whole, 0) == 10
    assert composed.next_allowed(composed, 0) == 8


def test_a_leaf_child_holds_all_of_itself_against_any_child_row():
    """A leaf child (opaque) composes as one row, "*", that meets every row of another task's
    children: a P whose leaf child runs over [5, 15) is followed by a P whose split child loads
    over [5, 7) of it no earlier than s = 10, and the other way round s = 10 too (the split
    child's children run to 15)."""
    own = {"controller": [(0, 1)]}
    leafy = Reservation.of(15, own, kids=compose([(5, (Reservation.whole(10),), 0)]))
    split = Reservation.of(15, own, kids=compose(
        [(5, (table(10, memory_port=[(0, 2)], children=[(2, 10)]),), 0)]))
    assert leafy.next_allowed(split, 0) == 10
    assert split.next_allowed(leafy, 0) == 10


def test_composed_children_keep_the_ends_and_cover_the_middle():
    """Six pieces each start the same child (port [0, 2)) 10 cycles apart: the first two and
    last two are kept, the two in between covered by one interval (a hull holds at least what
    it covers)."""
    kid = table(5, memory_port=[(0, 2)])
    rows = compose([(10 * i, (kid,), 0) for i in range(6)])
    assert Reservation.of(60, {}, kids=rows).kids["memory port"].tolist() == \
        [[0, 2], [10, 12], [20, 32], [40, 42], [50, 52]]


def test_children_of_consecutive_middle_tasks_overlap_and_are_checked(monkeypatch):
    """On a three-level machine the conv3d program's middle nodes start their next task's
    children while the previous task's still run: fewer cycles than with each task's children
    held as one, the exact run agreeing with the symmetric one and the compiler. A fault
    injected into the composition (a child's table reduced to its controller) lets tasks meet
    on the children's ports and leaves, and the exact run finds it."""
    plan = fractal.compile(CONV3D, three_levels())
    cycles = Engine(plan, "exact").instruction_cycles()
    assert cycles == Engine(plan, "symmetric").instruction_cycles()
    assert cycles == [r.est_cycles for r in plan.roots]
    real = compiler.pipeline.compose
    monkeypatch.setattr(compiler.pipeline, "compose", lambda placed, exact=2: {})
    as_one = Engine(fractal.compile(CONV3D, three_levels()), "exact").instruction_cycles()
    assert sum(cycles) < sum(as_one)
    monkeypatch.setattr(compiler.pipeline, "compose", lambda placed, exact=2: {
        r: v for r, v in real(placed, exact).items() if r == "controller"})
    plan = fractal.compile(CONV3D, three_levels())
    with pytest.raises(InternalError, match="no more tasks at once than its capacity"):
        Engine(plan, "exact").instruction_cycles()


def test_a_table_without_its_childrens_rows_holds_them_as_one():
    """A table whose children's own rows are unknown (its children row alone) meets every row of
    another task's children: after a P whose children row spans [5, 15), a P whose child loads
    over [5, 7) of it waits until s = 10, as a leaf child would make it."""
    own = {"controller": [(0, 1)]}
    whole = Reservation.of(15, {**own, "children": [(5, 15)]})
    split = Reservation.of(15, own, kids=compose(
        [(5, (table(10, memory_port=[(0, 2)], children=[(2, 10)]),), 0)]))
    assert whole.next_allowed(split, 0) == 10
    assert split.next_allowed(whole, 0) == 10
