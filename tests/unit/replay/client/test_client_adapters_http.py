"""Adapters against a real HTTP engine on 127.0.0.1 (the fake engine of conftest.py): a
normal stream, HTTP errors, connection resets, stalls, refused connections, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from replay.engines.adapters import Limits, StreamResult, make_adapter


def ids(n: int, start: int = 400) -> np.ndarray:
    return np.arange(start, start + n, dtype=np.int32)


async def test_vllm_adapter_streams_ids_and_reports_cache(fake_engine: Any) -> None:
    async with make_adapter("vllm", fake_engine.url, "fake-model") as a:
        first = await a.generate(a.build_body(ids(100), 5))
        assert first.status == "ok", first.error
        assert len(first.output_ids) == 5 and first.output_tokens == 5
        assert first.send_ns < first.first_token_ns <= first.done_ns  # type: ignore[operator]
        again = await a.generate(a.build_body(ids(100), 5))
        assert again.cached_tokens == 96  # 6 full blocks of 16; the last token is recomputed
    assert fake_engine.requests[0]["prompt"] == list(range(400, 500))


async def test_ttft_is_the_first_token_not_the_response_headers(fake_engine: Any) -> None:
    """vLLM answers with its headers at once and streams the first token after the prefill:
    the first token's arrival stamp must not be the headers' read."""
    fake_engine.prefill_delay_s = 0.3
    async with make_adapter("vllm", fake_engine.url, "fake-model") as a:
        r = await a.generate(a.build_body(ids(100), 3))
    assert r.status == "ok", r.error
    ttft = (r.first_token_ns - r.send_ns) / 1e9  # type: ignore[operator]
    assert ttft >= 0.3, ttft


async def test_sglang_adapter_streams_cumulative_ids(fake_engine: Any) -> None:
    async with make_adapter("sglang", fake_engine.url, None) as a:
        res = await a.generate(a.build_body(ids(50), 6))
    assert res.status == "ok", res.error
    assert res.output_ids == fake_engine.gen_ids(list(range(400, 450)), 6)
    assert res.cached_tokens == 0 and res.cached_field_seen


async def test_http_500_is_an_error_record_not_an_exception(fake_engine: Any) -> None:
    fake_engine.faults = ["500"]
    async with make_adapter("vllm", fake_engine.url, None) as a:
        res = await a.generate(a.build_body(ids(20), 2))
    assert res.status == "error" and res.http_status == 500
    assert "HTTP 500" in (res.error or "") and "injected failure" in (res.error or "")


async def test_connection_reset_is_recorded(fake_engine: Any) -> None:
    fake_engine.faults = ["reset"]
    async with make_adapter("vllm", fake_engine.url, None) as a:
        res = await a.generate(a.build_body(ids(20), 2))
    assert res.status == "error"
    assert res.error


async def test_stall_after_first_token_times_out_with_a_clear_reason(
    fake_engine: Any,
) -> None:
    fake_engine.faults = ["stall"]
    lim = Limits(stall_timeout_s=0.3, first_token_timeout_s=5)
    async with make_adapter("vllm", fake_engine.url, None, limits=lim) as a:
        res = await a.generate(a.build_body(ids(20), 4))
    assert res.status == "timeout"
    assert "stalled: no token for 0.3 s" in (res.error or "")
    assert res.output_ids == [301]  # what arrived before the stall is kept


async def test_no_first_token_in_time_is_a_timeout(fake_engine: Any) -> None:
    fake_engine.faults = ["slowfirst"]
    lim = Limits(first_token_timeout_s=0.3)
    async with make_adapter("vllm", fake_engine.url, None, limits=lim) as a:
        res = await a.generate(a.build_body(ids(20), 3))
    assert res.status == "timeout"
    assert "no first token within 0.3 s" in (res.error or "")


async def test_request_timeout_bounds_a_slow_stream(fake_engine: Any) -> None:
    fake_engine.token_delay_s = 0.1
    lim = Limits(request_timeout_s=0.35, stall_timeout_s=5)
    async with make_adapter("vllm", fake_engine.url, None, limits=lim) as a:
        res = await a.generate(a.build_body(ids(20), 50))
    assert res.status == "timeout"
    assert "request exceeded 0.35 s" in (res.error or "")


async def test_refused_connection_is_an_error() -> None:
    async with make_adapter("vllm", "http://127.0.0.1:9", None) as a:
        res = await a.generate(a.build_body(ids(5), 1))
    assert res.status == "error"
    assert "Connect" in (res.error or "") or "refused" in (res.error or "").lower()


async def test_cancellation_keeps_what_arrived(fake_engine: Any) -> None:
    fake_engine.token_delay_s = 0.05
    res = StreamResult()
    async with make_adapter("vllm", fake_engine.url, None) as a:
        task = asyncio.create_task(a.generate(a.build_body(ids(20), 100), res))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert res.status == "cancelled"
    assert 0 < len(res.output_ids) < 100


async def test_openai_adapter_sends_text_and_repeats_generated_text_verbatim(
    fake_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test")
    async with make_adapter("openai", fake_engine.url, "fake-model", api_key_env="MY_KEY") as a:
        prompt = ids(64)
        first = await a.generate(a.build_body(prompt, 4))
        assert first.status == "ok", first.error
        assert len(first.output_ids) == 4 and all(i < 0 for i in first.output_ids)
        assert first.output_tokens == 4 and first.prompt_tokens == 64
        follow = np.concatenate([prompt, np.asarray(first.output_ids, dtype=np.int32)])
        text = a.render_ids(follow)  # type: ignore[attr-defined]
        assert text.endswith("".join(a.atoms))  # type: ignore[attr-defined]
        again = await a.generate(a.build_body(follow, 2))
    assert again.status == "ok"
    assert (again.cached_tokens or 0) >= 64  # the text prefix hit the engine's cache
    assert fake_engine.requests[0]["prompt"] == a.render_ids(prompt)  # type: ignore[attr-defined]


async def test_a_connect_timeout_is_named_as_one() -> None:
    """aiohttp's connect timeout is a TimeoutError too: it is not 'no first token within
    1800 s' (what 10K sessions connecting at once showed before)."""
    import aiohttp

    from replay.engines.adapters import make_adapter

    class _Refusing:
        closed = False

        def post(self, *a: object, **k: object) -> object:
            raise aiohttp.ConnectionTimeoutError("Connection timeout to host http://x")

        async def close(self) -> None:
            return None

    a = make_adapter("vllm", "http://x", "m", session=_Refusing())
    res = await a.generate(b"{}")
    assert res.status == "timeout" and res.error is not None
    assert res.error.startswith("connect timed out after"), res.error
