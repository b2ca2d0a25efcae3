"""Run the Shepherd Model Gateway (`smg`, SGLang's router) in front of worker URLs, and own it.

    with start_smg(["http://127.0.0.1:41001", "http://127.0.0.1:41002"]) as router:
        router.url          # http://127.0.0.1:PORT, answers /v1/completions, /health, ...
        router.version      # "1.13.0", read from `smg --version`

Where it comes from: `REPLAY_SMG` (a path to the `smg` executable), else `.venv-smg/bin/smg`
in the project (scripts/setup_peers.sh installs the pinned 1.13.0 there), else `smg` on the
PATH. `SmgMissing` says how to install it.

Hard edges of smg 1.13.0 this module handles (issue 26):

- It also serves Prometheus metrics, by default on 0.0.0.0:29000: two routers on one machine
  collide and a test would listen on every interface. We pass `--prometheus-host 127.0.0.1`
  and a free `--prometheus-port` always.
- On SIGTERM it drains: it keeps its listener open for a 5 s "load-balancer propagation
  window" (model_gateway/src/server.rs, "Keeping listener open ... settle_secs=5") that the
  Python launcher leaves at its default (smg/router_args.py's module docstring), so it
  ignores SIGTERM for over 4 s; the launcher renames itself `smg::router`
  (smg/launch_router.py, setproctitle). It runs in its own session; stopping sends SIGTERM
  to its process group and every descendant, SIGKILL after `grace_s`, and then checks that
  no process of the group or of the descendants seen remains (`SmgLeftBehind` otherwise).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from replay.engines.launch import free_port
from replay.lifeline import pdeathsig_preexec

SMG_ENV = "REPLAY_SMG"
PINNED_VERSION = "1.13.0"  # scripts/setup_peers.sh SMG_VERSION
ROUTED_HEADER = "x-smg-routed-worker-id"  # the worker URL smg sent the request to
_PROJECT_SMG = Path(__file__).resolve().parents[2] / ".venv-smg" / "bin" / "smg"


class SmgMissing(RuntimeError):
    """No smg executable to run; the message says how to get one."""


class SmgError(RuntimeError):
    """smg did not start or did not become ready; the message carries its log's tail."""


class SmgLeftBehind(RuntimeError):
    """A process of the router outlived its stop."""


def find_smg() -> str:
    """The smg executable: $REPLAY_SMG, the project's .venv-smg, or the PATH."""
    given = os.environ.get(SMG_ENV)
    if given:
        if not (Path(given).is_file() and os.access(given, os.X_OK)):
            raise SmgMissing(f"{SMG_ENV}={given}: not an executable file")
        return given
    if _PROJECT_SMG.is_file():
        return str(_PROJECT_SMG)
    found = shutil.which("smg")
    if found:
        return found
    raise SmgMissing(
        f"smg (the Shepherd Model Gateway) is not installed: run `bash scripts/setup_peers.sh` "
        f"(it puts smg=={PINNED_VERSION} in .venv-smg), `pip install smg=={PINNED_VERSION}`, "
        f"or point {SMG_ENV} at an smg executable"
    )


def smg_version(exe: str) -> str:
    """`smg --version` ("smg 1.13.0") as "1.13.0"."""
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    text = (out.stdout or out.stderr).strip()
    if out.returncode != 0 or not text:
        raise SmgError(f"{exe} --version failed (exit {out.returncode}): {text[-500:]}")
    return text.split()[-1]


def _proc_stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the command name) of every process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        yield int(entry), stat.rsplit(")", 1)[1].split()


def _children_of() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for pid, fields in _proc_stats():
        kids.setdefault(int(fields[1]), []).append(pid)
    return kids


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (Linux /proc)."""
    kids, out, todo = _children_of(), set(), [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def group_members(pgid: int) -> set[int]:
    """Live processes whose process group is `pgid`."""
    return {pid for pid, f in _proc_stats() if f[0] != "Z" and int(f[2]) == pgid}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class SmgRouter:
    """One smg process (see the module docstring); use `start_smg`."""

    def __init__(
        self,
        worker_urls: Sequence[str],
        policy: str = "cache_aware",
        args: Mapping[str, object] | Sequence[str] = (),
        exe: str | None = None,
        startup_s: float = 60.0,
    ) -> None:
        if not worker_urls:
            raise ValueError("smg needs at least one worker URL")
        self.exe = exe or find_smg()
        self.version = smg_version(self.exe)
        self.worker_urls = list(worker_urls)
        self.policy = policy
        self.port = free_port()
        self.prometheus_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        extra = _flags(args)
        self.command = [
            self.exe, "launch", "--host", "127.0.0.1", "--port", str(self.port),
            "--worker-urls", *self.worker_urls, "--policy", policy,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.prometheus_port),
            *extra,
        ]  # fmt: skip
        self._tmp = tempfile.TemporaryDirectory(prefix="replay-smg-")
        self.log_path = Path(self._tmp.name) / "smg.log"
        self.startup_s = startup_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._seen: set[int] = set()

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=pdeathsig_preexec(signal.SIGKILL),
            )
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SmgError(
                    f"smg exited with {self.proc.returncode} at start; its log ends with:\n"
                    f"{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/readiness", timeout=2) as resp:
                    if resp.status == 200:
                        self._seen |= {self.proc.pid} | descendants(self.proc.pid)
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise SmgError(
            f"smg at {self.url} was not ready within {self.startup_s:.0f} s; its log ends "
            f"with:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def processes(self) -> set[int]:
        """The router's live processes: its group and every descendant seen so far."""
        if self.proc is None:
            return set()
        self._seen |= descendants(self.proc.pid)
        return {p for p in self._seen | group_members(self.proc.pid) if _alive(p)}

    def stop(self, grace_s: float = 1.0) -> None:
        """SIGTERM to the group and descendants, SIGKILL after `grace_s` (smg drains for 5 s
        on SIGTERM: a replay that is over has nothing to drain), then verify none is left."""
        proc = self.proc
        if proc is None:
            return
        pids = self.processes()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not pids:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
            while time.monotonic() < deadline:
                proc.poll()  # reap our own child so it is not left a zombie
                pids = self.processes()
                if not pids:
                    break
                time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(1)
        left = self.processes()
        if left:
            raise SmgLeftBehind(f"smg processes still running after SIGKILL: {sorted(left)}")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self._tmp.cleanup()


def _flags(args: Mapping[str, object] | Sequence[str]) -> list[str]:
    """`{"cache-threshold": 0.3, "disable-retries": True}` as smg flags (or a ready list)."""
    if not isinstance(args, Mapping):
        return [str(a) for a in args]
    out: list[str] = []
    for key, value in args.items():
        flag = "--" + key.lstrip("-").replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not False and value is not None:
            out += [flag, str(value)]
    return out


@contextlib.contextmanager
def start_smg(
    worker_urls: Sequence[str],
    policy: str = "cache_aware",
    args: Mapping[str, object] | Sequence[str] = (),
    exe: str | None = None,
    startup_s: float = 60.0,
) -> Iterator[SmgRouter]:
    """smg in front of `worker_urls`, ready; stopped (and checked gone) on leaving."""
    router = SmgRouter(worker_urls, policy, args, exe, startup_s)
    try:
        router.start()
        yield router
    finally:
        router.close()
