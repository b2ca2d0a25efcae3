"""The simulator's clock: a small deterministic event loop. Events are ordered by (time,
insertion order), so runs are reproducible.

Compiled with the engine model (`replay.sim.compiled`): a fleet's run files and runs a
callback per engine step of every replica, close to a million of them.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from mypy_extensions import mypyc_attr


@mypyc_attr(native_class=False)  # compiled: an exception stays a Python class
class SimStall(RuntimeError):
    """The event loop ran a very large number of callbacks without its clock moving: work
    re-filed at the same time over and over instead of being done."""


# Callbacks one simulated instant may run: far above any replay's (each session and each
# engine step files a handful per instant), far below what a loop that re-files work at
# `now` reaches in seconds.
MAX_EVENTS_PER_INSTANT = 1_000_000


class EventLoop:
    """Time-ordered callbacks; `now` is the simulated clock in seconds from run start.

    Progress guard: more than `max_per_instant` callbacks at one time raise `SimStall`
    naming `name` (the policy), the time and the callback, instead of spinning."""

    def __init__(self, name: str = "", max_per_instant: int = MAX_EVENTS_PER_INSTANT) -> None:
        self.now = 0.0
        self.name = name
        self.max_per_instant = max_per_instant
        self._q: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._q, (max(t, self.now), next(self._seq), fn))

    def clear(self) -> None:
        """Drop the events still pending (a run's end: they hold its processes)."""
        self._q.clear()

    def run(self, until: float) -> None:
        q = self._q
        last, same, limit = -1.0, 0, self.max_per_instant
        while q and q[0][0] <= until:
            t, _, fn = heapq.heappop(q)
            if t == last:
                same += 1
                if same > limit:
                    what = getattr(fn, "__qualname__", repr(fn))
                    raise SimStall(
                        f"{self.name or 'simulation'}: {same:,} events at t={t!r} s without "
                        f"the clock moving (the latest: {what}); work is being re-filed "
                        "at the same time instead of done"
                    )
            else:
                last, same = t, 0
            self.now = t
            fn()
        self.now = until
