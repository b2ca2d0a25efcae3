"""The processes a test started, followed through /proc (Linux): so a test can say that nothing
it started is left running, and clean up only what it started (other tests run beside it)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """Every living process below `pid` (children of each of its threads, recursively)."""
    out: set[int] = set()
    stack = [pid]
    while stack:
        p = stack.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                for c in (task / "children").read_text().split():
                    if int(c) not in out:
                        out.add(int(c))
                        stack.append(int(c))
    return out


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def name(pid: int, limit: int = 120) -> str:
    """The process's command line, cut at `limit` characters (for messages); "?" once gone."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:limit]
    return "?"


def wait_gone(pids: set[int], within_s: float) -> dict[int, str]:
    """Wait up to `within_s` for every pid to end; those still running, with their commands."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return {}
        time.sleep(0.05)
    return {p: name(p) for p in pids if alive(p)}


def wait_for(pid: int, count: int, within_s: float) -> set[int]:
    """Wait until `pid` has at least `count` descendants; them (fewer on timeout)."""
    deadline = time.monotonic() + within_s
    kids = descendants(pid)
    while len(kids) < count and time.monotonic() < deadline:
        time.sleep(0.1)
        kids = descendants(pid)
    return kids


def kill_all(pids: set[int]) -> None:
    """SIGKILL what a failed test left (only these pids: the test's own)."""
    for p in pids:
        if alive(p):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
