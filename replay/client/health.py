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

An engine whose server log the run was given (`replay run --engine-log NAME=PATH`) gets the
log's last error line in its event (`engine_error`, read again while it stays down: a dying
server writes its traceback after it stops answering). `all_down_s()` says how long every
watched engine has been down at once: the run ends early on it (`ENGINES_DOWN_END_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from replay.engines.launch import last_error_line
from replay.redact import redact_url

# A run ends early (with what it has, resumable) once every engine it watches has been down
# this many wall seconds at once: a crashed engine otherwise gets a failed request per
# session and retry until the run's end. Above an owned emulator's restart (a few seconds,
# replay.emulator.launch) and short beside the minutes a replay lasts. A choice, not a
# source's number.
ENGINES_DOWN_END_S = 30.0


class EngineWatch:
    def __init__(
        self,
        urls: dict[str, str],
        t0_ns: int,
        clock_scale: float = 1.0,
        interval_s: float = 1.0,
        on_change: Callable[[list[dict[str, Any]]], None] | None = None,
        logs: dict[str, Path] | None = None,
    ) -> None:
        self.urls = {n: u.rstrip("/") for n, u in urls.items() if u}
        # Server logs by engine name; a replica ("vllm.1", replay.client.fleet) reads its
        # engine's.
        self.logs = dict(logs or {})
        self.t0_ns = t0_ns
        self.clock_scale = clock_scale
        self.interval_s = interval_s
        self.on_change = on_change
        self.events: list[dict[str, Any]] = []
        self._open: dict[str, dict[str, Any]] = {}
        self._down_since_ns: int | None = None  # when every watched engine was down at once

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

    def _log_of(self, name: str) -> Path | None:
        return self.logs.get(name) or self.logs.get(name.rsplit(".", 1)[0])

    def _engine_error(self, name: str, ev: dict[str, Any]) -> bool:
        """Read the down engine's last log error into its event; True when it changed."""
        log = self._log_of(name)
        line = last_error_line(log) if log is not None else None
        if line is None or line == ev.get("engine_error"):
            return False
        ev["engine_error"] = line
        return True

    def all_down_s(self) -> float:
        """Wall seconds every watched engine has been down at once (0: one serves)."""
        if self._down_since_ns is None:
            return 0.0
        return (time.perf_counter_ns() - self._down_since_ns) / 1e9

    def down_at_end(self) -> bool:
        """An engine is down now (its event has no end)."""
        return bool(self._open)

    def observe(self, name: str, problem: str | None) -> None:
        """Record one poll's outcome for `name` (public so tests can drive transitions)."""
        ev = self._open.get(name)
        changed = ev is not None and problem is not None and self._engine_error(name, ev)
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
            self._engine_error(name, ev)
        elif problem is None and ev is not None:
            ev["end_s"] = self._now_s()
            del self._open[name]
        elif not changed:
            return
        all_down = bool(self.urls) and all(n in self._open for n in self.urls)
        if not all_down:
            self._down_since_ns = None
        elif self._down_since_ns is None:
            self._down_since_ns = time.perf_counter_ns()
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


__all__ = ["ENGINES_DOWN_END_S", "EngineWatch"]
