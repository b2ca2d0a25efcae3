"""Fault knobs over real HTTP, and child-process emulators that crash and come back."""

from __future__ import annotations

import asyncio
import time
import urllib.request

import aiohttp
import numpy as np
import pytest

from replay.emulator.config import EmulatorConfig, FaultConfig
from replay.emulator.launch import (
    EmulatorLaunchError,
    start_emulator_group,
    start_emulators,
)
from replay.emulator.server import running_server
from replay.engines.adapters import Limits, make_adapter

MODEL = "glm-5.3-flash"


def _cfg(engine: str = "vllm", time_scale: float = 500.0, **faults: object) -> EmulatorConfig:
    return EmulatorConfig(
        engine=engine,
        port=0,
        time_scale=time_scale,
        block_tokens=256,
        blocks=400,
        faults=FaultConfig.model_validate(faults),
    )


def _body(n: int = 200, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(1000, 100_000, n)


async def test_error_rate_fails_a_deterministic_fraction_with_500() -> None:
    statuses = []
    for _ in range(2):
        async with running_server(_cfg(error_rate=0.3, seed=7)) as (url, server):
            adapter = make_adapter("vllm", url, MODEL)
            results = [await adapter.generate(adapter.build_body(_body(), 2)) for _ in range(60)]
            await adapter.close()
            statuses.append([r.http_status for r in results])
            assert server.faults.errors == statuses[-1].count(500)
    assert statuses[0] == statuses[1]  # the same requests fail every time
    assert 8 <= statuses[0].count(500) <= 30
    assert set(statuses[0]) == {200, 500}


async def test_a_stalled_stream_goes_silent_after_its_first_token() -> None:
    async with running_server(_cfg(time_scale=2.0, stall_rate=1.0, stall_s=5.0)) as (url, _):
        limits = Limits(stall_timeout_s=0.5, first_token_timeout_s=5, request_timeout_s=10)
        adapter = make_adapter("vllm", url, MODEL, limits=limits)
        t0 = time.monotonic()
        r = await adapter.generate(adapter.build_body(_body(), 20))
        await adapter.close()
        assert r.status == "timeout" and r.first_token_ns is not None
        assert 1 <= len(r.output_ids) < 20
        assert time.monotonic() - t0 < 3


async def test_slow_start_answers_503_until_ready() -> None:
    async with running_server(_cfg(slow_start_s=0.4)) as (url, _), aiohttp.ClientSession() as s:
        async with s.get(url + "/health") as r:
            assert r.status == 503
        async with s.post(url + "/v1/completions", json={"prompt": [1, 2]}) as r:
            assert r.status == 503 and "starting" in (await r.json())["error"]["message"]
        await asyncio.sleep(0.5)
        async with s.get(url + "/health") as r:
            assert r.status == 200


async def test_crash_after_n_requests_calls_the_crash_hook() -> None:
    crashed: list[int] = []
    async with running_server(_cfg(crash_after=3), crash=lambda: crashed.append(1)) as (url, _):
        adapter = make_adapter("vllm", url, MODEL)
        for _ in range(3):
            assert (await adapter.generate(adapter.build_body(_body(), 2))).status == "ok"
        assert crashed == []
        await adapter.generate(adapter.build_body(_body(), 2))
        await adapter.close()
    assert crashed == [1]


def test_fault_flags_are_validated() -> None:
    with pytest.raises(ValueError, match="error_rate"):
        FaultConfig(error_rate=1.5)
    with pytest.raises(ValueError, match="crash_after"):
        FaultConfig(crash_after=0)
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        EmulatorConfig(engine="tgi")


def test_child_emulator_crashes_and_is_restarted_on_the_same_port() -> None:
    cfg = _cfg(crash_after=2)
    with start_emulator_group([cfg], restart=True, timeout_s=30) as group:
        url = group.urls["vllm"]

        async def go() -> list[str]:
            adapter = make_adapter("vllm", url, MODEL, limits=Limits(connect_timeout_s=2))
            out = []
            for i in range(3):
                out.append((await adapter.generate(adapter.build_body(_body(seed=i), 2))).status)
            await adapter.close()
            return out

        statuses = asyncio.run(go())
        assert statuses[:2] == ["ok", "ok"] and statuses[2] == "error"
        deadline = time.monotonic() + 30
        while group.restarts()["vllm"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group.restarts()["vllm"] == 1
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        assert group.urls["vllm"] == url
        again = asyncio.run(go())
        assert again == ["ok", "ok", "ok"]  # restarted without its crash fault


def test_start_emulators_serves_every_engine_and_stops_them() -> None:
    with start_emulators(
        ["flashstate", "sglang"], time_scale=100, blocks=300, block_tokens=256
    ) as urls:
        assert set(urls) == {"flashstate", "sglang"}
        for url in urls.values():
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                assert r.status == 200
    for url in urls.values():
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "/health", timeout=1)


def test_a_child_that_cannot_start_reports_its_log() -> None:
    bad = EmulatorConfig(engine="vllm", port=0, model="no-such-model")
    with (
        pytest.raises(EmulatorLaunchError, match=r"no-such-model.*not found"),
        start_emulators([bad], timeout_s=20),
    ):
        pass


async def test_an_engine_model_error_fails_its_requests_and_the_server_goes_on() -> None:
    """A bug in the cache model must surface as an error answer, never a hung request."""
    from replay.emulator.config import make_cache
    from replay.emulator.hashing import PrefixKeys

    calls = {"finish": 0}

    def faulty(cfg: EmulatorConfig, profile):  # type: ignore[no-untyped-def]
        cache = make_cache(cfg, profile)
        real_finish = cache.finish

        def finish(rid: int, seq: PrefixKeys, total_len: int, now: float) -> None:
            calls["finish"] += 1
            if calls["finish"] == 1:
                raise RuntimeError("model bug")
            real_finish(rid, seq, total_len, now)

        cache.finish = finish  # type: ignore[method-assign]
        return cache

    async with running_server(_cfg(), cache_factory=faulty) as (url, _):
        adapter = make_adapter("vllm", url, MODEL)
        first = await adapter.generate(adapter.build_body(_body(), 3))
        second = await adapter.generate(adapter.build_body(_body(seed=1), 3))
        await adapter.close()
    assert first.status == "error" and "model bug" in (first.error or "")
    assert second.status == "ok"
