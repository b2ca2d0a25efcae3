"""`replay serve-sim --engine sglang --policy sglang-native`: the emulator with SGLang's own
radix cache behind SGLang's `/generate` (run in `.venv-vllm`'s worker process), answering
cached tokens as SGLang 0.5.22's cache gives them."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from replay.emulator.launch import READY_PREFIX
from replay.sim.native.worker import NativeError, find_engine
from tests.required import SGLANG, missing

pytestmark = pytest.mark.vllm  # the vLLM environment, which SGLang is added to


def _generate(url: str, ids: list[int], max_new: int) -> dict[str, Any]:
    body = json.dumps(
        {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    ).encode()
    req = urllib.request.Request(url + "/generate", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def test_serve_sim_runs_sglangs_own_radix_cache() -> None:
    try:
        find_engine("sglang")
    except NativeError as e:
        missing(str(e), SGLANG)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "replay", "serve-sim", "--engine", "sglang",
            "--policy", "sglang-native", "--port", "0", "--block-tokens", "64",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), line
        assert "policy=sglang-native" in line
        url = line.split()[2]
        first = _generate(url, list(range(1000, 1700)), 8)
        assert first["meta_info"]["prompt_tokens"] == 700
        assert first["meta_info"]["cached_tokens"] == 0
        # One 700-token chunk (16,384 by default) tracks its state at ⌊700/256⌋·256 = 512,
        # and the tree keeps the KV up to it: the next turn hits 512.
        second = _generate(url, list(range(1000, 1700)) + list(range(5000, 5100)), 8)
        assert second["meta_info"]["cached_tokens"] == 512
    finally:
        proc.terminate()
        proc.wait(30)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
