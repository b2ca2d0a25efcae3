"""The field's own benchmark clients against the emulators over HTTP: aiperf (completions and
multi-turn chat, Anthropic messages; streaming), `vllm bench serve` (random dataset, completions and chat) and
GuideLLM (chat) — each from its own environment (`.venv-peers`, `.venv-vllm`;
`scripts/setup.sh --test` installs both). Every run must finish with zero errors; emulator and
client share one tokenizer (a character-level Hugging Face folder), so token counts agree.

The clients spend most of their time starting up (imports, worker processes), so the module
runs all of them at once, each against its own in-process emulator, and each test then checks
one client's results. Without an environment its tests skip and say how to install it;
REPLAY_REQUIRE_PEERS=1 (set by `scripts/test.sh`) makes that a failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from replay.emulator.config import EmulatorConfig
from replay.emulator.server import running_server
from replay.emulator.tokenizer import save_char_tokenizer
from tests.required import PEERS, missing

pytestmark = [pytest.mark.peers, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
GUIDELLM = ROOT / ".venv-peers" / "bin" / "guidellm"
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
MODEL = "glm-5.3-flash"
TIMEOUT_S = 600.0

_VLLM_BENCH = """
import argparse, sys
from vllm.benchmarks.serve import add_cli_args, main
for argv in sys.argv[1:]:
    p = argparse.ArgumentParser()
    add_cli_args(p)
    main(p.parse_args(argv.split("\\x1f")))
"""


@dataclass
class PeerRun:
    """One client's run: its command's exit code and log, its output folder, and the
    emulator's counters after it."""

    out: Path
    rc: int = 0
    log: str = ""
    counters: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        assert self.rc == 0, f"exit code {self.rc}; log tail:\n{self.log[-4000:]}"


def _aiperf(url: str, tok: Path, out: Path, *args: str) -> list[str]:
    return [
        str(PEERS_PY), "-m", "aiperf", "profile", "--model", MODEL, "--url", url,
        "--tokenizer", str(tok), "--streaming", "--ui-type", "none", "--random-seed", "1",
        "--artifact-dir", str(out), "--workers-max", "2", "--record-processor-service-count",
        "1", "--extra-inputs", "ignore_eos:true", *args,
    ]  # fmt: skip


def _aiperf_completions(url: str, tok: Path, out: Path) -> list[str]:
    args = ["--endpoint-type", "completions", "--concurrency", "16", "--request-count", "200"]
    args += ["--synthetic-input-tokens-mean", "512", "--synthetic-input-tokens-stddev", "0"]
    args += ["--output-tokens-mean", "16", "--output-tokens-stddev", "0"]
    return _aiperf(url, tok, out, *args)


def _aiperf_chat(url: str, tok: Path, out: Path) -> list[str]:
    args = ["--endpoint-type", "chat", "--concurrency", "8", "--conversation-num", "24"]
    args += ["--conversation-turn-mean", "4", "--conversation-turn-stddev", "0"]
    args += ["--synthetic-input-tokens-mean", "300", "--output-tokens-mean", "24"]
    return _aiperf(url, tok, out, *args)


def _aiperf_messages(url: str, tok: Path, out: Path) -> list[str]:
    args = ["--endpoint-type", "messages", "--concurrency", "4", "--conversation-num", "8"]
    args += ["--conversation-turn-mean", "3", "--conversation-turn-stddev", "0"]
    args += ["--synthetic-input-tokens-mean", "300", "--output-tokens-mean", "16"]
    return _aiperf(url, tok, out, *args)


def _vllm_bench(url: str, tok: Path, out: Path) -> list[str]:
    runs = []
    for backend, endpoint in (("vllm", "/v1/completions"), ("openai-chat", "/v1/chat/completions")):
        argv = ["--backend", backend, "--endpoint", endpoint, "--base-url", url]
        argv += ["--model", MODEL, "--tokenizer", str(tok), "--dataset-name", "random"]
        argv += ["--random-input-len", "256", "--random-output-len", "16"]
        argv += ["--num-prompts", "200", "--max-concurrency", "16", "--ignore-eos"]
        argv += ["--save-result", "--result-dir", str(out), "--result-filename"]
        argv += [f"{backend}.json", "--seed", "1"]
        runs.append("\x1f".join(argv))
    return [str(VLLM_PY), "-c", _VLLM_BENCH, *runs]


def _guidellm(url: str, tok: Path, out: Path) -> list[str]:
    return [
        str(GUIDELLM), "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
        "--profile", "kind=concurrent,streams=8",
        "--data", "kind=synthetic_text,prompt_tokens=256,output_tokens=16",
        "--tokenizer", f"kind=hf_auto,model={tok}",
        "--constraint", "kind=max_requests,count=100",
        "--output", f"kind=json,path={out / 'guidellm.json'}", "--disable-console-interactive",
    ]  # fmt: skip


# name: (the client's executable, how to install it, engine, block tokens, command)
CommandFn = Callable[[str, Path, Path], list[str]]
CLIENTS: dict[str, tuple[Path, str, str, int, CommandFn]] = {
    "aiperf-completions": (
        PEERS_PY, "bash scripts/setup_peers.sh", "vllm", 256, _aiperf_completions,
    ),
    "aiperf-chat": (PEERS_PY, "bash scripts/setup_peers.sh", "sglang", 64, _aiperf_chat),
    "aiperf-messages": (
        PEERS_PY, "bash scripts/setup_peers.sh", "flashstate", 64, _aiperf_messages,
    ),
    "vllm-bench": (VLLM_PY, "bash scripts/setup_vllm_cpu.sh", "vllm", 256, _vllm_bench),
    "guidellm": (
        GUIDELLM,
        "bash scripts/setup_peers.sh (GuideLLM needs .venv-vllm, for torch)",
        "flashstate",
        256,
        _guidellm,
    ),
}  # fmt: skip


async def _one(cmd: list[str], run: PeerRun, url: str) -> None:
    """Run a peer tool in its own environment (ours off its path: PYTHONPATH cleared)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"NO_COLOR": "1", "COLUMNS": "200", "HF_HUB_DISABLE_TELEMETRY": "1"}
    log = run.out / "client.log"
    with log.open("wb") as f:
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=f, stderr=asyncio.subprocess.STDOUT, env=env, cwd=run.out
        )
        try:
            run.rc = await asyncio.wait_for(proc.wait(), TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            run.rc = -9
    run.log = log.read_text(errors="replace")
    async with aiohttp.ClientSession() as s, s.get(url + "/emulator/stats") as r:
        run.counters = (await r.json())["counters"]


async def _run_all(tmp: Path) -> dict[str, PeerRun]:
    tok = save_char_tokenizer(tmp / "char-tokenizer")
    runs: dict[str, PeerRun] = {}
    async with contextlib.AsyncExitStack() as stack:
        jobs = []
        for name, (exe, _, engine, block, command) in CLIENTS.items():
            if not exe.is_file():
                continue
            cfg = EmulatorConfig(
                engine=engine, port=0, time_scale=100.0, block_tokens=block, tokenizer=str(tok)
            )
            url, _ = await stack.enter_async_context(running_server(cfg))
            out = tmp / name
            out.mkdir()
            runs[name] = PeerRun(out)
            jobs.append(_one(command(url, tok, out), runs[name], url))
        await asyncio.gather(*jobs)
    return runs


@pytest.fixture(scope="module")
def peer_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PeerRun]:
    tmp = tmp_path_factory.mktemp("peers")
    # In a thread of its own, so its event loop never meets pytest-asyncio's.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _run_all(tmp)).result()


def _get(runs: dict[str, PeerRun], name: str) -> PeerRun:
    exe, how = CLIENTS[name][:2]
    if name not in runs:
        msg = f"{exe} is missing: run `{how}`"
        missing(msg, PEERS)
    run = runs[name]
    run.check()
    return run


def _aiperf_summary(run: PeerRun) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run.out / "profile_export_aiperf.json").read_text())
    return summary


def test_aiperf_streams_completions_with_zero_errors(peer_runs: dict[str, PeerRun]) -> None:
    run = _get(peer_runs, "aiperf-completions")
    s = _aiperf_summary(run)
    assert s["error_summary"] == [] and s["request_count"]["avg"] == 200
    assert s["input_sequence_length"]["avg"] == 512 and s["output_sequence_length"]["avg"] == 16
    assert run.counters["prompt_tokens"] == 200 * 512  # client and server count alike
    assert run.counters["requests_finished"] == 200


def test_aiperf_multi_turn_chat_sees_cached_tokens(peer_runs: dict[str, PeerRun]) -> None:
    run = _get(peer_runs, "aiperf-chat")
    s = _aiperf_summary(run)
    assert s["error_summary"] == [] and s["request_count"]["avg"] == 96
    # Later turns resend the history (with the previous answers): the engine's cache hits it
    # and aiperf's prompt-cache metrics, read from usage.prompt_tokens_details, see it.
    assert s["usage_prompt_cache_read_tokens"]["avg"] > 0
    assert run.counters["cached_tokens"] > 0


def test_aiperf_anthropic_messages_multi_turn_reads_the_cache(
    peer_runs: dict[str, PeerRun],
) -> None:
    run = _get(peer_runs, "aiperf-messages")
    s = _aiperf_summary(run)
    assert s["error_summary"] == [] and s["request_count"]["avg"] == 24
    # From /v1/messages' usage.cache_read_input_tokens (Anthropic's field).
    assert s["usage_prompt_cache_read_tokens"]["avg"] > 0


def test_vllm_bench_serve_random_completions_and_chat(peer_runs: dict[str, PeerRun]) -> None:
    run = _get(peer_runs, "vllm-bench")
    for backend in ("vllm", "openai-chat"):
        r = json.loads((run.out / f"{backend}.json").read_text())
        assert (r["completed"], r["failed"]) == (200, 0), backend
        assert r["total_output_tokens"] == 200 * 16, backend
    assert run.counters["requests_finished"] == 400


def test_guidellm_streams_chat_with_zero_errors(peer_runs: dict[str, PeerRun]) -> None:
    run = _get(peer_runs, "guidellm")
    bench = json.loads((run.out / "guidellm.json").read_text())["benchmarks"][0]
    totals = bench["metrics"]["request_totals"]
    assert (totals["successful"], totals["errored"], totals["incomplete"]) == (100, 0, 0)
    assert run.counters["requests_finished"] == 100
