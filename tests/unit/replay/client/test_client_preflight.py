"""Preflight against a real HTTP engine: every check passes on a fit engine, and each unfit
setting fails its check with a message naming what to change."""

from __future__ import annotations

from typing import Any

import pytest

from replay.engines.preflight import preflight


async def test_fit_engine_passes_every_check(fake_engine: Any) -> None:
    rep = await preflight(fake_engine.url, "vllm")
    assert rep.ok, rep.message()
    assert [c.name for c in rep.checks] == [
        "reachable",
        "model listed",
        "metrics readable",
        "token-id prompts",
        "generated ids returned",
        "cached-token reporting",
        "prefix caching",
        "cold cache",
    ]
    assert rep.model == "fake-model"
    assert rep.block_size == 16 and rep.context_tokens == 100_000
    assert "all 8 checks passed" in rep.message()
    assert rep.as_dict()["ok"] is True


async def test_cached_token_reporting_off_names_the_vllm_flag(fake_engine: Any) -> None:
    fake_engine.report_cached = False
    rep = await preflight(fake_engine.url, "vllm")
    assert not rep.ok
    (bad,) = rep.failures
    assert bad.name == "cached-token reporting"
    assert "--enable-prompt-tokens-details" in rep.message()
    assert "counters show a hit" in rep.message()


async def test_sglang_without_cache_report_names_its_flag(fake_engine: Any) -> None:
    fake_engine.report_cached = False
    rep = await preflight(fake_engine.url, "sglang")
    assert [c.name for c in rep.failures] == ["cached-token reporting"]
    assert "--enable-cache-report" in rep.message()


async def test_prefix_caching_off_is_caught_by_the_two_request_probe(fake_engine: Any) -> None:
    fake_engine.caching = False
    rep = await preflight(fake_engine.url, "vllm")
    names = [c.name for c in rep.failures]
    assert "prefix caching" in names
    assert "--enable-prefix-caching" in rep.message()


async def test_missing_generated_ids_names_return_token_ids(fake_engine: Any) -> None:
    fake_engine.return_ids = False
    rep = await preflight(fake_engine.url, "vllm")
    assert [c.name for c in rep.failures] == ["generated ids returned"]
    assert "return_token_ids" in rep.message()


async def test_unknown_model_lists_the_served_ones(fake_engine: Any) -> None:
    rep = await preflight(fake_engine.url, "vllm", model="glm-5.3")
    assert not rep.ok
    assert "model 'glm-5.3' is not served; the server lists: fake-model" in rep.message()


async def test_unreachable_engine_says_so_and_skips_the_rest() -> None:
    rep = await preflight("http://127.0.0.1:9", "sglang")
    assert not rep.ok
    assert rep.checks[0].name == "reachable" and rep.checks[0].ok is False
    assert all(c.ok is None for c in rep.checks[1:])
    assert "start the engine, or fix the URL http://127.0.0.1:9" in rep.message()


async def test_rejected_token_prompts_are_reported(fake_engine: Any) -> None:
    fake_engine.max_model_len = 600  # the probe fits; make the server reject it instead
    fake_engine.faults = ["500"]
    rep = await preflight(fake_engine.url, "vllm")
    failed = {c.name for c in rep.failures}
    assert "token-id prompts" in failed
    assert "HTTP 500" in rep.message()


async def test_openai_kind_checks_a_text_endpoint_without_requiring_token_ids(
    fake_engine: Any,
) -> None:
    fake_engine.report_cached = False  # a hosted endpoint that reports no cache is still usable
    rep = await preflight(fake_engine.url + "/v1", "openai")
    assert rep.ok, rep.message()
    ids = next(c for c in rep.checks if c.name == "generated ids returned")
    assert ids.ok is False and not ids.required and "not exact" in ids.detail


async def test_a_401_fails_preflight_and_names_the_key_variable(
    fake_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_engine.auth_key = "sk-right-key-0123456789"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rep = await preflight(fake_engine.url + "/v1", "openai")
    assert not rep.ok
    assert "set the API key in the environment variable OPENAI_API_KEY" in rep.message()
    assert "passed" not in rep.message()
    monkeypatch.setenv("MY_KEY", "sk-wrong-key-0123456789")
    rep = await preflight(
        fake_engine.url + "/v1", "openai", adapter_options={"api_key_env": "MY_KEY"}
    )
    assert not rep.ok and "the API key in MY_KEY was rejected (401)" in rep.message()
    assert all(c.ok is None for c in rep.checks[1:])  # the rest did not run, and say so
    monkeypatch.setenv("MY_KEY", "sk-right-key-0123456789")
    rep = await preflight(
        fake_engine.url + "/v1", "openai", adapter_options={"api_key_env": "MY_KEY"}
    )
    assert rep.ok, rep.message()


async def test_passed_is_said_only_of_checks_that_ran_and_passed(fake_engine: Any) -> None:
    fake_engine.return_ids = False
    fake_engine.report_cached = False
    rep = await preflight(fake_engine.url + "/v1", "openai")
    assert rep.ok  # the token-level checks are informative for a hosted endpoint
    msg = rep.message()
    assert "all" not in msg.split(":")[1] and "checks passed" in msg
    passed = sum(1 for c in rep.checks if c.ok)
    assert f"ready ({passed} of {len(rep.checks)} checks passed" in msg
    assert "generated ids returned failed" in msg


async def test_a_warm_engine_is_warned_not_failed(fake_engine: Any) -> None:
    cold = await preflight(fake_engine.url, "vllm")
    (guard,) = [c for c in cold.checks if c.name == "cold cache"]
    assert guard.ok is True and not guard.required
    # The first preflight's probes were traffic: a second one finds the counters moved.
    warm = await preflight(fake_engine.url, "vllm")
    assert warm.ok  # a warning, never a failure
    (guard,) = [c for c in warm.checks if c.name == "cold cache"]
    assert guard.ok is False
    assert "served earlier traffic" in guard.detail and "prompt tokens looked up" in guard.detail
    assert "/reset_prefix_cache" in guard.fix and "VLLM_SERVER_DEV_MODE=1" in guard.fix


async def test_the_sglang_warning_names_flush_cache(fake_engine: Any) -> None:
    from replay.engines.preflight import warm_cache_check

    text = "# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total 512\n"
    check = warm_cache_check(text, "sglang")
    assert check.ok is False and "/flush_cache" in check.fix
    assert warm_cache_check(None, "sglang").ok is None
