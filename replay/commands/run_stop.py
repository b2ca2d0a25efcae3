"""`replay run` stops within seconds of SIGINT or SIGTERM, however busy its event loop is.

The first signal asks the run to stop cleanly (cancel in-flight requests, flush, summarise),
which takes well under a second on an ordinary run. A run driving more sessions than its
event loop keeps up with (tens of thousands) may not get to that for minutes, so the first
signal also arms `HardStop`: if the run has not ended `GRACE_S` later, a thread marks the
manifest `interrupted` (with a note), and the process exits 130 at once. The records
flushed so far stay in the journal (whole lines; a torn last one is cut on resume), the
emulators die with the harness (`replay.lifeline`), and the run resumes with --resume
(which takes over the dead writer's lock). `stop_on_signals` installs both handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from replay.rundir_lock import utc_now

GRACE_S = 3.0


def mark_interrupted(run_dir: Path, signame: str, grace_s: float) -> bool:
    """Set manifest.json's status to `interrupted` (with a note and the end time) through a
    temporary file of its own; False when there is no manifest to mark."""
    path = run_dir / "manifest.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    if not isinstance(data, dict) or data.get("status") not in (None, "running"):
        return False
    data["status"] = "interrupted"
    data["end"] = utc_now()
    old = data.get("notes")
    notes: list[object] = old if isinstance(old, list) else []
    data["notes"] = [
        *notes,
        f"stopped by {signame}: the run did not wind down within {grace_s:g} s (its event "
        "loop was too busy), so the harness ended at once; records flushed so far are kept, "
        "summary.json is not written (replay report builds it)",
    ]
    tmp = path.with_name(path.name + ".stop.tmp")
    try:
        tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


class HardStop:
    """Arm once per signal; `disarm()` when the run ends on its own."""

    def __init__(self, run_dir: Path, grace_s: float = GRACE_S) -> None:
        self.run_dir = run_dir
        self.grace_s = grace_s
        self._done = threading.Event()
        self._armed = False

    def arm(self, signame: str) -> None:
        if self._armed:
            return
        self._armed = True
        threading.Thread(target=self._watch, args=(signame,), daemon=True).start()

    def disarm(self) -> None:
        self._done.set()

    def _watch(self, signame: str) -> None:
        if self._done.wait(self.grace_s):
            return
        mark_interrupted(self.run_dir, signame, self.grace_s)
        sys.stderr.write(
            f"stopped by {signame} at once (the run did not wind down within {self.grace_s:g} "
            f"s); the records flushed so far are in {self.run_dir} "
            f"(continue with: replay run --resume {self.run_dir})\n"
        )
        sys.stderr.flush()
        time.sleep(0.05)
        os._exit(130)


def stop_on_signals(hard: HardStop | None) -> asyncio.Event:
    """SIGINT and SIGTERM set the returned event (the clean stop); a second one cancels the
    running task outright (records already flushed are still kept)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal() -> None:
        # First Ctrl-C: stop cleanly (cancel in-flight requests, write the summary). A second
        # one cancels the run's task outright; records already flushed are still kept.
        if stop.is_set() and main is not None:
            main.cancel()
        stop.set()

    def on_raw_signal(signum: int, frame: Any) -> None:
        # A plain handler, run between bytecodes even while the loop is swamped: it arms the
        # hard stop at once, and hands the clean stop to the loop.
        if hard is not None:
            hard.arm(signal.Signals(signum).name)
        loop.call_soon_threadsafe(on_signal)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_raw_signal)
    return stop


__all__ = ["GRACE_S", "HardStop", "mark_interrupted", "stop_on_signals"]
