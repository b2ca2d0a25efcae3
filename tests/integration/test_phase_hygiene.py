"""Phase hygiene (issue 35, point 5): `replay run --reset-cache` and `/metrics` snapshots.

The emulators serve their protocol's reset (vLLM's `/reset_prefix_cache`, SGLang's
`/flush_cache`); a run resets each engine after preflight and writes `/metrics` at each
phase's edges; an engine that offers no reset fails the run before anything is sent, with
the fix. And the real CPU vLLM (dev mode) forgets a prompt it had cached."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
from typer.testing import CliRunner

from analysis.summary import summary_of_dir
from replay.cli import app
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.client.phases import PHASES, snapshot_path
from replay.emulator.config import EmulatorConfig
from replay.emulator.launch import start_emulators
from replay.emulator.server import running_server
from replay.engines.reset import CacheResetError, reset_all
from replay.traces import load_trace
from replay.traces.synth import Knobs, SynthConfig, write_synth
from replay.workload import WorkloadConfig

X = 60.0


def _emulator(engine: str = "vllm", time_scale: float = X) -> EmulatorConfig:
    return EmulatorConfig(
        engine=engine, port=0, time_scale=time_scale, token_scale=16, block_tokens=256
    )


def _ids(n: int = 1000, seed: int = 0) -> list[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(1000, 30_000, n)]


async def _cached(s: aiohttp.ClientSession, url: str, ids: list[int], model: str | None) -> int:
    body: dict[str, Any] = {"prompt": ids, "max_tokens": 1, "ignore_eos": True}
    if model:
        body["model"] = model
    async with s.post(url + "/v1/completions", json=body) as r:
        assert r.status == 200, await r.text()
        usage = (await r.json())["usage"]
    return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


async def _metric(s: aiohttp.ClientSession, url: str, name: str) -> float:
    async with s.get(url + "/metrics") as r:
        text = await r.text()
    return sum(float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith(name))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_the_emulator_resets_its_cache_and_keeps_its_counters(engine: str) -> None:
    cfg = _emulator(engine, time_scale=500.0)
    name = "vllm:prefix_cache_hits_total" if engine == "vllm" else "sglang:cached_tokens_total"
    async with running_server(cfg) as (url, server), aiohttp.ClientSession() as s:
        ids = _ids()
        await _cached(s, url, ids, None)
        assert await _cached(s, url, ids, None) > 0
        hits = await _metric(s, url, name)
        kind = "vllm" if engine == "vllm" else "sglang"
        done = await reset_all([("e", kind, url)])
        assert done["e"].ok and done["e"].attempts == 1
        assert await _cached(s, url, ids, None) == 0  # forgotten
        assert await _metric(s, url, name) == hits  # counters stay monotonic
        assert server.resets == 1


async def test_a_busy_emulator_refuses_and_the_reset_is_retried() -> None:
    async with running_server(_emulator(time_scale=1.0)) as (url, server):
        async with aiohttp.ClientSession() as s:
            # A long generation keeps the engine busy for a few wall seconds.
            body = {"prompt": _ids(), "max_tokens": 400, "ignore_eos": True}
            gen = asyncio.create_task(s.post(url + "/v1/completions", json=body))
            await asyncio.sleep(0.3)
            with pytest.raises(CacheResetError, match="refused to reset its prefix cache 2 times"):
                await reset_all([("busy", "vllm", url)], attempts=2, retry_s=0.05)
            gen.cancel()
        assert server.resets == 0


async def test_an_engine_without_a_reset_is_named_with_its_fix() -> None:
    with pytest.raises(CacheResetError, match=r"kind openai.*offers no prefix-cache reset"):
        await reset_all([("gpt", "openai", "http://127.0.0.1:9")])
    # An SGLang emulator has no /reset_prefix_cache: a vLLM without dev mode looks the same.
    async with running_server(_emulator("sglang", 500.0)) as (url, _):
        with pytest.raises(CacheResetError, match="start vLLM with VLLM_SERVER_DEV_MODE=1"):
            await reset_all([("v", "vllm", url)])


def _plan(url: str, out: Path, kind: str = "vllm", reset: bool = True) -> RunPlan:
    knobs = Knobs(top_turns=(6.0, 0.4), sub_turns=(2.0, 0.4), tool_gap=(2.0, 2.0))
    write_synth(
        out.parent / "t.jsonl", SynthConfig(n_trajectories=10, seed=0, scale=16), knobs=knobs
    )
    return RunPlan(
        engines=[EngineSpec(name="e", kind=kind, url=url)],
        trace=load_trace(out.parent / "t.jsonl"),
        workload=WorkloadConfig(sessions=2, duration_s=180.0, window=(60.0, 180.0), seed=0),
        out_dir=out,
        time_scale=X,
        clock_scale=X,
        summarize=summary_of_dir,
        salt=3,
        reset_cache=reset,
    )


def test_a_run_resets_after_preflight_and_snapshots_each_phase(tmp_path: Path) -> None:
    with start_emulators([_emulator()]) as urls:
        url = urls["vllm"]
        outcome = asyncio.run(run_live(_plan(url, tmp_path / "run")))
        with aiohttp_stats(url) as stats:
            resets = stats["resets"]
    assert outcome.status == "completed"
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    done = manifest["engines"][0]["cache_reset"]
    assert done["ok"] is True and done["route"] == "/reset_prefix_cache"
    assert done["when"] == "after preflight, before the first replay request"
    assert resets == 2  # the check before preflight, and the one that counts
    for phase in PHASES:
        text = snapshot_path(outcome.run_dir, "e", phase).read_text()
        assert "vllm:prefix_cache_queries_total" in text, phase
    start = snapshot_path(outcome.run_dir, "e", "run-start").read_text()
    end = snapshot_path(outcome.run_dir, "e", "run-end").read_text()
    assert _value(start, "vllm:generation_tokens_total") < _value(
        end, "vllm:generation_tokens_total"
    )


def test_a_run_without_the_flag_does_not_reset(tmp_path: Path) -> None:
    with start_emulators([_emulator()]) as urls:
        outcome = asyncio.run(run_live(_plan(urls["vllm"], tmp_path / "run", reset=False)))
        with aiohttp_stats(urls["vllm"]) as stats:
            assert stats["resets"] == 0
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["engines"][0].get("cache_reset") is None
    assert snapshot_path(outcome.run_dir, "e", "window-end").is_file()


def test_replay_run_refuses_an_engine_without_a_reset(tmp_path: Path) -> None:
    with start_emulators([_emulator("sglang")]) as urls:
        trace = tmp_path / "t.jsonl"
        write_synth(trace, SynthConfig(n_trajectories=4, seed=0, scale=16))
        out = tmp_path / "run"
        args = ["run", "--endpoint", f"v=vllm@{urls['sglang']}", "--trace", str(trace)]
        args += ["--sessions", "1", "--duration-min", "1", "--out", str(out), "--reset-cache"]
        args += ["--no-panel"]
        result = CliRunner().invoke(app, args)
    text = " ".join(result.output.split())
    assert result.exit_code != 0, text
    assert "--reset-cache" in text and "VLLM_SERVER_DEV_MODE=1" in text, text
    assert "no replay request was sent" in text and "Traceback" not in text
    assert not (out / "requests.jsonl").exists()


@pytest.mark.vllm
def test_the_real_vllm_forgets_after_a_reset(vllm_cpu: Any) -> None:
    async def go() -> tuple[int, int, bool]:
        ids = _ids(600, seed=9)
        async with aiohttp.ClientSession() as s:
            await _cached(s, vllm_cpu.url, ids, vllm_cpu.model)
            warm = await _cached(s, vllm_cpu.url, ids, vllm_cpu.model)
            done = await reset_all([(vllm_cpu.engine, "vllm", vllm_cpu.url)])
            cold = await _cached(s, vllm_cpu.url, ids, vllm_cpu.model)
        return warm, cold, done[vllm_cpu.engine].ok

    warm, cold, ok = asyncio.run(go())
    assert warm == 512 and ok  # 600 tokens: 4 full 128-token blocks were cached
    assert cold == 0


class aiohttp_stats:
    """`/emulator/stats` of an emulator, read synchronously."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __enter__(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/emulator/stats", timeout=10) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def __exit__(self, *exc: object) -> None:
        return None


def _value(text: str, name: str) -> float:
    return sum(float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith(name))
