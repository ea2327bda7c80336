"""Local workers that plan each machine together and pass each other what they plan.

With fewer groups of machines than local workers (`fractal.explore.search`), every worker takes
part in every timing class: one makes the class's runs, the others help it plan
(`fractal.explore.evaluate.Memo.share`), and every worker passes on what it planned and
priced to all the others before each instruction it plans (`Channel`). Which worker plans what
changes no result: a plan or a price depends only on its task and its `plan_inputs` or
`pricing_inputs`, and a plan is taken only with its subtree (`Memo.take`).
"""
from __future__ import annotations

import pickle
import queue

from fractal.explore.evaluate import MEMO, Job, Memo, run_job
from fractal.sweep import _results, worker_context

__all__ = ["Channel", "shared_results", "WAIT_SECONDS"]

#: how long a worker waits for the others' instructions of a job they share while none of
#: them says anything, before it plans what is missing itself
WAIT_SECONDS = 60.0


class Channel:
    """A local worker's link to the other workers of `shared_results`: its own queue, on which
    they put what they plan and which instructions they are done with, theirs, and the claim
    counters of the shared jobs. `exchange` passes on what this worker planned and priced
    since it last did, and takes in what the others passed on."""

    def __init__(self, index: int, queues: list, claims):
        self.inbox = queues[index]
        self.others = [q for j, q in enumerate(queues) if j != index]
        for q in self.others:       # a worker that ends leaves what no one took behind
            q.cancel_join_thread()
        self.claims = claims
        self.mark = None
        self.finished: set = set()      # (slot, instruction) the others are done with

    def claim(self, slot: int) -> int:
        """The next unclaimed instruction of a shared job."""
        with self.claims.get_lock():
            at = self.claims[slot]
            self.claims[slot] = at + 1
        return at

    def done(self, slot: int, at: int):
        for q in self.others:
            q.put(("done", slot, at))

    def exchange(self, memo: Memo):
        if self.mark is not None:
            plans, priced = memo.since(self.mark)
            if plans or priced:
                data = pickle.dumps((plans, priced), pickle.HIGHEST_PROTOCOL)
                for q in self.others:
                    q.put(("news", data))
        while True:
            try:
                self._read(self.inbox.get_nowait(), memo)
            except queue.Empty:
                break
        self.mark = memo.mark()

    def wait(self, slot: int, ats: list, memo: Memo):
        """Until the others are done with these instructions of a shared job (what they plan
        comes before), or none of them has said anything for `WAIT_SECONDS`."""
        while any((slot, at) not in self.finished for at in ats):
            try:
                self._read(self.inbox.get(timeout=WAIT_SECONDS), memo)
            except queue.Empty:
                break
        self.mark = memo.mark()

    def _read(self, message: tuple, memo: Memo):
        if message[0] == "news":
            memo.take(*pickle.loads(message[1]))
        else:
            self.finished.add(message[1:])


def _join(queues: list, counter, claims):
    """A local worker's start (`shared_results`): the next free index is its channel's."""
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    MEMO.channel = Channel(index, queues, claims)


def shared_results(jobs: list[Job], workers: int):
    """Each job's results (`run_job`), in the order they finish, from `workers` local processes
    that pass on what they plan (`Channel`) before each instruction they plan, the jobs taken
    in order by the workers as they become free. The shares of a job (`Job`) claim its
    instructions one at a time, so a machine is planned by every worker at once; and a worker
    that runs a machine after a neighbour of it was run (another memory capacity or root
    bandwidth, the levels below alike) plans and prices only what no worker did."""
    context = worker_context()      # the queues' locks must be the workers' kind
    queues = [context.Queue() for _ in range(workers)]
    claims = context.Array("i", max((j.slot for j in jobs), default=0) + 1)
    for _, done in _results(jobs, workers, None, run_job, context, _join,
                            (queues, context.Value("i", 0), claims)):
        yield done
