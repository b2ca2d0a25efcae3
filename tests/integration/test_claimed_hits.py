"""Claimed hits checked against time (issue 35, point 4), over real HTTP.

An emulator told to lie (`--lie-cached-rate`) reports a full cache hit on a fraction of its
requests while its engine model computes the whole prompt. A live run against it and an
honest twin: the check (`analysis.claimed_hits`) finds every lie the run recorded and flags
nothing on the honest engine."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from pathlib import Path

import aiohttp
import numpy as np
import pandas as pd
import pytest

from analysis.claimed_hits import check_engine
from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.emulator.config import EmulatorConfig, FaultConfig
from replay.emulator.launch import start_emulators
from replay.emulator.server import running_server
from replay.traces import load_trace
from replay.traces.synth import Knobs, SynthConfig, write_synth
from replay.workload import WorkloadConfig

X = 10.0  # 10x the modelled GPU: the records' TTFTs (modelled clock) keep ~10 ms of jitter
MINUTES = 6.0
LIE_RATE = 0.3


def _emulator(lie: float = 0.0) -> EmulatorConfig:
    return EmulatorConfig(
        engine="vllm",
        port=0,
        time_scale=X,
        token_scale=16,
        block_tokens=256,
        faults=FaultConfig(lie_cached_rate=lie, seed=5),
    )


async def _send(session: aiohttp.ClientSession, url: str, ids: list[int]) -> int:
    body = {"prompt": ids, "max_tokens": 2, "ignore_eos": True}
    async with session.post(url + "/v1/completions", json=body) as r:
        usage = (await r.json())["usage"]
    return int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


async def test_a_lying_emulator_claims_a_hit_and_computes_the_prompt() -> None:
    ids = [int(x) for x in np.random.default_rng(0).integers(1000, 30_000, 1000)]
    cfg = _emulator(lie=1.0).model_copy(update={"time_scale": 500.0})
    async with running_server(cfg) as (url, server), aiohttp.ClientSession() as s:
        claims = [await _send(s, url, ids) for _ in range(2)]
    assert claims == [768, 768]  # every block but the one holding the last token
    assert server.core.counters.cached_tokens == 0  # ... while nothing came from the cache
    assert server.faults.lies == [(1000, 768), (1000, 768)]


@pytest.mark.slow
def test_the_lying_emulator_check_finds_every_false_hit(tmp_path: Path) -> None:
    knobs = Knobs(top_turns=(12.0, 0.4), sub_turns=(4.0, 0.4), tool_gap=(2.0, 2.0))
    write_synth(tmp_path / "t.jsonl", SynthConfig(n_trajectories=40, seed=0, scale=16), knobs=knobs)
    trace = load_trace(tmp_path / "t.jsonl")
    configs = {"honest": _emulator(), "liar": _emulator(LIE_RATE)}
    with contextlib.ExitStack() as stack:
        urls = {n: stack.enter_context(start_emulators([c]))["vllm"] for n, c in configs.items()}
        specs = [EngineSpec(name=n, kind="vllm", url=u) for n, u in urls.items()]
        plan = RunPlan(
            engines=specs,
            trace=trace,
            workload=WorkloadConfig(
                sessions=6, duration_s=MINUTES * 60, window=(60.0, MINUTES * 60), seed=0
            ),
            out_dir=tmp_path / "run",
            time_scale=X,
            clock_scale=X,
            summarize=summary_of_dir,
            salt=11,
        )
        outcome = asyncio.run(run_live(plan))
        lies = _lies(urls["liar"])
    records = pd.read_parquet(outcome.run_dir / "requests.parquet")
    liar = records[records["engine"] == "liar"]
    got = check_engine(liar)
    flagged = liar[got.flags["false_hit"]]
    # The lies the run recorded, by (prompt, claim) as the emulator logged them (preflight's
    # probes are lied to as well but are no records). A pair can also be an honest full hit
    # of the same prompt, so each pair's flags are counted against its lies. Every lie whose
    # claimed saving stands above the check's noise floor is found, nothing else is flagged.
    told = Counter(lies)
    pair = list(zip(liar.prompt_tokens, liar.cached_tokens, strict=True))
    assessed = liar[got.flags["assessed"].to_numpy()]
    planted = [k for k in told if k in set(pair)]
    found = Counter(zip(flagged.prompt_tokens, flagged.cached_tokens, strict=True))
    judged = Counter(zip(assessed.prompt_tokens, assessed.cached_tokens, strict=True))
    assert len(planted) >= 8, "too few lies planted to test the check"
    assert set(found) <= set(told), "an honest hit was flagged"
    for k in planted:
        assert found[k] == min(told[k], judged[k]), (k, got.evidence)
    n_found, n_planted = sum(found.values()), sum(min(told[k], pair.count(k)) for k in planted)
    # Lies on short prompts save less than the clock's noise and are left unjudged (about
    # half of them here); the check must still judge and find a fair number.
    assert n_found >= 5, (n_found, n_planted, got.evidence)
    honest = check_engine(records[records["engine"] == "honest"])
    assert honest.false_hits == 0, honest.evidence
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    assert summary["engines"]["liar"]["false_hits"] == n_found
    assert summary["engines"]["honest"]["false_hits"] == 0
    assert any("liar: " in n and "TTFT of a full prefill" in n for n in summary["notes"])
    print(f"false hits: {n_found} found of {n_planted} planted;", got.evidence)


def _lies(url: str) -> list[tuple[int, int]]:
    import urllib.request

    with urllib.request.urlopen(url + "/emulator/stats", timeout=10) as r:
        return [tuple(x) for x in json.loads(r.read())["faults"]["lies"]]
