"""`replay serve-sim` as a real subprocess on a free port, for tests that need an emulator over
HTTP in a separate process (the live client under signals, a real engine's twin)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from replay.engines.launch import free_port


@contextlib.contextmanager
def serve_sim(args: list[str], log: Path) -> Iterator[str]:
    """Start `replay serve-sim ARGS --port P`, yield its URL once /health answers, stop its
    process group on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "replay", "serve-sim", *args, "--port", str(port)]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url + "/health", timeout=2) as r,
            ):
                if r.status == 200:
                    break
            assert proc.poll() is None, log.read_text()
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
