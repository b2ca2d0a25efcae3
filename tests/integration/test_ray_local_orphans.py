"""`replay simulate --ray local` leaves nothing of its Ray cluster behind (issue 36, nothing left
running): whether the sweep completes, is stopped by SIGINT or SIGTERM, or the command is
SIGKILLed, every process the local cluster started (GCS, raylet, dashboard, Ray's dashboard
and runtime-env agents, its workers) is gone within 5 s of the command's end. The two agents
used to stay about a minute (they only notice the raylet's death by polling), after a
completed sweep too: the forked sweep child runs no atexit handlers, so nothing called
`ray.shutdown()`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.long_trace import write_long_trace
from tests.processes import descendants, kill_all, name, wait_gone

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
GONE_S = 5.0
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
# Each agent as it runs before it renames itself (a short sweep can end before the rename).
AGENT_SCRIPTS = {AGENTS[0]: "ray/dashboard/agent.py", AGENTS[1]: "runtime_env/agent/main.py"}


def _agents_seen(commands: set[str]) -> set[str]:
    return {a for a in AGENTS if any(c.startswith(a) or AGENT_SCRIPTS[a] in c for c in commands)}


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _simulate(tmp_path: Path, sessions: int, minutes: int) -> subprocess.Popen[bytes]:
    with (tmp_path / "log").open("wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "replay", "simulate", "--trace", str(write_long_trace(tmp_path / "t.jsonl")),
             "--policies", "vllm,flashstate", "--sessions", str(sessions), "--duration-min",
             str(minutes), "--token-scale", "1", "--ray", "local", "--out", str(tmp_path / "sim")],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
        )  # fmt: skip


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_a_stopped_ray_local_sweep_leaves_no_ray_process(sig: int, tmp_path: Path) -> None:
    proc = _simulate(tmp_path, 50, 300)
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            kids = descendants(proc.pid)
            names = {name(k).strip() for k in kids}
            if all(a in names for a in AGENTS) and "ray::run_one" in names:
                break  # the cluster is up and simulating
            time.sleep(0.2)
        else:
            pytest.fail(f"Ray never ran the sweep: {(tmp_path / 'log').read_text()}")
        time.sleep(0.5)
        kids = descendants(proc.pid)
        proc.send_signal(sig)
        code = proc.wait(timeout=15)
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 130), (
            tmp_path / "log"
        ).read_text()
        left = wait_gone(kids, GONE_S)
        assert not left, f"still running {GONE_S} s after the command ended: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(kids)


def test_a_completed_ray_local_sweep_leaves_no_ray_process(tmp_path: Path) -> None:
    proc = _simulate(tmp_path, 2, 3)
    seen: dict[int, str] = {}
    try:
        while proc.poll() is None:
            seen.update({k: name(k, 4096).strip() for k in descendants(proc.pid)})  # names change
            time.sleep(0.1)
        assert proc.returncode == 0, (tmp_path / "log").read_text()
        assert _agents_seen(set(seen.values())) == set(AGENTS), seen  # the agents were there
        left = wait_gone(set(seen), GONE_S)
        assert not left, f"still running {GONE_S} s after the command ended: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(set(seen))


def _ray_run(
    tmp_path: Path, name: str, minutes: str, engines: str = "vllm", sessions: int = 2
) -> subprocess.Popen[bytes]:
    """`replay run --workers 2 --ray local` into `tmp_path/name`, its output in `name.log`."""
    with (tmp_path / f"{name}.log").open("wb") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", "replay", "run", "--engines", engines, "--sessions", str(sessions),
             "--duration-min", minutes, "--time-scale", "60", "--no-panel", "--workers", "2",
             "--ray", "local", "--out", str(tmp_path / name)],
            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200"),
        )  # fmt: skip


@pytest.mark.parametrize("stop", ["completed", "SIGINT"])
def test_a_run_with_ray_local_workers_leaves_no_ray_process(stop: str, tmp_path: Path) -> None:
    """`replay run --workers 2 --ray local`: the run's pool starts the cluster from a worker
    thread, and Ray bound its GCS and raylet to that thread, so they were killed when it ended
    and the two agents stayed about a minute; the pool now stops the cluster it started."""
    proc = _ray_run(tmp_path, "run", "1" if stop == "completed" else "30", "flashstate,vllm", 4)
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update({k: name(k).strip() for k in descendants(proc.pid)})  # names change
            running = sum(v.startswith("ray::_Worker") for v in seen.values()) >= 2
            if stop == "SIGINT" and running and _agents_seen(set(seen.values())) == set(AGENTS):
                time.sleep(1.0)
                seen.update({k: name(k).strip() for k in descendants(proc.pid)})
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.1)
        code = proc.wait(timeout=30)
        assert code == (0 if stop == "completed" else 130), (tmp_path / "run.log").read_text()
        # The cluster's agents were there (by their scripts, where the run ended before an agent
        # renamed itself: a 1-minute run at ×60 took ~1 s, and RuntimeEnvAgent was once missed).
        assert _agents_seen(set(seen.values())) == set(AGENTS), seen
        left = wait_gone(set(seen), GONE_S)
        assert not left, f"still running {GONE_S} s after the run ended: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(set(seen))


def test_the_next_ray_local_run_stops_the_agents_a_sigkilled_run_left(tmp_path: Path) -> None:
    """A SIGKILLed `replay run --ray local` runs no cleanup: its GCS and raylet die with it,
    but Ray's two agents live on about a minute. The run wrote its cluster's processes down
    once its workers were ready; the next `--ray local` run stops them and says so."""
    proc = _ray_run(tmp_path, "killed", "30")
    seen: dict[int, str] = {}
    later: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update({k: name(k).strip() for k in descendants(proc.pid)})
            running = sum(v.startswith("ray::_Worker") for v in seen.values()) >= 2
            if running and set(AGENTS) <= set(seen.values()):
                time.sleep(2.0)  # the workers are ready: the cluster's processes written down
                break
            time.sleep(0.1)
        agents = {k for k, v in seen.items() if v in AGENTS}
        assert len(agents) == 2, (tmp_path / "killed.log").read_text()
        proc.kill()
        proc.wait(timeout=15)
        time.sleep(1.0)
        assert set(wait_gone(agents, 0.1)) == agents, "the agents did not outlive the SIGKILL"
        later = _ray_run(tmp_path, "next", "0.5")
        assert later.wait(timeout=180) == 0, (tmp_path / "next.log").read_text()
        log = (tmp_path / "next.log").read_text()
        assert "removed 1 Ray cluster folder left by a killed run" in log, log
        assert "stopped" in log and "process" in log, log
        assert not wait_gone(agents, GONE_S), "the killed run's agents still run"
    finally:
        for p in (proc, later):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        kill_all(set(seen))
