"""`replay serve-sim --policy vllm-native`: the emulator with vLLM's own KV cache manager behind
HTTP (run in `.venv-vllm`'s worker process), answering cached tokens as vLLM 0.32 does."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from replay.emulator.launch import READY_PREFIX
from replay.sim.native.worker import NativeError, find_vllm
from tests.required import missing

pytestmark = pytest.mark.vllm


def _post(url: str, ids: list[int], max_tokens: int) -> dict[str, Any]:
    body = json.dumps({"prompt": ids, "max_tokens": max_tokens, "ignore_eos": True}).encode()
    req = urllib.request.Request(
        url + "/v1/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def test_serve_sim_runs_vllms_own_cache_manager() -> None:
    try:
        find_vllm()
    except NativeError as e:
        missing(str(e))
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "replay", "serve-sim", "--engine", "vllm",
            "--policy", "vllm-native", "--port", "0", "--block-tokens", "64",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), line
        assert "policy=vllm-native" in line
        url = line.split()[2]
        first = _post(url, list(range(1000, 1700)), 8)
        assert first["usage"]["prompt_tokens"] == 700
        assert not first["usage"].get("prompt_tokens_details")  # cold: nothing cached
        # The next turn extends the first prompt (not its output): vLLM kept the state at
        # the replay boundary ⌊(700 − 1)/64⌋·64 = 640 and caps the hit there.
        second = _post(url, list(range(1000, 1700)) + list(range(5000, 5100)), 8)
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 640
    finally:
        proc.terminate()
        proc.wait(30)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
