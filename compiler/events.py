"""A small discrete-event kernel with SimPy's semantics, for the compiler's node model.

The compiler prices every split on its shortlist by running the node's pipeline
(`compiler.pipeline.NodePipeline`), thousands of short runs per compile. The pipeline is written
against SimPy (the simulator runs it there); this module gives the part of SimPy 4's API that
the pipeline uses (`Environment` with `now`, `timeout`, `event`, `process` and `run`; `Resource`
with `request` and `release`; `AllOf`) with the same order of events, without SimPy's general
machinery (bound classes, generic put and get queues, condition values):

- events fire in order of (time, priority, the order they were scheduled), an `Initialize`
  event (a process's start) before ordinary events of the same time;
- a request for a free resource succeeds at once (it is scheduled now); a release frees the
  resource at once and, when its own event fires, grants the oldest waiting request;
- a process that yields an event already processed resumes without waiting.

So the pipeline gives the same cycles and reservation tables on either kernel, which
tests/compiler/test_events.py checks against SimPy on the suite's schedules. A failure inside a
process is raised out of `Environment.run` as it is.
"""
from __future__ import annotations

from heapq import heappop, heappush

__all__ = ["Environment", "Event", "Resource", "AllOf"]

_PENDING = object()
_URGENT, _NORMAL = 0, 1


class Event:
    """An event: pending until it succeeds, processed once its callbacks have run."""
    __slots__ = ("env", "callbacks", "_value")

    def __init__(self, env: "Environment"):
        self.env = env
        self.callbacks = []
        self._value = _PENDING

    @property
    def triggered(self) -> bool:
        return self._value is not _PENDING

    @property
    def processed(self) -> bool:
        return self.callbacks is None

    @property
    def value(self):
        return self._value

    def succeed(self, value=None) -> "Event":
        if self._value is not _PENDING:
            raise RuntimeError(f"{self} has already been triggered")
        self._value = value
        env = self.env
        env._eid += 1
        heappush(env._queue, (env.now, _NORMAL, env._eid, self))
        return self


class Process(Event):
    """A generator run as a process: an event that succeeds with its return value."""
    __slots__ = ("_generator",)

    def __init__(self, env: "Environment", generator):
        Event.__init__(self, env)
        self._generator = generator
        start = Event(env)
        start._value = None
        start.callbacks.append(self._resume)
        env._eid += 1
        heappush(env._queue, (env.now, _URGENT, env._eid, start))

    def _resume(self, event: Event):
        send = self._generator.send
        while True:
            try:
                event = send(event._value)
            except StopIteration as stop:
                self.succeed(stop.value)
                return
            callbacks = event.callbacks
            if callbacks is not None:
                callbacks.append(self._resume)
                return


class AllOf(Event):
    """Succeeds once all its events have (SimPy's `AllOf`; its value is not kept)."""
    __slots__ = ("_left",)

    def __init__(self, env: "Environment", events):
        Event.__init__(self, env)
        events = tuple(events)
        self._left = len(events)
        if not events:
            self.succeed()
            return
        for e in events:
            if e.callbacks is None:
                self._check(e)
            else:
                e.callbacks.append(self._check)

    def _check(self, _event):
        if self._value is not _PENDING:
            return
        self._left -= 1
        if not self._left:
            self.succeed()


class Request(Event):
    """A request for a resource; as a context manager, released on leaving."""
    __slots__ = ("resource",)

    def __init__(self, resource: "Resource"):
        Event.__init__(self, resource.env)
        self.resource = resource
        resource.queue.append(self)
        resource._grant()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        resource = self.resource
        if self._value is _PENDING:
            resource.queue.remove(self)
        if exc_type is not GeneratorExit:
            resource.release(self)


class _Release(Event):
    """A release's own event: when it fires, the oldest waiting request may be granted."""
    __slots__ = ()


class Resource:
    """`capacity` users at a time, granted in the order they asked."""
    __slots__ = ("env", "capacity", "users", "queue")

    def __init__(self, env: "Environment", capacity: int = 1):
        if capacity <= 0:
            raise ValueError('"capacity" must be > 0.')
        self.env, self.capacity = env, capacity
        self.users: list = []
        self.queue: list = []

    def request(self) -> Request:
        return Request(self)

    def _grant(self, _event=None):
        queue = self.queue
        if queue and len(self.users) < self.capacity:
            req = queue.pop(0)
            self.users.append(req)
            req.succeed()

    def release(self, request: Request) -> Event:
        try:
            self.users.remove(request)
        except ValueError:
            pass
        done = _Release(self.env)
        done.callbacks.append(self._grant)
        done.succeed()
        return done


class Environment:
    """Time, the event queue, and the factories the pipeline calls."""
    __slots__ = ("now", "_queue", "_eid")

    def __init__(self):
        self.now = 0
        self._queue: list = []
        self._eid = 0

    def event(self) -> Event:
        return Event(self)

    def timeout(self, delay, value=None) -> Event:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        e = Event(self)
        e._value = value
        self._eid += 1
        heappush(self._queue, (self.now + delay, _NORMAL, self._eid, e))
        return e

    def process(self, generator) -> Process:
        return Process(self, generator)

    def all_of(self, events) -> AllOf:
        return AllOf(self, events)

    def run(self):
        """Process events until none is left."""
        queue = self._queue
        while queue:
            self.now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
