"""Prometheus text parsing (vLLM's names, the CPU build's block size) and the scraper
against a real local /metrics endpoint, including one that goes away."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from replay.engines.scrape import (
    MetricsError,
    MetricsScraper,
    block_size_from_metrics,
    cache_config,
    parse_metrics,
)

VLLM_TEXT = """\
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",effective_attention_block_size="128",enable_prefix_caching="True",mamba_block_size="None"} 1.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny-llama"} 6144.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny-llama"} 2944.0
# TYPE vllm:prompt_tokens_by_source counter
vllm:prompt_tokens_by_source_total{model_name="tiny-llama",source="local_cache_hit"} 2944.0
vllm:prompt_tokens_by_source_total{model_name="tiny-llama",source="local_compute"} 3200.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny-llama"} 0.01
"""


def test_block_size_and_cache_config_from_vllm_metrics() -> None:
    assert block_size_from_metrics(VLLM_TEXT) == 128
    assert cache_config(VLLM_TEXT)["enable_prefix_caching"] == "True"
    assert block_size_from_metrics("# nothing here\n") is None


def test_kept_samples_carry_labels() -> None:
    s = parse_metrics(VLLM_TEXT, frozenset({"vllm:prompt_tokens_by_source_total"}))
    assert {x.labels["source"]: x.value for x in s} == {
        "local_cache_hit": 2944.0,
        "local_compute": 3200.0,
    }


def test_garbage_metrics_raise_a_clear_error() -> None:
    with pytest.raises(MetricsError, match="unparseable /metrics"):
        parse_metrics("vllm:x not-a-number\n")


async def test_scraper_collects_series_and_survives_an_engine_going_away() -> None:
    up = {"on": True}

    async def metrics(req: web.Request) -> web.Response:
        if not up["on"]:
            return web.Response(status=503)
        return web.Response(text=VLLM_TEXT)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        sc = MetricsScraper({"vllm": f"http://127.0.0.1:{port}"}, time.perf_counter_ns(), 0.05)
        stop = asyncio.Event()
        task = asyncio.create_task(sc.run(stop))
        await asyncio.sleep(0.2)
        up["on"] = False
        await asyncio.sleep(0.15)
        up["on"] = True
        await asyncio.sleep(0.15)
        stop.set()
        await task
    finally:
        await runner.cleanup()
    t = sc.table().to_pandas()
    assert sc.failures["vllm"] >= 1 and "HTTP 503" in sc.last_error["vllm"]
    hits = t[t.metric == "vllm:prefix_cache_hits_total"]
    assert len(hits) >= 3 and (hits.value == 2944.0).all()
    assert t.t_s.is_monotonic_increasing
    assert "kv_cache_usage" in " ".join(set(t.metric))
