"""Which run is the newest: what the pages open when the user has not chosen one.

A run's start is its manifest's `start` (UTC, written when the run began); a run whose manifest
is unreadable or has no start counts from its directory's modification time. Two runs that
started in the same second (the manifest keeps seconds) are told apart by their directories'
modification times. Manifests are read once per change (cached on their modification time).
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from pathlib import Path

from replay.rundir import RunDirError, read_manifest

MANIFEST = "manifest.json"


@functools.lru_cache(maxsize=4096)
def _manifest_start(path: str, mtime_ns: int) -> float | None:
    del mtime_ns  # only part of the cache key: a rewritten manifest is read again
    try:
        start = read_manifest(Path(path)).start
    except (RunDirError, OSError, ValueError):
        return None
    if not start:
        return None
    try:
        when = dt.datetime.fromisoformat(str(start))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def started_at(run_dir: Path) -> tuple[float, float]:
    """(when the run started, its directory's modification time), seconds since the epoch:
    the sort key of `newest_first`."""
    try:
        folder_mtime = os.stat(run_dir).st_mtime
    except OSError:
        return (float("-inf"), float("-inf"))
    try:
        stamp = os.stat(run_dir / MANIFEST).st_mtime_ns
    except OSError:
        return (folder_mtime, folder_mtime)
    start = _manifest_start(str(run_dir), stamp)
    return (start if start is not None else folder_mtime, folder_mtime)


def newest_first(root: Path, names: list[str]) -> list[str]:
    """`names` (run directories relative to `root`) from the newest start to the oldest."""
    return sorted(names, key=lambda n: started_at(root / n), reverse=True)


def newest(root: Path, names: list[str]) -> str | None:
    """The run of `names` that started last; None when there are none."""
    return max(names, key=lambda n: started_at(root / n)) if names else None


__all__ = ["newest", "newest_first", "started_at"]
