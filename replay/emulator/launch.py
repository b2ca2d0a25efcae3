"""Start engine emulators as local child processes (the embedded default of `replay run`).

Usage::

    from replay.emulator.launch import start_emulators

    with start_emulators(["flashstate", "vllm", "sglang"], time_scale=30, blocks=600) as urls:
        # urls == {"flashstate": "http://127.0.0.1:41231", "vllm": ..., "sglang": ...}
        ...  # every server answers /health before the block starts

Each emulator is its own `python -m replay.emulator` process (the same server as
`replay serve-sim`), so three engines and the client spread over the cores and one engine's
event loop never delays another's timestamps. Each child binds a free loopback port and
reports it on stdout, so parallel test runs never race for ports. With `restart=True` a
supervisor restarts a child that died (an injected crash) on the same port, with an empty
cache and without its `crash_after` fault, as an engine restarted by its operator would be.
Leaving the block stops every child (SIGTERM, then SIGKILL after a grace period); a child
also ends by itself when this process dies, even by SIGKILL (`replay/lifeline.py`). The
children's logs folder (`replay-emulators-*` in the temp directory) names its owner
(`replay.owned_tmp`): one a SIGKILLed process left is removed, with a one-line notice, by the
next group that starts (issue 36).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypedDict, Unpack

from replay.emulator.config import EmulatorConfig, FaultConfig, emulator_config
from replay.lifeline import PARENT_ENV
from replay.owned_tmp import describe, owned_tempdir, remove_orphans
from replay.profiles import DEFAULT_MODEL

READY_PREFIX = "serve-sim ready:"
TMP_PREFIX = "replay-emulators-"  # the children's logs folder, in the temp directory
_READY_RE = re.compile(re.escape(READY_PREFIX) + r"\s+(http://\S+)")


class EmulatorLaunchError(RuntimeError):
    """An emulator child that did not come up; the message carries the tail of its log."""


class _Child:
    """One emulator process, its log file and the URL it reported."""

    def __init__(self, cfg: EmulatorConfig, log_dir: Path, timeout_s: float) -> None:
        self.cfg = cfg
        self.log_path = log_dir / f"{server_name(cfg)}-{cfg.port or 'auto'}.log"
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.restarts = 0
        # (died, serving again) per restart, in time.perf_counter_ns(); None: not restarted.
        self.outages: list[tuple[int, int | None]] = []

    def start(self) -> None:
        cmd = [sys.executable, "-m", "replay.emulator", *self.cfg.child_args()]
        # The child ends with this process, even under SIGKILL (see replay/lifeline.py).
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{PARENT_ENV: str(os.getpid())})
        log = self.log_path.open("a")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env, start_new_session=True
        )
        log.close()
        self.url = self._await_ready()
        # Drain stdout for the child's lifetime so a chatty child never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        _wait_healthy(self.url, self.timeout_s, self)

    def _await_ready(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break  # the child exited before it was ready
            m = _READY_RE.search(line)
            if m:
                return m.group(1)
        self.stop()
        raise EmulatorLaunchError(
            f"emulator '{self.cfg.engine}' did not start within {self.timeout_s:.0f} s; "
            f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
        )

    def _drain(self) -> None:
        proc = self.proc
        if proc is not None and proc.stdout is not None:
            for _ in proc.stdout:
                pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 3.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(grace_s)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_healthy(url: str, timeout_s: float, child: _Child) -> None:
    """Poll /health until it answers 200; a slow-start child answers 503 for a while."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.alive():
            break
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise EmulatorLaunchError(
        f"emulator '{child.cfg.engine}' at {url} did not become healthy within "
        f"{timeout_s:.0f} s; its log ({child.log_path}) ends with:\n{child.log_tail()}"
    )


def server_name(cfg: EmulatorConfig) -> str:
    """The engine's name for a lone server, `engine.N` for its replica N."""
    return cfg.engine if cfg.replica is None else f"{cfg.engine}.{cfg.replica}"


class EmulatorGroup:
    """Running emulators: `urls` maps each server's name (`server_name`: the engine, or
    `engine.N` for replica N) to its base URL. Use `start_emulators` or `start_fleet`."""

    def __init__(
        self,
        configs: Sequence[EmulatorConfig],
        restart: bool,
        timeout_s: float,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        names = [server_name(c) for c in configs]
        if len(set(names)) != len(names):
            raise ValueError(f"one emulator per engine name (or engine replica), got {names}")
        removed = remove_orphans(TMP_PREFIX)
        if removed:
            (notice or _stderr)(describe(removed, "emulator logs"))
        self._tmp = owned_tempdir(TMP_PREFIX)
        self._children = {
            server_name(c): _Child(c, Path(self._tmp.name), timeout_s) for c in configs
        }
        self._restart = restart
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._supervisor: threading.Thread | None = None

    @property
    def urls(self) -> dict[str, str]:
        return {name: child.url for name, child in self._children.items()}

    @property
    def fleet(self) -> dict[str, list[str]]:
        """Each engine's replica URLs in replica order (a lone server: a list of one)."""
        out: dict[str, list[tuple[int, str]]] = {}
        for child in self._children.values():
            out.setdefault(child.cfg.engine, []).append((child.cfg.replica or 0, child.url))
        return {engine: [url for _, url in sorted(pairs)] for engine, pairs in out.items()}

    def restarts(self) -> dict[str, int]:
        """How many times each emulator was restarted after dying."""
        return {name: child.restarts for name, child in self._children.items()}

    def outages(self) -> dict[str, list[tuple[int, int | None]]]:
        """When each emulator was seen dead and when it served again (perf_counter_ns), so an
        outage shorter than a health poll is still recorded."""
        return {name: list(child.outages) for name, child in self._children.items()}

    def start(self) -> None:
        try:
            for child in self._children.values():
                child.start()
        except BaseException:
            self.close()
            raise
        if self._restart:
            self._supervisor = threading.Thread(target=self._supervise, daemon=True)
            self._supervisor.start()

    def _supervise(self) -> None:
        while not self._stop.wait(0.2):
            for child in self._children.values():
                with self._lock:
                    if self._stop.is_set() or child.alive():
                        continue
                    died = time.perf_counter_ns()
                    child.stop()
                    # Same port (clients keep their URL); no crash fault, or it would loop.
                    port = int(child.url.rsplit(":", 1)[1])
                    faults = child.cfg.faults.model_copy(update={"crash_after": None})
                    child.cfg = child.cfg.model_copy(update={"port": port, "faults": faults})
                    child.restarts += 1
                    back: int | None = None
                    with contextlib.suppress(EmulatorLaunchError):
                        child.start()
                        back = time.perf_counter_ns()
                    child.outages.append((died, back))

    def close(self) -> None:
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(5)
        with self._lock:
            for child in self._children.values():
                child.stop()
        self._tmp.cleanup()


def _stderr(line: str) -> None:
    sys.stderr.write(f"note: {line}\n")


class EmulatorSettings(TypedDict, total=False):
    """The keyword settings `emulator_configs` shares between the emulators it configures
    (its signature holds their defaults): what `start_emulators`, `start_emulator_group` and
    `start_fleet` take beside engine names."""

    model: str
    time_scale: float
    blocks: int | None
    block_tokens: int | None
    max_batch: int | None
    policies: Mapping[str, str] | None
    faults: FaultConfig | Mapping[str, FaultConfig] | None
    ports: Mapping[str, int] | None


def emulator_configs(
    engines: Sequence[str],
    *,
    model: str = DEFAULT_MODEL,
    time_scale: float = 1.0,
    blocks: int | None = None,
    block_tokens: int | None = None,
    max_batch: int | None = None,
    policies: Mapping[str, str] | None = None,
    faults: FaultConfig | Mapping[str, FaultConfig] | None = None,
    ports: Mapping[str, int] | None = None,
    replicas: int = 1,
) -> list[EmulatorConfig]:
    """One `EmulatorConfig` per engine, sharing the model, clock and capacity settings; with
    `replicas` N > 1, N per engine (replica 0..N-1, each its own server and cache, free
    ports: `ports` pins lone servers only)."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    out = []
    for engine in engines:
        f = faults.get(engine) if isinstance(faults, Mapping) else faults
        for replica in range(replicas) if replicas > 1 else [None]:
            out.append(
                emulator_config(
                    engine,
                    policy=(policies or {}).get(engine),
                    model=model,
                    port=(ports or {}).get(engine, 0) if replica is None else 0,
                    time_scale=time_scale,
                    blocks=blocks,
                    block_tokens=block_tokens,
                    max_batch=max_batch,
                    faults=f or FaultConfig(),
                    replica=replica,
                )
            )
    return out


def replica_configs(cfg: EmulatorConfig, replicas: int) -> list[EmulatorConfig]:
    """`replicas` copies of one emulator's settings, replica 0..N-1, each on a free port."""
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    return [cfg.model_copy(update={"replica": i, "port": 0}) for i in range(replicas)]


def _configs(
    engines: Sequence[str] | Sequence[EmulatorConfig], settings: EmulatorSettings
) -> list[EmulatorConfig]:
    """Ready configs as they are (the settings then unused), else one per engine name."""
    if engines and all(isinstance(e, EmulatorConfig) for e in engines):
        return [e for e in engines if isinstance(e, EmulatorConfig)]
    return emulator_configs([str(e) for e in engines], **settings)


@contextlib.contextmanager
def start_fleet(
    engines: Sequence[str] | Sequence[EmulatorConfig],
    replicas: int,
    *,
    restart: bool = False,
    timeout_s: float = 60.0,
    **settings: Unpack[EmulatorSettings],
) -> Iterator[EmulatorGroup]:
    """`replicas` emulator servers per engine (`engines`: names, with `emulator_configs`'s
    keyword `settings`, or ready configs, each multiplied); yields the group, whose `fleet`
    maps each engine to its replicas' URLs. Every replica answers with its index in the
    `x-replay-replica` header (replay.emulator.server.REPLICA_HEADER)."""
    configs = [r for c in _configs(engines, settings) for r in replica_configs(c, replicas)]
    with start_emulator_group(configs, restart=restart, timeout_s=timeout_s) as group:
        yield group


@contextlib.contextmanager
def start_emulators(
    engines: Sequence[str] | Sequence[EmulatorConfig],
    *,
    restart: bool = False,
    timeout_s: float = 60.0,
    **settings: Unpack[EmulatorSettings],
) -> Iterator[dict[str, str]]:
    """Start one emulator per engine on loopback; yield `{engine: base_url}`.

    `engines` are names (flashstate, vllm, sglang), each served with its own cache policy,
    or ready `EmulatorConfig`s (then the keyword settings are ignored). `blocks` and
    `block_tokens` override the profile's cache (per engine) so a small trace sees realistic
    pressure. `faults` is one `FaultConfig` for all or a mapping per engine. `ports` pins
    ports (default: free ones). `restart=True` restarts a child that dies (see module doc).
    Blocks until every server answers `/health`; raises `EmulatorLaunchError` (with the
    child's log tail) if one does not within `timeout_s`. Use `start_emulator_group` to
    also reach the restart counts.
    """
    with start_emulator_group(engines, restart=restart, timeout_s=timeout_s, **settings) as group:
        yield group.urls


@contextlib.contextmanager
def start_emulator_group(
    engines: Sequence[str] | Sequence[EmulatorConfig],
    *,
    restart: bool = False,
    timeout_s: float = 60.0,
    **settings: Unpack[EmulatorSettings],
) -> Iterator[EmulatorGroup]:
    """Like `start_emulators`, yielding the `EmulatorGroup` (urls, restart counts)."""
    group = EmulatorGroup(_configs(engines, settings), restart=restart, timeout_s=timeout_s)
    group.start()
    try:
        yield group
    finally:
        group.close()
