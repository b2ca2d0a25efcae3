"""The emulator over real HTTP: the `openai` package, the live client's adapters and the
preflight checks talk to it as they would to vLLM or SGLang."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import numpy as np
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from replay.emulator.config import EmulatorConfig
from replay.emulator.server import EmulatorServer, running_server
from replay.engines.adapters import make_adapter
from replay.engines.adapters.base import StreamResult
from replay.engines.preflight import preflight
from replay.server_info import ServerInfo
from replay.sim.cache.cost import PrefillCost

MODEL = "glm-5.3-flash"


def _cfg(engine: str, **kw: object) -> EmulatorConfig:
    base: dict[str, object] = dict(
        engine=engine, port=0, time_scale=200.0, block_tokens=256, blocks=400
    )
    base.update(kw)
    return EmulatorConfig.model_validate(base)


def _prompt(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1000, 100_000, n).tolist()


@pytest.fixture
async def vllm_url() -> AsyncIterator[str]:
    async with running_server(_cfg("vllm")) as (url, _):
        yield url


async def test_openai_streaming_completions_with_token_ids(vllm_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=vllm_url + "/v1", api_key="none")
    prompt = _prompt(3000)
    reports = []
    for _ in range(2):
        ids: list[int] = []
        usage = None
        finish = None
        stream = await client.completions.create(
            model=MODEL,
            prompt=prompt,
            max_tokens=40,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"return_token_ids": True, "ignore_eos": True},
        )
        async for chunk in stream:
            if chunk.choices:
                extra = chunk.choices[0].model_extra or {}
                ids += extra.get("token_ids") or []
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage is not None:
                usage = chunk.usage
        assert len(ids) == 40 and finish == "length"
        assert usage is not None and usage.prompt_tokens == 3000 and usage.completion_tokens == 40
        reports.append((ids, usage))
    (ids1, u1), (ids2, u2) = reports
    assert ids1 == ids2  # deterministic per prompt
    assert u1.prompt_tokens_details is None  # vLLM omits the details when nothing was cached
    assert u2.prompt_tokens_details is not None
    cached = u2.prompt_tokens_details.cached_tokens
    assert cached is not None and 0 < cached < 3000
    await client.close()


async def test_openai_non_streaming_completion(vllm_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=vllm_url + "/v1", api_key="none")
    out = await client.completions.create(
        model=MODEL, prompt=_prompt(500), max_tokens=7, extra_body={"return_token_ids": True}
    )
    extra = out.choices[0].model_extra or {}
    assert len(extra["token_ids"]) == 7 and len(extra["prompt_token_ids"]) == 500
    assert out.usage is not None and out.usage.completion_tokens == 7
    models = await client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert (models.data[0].model_extra or {})["max_model_len"] == 1_048_576
    await client.close()


@pytest.mark.parametrize("engine", ["vllm", "flashstate", "sglang"])
async def test_live_client_adapters_replay_a_continuation(engine: str) -> None:
    async with running_server(_cfg(engine)) as (url, server):
        adapter = make_adapter(engine, url, MODEL)
        try:
            first = _prompt(2000, seed=3)
            r1 = await adapter.generate(adapter.build_body(np.array(first), 30))
            assert r1.status == "ok", r1.error
            assert len(r1.output_ids) == 30 and r1.first_token_ns is not None
            # Turn 2 = turn 1's prompt + what the engine generated + a tool result.
            second = first + r1.output_ids + _prompt(300, seed=4)
            r2 = await adapter.generate(adapter.build_body(np.array(second), 10))
            assert r2.status == "ok", r2.error
            assert r2.prompt_tokens == len(second)
            assert r2.cached_tokens is not None and r2.cached_tokens > 0
            assert server.core.counters.cached_tokens == r2.cached_tokens
        finally:
            await adapter.close()


@pytest.mark.parametrize("engine", ["vllm", "flashstate", "sglang"])
async def test_the_live_clients_preflight_passes(engine: str) -> None:
    async with running_server(_cfg(engine)) as (url, _):
        report = await preflight(url, engine, vocab_size=151_552)
        assert report.ok, report.message()
        assert report.model == MODEL
        if engine != "sglang":
            assert report.block_size == 256
        # The client parses the emulator's /get_server_info as the model it was written from.
        assert report.emulator is not None and report.emulator.engine == engine
        assert (
            report.emulator.engine_model.capacity_blocks
            == report.server_info["engine_model"]["capacity_blocks"]
        )
        assert all(c.ok for c in report.checks if c.name == "server info")


async def _metrics(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
        text = await r.text()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for sample in fam.samples:
            key = sample.name + (
                f"[{sample.labels['source']}]" if "source" in sample.labels else ""
            )
            out[key] = sample.value
    return out


async def test_vllm_metrics_parse_and_count_prompt_and_cached_tokens(vllm_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=vllm_url + "/v1", api_key="none")
    prompt = _prompt(1500)
    for _ in range(2):
        await client.completions.create(model=MODEL, prompt=prompt, max_tokens=3)
    m = await _metrics(vllm_url)
    assert m["vllm:prefix_cache_queries_total"] == 3000
    hits = m["vllm:prefix_cache_hits_total"]
    assert hits > 0
    assert m["vllm:prompt_tokens_by_source_total[local_cache_hit]"] == hits
    assert m["vllm:prompt_tokens_by_source_total[local_compute]"] == 3000 - hits
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
    assert 0 < m["vllm:kv_cache_usage_perc"] <= 1
    assert m["vllm:cache_config_info"] == 1
    await client.close()


async def test_sglang_metrics_and_generate_stream_format() -> None:
    async with running_server(_cfg("sglang")) as (url, _), aiohttp.ClientSession() as s:
        body = {
            "input_ids": _prompt(800),
            "sampling_params": {"max_new_tokens": 12},
            "stream": True,
        }
        events = []
        async with s.post(url + "/generate", json=body) as r:
            assert r.status == 200
            async for line in r.content:
                if line.startswith(b"data:"):
                    events.append(line[5:].strip())
        assert events[-1] == b"[DONE]"
        import orjson

        objs = [orjson.loads(e) for e in events[:-1]]
        lengths = [len(o["output_ids"]) for o in objs]
        assert lengths == sorted(lengths) and lengths[-1] == 12  # cumulative, like SGLang
        assert objs[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
        assert all(o["meta_info"]["cached_tokens"] == 0 for o in objs)
        m = await _metrics(url)
        assert m["sglang:prompt_tokens_total"] == 800
        assert m["sglang:cached_tokens_total"] == 0
        assert m["sglang:num_running_reqs"] == 0 and m["sglang:num_queue_reqs"] == 0
        assert "sglang:token_usage" in m


BAD_COMPLETIONS = [
    (b"not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"max_tokens": 5}', "'prompt' is required"),
    (b'{"prompt": ""}', "'prompt' is empty"),
    (b'{"prompt": ["a", ""]}', "'prompt[1]' is empty"),
    (b'{"prompt": [[1], [2]]}', "holds 2 token-id lists"),
    (b'{"prompt": []}', "'prompt' must be a non-empty string or list"),
    (b'{"prompt": [1, "a"]}', "'prompt' must be a string or a list of integers"),
    (b'{"prompt": [1, 2.5]}', "'prompt' must be a string or a list of integers"),
    (b'{"prompt": [1, -3]}', "token id -3, outside the vocabulary"),
    (b'{"prompt": [1, 999999999]}', "outside the vocabulary"),
    (b'{"prompt": [1, 2], "max_tokens": 0}', "'max_tokens' must be a positive integer"),
    (b'{"prompt": [1, 2], "max_tokens": "5"}', "'max_tokens' must be a positive integer"),
    (b'{"prompt": [1, 2], "n": 2}', "'n' must be 1"),
    (b'{"prompt": [1, 2], "stream": "yes"}', "'stream' must be true or false"),
    (b'{"prompt": [1, 2], "stream_options": {"include_usage": true}}', "only allowed when"),
    (b'{"prompt": [1, 2], "stream": true, "stream_options": 3}', "'stream_options' must be"),
    (b'{"prompt": [1, 2], "max_tokens": 2000000}', "maximum context length is 1048576"),
    (b'{"prompt": [1, 2], "model": "other"}', "The model `other` does not exist"),
    (b'{"prompt": [1, 2], "ignore_eos": 1}', "'ignore_eos' must be true or false"),
]


@pytest.mark.parametrize(("body", "needle"), BAD_COMPLETIONS)
async def test_bad_completion_requests_get_a_clear_4xx(
    vllm_url: str, body: bytes, needle: str
) -> None:
    async with aiohttp.ClientSession() as s, s.post(vllm_url + "/v1/completions", data=body) as r:
        assert 400 <= r.status < 500
        err = (await r.json())["error"]
        assert needle in err["message"]


BAD_GENERATES = [
    (b'{"text": ["a", "b"]}', "'text' must be a string", "text"),
    (b'{"text": "a", "input_ids": [1]}', "either 'text' or 'input_ids'", "text"),
    (b'{"sampling_params": {}}', "'text' or 'input_ids' is required", "input_ids"),
    (b'{"input_ids": [1], "sampling_params": 5}', "'sampling_params' must be", "sampling_params"),
    (
        b'{"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}',
        "'sampling_params.max_new_tokens' must be a positive integer",
        "sampling_params.max_new_tokens",
    ),
]


@pytest.mark.parametrize(("body", "needle", "field"), BAD_GENERATES)
async def test_bad_generate_requests_name_the_field(body: bytes, needle: str, field: str) -> None:
    async with (
        running_server(_cfg("sglang")) as (url, _),
        aiohttp.ClientSession() as s,
        s.post(url + "/generate", data=body) as r,
    ):
        assert r.status == 400
        err = (await r.json())["error"]
        assert needle in err["message"] and err["param"] == field


async def test_a_request_larger_than_the_cache_is_refused() -> None:
    async with (
        running_server(_cfg("vllm", blocks=4)) as (url, _),
        aiohttp.ClientSession() as s,
        s.post(url + "/v1/completions", json={"prompt": _prompt(2000)}) as r,
    ):
        assert r.status == 400
        assert "raise --blocks" in (await r.json())["error"]["message"]


async def test_time_scale_sets_wall_time_and_fast_steps_are_coalesced() -> None:
    # 300 decode steps of ≈ 3.2 ms (the GLM clock) at scale 2 take ≈ 0.5 s of wall time; at
    # scale 200, tokens come in far fewer chunks than steps.
    n = 300
    for scale in (2.0, 200.0):
        async with running_server(_cfg("vllm", time_scale=scale)) as (url, server):
            adapter = make_adapter("vllm", url, MODEL)
            t0 = time.monotonic()
            r: StreamResult = await adapter.generate(adapter.build_body(np.array(_prompt(100)), n))
            wall = time.monotonic() - t0
            await adapter.close()
            assert r.status == "ok" and len(r.output_ids) == n
            p = server.profile
            model_s = server.core.counters.busy_s
            assert model_s == pytest.approx(
                PrefillCost(p).clock_seconds(0, 100)
                + n * p.decode_s_per_step
                + (n - 1) * p.decode_s_per_seq,
                rel=1e-6,
            )
            # Never faster than the modelled time; at most a second of host overhead.
            assert model_s / scale * 0.9 < wall < model_s / scale + 1.0, (scale, wall, model_s)
            if scale == 200.0:
                assert len(r.chunk_ns) < n / 10


async def test_concurrent_requests_batch_and_a_disconnect_frees_the_request() -> None:
    async with running_server(_cfg("vllm", time_scale=20.0)) as (url, server):
        adapter = make_adapter("vllm", url, MODEL)
        tasks = [
            asyncio.create_task(adapter.generate(adapter.build_body(np.array(_prompt(300, i)), 20)))
            for i in range(5)
        ]
        results = await asyncio.gather(*tasks)
        assert all(r.status == "ok" and len(r.output_ids) == 20 for r in results)
        # Five sequences decoded together: far fewer steps than 5 × 20.
        assert server.core.counters.steps < 40
        long = asyncio.create_task(
            adapter.generate(adapter.build_body(np.array(_prompt(300, 9)), 5000))
        )
        await asyncio.sleep(0.3)
        assert server.core.num_running == 1
        long.cancel()
        with pytest.raises(asyncio.CancelledError):
            await long
        for _ in range(50):
            if server.core.num_running == 0:
                break
            await asyncio.sleep(0.05)
        assert server.core.num_running == 0 and server.core.counters.requests_aborted == 1
        await adapter.close()


def test_emulator_server_object_exposes_its_profile() -> None:
    from replay.emulator.config import make_cache

    srv = EmulatorServer(_cfg("vllm"), make_cache)
    assert srv.profile.block_tokens == 256 and srv.cache.capacity_blocks == 400
    assert srv.model_id == MODEL
    # SGLang sizes its own pools (state slots beside KV); they are resized to the block count.
    sg = EmulatorServer(_cfg("sglang"), make_cache)
    assert sg.cache.capacity_blocks is not None and abs(sg.cache.capacity_blocks - 400) <= 5


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_server_info_says_what_the_emulator_models(engine: str) -> None:
    cfg = _cfg(engine, token_scale=16.0)
    async with (
        running_server(cfg) as (url, _),
        aiohttp.ClientSession() as s,
        s.get(url + "/get_server_info") as r,
    ):
        info = await r.json()
    assert info["emulator"] is True and info["engine"] == engine and info["policy"] == engine
    assert info["token_scale"] == 16.0 and info["block_tokens"] == 256
    model = info["engine_model"]  # the engine model's parameters, for the run's manifest
    assert model["token_scale"] == 16.0 and model["max_batched_tokens"] == 16384
    assert model["step_s"] > 0 and model["admission"] == "schedule"
    assert info["context_length"] == 1_048_576 // 16
    # The cache's size under one name, with where it came from (replay.sim.cache.capacity).
    assert "cache_blocks" not in info and "blocks" not in model
    assert model["requested_capacity_blocks"] == 400 and model["capacity_source"] == "override"
    if engine == "sglang":  # SGLang's pools from the 400 blocks, less its padding slot
        assert model["state_slots"] > 0 and 395 <= model["capacity_blocks"] <= 400
        kv_blocks = model["capacity_blocks"] - 5 * model["state_slots"]
        assert model["kv_tokens"] == kv_blocks * info["block_tokens"]
    else:
        assert model["capacity_blocks"] == 400 and model["state_slots"] is None
    assert ServerInfo.model_validate(info).engine_model.capacity_blocks == model["capacity_blocks"]
