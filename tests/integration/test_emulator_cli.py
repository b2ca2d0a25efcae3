"""`replay serve-sim` on the command line: flags, clear errors, a real server process."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.emulator.launch import READY_PREFIX

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--engine", "tgi"], "--engine: unknown engine 'tgi'; known: flashstate, vllm, sglang"),
        (["--engine", "vllm", "--time-scale", "0"], "--time-scale"),
        (["--engine", "vllm", "--error-rate", "2"], "--error-rate"),
        (["--engine", "vllm", "--crash-after", "0"], "--crash-after"),
        (["--engine", "vllm", "--token-scale", "0.5"], "--token-scale"),
        (["--engine", "vllm", "--model", "gpt-9"], "--model: model profile 'gpt-9' not found"),
        (["--engine", "vllm", "--policy", "nope"], "--policy nope: unknown policy 'nope'"),
        (["--engine", "vllm", "--blocks", "0"], "--blocks"),
        (
            ["--engine", "vllm", "--tokenizer", "no/such-dir-or-hub-name"],
            "--tokenizer no/such-dir-or-hub-name:",
        ),
    ],
)
def test_bad_flags_fail_naming_the_flag(args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["serve-sim", *args])
    assert result.exit_code == 2
    assert needle in " ".join(result.output.split())


def test_a_port_in_use_is_reported() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = runner.invoke(app, ["serve-sim", "--engine", "vllm", "--port", str(port)])
    assert result.exit_code == 2
    assert f"--port {port}: cannot listen" in " ".join(result.output.split())


def test_replay_serve_sim_serves_until_stopped() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "replay", "serve-sim", "--engine", "sglang", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), line
        assert "engine=sglang policy=sglang model=glm-5.3-flash" in line
        url = line.split()[2]
        with urllib.request.urlopen(url + "/health", timeout=5) as r:
            assert r.status == 200
        with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
            assert b"sglang:num_queue_reqs" in r.read()
    finally:
        proc.terminate()
        proc.wait(10)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def test_a_bad_early_stop_rate_names_its_flag() -> None:
    result = runner.invoke(app, ["serve-sim", "--engine", "vllm", "--early-stop-rate", "1.5"])
    assert result.exit_code == 2
    assert "--early-stop-rate" in " ".join(result.output.split())
