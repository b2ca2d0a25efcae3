"""Phase hygiene of a live run: the engines' prefix caches reset before the replay, and raw
`/metrics` snapshots at each phase's edges.

The measured phase, for a replay whose sessions run continuously, starts with the first
replay request: preflight's probes go to the engines first and leave their prompts cached,
and the warm-up minutes before the window are the replay's own (they are why it has a
warm-up). So `--reset-cache` resets each engine after preflight and before the first replay
request; a reset at the window's start would throw away the state the warm-up built. A
first reset before preflight checks that every engine offers one, so an engine that cannot
fails the run before any prompt is sent (`replay.engines.reset`).

Snapshots: each engine's `/metrics` text as served, at the run's start (after the reset),
the window's start and end (the scraper's marks) and the run's end, in
`metrics/<engine>-<phase>.prom`. An engine that does not answer gets no file for that
phase, and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from pathlib import Path

import aiohttp

from replay.engines.reset import reset_all

PHASES = ("run-start", "window-start", "window-end", "run-end")
WINDOW_PHASES = ("window-start", "window-end")
METRICS_DIR = "metrics"


def snapshot_path(run_dir: Path, engine: str, phase: str) -> Path:
    return run_dir / METRICS_DIR / f"{engine}-{phase}.prom"


async def snapshot(urls: dict[str, str], run_dir: Path, phase: str) -> list[str]:
    """Write every engine's `/metrics` text for `phase`; the engines written."""
    async with aiohttp.ClientSession() as session:
        got = await asyncio.gather(*(_text(session, u) for u in urls.values()))
    written = []
    for name, text in zip(urls, got, strict=True):
        if text is None:
            continue
        path = snapshot_path(run_dir, name, phase)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".prom.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(name)
    return written


async def _text(session: aiohttp.ClientSession, url: str) -> str | None:
    try:
        async with session.get(
            url.rstrip("/") + "/metrics", timeout=aiohttp.ClientTimeout(total=10)
        ) as resp:
            return await resp.text() if resp.status == 200 else None
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None


async def window_snapshots(
    urls: dict[str, str],
    run_dir: Path,
    t0_ns: int,
    marks_s: Iterable[tuple[str, float]],
    stop: asyncio.Event,
) -> None:
    """Snapshot each (phase, mark) in order, at the mark (wall seconds after t0): the
    window's start and end; marks not reached before `stop` are skipped."""
    for phase, mark in marks_s:
        wait = mark - (time.perf_counter_ns() - t0_ns) / 1e9
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
        if stop.is_set():
            return
        await snapshot(urls, run_dir, phase)


async def reset_caches(engines: list[tuple[str, str, str]]) -> dict[str, dict[str, object]]:
    """Reset every (name, kind, url) engine's prefix cache after preflight; per engine what
    was done (the manifest's `cache_reset`). Raises `CacheResetError` as `reset_all` does."""
    done = await reset_all(engines)
    when = "after preflight, before the first replay request"
    return {name: {"when": when, **r.as_dict()} for name, r in done.items()}


__all__ = [
    "METRICS_DIR",
    "PHASES",
    "WINDOW_PHASES",
    "reset_caches",
    "snapshot",
    "snapshot_path",
    "window_snapshots",
]
