"""The pipeline of one split node, in SimPy: the node model the simulator runs and the compiler
ranks its candidate splits with (one cost model). The simulator runs it on SimPy; the compiler,
which runs it thousands of times per compile, on `compiler.events`, a smaller kernel with
SimPy's order of events (the same cycles and tables, tests/compiler/test_events.py).

A split node pays its decode, then runs the pieces of its schedule (`compiler.schedule`), each
through LD, EX, WB and RD (docs/simulator.md, "The pipeline of a split node"):

    LD  the children's links in, and within them the memory port, for the load's port cycles;
        the links alone for the rest of their link cycles; then the link latency, holding neither
    EX  the children: the slowest child. A piece's child tasks start as soon as the children's
        reservation tables allow (`compiler.reservation`): a split child's next task may begin
        its ID and first load while its previous one finishes, a leaf's when it has finished
    AC  the children's LFUs adding the piece's partial results into the ones they keep: while
        the children run the next piece when their own tasks leave their LFUs idle (a leaf's
        LFU is not its compute units), within EX otherwise
    WB  like LD, with the store's bytes, over the links out (the same links when half duplex)
    RD  the node's LFU combining the children's results

At most `buffering` pieces (the child level's) are in flight. After the last piece, a final merge
runs on the LFU. How the children run is the caller's: `execute(i, kind)` is a SimPy generator,
a fixed duration per child task when the compiler estimates or the simulator runs one node per
(task, level), the children's own processes when the simulator runs every node.
"""
from __future__ import annotations

from dataclasses import dataclass

import simpy

from compiler import events
from compiler.reservation import Reservation, compose, earliest_start, slot_rows
from compiler.rules import ceil_cycles
from compiler.schedule import Schedule, stage_times
from isa.errors import InternalError

__all__ = ["NodeTotals", "NodePipeline", "best_variant", "node_cycles", "piece_timing", "lfu_free",
           "streams"]


@dataclass
class NodeTotals:
    """What a node's stages did, summed over its pieces: busy cycles per stage (to name what
    bounds it), and the bytes and reduction work it moved and ran (checked against the plan)."""
    cycles: int = 0
    transfer: int = 0
    latency: int = 0
    execute: int = 0
    reduce: int = 0
    leaf_compute: int = 0
    leaf_memory: int = 0
    slowest_child: tuple | None = None
    bytes_down: int = 0
    bytes_up: int = 0
    reduction_ops: int = 0
    child_reduction_ops: int = 0
    port_busy: int = 0          # cycles the memory port was held
    port_bytes: int = 0
    link_in_busy: int = 0       # cycles the busiest child's link carried loads ...
    link_in_bytes: float = 0    # (a distributed memory's links carry a fraction of the bytes)
    link_out_busy: int = 0      # ... and write-backs
    link_out_bytes: float = 0
    lfu_busy: int = 0           # cycles this node's LFU combined the children's results
    kids_lfu_busy: int = 0      # cycles the children's LFUs added into their kept partials


class NodePipeline:
    """One split node running its schedule: its shared resources (the memory port, the
    children's links, the children, the LFU, and the piece buffers of the children's memories)
    and one process per serial piece, as in SimPy's machine-shop examples."""

    def __init__(self, env: simpy.Environment, schedule: Schedule, level, child, timing, execute,
                 record=None, lfu_free: bool = False, stream: bool = False):
        self.env, self.schedule, self.level, self.child = env, schedule, level, child
        self.stream = stream            # the children start while a load streams in
        self.lfu_free = lfu_free        # the children's tasks leave their LFUs idle
        self.timing = timing            # timing(kind): (slowest child's cycles, reservations)
        self.execute = execute          # execute(i, kind): the children's part of EX
        self.record = record            # record(piece, stage, start, end, value=None), or None
        self.totals = NodeTotals()
        self.reservation: Reservation | None = None
        self.rows: dict = {}            # resource -> intervals held, from the task's start
        self.holds: list = []           # buffer holds
        self.active: list = []          # pieces whose child tasks may still run
        self.placed_tasks: list = []    # per piece: (start, child reservations, slot rotation)

    def _note(self, i, stage, start, value=None):
        """A stage of piece i from `start` to now; with a value, a counter's value over it
        ("port busy", "bytes in flight")."""
        if self.record is not None:
            self.record(i, stage, start, self.env.now, value)

    def _held(self, resource: str, start):
        self.rows.setdefault(resource, []).append((int(start - self.t0), int(self.env.now - self.t0)))

    def run(self):
        """ID, the pieces, and the final merge."""
        env, lv, t = self.env, self.level, self.totals
        start = self.t0 = env.now
        yield env.timeout(lv.decode_cycles)
        self._note(-1, "ID", start)
        self._held("controller", start)
        yield from self._pieces()
        t.cycles = int(env.now - start)
        t.latency += lv.decode_cycles
        self.reservation = Reservation.of(t.cycles, self.rows,
                                          slot_rows(self.holds, self.child.buffering),
                                          [(self.ld_starts[i], need)
                                           for i, need in self.schedule.slices()],
                                          self._outflow(), compose(self.placed_tasks))

    def _outflow(self) -> list:
        """When the task's results are final, slice by slice (`Schedule.results`)."""
        out, i, latest = [], 0, 0
        for last, final in self.schedule.results():
            while i <= last:
                latest = max(latest, self.done[i])
                i += 1
            out.append((latest, final))
        out[-1] = (self.totals.cycles, out[-1][1])
        return out

    def _pieces(self):
        env, schedule = self.env, self.schedule
        self.port, self.lfu, self.kids, self.kids_lfu = (_resource(env) for _ in range(4))
        # the children's links: one resource per direction, or one for both (half duplex); a
        # piece's transfer holds every busy child's link at once, for the busiest one's time
        self.link_in = _resource(env)
        self.link_out = self.link_in if self.child.duplex == "half" else _resource(env)
        self.buffers = _resource(env, self.child.buffering)
        running = []
        self.placed = []                # per piece: when its child tasks start, once decided
        self.ld_starts = {}             # per piece: when its load began, from the task's start
        self.done = {}                  # per piece: when its results were final in this memory
        prev = None
        for i, kind in enumerate(schedule.sequence()):
            buffer = self.buffers.request()
            yield buffer
            self.placed.append(env.event())
            running.append(env.process(self._piece(i, kind, buffer, prev)))
            prev = kind
        yield env.all_of(running)
        if schedule.final_reduce_ops:
            start = env.now
            cycles = ceil_cycles(schedule.final_reduce_ops / self.level.lfu_ops_per_cycle)
            yield env.timeout(cycles)
            self._held("LFU", start)
            t = self.totals
            t.reduce += cycles
            t.lfu_busy += cycles
            t.reduction_ops += schedule.final_reduce_ops
            self._note(len(running), "RD", start)

    def _transfer(self, link, port_cycles: int, link_cycles: int, latency: int, began=None):
        """Hold the children's links in one direction for the link time and, within it, the
        memory port for the port time; the latency follows, holding neither. `began` succeeds
        with (when the links were taken, when the port was: the bytes flow from then on)."""
        with link.request() as held:
            yield held
            start = self.env.now
            with self.port.request() as req:
                yield req
                at = self.env.now
                if began is not None:
                    began.succeed((start, at))
                yield self.env.timeout(port_cycles)
                self._held("memory port", at)
                self._note(-1, "port busy", at, 1)
            yield self.env.timeout(max(0, link_cycles - port_cycles))
            self._held("links in" if link is self.link_in else "links out", start)
        yield self.env.timeout(latency)
        t = self.totals
        t.transfer += max(port_cycles, link_cycles)
        t.latency += latency
        t.port_busy += port_cycles
        if link is self.link_in and link_cycles:
            t.link_in_busy += link_cycles
        elif link_cycles:
            t.link_out_busy += link_cycles
        return start

    def _load(self, i, st, began):
        """LD: the piece's inputs over the children's links in."""
        start = self.env.now
        yield from self._transfer(self.link_in, st.load_port, st.load_link, st.latency, began)
        self._note(i, "LD", start)

    def _store(self, i, st, when):
        """WB, from `when` on: the piece's results over the children's links out."""
        if when > self.env.now:
            yield self.env.timeout(when - self.env.now)
        start = self.env.now
        yield from self._transfer(self.link_out, st.store_port, st.store_link, st.latency)
        self._note(i, "WB", start)

    def _accumulate(self, i: int, cycles: int):
        """Each child adds this piece's partial result into the one it keeps."""
        start = self.env.now
        yield self.env.timeout(cycles)
        self.totals.reduce += cycles
        self.totals.kids_lfu_busy += cycles
        self._note(i, "AC", start)
        if self.lfu_free:
            self._held("children's LFUs", start)

    def _tasks(self, kind, st) -> tuple:
        """The reservation tables of a piece's child tasks (one, the whole children, when they
        add into their kept partials after it)."""
        cycles, tasks = self.timing(kind)
        if st.child_reduce and not self.lfu_free:
            return (Reservation.whole(cycles + st.child_reduce),)
        return tasks

    def _lead(self, kind, st) -> int:
        """How long after its load begins a piece's child tasks may start: when every slice of
        theirs finds its bytes arrived (`Reservation.lead`; a leaf waits for the whole load)."""
        transfer = max(st.load_port, st.load_link)
        if not self.stream:
            return transfer + st.latency
        sent = self.schedule.loads(kind)
        return max(r.lead(sent, transfer, st.latency) for r in self._tasks(kind, st))

    def _place(self, i, kind, st, ready: int):
        """Wait until this piece's child tasks may start: from `ready` (their inputs have
        arrived), when none of their reservations meets those of the child tasks still running
        (a leaf's next task starts when it ends)."""
        env = self.env
        tasks = self._tasks(kind, st)
        now = max(int(env.now), ready)
        self.active = [a for a in self.active if a[0] + max(r.cycles for r in a[1]) > now]
        at, rotation = earliest_start(self.active, tasks, now)
        self.active.append((at, tasks, rotation))
        self.placed_tasks.append((at - int(self.t0), tasks, rotation))
        self.placed[i].succeed(at)
        if at > env.now:
            yield env.timeout(at - env.now)

    def _just_in_time(self, i, kind, prev, st):
        """A load waits while the children are busy long enough: it starts so as to end when
        they can take its piece (when the piece before runs longer than this load takes), so a
        buffer fills no earlier than it must and the next task on this node finds the port, the
        links and the buffers free sooner."""
        load = st.load
        if prev is None or self.timing(prev)[0] <= load:
            return
        before = yield self.placed[i - 1]
        free, _ = earliest_start(self.active, self._tasks(kind, st), before)
        wait = free - load - int(self.env.now)
        if wait > 0:
            yield self.env.timeout(wait)

    def _piece(self, i: int, kind: tuple, buffer, prev):
        env, t = self.env, self.totals
        work = self.schedule.work(kind)
        st = stage_times(work, self.level, self.child)
        t.bytes_down += work.load_bytes
        t.bytes_up += work.store_bytes
        t.reduction_ops += work.reduce_ops
        t.child_reduction_ops += work.child_reduce_ops
        t.port_bytes += work.load_bytes + work.store_bytes
        t.link_in_bytes += work.load_link_bytes * self.level.link_fraction
        t.link_out_bytes += work.store_link_bytes * self.level.link_fraction
        yield from self._just_in_time(i, kind, prev, st)
        start = env.now
        # the buffer holds data from the load's first byte: a piece admitted but still waiting
        # for the links has no bytes in the children's memories yet
        began = env.event()
        load = env.process(self._load(i, st, began))
        held_since, flowing = yield began
        self.ld_starts[i] = int(held_since - self.t0)
        with self.kids.request() as req:       # pieces start their children in order
            yield req
            # the children start once what their first pieces read has arrived
            yield from self._place(i, kind, st, int(flowing) + self._lead(kind, st))
        start = env.now
        store = None
        if self.stream and work.store_bytes and not st.child_reduce:
            # the write-back streams out as the children finish their slices
            drain = max(r.drain(max(st.store_port, st.store_link)) for r in self._tasks(kind, st))
            store = env.process(self._store(i, st, start + drain))
        yield from self.execute(i, kind)
        if not load.processed:
            raise InternalError("a task never ends before its inputs have arrived",
                                f"level {self.level.name}, piece {i}",
                                f"its children ended at cycle {env.now:,}, its load later")
        t.execute += int(env.now - start)
        self._note(i, "EX", start)
        if st.child_reduce and not self.lfu_free:
            yield from self._accumulate(i, st.child_reduce)
        self._held("children", start)
        if st.child_reduce and self.lfu_free:
            with self.kids_lfu.request() as req:
                yield req
                yield from self._accumulate(i, st.child_reduce)
        if work.store_bytes:
            yield store or env.process(self._store(i, st, env.now))
        # the piece's results have left the children's memories: its buffer is free (RD works
        # on them in this node's memory)
        self.buffers.release(buffer)
        self.holds.append((int(held_since - self.t0), int(env.now - self.t0)))
        self._note(i, "bytes in flight", held_since, work.load_bytes)
        if st.reduce:
            with self.lfu.request() as req:
                yield req
                start = env.now
                yield env.timeout(st.reduce)
                t.reduce += st.reduce
                t.lfu_busy += st.reduce
                self._note(i, "RD", start)
                self._held("LFU", start)
        self.done[i] = int(env.now - self.t0)


def _resource(env, capacity: int = 1):
    """A resource of the environment's kernel: SimPy's, or the compiler's (`compiler.events`)."""
    kind = events.Resource if isinstance(env, events.Environment) else simpy.Resource
    return kind(env, capacity=capacity)


def lfu_free(children) -> bool:
    """Whether the child plans leave their own LFUs idle (no combining of their children's
    results): then a parent's AC may overlap their next task."""
    return all(c.reduction_ops == 0 for c in children)


def piece_timing(schedule: Schedule, child_timing):
    """`timing(kind)` of a node's pieces: the slowest child's cycles and the distinct
    reservation tables of the piece's child tasks, from `child_timing(task)` -> (cycles,
    reservation), memoized per kind."""
    memo: dict = {}

    def timing(kind):
        out = memo.get(kind)
        if out is None:
            kids = [child_timing(task) for task, _ in schedule.children(kind)]
            res = {id(r): r for _, r in kids}
            out = memo[kind] = (max(c for c, _ in kids), tuple(res.values()))
        return out
    return timing


def node_cycles(schedule: Schedule, level, child, child_timing, free: bool, stream: bool = False,
                kernel=events.Environment):
    """Cycles and reservation table of a split node's whole task, its children timed by
    `child_timing(task)` -> (cycles, reservation): the simulator's node model, run once, on the
    compiler's event kernel (`compiler.events`; `kernel=simpy.Environment` runs it on SimPy,
    with the same result)."""
    env = kernel()
    timing = piece_timing(schedule, child_timing)

    def execute(i, kind):
        yield env.timeout(timing(kind)[0])
    pipe = NodePipeline(env, schedule, level, child, timing, execute, lfu_free=free, stream=stream)
    env.process(pipe.run())
    env.run()
    return pipe.totals.cycles, pipe.reservation


def streams(schedule: Schedule, child_timing) -> bool:
    """Whether streaming can start any of a node's child tasks early: some child task reads its
    inputs slice by slice (a leaf reads them all at its start)."""
    timing = piece_timing(schedule, child_timing)
    return any(len(r.intake) > 1 for kind in schedule.counts() for r in timing(kind)[1])


def best_variant(level: int, runs: dict) -> bool:
    """Of a node's task run with and without streaming (`runs[stream]` = (cycles,
    reservation)), whether to stream. The root runs each program instruction once: the fewer
    cycles. Below it a task follows others on its node: the shorter interval at which the same
    task can follow itself (its steady rate), then the fewer cycles."""
    def key(stream):
        cycles, res = runs[stream]
        return (cycles,) if level == 0 else (res.next_allowed(res, 0), cycles)
    return min(runs, key=key)
