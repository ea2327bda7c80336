"""Reservation tables: what a node's task holds, and when, so that a node's consecutive tasks may
overlap without any resource serving two of them at once.

A split node's task holds its resources over time: its controller (ID), its memory port, its
children's links in and out, its LFU, its children's LFUs, its children, and the buffers of its
children's memories. The table records, per resource, the intervals it is held, in cycles from the
task's start: the reservation table of classic pipeline scheduling (Davidson, "The design and
control of pipelined function generators", 1971; Kogge, "The Architecture of Pipelined
Computers", 1981). A task B may start `s` cycles after a task A on the same node when, for every
resource, B's intervals shifted by `s` meet none of A's: a shift is *forbidden* otherwise. Then
both run exactly as they would alone, so each keeps the cycles, bytes and busy times its own
simulation gives, and no port, link, LFU or buffer ever serves more than its capacity.

A split task also records its **intake**: per slice of its outermost serially cut axis, when its
first piece begins to load and how many bytes of each input operand the slices so far read. Its
parent may start it while its own load is still arriving, as long as every slice finds its bytes
there (`Reservation.lead`): the parent's DMA sends them in the order the task reads them. And
its **outflow**: per slice, when its results are final, so that the parent's write-back may
start before the task ends and send each slice once it is (`Reservation.drain`).

A leaf, a node running a data-movement instruction on its DMA, and a node priced by the closed
form are *opaque*: one task holds all of the node from its start to its end, so the next starts
when it ends. A split task's table also holds its **children's own tables** (`compose`), each
child task's rows shifted to where its piece placed it: its children's controllers, ports, links,
LFUs, buffers and, as one row, their own children (a leaf child holds all of itself, a row that
meets every other row of the children). Those rows stand for the children when two tasks on one
node are compared (a table without them shows its children row as children holding all of
themselves), so the next task's children may start their first piece while the previous task's
run their last, where the children's tables allow, as a node's consecutive pieces do. To
keep a table small, the children's intervals of all pieces but the first two and last two are
covered by one interval per resource (a hull holds at least what it covers). The children's own
children are not composed further: they stay one row.

Buffers are slots: the `buffering` pieces a child's memory holds. Within a task each piece's
buffer is given the lowest free slot; a following task may use its slots rotated (the next task's
first piece takes whichever buffer the last pieces left free), and the rotation giving the
earliest start is the one chosen.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Reservation", "compose", "earliest_start", "slot_rows"]

_uids = itertools.count()
#: answers one table keeps (`next_allowed`), about 100 bytes each
MEMO_ENTRIES = 1 << 14


def _merged(intervals) -> np.ndarray:
    """Intervals (start, end) as a sorted array of disjoint ones (touching ones stay apart)."""
    out: list[list[int]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a < out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return np.array(out, dtype=np.int64).reshape(-1, 2)


@dataclass(frozen=True, eq=False)
class Reservation:
    """A task's reservation table: `cycles` long; per resource, its busy intervals (sorted,
    disjoint, relative to the task's start); per buffer slot, likewise. Opaque when it has no
    rows: the task holds everything from 0 to `cycles`."""
    cycles: int
    rows: dict = field(default_factory=dict)            # resource -> array (n, 2)
    slots: tuple = ()                                   # buffer slot -> array (n, 2)
    # what the task must have received of its inputs, and by when: ((cycles from its start,
    # per input operand the bytes read by then), ...), the last entry the whole inputs; empty:
    # all of them at its start (a leaf, an opaque task)
    intake: tuple = ()
    # what of its outputs is final in its memory, and from when: ((cycles from its start, per
    # output operand the bytes final by then), ...); empty: all of them at its end
    outflow: tuple = ()
    # its children's own tables, as its pieces placed them: resource -> array (n, 2), "*" where a
    # child holds all of itself (`compose`); empty: the children row stands for them
    kids: dict = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_uids))
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def whole(cls, cycles: float) -> "Reservation":
        return cls(cycles=math.ceil(cycles))

    @classmethod
    def of(cls, cycles: int, rows: dict, slots=(), intake=(), outflow=(),
           kids=None) -> "Reservation":
        return cls(cycles=int(cycles), rows=_rows(rows), slots=tuple(_merged(v) for v in slots),
                   intake=tuple(intake), outflow=tuple(outflow), kids=_rows(kids or {}))

    def own(self, rotation: int = 0, n_slots: int = 0) -> dict:
        """What the task holds of its own node, by resource, its buffer slots renamed by
        `rotation` (its children as one, the children row): what its parent composes."""
        if self.opaque:
            return {"*": np.array([[0, self.cycles]], dtype=np.int64)}
        table = dict(self.rows)
        for k, iv in enumerate(self.slots):
            table[f"slot {(k + rotation) % max(n_slots, len(self.slots))}"] = iv
        return table

    def drain(self, transfer: int) -> int:
        """How long after this task starts a write-back of its outputs over `transfer` cycles
        may begin, sending them in the order they become final: the bytes after a slice's first
        leave once that slice is final, so the transfer ends no earlier than each slice's
        finishing time plus the time to send it and everything after it. Without an outflow, at
        the task's end."""
        if not self.outflow:
            return self.cycles
        total = sum(self.outflow[-1][1])
        if not total:
            return self.cycles
        before, end = 0, 0
        for ready, final in self.outflow:
            end = max(end, ready + math.ceil((total - before) * transfer / total))
            before = sum(final)
        return max(0, end - transfer)

    def lead(self, sent: tuple, transfer: int, latency: int) -> int:
        """How long after a load of its inputs begins this task may start, when the load sends
        the operands flagged in `sent` over `transfer` cycles, then `latency`, in the order the
        task reads them (the bytes of its first slice first): the fraction F of the sent bytes
        a slice needs has arrived F x `transfer` + `latency` cycles after the load began.
        Without an intake, the whole load."""
        if not self.intake:
            return transfer + latency
        total = sum(b for b, s in zip(self.intake[-1][1], sent) if s)
        return max(0, max((math.ceil(sum(b for b, s in zip(need, sent) if s) * transfer / total)
                           if total else 0) + latency - offset for offset, need in self.intake))

    @property
    def opaque(self) -> bool:
        return not self.rows and not self.slots

    def _table(self, rotation: int = 0, n_slots: int = 0) -> dict:
        """Rows by resource name, the buffer slots renamed by `rotation`; the children's own
        tables where they are known ("kid:<resource>"), the children row otherwise, as children
        that hold all of themselves ("kid:*")."""
        table = self.own(rotation, n_slots)
        children = table.pop("children", None)
        if self.kids:
            table.update((f"kid:{r}", v) for r, v in self.kids.items())
        elif children is not None:
            table["kid:*"] = children
        return table

    def next_allowed(self, other: "Reservation", shift: int, rotation: int = 0) -> int:
        """The least shift >= `shift` at which `other` may start after this task started, its
        buffer slots rotated by `rotation` relative to this task's."""
        if shift >= self.cycles:
            return shift
        if self.opaque or other.opaque:     # one holds everything: the other waits for its end
            if self.opaque:
                first = _first_use(other)
                return max(shift, self.cycles - first)
            last = _last_use(self)
            return max(shift, last)
        asked = (other.uid, rotation, shift)
        found = self._memo.get(asked)
        if found is None:
            if len(self._memo) >= MEMO_ENTRIES:     # a long-lived table: start afresh
                self._memo.clear()
            found = self._memo[asked] = self._next_allowed(other, shift, rotation)
        return found

    def _next_allowed(self, other: "Reservation", shift: int, rotation: int) -> int:
        key = (other.uid, rotation)
        bands = self._memo.get(key)
        if bands is None:
            n = max(len(self.slots), len(other.slots))
            mine, theirs = self._table(0, n), other._table(rotation, n)
            pairs = [(mine[r], theirs[r]) for r in mine if r in theirs]
            # a child holding all of itself meets every row of the other task's children
            pairs += [(mine["kid:*"], theirs[q]) for q in theirs if _kid_part(q)] \
                if "kid:*" in mine else []
            pairs += [(mine[r], theirs["kid:*"]) for r in mine if _kid_part(r)] \
                if "kid:*" in theirs else []
            bands = self._memo[key] = _bands(pairs, self.cycles + other.cycles + 1)
        a, b = bands
        if not len(b):
            return shift
        while True:
            # for each of b's intervals shifted, the first of a's that ends after it starts (each
            # pair of rows in its own band of the time axis, so that one search serves them all)
            bs, be = b[:, 0] + shift, b[:, 1] + shift
            j = np.searchsorted(a[:, 1], bs, side="right")
            ok = j < len(a)
            jj = j[ok]
            clash = a[jj, 0] < be[ok]
            if not clash.any():
                return shift
            shift = int((a[jj, 1][clash] - b[ok][clash, 0]).max())


def _bands(pairs, width: int) -> tuple:
    """Rows paired for `_next_allowed`, the k-th pair moved k x `width` cycles along (wider than
    any interval's end after any shift tried), concatenated: (a's intervals, b's)."""
    a = [x + k * width for k, (x, _) in enumerate(pairs)]
    b = [y + k * width for k, (_, y) in enumerate(pairs)]
    empty = np.zeros((0, 2), dtype=np.int64)
    return (np.concatenate(a) if a else empty), (np.concatenate(b) if b else empty)


def _kid_part(q: str) -> bool:
    """Whether row q is one resource of a child's (not a child holding all of itself)."""
    return q.startswith("kid:") and q != "kid:*"


def _rows(rows: dict) -> dict:
    merged = {r: _merged(v) for r, v in rows.items()}     # zero-length holds drop out
    return {r: v for r, v in merged.items() if len(v)}


def _held(r: Reservation) -> list:
    return list(r.rows.values()) + list(r.kids.values()) + [s for s in r.slots if len(s)]


def _first_use(r: Reservation) -> int:
    """When a task first holds anything (0 for an opaque one)."""
    if r.opaque:
        return 0
    return int(min(v[0, 0] for v in _held(r)))


def _last_use(r: Reservation) -> int:
    if r.opaque:
        return r.cycles
    return int(max(v[-1, 1] for v in _held(r)))


def compose(placed, exact: int = 2) -> dict:
    """A task's children's own tables, as its pieces placed them (`placed`: per piece, when its
    child tasks start from the task's start, their distinct reservations and the rotation of
    their buffer slots): resource -> intervals, for `Reservation.of`. The first and last
    `exact` pieces' intervals are kept as they are; each resource's intervals in between are
    covered by one (a hull holds at least what it covers, so a table stays safe and small:
    consecutive tasks meet only at their ends)."""
    rows: dict = {}
    middle: dict = {}
    for i, (at, tasks, rotation) in enumerate(placed):
        kept = i < exact or i >= len(placed) - exact
        for r in tasks:
            for name, iv in r.own(rotation).items():
                if not len(iv):
                    continue
                if kept:
                    rows.setdefault(name, []).extend((iv + at).tolist())
                else:       # sorted and disjoint: the first interval starts, the last ends
                    lo, hi = middle.get(name, (iv[0, 0] + at, iv[-1, 1] + at))
                    middle[name] = (min(lo, iv[0, 0] + at), max(hi, iv[-1, 1] + at))
    for name, hull in middle.items():
        rows.setdefault(name, []).append([int(x) for x in hull])
    return rows


def earliest_start(active, tasks, now: int) -> tuple[int, int]:
    """The earliest time >= `now` at which a node's children may start `tasks` (the distinct
    reservations of one piece's child tasks), and the rotation of their buffer slots, given the
    `active` pieces before it, each (start, reservations, rotation). Every pair of an earlier and
    a new task is checked (which child receives which is not tracked, so this is safe for any)."""
    n = max((len(r.slots) for r in itertools.chain(tasks, *(b for _, b, _ in active))), default=0)
    best = None
    for rotation in range(max(1, n)):
        t = now
        changed = True
        while changed:
            changed = False
            for start, before, rot in active:
                for a in before:
                    for b in tasks:
                        s = a.next_allowed(b, t - start, (rotation - rot) % max(1, n))
                        if s + start > t:
                            t, changed = s + start, True
        if best is None or t < best[0]:
            best = (t, rotation)
        if not active:
            break
    return best


def slot_rows(holds, n_slots: int) -> list[list[tuple[int, int]]]:
    """Buffer holds (start, end) given slots: each, in order of start, the lowest slot free then
    (interval colouring: never more than `n_slots` are held at once)."""
    slots: list[list[tuple[int, int]]] = [[] for _ in range(max(1, n_slots))]
    for a, b in sorted(holds):
        k = next((k for k, s in enumerate(slots) if not s or s[-1][1] <= a), None)
        if k is None:
            raise ValueError("more buffers held at once than the level has")
        slots[k].append((a, b))
    return slots
