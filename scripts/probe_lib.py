"""What the probes share (scripts/probe_integrity.py, scripts/probe_hard_edges.py): running
`replay` as a new user would, one PASS/FAIL line per case, the figures, a careless server."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
KEY = ["engine", "session", "trajectory", "agent", "turn", "attempt", "priming", "scheduled_s"]
PLANTED = "sk-probe-PLANTED-0123456789abcdef"
RESULTS: list[tuple[str, bool, str]] = []
FIGURES: dict[str, Any] = {}


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", COLUMNS="250")


def replay(*args: str, timeout: float = 300, extra_env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "replay", *args], capture_output=True, text=True,
        env={**env(), **(extra_env or {})}, cwd=ROOT, timeout=timeout,
    )  # fmt: skip


def start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replay", *args], stdout=out, stderr=subprocess.STDOUT,
            env=env(), cwd=ROOT,
        )  # fmt: skip


def check(name: str, ok: bool, seen: str = "") -> None:
    RESULTS.append((name, ok, seen))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  [{seen}]" if seen else ""), flush=True)


def said(res: Any) -> str:
    return " ".join((res.stdout + res.stderr).split())


def message_case(name: str, res: Any, *needles: str, code: int = 2) -> None:
    text = said(res)
    ok = res.returncode == code and "Traceback" not in text and all(n in text for n in needles)
    check(name, ok, text[-240:] if not ok else f"exit {res.returncode}")


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def listening(url: str) -> bool:
    p = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((p.hostname or "127.0.0.1", p.port or 80)) == 0


def wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.25)
    return False


def text_of(path: Path) -> str:
    """A file's text, or "" when the command under test did not write it."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def journal_lines(run: Path) -> int:
    p = run / "requests.jsonl"
    return p.read_bytes().count(b"\n") if p.exists() else 0


# -- a small careless server: 401 without the right key, errors that echo the request -------
@contextlib.contextmanager
def echo_server(require_key: str | None) -> Iterator[str]:
    import asyncio

    from aiohttp import web

    async def handle(req: web.Request) -> web.StreamResponse:
        auth = req.headers.get("Authorization", "")
        if require_key is not None and auth != f"Bearer {require_key}":
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        if req.path.endswith("/models"):
            return web.json_response({"data": [{"id": "m", "max_model_len": 100000}]})
        with contextlib.suppress(ConnectionError):  # a client that gave up
            await req.read()
        # Bare encodings first (an error body is cut at 500 characters): the base64 of the
        # bearer key, and a Basic header's base64 of user:password without its `Basic`.
        kind, _, token = auth.partition(" ")
        bare = base64.b64encode(token.encode()).decode() if kind == "Bearer" else token
        return web.Response(status=500, text=f"echo: {bare} {req.url} {dict(req.headers)}")

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    def serve() -> None:
        asyncio.set_event_loop(loop)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        box["runner"] = runner
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
