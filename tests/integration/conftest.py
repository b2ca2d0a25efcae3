"""Integration fixtures: a real vLLM engine on the CPU, shared by the whole test session.

`vllm_cpu` (session scope) starts the bundled `vllm-cpu-tiny` config once, through the real
command a user runs (`replay engines launch vllm-cpu-tiny --port P`), so every test that uses
it also exercises the launcher, and CI (2 cores, ~100 s start-up) never pays for a second
server. Use it like this::

    @pytest.mark.vllm
    def test_something(vllm_cpu):
        vllm_cpu.url          # "http://127.0.0.1:PORT" (no /v1): OpenAI API at url + "/v1"
        vllm_cpu.model        # "tiny-llama": the `model` field of each request
        vllm_cpu.block_size   # 128: cache block size from /metrics cache_config_info
        vllm_cpu.vocab_size   # 32000: token ids must be below this
        vllm_cpu.engine       # "vllm": the name for `--endpoint vllm=URL`

Prompts must be token-id lists (the model has no tokenizer); the engine has prefix caching
and cached-token reporting on. The server is stopped (its whole process group) at the end of
the session. When `.venv-vllm` is absent the fixture skips and says how to install it
(`bash scripts/setup_vllm_cpu.sh`); set REPLAY_REQUIRE_VLLM=1 to make that a failure instead
(CI installs it, so there it must not skip). Server and launcher logs go under the pytest tmp
dir and are printed when start-up fails.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from replay.engines.configs import load_engine_config, resolve_python
from replay.engines.launch import engine_block_size, free_port
from tests.required import missing

_ENDPOINT = re.compile(r"^--endpoint (\S+)=(\S+)$", re.M)
_PID = re.compile(r"^server pid (\d+) ", re.M)


@dataclass(frozen=True)
class VllmCpuServer:
    """A running vLLM CPU server (see the module docstring)."""

    url: str
    model: str
    block_size: int
    vocab_size: int
    engine: str
    log_path: Path
    launch_output: Path
    pid: int


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _stop(proc: subprocess.Popen[bytes], server_pid: int | None) -> None:
    """Ctrl-C the launcher (it stops the server's group); force both groups if it hangs."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    if server_pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server_pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def vllm_cpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmCpuServer]:
    """The shared real vLLM CPU engine; skips when `.venv-vllm` is not installed."""
    with launch_engine("vllm-cpu-tiny", tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="session")
def vllm_hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmCpuServer]:
    """The real HYBRID engine (`vllm-cpu-hybrid`: a tiny Qwen3-Next, Gated DeltaNet +
    attention, align-mode prefix caching, 256-token blocks), shared by the session."""
    with launch_engine("vllm-cpu-hybrid", tmp_path_factory) as server:
        yield server


@contextlib.contextmanager
def launch_engine(name: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmCpuServer]:
    """Start engine config `name` through `replay engines launch` (launcher, preflight and
    all), yield it once it printed its endpoint line, stop its process groups on exit."""
    cfg = load_engine_config(name)
    python = Path(resolve_python(cfg))
    if not python.is_file():
        msg = (
            f"the CPU vLLM engine is not installed ({python} is missing): "
            "run `bash scripts/setup_vllm_cpu.sh` (about 4 minutes, 3.5 GB)"
        )
        missing(msg)

    logs = tmp_path_factory.mktemp(name.replace("-", "_"))
    log_path, out_path = logs / "server.log", logs / "launch.out"
    port = free_port()
    cmd = [sys.executable, "-m", "replay", "engines", "launch", name]
    cmd += ["--port", str(port), "--log-file", str(log_path)]
    with out_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
            start_new_session=True,
        )
    server_pid: int | None = None
    try:
        deadline = time.monotonic() + cfg.serve.startup_timeout_s + 120  # + preflight
        url = ""
        while time.monotonic() < deadline:
            text = _read(out_path)
            if server_pid is None and (m := _PID.search(text)):
                server_pid = int(m.group(1))
            if m := _ENDPOINT.search(text):
                url = m.group(2)
                break
            if proc.poll() is not None:
                break
            time.sleep(1.0)
        if not url:
            pytest.fail(
                f"the vLLM CPU engine {name} did not come up (launcher exit code "
                f"{proc.poll()}).\n--- launcher output ({out_path}):\n{_read(out_path)[-4000:]}\n"
                f"--- server log tail ({log_path}):\n{_read(log_path)[-6000:]}"
            )
        block = engine_block_size(url)
        if block is None:
            pytest.fail(f"{url}/metrics has no vllm:cache_config_info block_size; log {log_path}")
        vocab = _vocab_size(Path(cfg.resolved_model()))
        assert server_pid is not None  # printed before the endpoint line
        yield VllmCpuServer(
            url=url,
            model=cfg.model_name,
            block_size=block,
            vocab_size=vocab,
            engine=cfg.engine,
            log_path=log_path,
            launch_output=out_path,
            pid=server_pid,
        )
    finally:
        _stop(proc, server_pid)


def _vocab_size(model_dir: Path) -> int:
    import json

    return int(json.loads((model_dir / "config.json").read_text())["vocab_size"])
