"""`replay engines launch vllm-cpu-tiny` against the real CPU vLLM engine.

The session fixture `vllm_cpu` (conftest.py) already runs the launch command, so these tests
check what it printed and what it started rather than paying ~100 s for a second server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from replay.engines.configs import config_names, load_engine_config, render_command, resolve_python
from tests.required import missing

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=30) as r:
        data = json.loads(r.read())
    assert isinstance(data, dict)
    return data


def test_launch_prints_the_endpoint_line_and_the_server_answers(vllm_cpu) -> None:
    out = vllm_cpu.launch_output.read_text()
    assert f"--endpoint vllm={vllm_cpu.url}" in out.splitlines()
    assert "healthy after" in out
    # launch ran the live client's preflight before printing the endpoint line.
    assert "preflight passed: model tiny-llama, block size 128" in out
    for check in ("reachable", "model listed", "cached-token reporting", "prefix caching"):
        assert f"ok {check}:" in out
    assert out.index("preflight passed") < out.index("--endpoint vllm=")
    models = _get_json(vllm_cpu.url + "/v1/models")["data"]
    assert isinstance(models, list)
    assert [m["id"] for m in models] == ["tiny-llama"]


def test_block_size_matches_the_config_expectation(vllm_cpu) -> None:
    cfg = load_engine_config("vllm-cpu-tiny")
    assert vllm_cpu.block_size == cfg.expect.block_size == 128


def test_token_id_prompt_reports_cached_tokens_on_repeat(vllm_cpu) -> None:
    # The flags the config renders must give what the replay needs: token-id prompts and
    # cached-token accounting with prefix caching. A repeated 600-token prompt hits the cache
    # in whole 128-token blocks (the last partial block is recomputed).
    prompt = [(i * 7919) % 31000 + 100 for i in range(600)]
    body = {
        "model": vllm_cpu.model,
        "prompt": prompt,
        "max_tokens": 2,
        "ignore_eos": True,
        "return_token_ids": True,
    }
    usages = []
    for _ in range(2):
        req = urllib.request.Request(
            vllm_cpu.url + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            usages.append(json.loads(r.read())["usage"])
    assert usages[0]["prompt_tokens"] == 600
    assert usages[1]["prompt_tokens_details"]["cached_tokens"] == 512


def test_preflight_command_passes_against_the_launched_engine(vllm_cpu) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replay", "engines", "preflight", vllm_cpu.url],
        capture_output=True,
        text=True,
        timeout=300,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preflight passed: model tiny-llama, block size 128" in done.stdout


FORK_ONLY = {
    "--mamba-frontier-checkpoint",
    "--mamba-prefill-export",
    "--prefix-cache-eviction",
    "--prefill-cost-coefficients",
    "--prefix-cache-leaf-last",
    "--prefix-cache-leaf-idle-seconds",
}


def test_every_vllm_flag_in_the_configs_is_known_to_vllm() -> None:
    # Flag names come from vLLM's own parser, not from memory: every flag a vLLM-kind config
    # renders (the fork's six additions aside) must appear in vllm-cpu 0.32's --help=all.
    cfg = load_engine_config("vllm-cpu-tiny")
    python = resolve_python(cfg)
    if not Path(python).is_file():
        missing(f"{python} is missing: run `bash scripts/setup_vllm_cpu.sh`")
    done = subprocess.run(
        [python, "-m", "vllm.entrypoints.openai.api_server", "--help=all"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    known = set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", done.stdout))
    checked = 0
    for name in config_names():
        c = load_engine_config(name)
        if c.kind == "sglang":
            continue
        flags = {a for a in render_command(c).argv if a.startswith("--")} - FORK_ONLY
        unknown = sorted(flags - known)
        assert not unknown, f"{name}: vLLM does not know {unknown}"
        checked += len(flags)
    assert checked > 40
