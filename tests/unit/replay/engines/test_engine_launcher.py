"""The launcher with real processes: a stand-in engine (stub/stub_engine_server.py) started
from a config exactly as vLLM would be, with a worker child of its own. Checks health waiting,
start-up failures with the log's tail, time-outs, the GPU and interpreter fail-fast paths,
that stopping takes the whole process group down, and `replay engines launch` end to end
(endpoint line, Ctrl-C and SIGTERM stop the server)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from replay.engines.configs import EngineConfig, load_engine_config, render_command
from replay.engines.launch import (
    LaunchError,
    check_can_start,
    free_port,
    launched,
    start_server,
    wait_healthy,
)

STUB_DIR = Path(__file__).resolve().parent / "stub"
ENGINES = Path(__file__).resolve().parents[4] / "configs" / "engines"


def _alive(pid: int) -> bool:
    """Running and not a zombie (an orphaned worker may linger as one until reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_dead(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def stub_config(tmp_path: Path, mode: str = "healthy", timeout_s: float = 20) -> EngineConfig:
    """A config whose server is the stub (nothing is expected of it beyond /health)."""
    data = {
        "description": "stub engine for launcher tests",
        "kind": "vllm",
        "engine": "stubengine",
        "adapter": "vllm",
        "source": {"type": "package", "package": "stub", "version": "0"},
        "model": {"path": "stub-model", "served_name": "stub"},
        "hardware": {"gpus": 0},
        "serve": {
            "python": sys.executable,
            "module": "stub_engine_server",
            "args": ["--mode", mode, "--pidfile", str(tmp_path / "worker.pid")],
            "env": {"PYTHONPATH": str(STUB_DIR)},
            "startup_timeout_s": timeout_s,
        },
        "expect": {
            "cached_tokens_reported": False,
            "prefix_caching": False,
            "token_id_prompts": False,
            "metrics": False,
        },
    }
    path = tmp_path / f"stub-{mode}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_engine_config(str(path))


def _worker_pid(tmp_path: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = (tmp_path / "worker.pid").read_text() if (tmp_path / "worker.pid").exists() else ""
        if text.strip():
            return int(text)
        time.sleep(0.05)
    raise AssertionError("the stub never wrote its worker pid")


def test_launched_server_is_healthy_and_stop_takes_the_group_down(tmp_path: Path) -> None:
    cfg = stub_config(tmp_path)
    with launched(cfg, tmp_path / "server.log", port=free_port()) as server:
        with urllib.request.urlopen(server.url + "/health", timeout=5) as r:
            assert r.status == 200
        worker = _worker_pid(tmp_path)
        assert _alive(server.pid) and _alive(worker)
        assert os.getpgid(worker) == server.pid  # the worker is in the server's group
    assert not _alive(server.pid)
    assert _wait_dead(worker), "the engine's worker outlived the stop"
    assert "stub engine starting in mode healthy" in (tmp_path / "server.log").read_text()


def test_a_server_that_exits_during_start_up_reports_its_log(tmp_path: Path) -> None:
    cfg = stub_config(tmp_path, "exit")
    server = start_server(cfg, tmp_path / "server.log", port=free_port())
    try:
        with pytest.raises(LaunchError) as e:
            wait_healthy(server, poll_s=0.1)
    finally:
        server.stop()
    msg = str(e.value)
    assert "exited with code 3 during start-up" in msg
    assert "fatal: stub engine could not start (on purpose)" in msg
    assert str(tmp_path / "server.log") in msg


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    cfg = stub_config(tmp_path, "hang", timeout_s=1.5)
    with (
        pytest.raises(LaunchError, match=r"did not answer 200 within 2 s"),
        launched(cfg, tmp_path / "server.log", port=free_port()),
    ):
        pass
    # `launched` stopped the whole group on the way out, the stub's worker included.
    assert _wait_dead(_worker_pid(tmp_path))


def test_a_gpu_config_fails_before_spawning_anything_on_a_cpu_machine() -> None:
    cfg = load_engine_config("vllm-glm53-b200", ENGINES)
    with pytest.raises(LaunchError) as e:
        check_can_start(cfg, render_command(cfg), gpus=1)
    assert "needs 2 × B200 GPU(s) per engine but this machine shows 1" in str(e.value)


def test_a_missing_interpreter_says_how_to_install(tmp_path: Path) -> None:
    cfg = load_engine_config("flashstate-glm53-b200", ENGINES)
    with pytest.raises(LaunchError) as e:
        start_server(cfg, tmp_path / "x.log", gpus=2)  # pretend the GPUs are there
    msg = str(e.value)
    assert ".venv-flashstate/bin/python does not exist" in msg
    assert "bash scripts/fetch_flashstate.sh" in msg
    assert not (tmp_path / "x.log").exists()  # nothing was started


def _launch_cli(tmp_path: Path, cfg: EngineConfig) -> tuple[subprocess.Popen[bytes], Path, str]:
    out = tmp_path / "launch.out"
    cmd = [sys.executable, "-m", "replay", "engines", "launch", str(cfg.path)]
    cmd += ["--no-preflight", "--port", str(free_port()), "--log-file", str(tmp_path / "s.log")]
    with out.open("wb") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "300"}
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if m := re.search(r"^--endpoint (\S+)$", out.read_text(), re.M):
            return proc, out, m.group(1)
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no endpoint line; launcher said:\n{out.read_text()}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_launch_command_prints_the_endpoint_and_a_signal_stops_the_server(
    tmp_path: Path, sig: signal.Signals
) -> None:
    cfg = stub_config(tmp_path)
    proc, out, endpoint = _launch_cli(tmp_path, cfg)
    try:
        url = endpoint.rsplit("@", 1)[1]
        # The engine name is not a kind, so the line names the kind for `replay run`.
        assert endpoint == f"stubengine=vllm@{url}" and url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            assert r.status == 200
        m = re.search(r"^server pid (\d+)", out.read_text(), re.M)
        assert m is not None
        server_pid, worker = int(m.group(1)), _worker_pid(tmp_path)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:  # a failed assertion must not leave the launcher running
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    assert "server stopped" in out.read_text()
    assert _wait_dead(server_pid) and _wait_dead(worker)


def _preflight_cli(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replay", "engines", "preflight", target],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def test_preflight_command_fails_with_the_fix_against_a_server_without_a_model(
    tmp_path: Path,
) -> None:
    # The stub answers /health but serves no OpenAI API: preflight must stop and say so.
    with launched(stub_config(tmp_path), tmp_path / "server.log", port=free_port()) as server:
        done = _preflight_cli(server.url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ok reachable" in done.stdout
    assert "preflight failed" in done.stderr and "model listed failed" in done.stderr
    assert "Fix:" in done.stderr


def test_preflight_command_against_nothing_says_it_is_unreachable() -> None:
    done = _preflight_cli(f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1
    assert "reachable failed" in done.stderr and "start the engine" in done.stderr


def test_visible_gpus_counts_nvidia_smi_lines_within_cuda_visible_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No GPU here: a stand-in nvidia-smi prints what the real one prints on a 2×B200 node.
    from replay.engines.launch import visible_gpus

    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "GPU 0: NVIDIA B200 (UUID: GPU-aaaa)"\n'
        'echo "GPU 1: NVIDIA B200 (UUID: GPU-bbbb)"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus() == 2
    for cvd, n in (("0", 1), ("1,0", 2), ("", 0), ("-1", 0), ("0,1,2,3", 2)):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cvd)
        assert visible_gpus() == n, cvd
    monkeypatch.setenv("PATH", "/nonexistent")
    assert visible_gpus() == 0


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # vLLM's engine core: the exception line after its logger's prefix, not the later
        # ERROR line of the API server that merely reports it.
        ("INFO ok\n(EngineCore pid=1) ERROR 12-05 [core.py:1] Traceback (most recent call "
         "last):\n(EngineCore pid=1) ERROR 12-05 [core.py:1] ValueError: bad block 7\n"
         "\x1b[31mERROR 12-05 [async_llm.py:2] AsyncLLM output_handler failed.\x1b[0m\n",
         "(EngineCore pid=1) ERROR 12-05 [core.py:1] ValueError: bad block 7"),
        # A Python traceback's last line; `raise X(...)` lines are not it.
        ("Traceback:\n    raise RuntimeError(msg)\ntorch.OutOfMemoryError: CUDA out of memory\n",
         "torch.OutOfMemoryError: CUDA out of memory"),
        # vLLM 0.32's Mamba-2 crash on the CPU (the unpatched tiny NemotronH, measured): the
        # worker's IndexError is the cause; the engine core's and API server's lines after it
        # only point back at it.
        ("(Worker pid=2) ERROR [multiproc_executor.py:1063] IndexError: index 13 is out of "
         "bounds for dimension 0 with size 1\n(EngineCore pid=1) ERROR [core.py:1512] "
         "RuntimeError: Worker failed with error 'index 13 is out of bounds for dimension 0 "
         "with size 1', please check the stack trace above for the root cause\n(APIServer "
         "pid=0) ERROR [serving.py:500] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
         "encountered an issue. See stack trace (above) for the root cause.\n",
         "(Worker pid=2) ERROR [multiproc_executor.py:1063] IndexError: index 13 is out of "
         "bounds for dimension 0 with size 1"),
        # Only wrappers: the last of them.
        ("EngineDeadError: see the root cause above\n", "EngineDeadError: see the root cause above"),
        # No exception: the last line a logger marked ERROR (colour codes dropped).
        ("INFO a\n\x1b[1;31mERROR 12-05 server died\x1b[0m\nINFO b\n", "ERROR 12-05 server died"),
        ("INFO all fine\nWARNING slow\n", None),
        ("", None),
    ],
)  # fmt: skip
def test_last_error_line_finds_the_engines_last_words(
    tmp_path: Path, text: str, want: str | None
) -> None:
    from replay.engines.launch import last_error_line

    log = tmp_path / "server.log"
    log.write_text(text)
    assert last_error_line(log) == want
    assert last_error_line(tmp_path / "missing.log") is None
