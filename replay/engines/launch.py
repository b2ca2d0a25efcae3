"""Start an engine server from its config, wait until it is healthy, stop it cleanly.

The server runs in its own process group (a new session), because vLLM and SGLang spawn
worker processes (engine core, tensor-parallel ranks) that must go down with it: stopping
signals the whole group, SIGTERM first, SIGKILL after a grace period. Its stdout and stderr
go to a log file, whose tail is put into the error when start-up fails.

Everything here returns data or raises `LaunchError`; the command layer does the printing.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from replay.engines.configs import EngineConfig, ServeCommand, render_command
from replay.engines.scrape import block_size_from_metrics
from replay.lifeline import pdeathsig_preexec


class LaunchError(Exception):
    """The server could not be started or did not become healthy; the message says why and
    what to do."""


# An exception's last line ("IndexError: index 7 is out of bounds…", as Python prints it,
# after vLLM's "(EngineCore pid=…) ERROR 12-05 10:00:00 [core.py:1]" prefix), or a line a
# logger marked ERROR/CRITICAL/FATAL.
_EXCEPTION_LINE = re.compile(r"\b[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::\s|$)")
_ERROR_LEVEL = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
# A wrapper that points elsewhere ("EngineDeadError: … See stack trace (above) for the root
# cause", vLLM's API server after its engine core died) is passed over for the line it means.
_POINTER = re.compile(r"(?i)\b(?:above|root cause)\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TAIL_BYTES = 64 * 1024


def last_error_line(log_path: Path) -> str | None:
    """The server log's last error line: the last exception line (`IndexError: …`) in its
    final 64 KiB that is not a wrapper pointing at another (`_POINTER`), else the last
    exception line, else the last line a logger marked ERROR, CRITICAL or FATAL; None when
    the log cannot be read or holds none. Colour codes are dropped, the line cut at 300
    characters."""
    try:
        with log_path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(fh.tell() - _TAIL_BYTES, 0))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [_ANSI.sub("", line).strip() for line in text.splitlines()]
    exceptions = [line for line in lines if _EXCEPTION_LINE.search(line)]
    causes = [line for line in exceptions if not _POINTER.search(line)]
    levels = [line for line in lines if _ERROR_LEVEL.search(line)]
    found = causes or exceptions or levels
    return found[-1][:300] if found else None


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def visible_gpus() -> int:
    """How many NVIDIA GPUs this process may use: those `nvidia-smi -L` lists, limited by
    CUDA_VISIBLE_DEVICES when it is set (empty or -1: none), as the engines themselves do."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    listed = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return listed
    allowed = [d for d in cvd.split(",") if d.strip()]
    if allowed and allowed[0].strip() == "-1":
        return 0
    return min(listed, len(allowed))


def check_can_start(cfg: EngineConfig, command: ServeCommand, gpus: int | None = None) -> None:
    """Fail fast, before spawning anything, when this machine cannot run `cfg`."""
    need = cfg.hardware.gpus
    have = visible_gpus() if gpus is None else gpus
    if need > have:
        raise LaunchError(
            f"{cfg.name} needs {need} × {cfg.hardware.gpu_type} GPU(s) per engine but this "
            f"machine shows {have} (nvidia-smi -L). Run it on a GPU node, or use "
            "`replay engines launch vllm-cpu-tiny` for a CPU engine."
        )
    exe = command.argv[0]
    found = Path(exe).is_file() if "/" in exe else shutil.which(exe) is not None
    if not found:
        hint = cfg.serve.install_hint or cfg.source.install
        how = f" Install it with: {hint}" if hint else ""
        raise LaunchError(
            f"{cfg.name}: the interpreter {exe} does not exist (serve.python).{how} "
            "Or point --python at an interpreter that has the engine installed."
        )


# How long `stop` waits for the killed group's processes to be gone (issue 36: nothing is
# left running 5 s after an exit).
GROUP_EXIT_S = 5.0


def group_members(pgid: int) -> list[int]:
    """The running processes of group `pgid` (Linux /proc; zombies, whose reaper has them,
    do not run); empty where /proc cannot be read."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
            out.append(int(stat.parent.name))
    return out


@dataclass
class RunningServer:
    """A server process this module started. `url` is the base URL (no `/v1`)."""

    config: EngineConfig
    command: ServeCommand
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def last_error(self) -> str | None:
        """The log's last error line (`last_error_line`)."""
        return last_error_line(self.log_path)

    def stop(self, grace_s: float = 30.0) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace_s`. Returns the
        server's exit code (None if it could not be reaped)."""
        pgid = self.process.pid  # start_new_session made the server its group's leader
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace_s)
        # Workers may outlive the leader; whatever is left of the group goes now.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        try:
            code: int | None = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        # A SIGKILL is delivered, not waited for: a worker still dying would outlive the call
        # (seen: an engine process left 0 s after a stop). Wait until the group has gone.
        deadline = time.monotonic() + GROUP_EXIT_S
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return code


def start_server(
    cfg: EngineConfig,
    log_path: Path,
    *,
    port: int | None = None,
    python: str | None = None,
    host: str | None = None,
    gpus: int | None = None,
) -> RunningServer:
    """Spawn the server (not yet healthy) on `port` (default: the config's serve.port);
    `gpus` overrides GPU detection (tests)."""
    port = port or cfg.serve.port
    host = host or cfg.serve.host
    command = render_command(cfg, port=port, python=python, host=host)
    check_can_start(cfg, command, gpus)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **command.env}
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            list(command.argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            # The server ends with this launcher, even a SIGKILLed one (Linux).
            preexec_fn=pdeathsig_preexec(),
        )
    # A wildcard bind is reached on loopback from this machine.
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return RunningServer(cfg, command, process, f"http://{reach}:{port}", log_path)


def _get(url: str, timeout: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status), r.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def wait_healthy(
    server: RunningServer,
    timeout_s: float | None = None,
    poll_s: float = 1.0,
    on_wait: Callable[[float], None] | None = None,
) -> float:
    """Poll the health path until it answers 200; return the seconds it took. Raises
    `LaunchError` (with the log's tail) if the process exits or the timeout passes."""
    limit = server.config.serve.startup_timeout_s if timeout_s is None else timeout_s
    health = server.url + server.config.serve.health_path
    t0 = time.monotonic()
    while True:
        waited = time.monotonic() - t0
        if not server.alive():
            raise LaunchError(
                f"{server.config.name}: the server exited with code {server.process.returncode} "
                f"during start-up (log: {server.log_path}). Last lines:\n{server.log_tail()}"
            )
        status, _ = _get(health, timeout=min(5.0, poll_s + 4.0))
        if status == 200:
            return waited
        if waited > limit:
            raise LaunchError(
                f"{server.config.name}: {health} did not answer 200 within {limit:.0f} s "
                f"(serve.startup_timeout_s; log: {server.log_path}). Last lines:\n"
                f"{server.log_tail()}"
            )
        if on_wait is not None:
            on_wait(waited)
        time.sleep(poll_s)


@contextlib.contextmanager
def launched(
    cfg: EngineConfig,
    log_path: Path,
    *,
    port: int | None = None,
    python: str | None = None,
    timeout_s: float | None = None,
    gpus: int | None = None,
) -> Iterator[RunningServer]:
    """Start `cfg`, wait until healthy, yield the server, stop it on exit (also on errors)."""
    server = start_server(cfg, log_path, port=port, python=python, gpus=gpus)
    try:
        wait_healthy(server, timeout_s)
        yield server
    finally:
        server.stop()


def engine_block_size(url: str, timeout: float = 10.0) -> int | None:
    """The cache block size the engine reports on /metrics (vLLM's `cache_config_info`
    `block_size` label, read by `replay.engines.scrape`); None when absent."""
    status, text = _get(url.rstrip("/") + "/metrics", timeout)
    if status != 200:
        return None
    return block_size_from_metrics(text)
