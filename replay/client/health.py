"""Engine health during a live run: `engine_down` events with their times.

`EngineWatch` polls each engine's `/health` (every `interval_s` wall seconds) while the run
goes. An engine that does not answer 200 is down from that poll until the first poll it
answers again; each such spell is one event, in the records' clock (seconds from the run
start, × clock_scale)::

    {"event": "engine_down", "engine": "vllm", "start_s": 312.4, "end_s": 348.9,
     "detail": "GET /health failed (ClientConnectorError)"}

`end_s` is null while the engine is still down (or was when the run ended). Hosted
endpoints (`openai` kind) publish no health route and are not watched; their failures show
as request errors. `on_change` is called after every transition (the run writes the events
into its manifest then, so a killed run keeps them).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from replay.redact import redact_url


class EngineWatch:
    def __init__(
        self,
        urls: dict[str, str],
        t0_ns: int,
        clock_scale: float = 1.0,
        interval_s: float = 1.0,
        on_change: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.urls = {n: u.rstrip("/") for n, u in urls.items() if u}
        self.t0_ns = t0_ns
        self.clock_scale = clock_scale
        self.interval_s = interval_s
        self.on_change = on_change
        self.events: list[dict[str, Any]] = []
        self._open: dict[str, dict[str, Any]] = {}

    def _now_s(self) -> float:
        return self.at_s(time.perf_counter_ns())

    def at_s(self, t_ns: int) -> float:
        """A perf_counter_ns() instant in the run's clock (seconds from its start, scaled)."""
        return round((t_ns - self.t0_ns) / 1e9 * self.clock_scale, 3)

    def events_url(self, name: str) -> str | None:
        """The engine's URL as events record it (no userinfo)."""
        return redact_url(self.urls.get(name))

    async def _probe(self, session: aiohttp.ClientSession, url: str) -> str | None:
        """None when healthy, else what went wrong (no URL userinfo in it)."""
        try:
            async with session.get(url + "/health") as r:
                return None if r.status == 200 else f"GET /health answered {r.status}"
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            return f"GET /health failed ({type(e).__name__})"

    def observe(self, name: str, problem: str | None) -> None:
        """Record one poll's outcome for `name` (public so tests can drive transitions)."""
        ev = self._open.get(name)
        if problem is not None and ev is None:
            ev = {
                "event": "engine_down",
                "engine": name,
                "url": self.events_url(name),
                "start_s": self._now_s(),
                "end_s": None,
                "detail": problem,
            }
            self._open[name] = ev
            self.events.append(ev)
        elif problem is None and ev is not None:
            ev["end_s"] = self._now_s()
            del self._open[name]
        else:
            return
        if self.on_change is not None:
            self.on_change(self.events)

    async def run(self, stop: asyncio.Event) -> None:
        if not self.urls:
            return
        timeout = aiohttp.ClientTimeout(total=max(self.interval_s * 2, 2.0))
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while not stop.is_set():
                names = list(self.urls)
                found = await asyncio.gather(*(self._probe(session, self.urls[n]) for n in names))
                for name, problem in zip(names, found, strict=True):
                    self.observe(name, problem)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)

    def down_notes(self) -> list[str]:
        out = []
        for ev in self.events:
            end = "the end of the run" if ev["end_s"] is None else f"{ev['end_s']:g} s"
            out.append(
                f"{ev['engine']}: engine down from {ev['start_s']:g} s to {end} ({ev['detail']})"
            )
        return out


__all__ = ["EngineWatch"]
