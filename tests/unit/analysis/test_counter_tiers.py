"""The engine-counter figures of a tiered engine (issue 34 point 3) on hand-made
`server_metrics` frames: vLLM 0.32 counts a KV connector's hits apart from the GPU's, SGLang
0.5.22 labels its cached tokens by `cache_source`."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from analysis.counters import counter_hit_rate, counter_offload_hit_rate
from analysis.manifest import Window

WINDOW = Window(100.0, 200.0)
TIMES = (50.0, 100.0, 200.0)


def _rows(metric: str, values: tuple[float, ...], **labels: str) -> list[dict[str, object]]:
    text = json.dumps({"model_name": "m", **labels})
    return [
        {"engine": "a", "t_s": t, "metric": metric, "labels": text, "value": v}
        for t, v in zip(TIMES, values, strict=True)
    ]


def _vllm(connector: bool) -> pd.DataFrame:
    # Over the window: 1,000 prompt tokens, 300 GPU hits, 200 loaded by the connector.
    rows = [
        *_rows("vllm:prefix_cache_queries_total", (0, 1000, 2000)),
        *_rows("vllm:prefix_cache_hits_total", (0, 100, 400)),
        *_rows("vllm:prompt_tokens_by_source_total", (0, 700, 1200), source="local_compute"),
        *_rows("vllm:prompt_tokens_by_source_total", (0, 100, 400), source="local_cache_hit"),
        *_rows(
            "vllm:prompt_tokens_by_source_total",
            (0, 200, 400) if connector else (0, 0, 0),
            source="external_kv_transfer",
        ),
    ]
    if connector:
        rows += _rows("vllm:external_prefix_cache_hits_total", (0, 200, 400))
        rows += _rows("vllm:external_prefix_cache_queries_total", (0, 900, 1700))
    return pd.DataFrame(rows)


def test_a_vllm_connectors_hits_count_in_the_hit_rate_and_apart() -> None:
    frame = _vllm(connector=True)
    assert counter_hit_rate(frame, "a", WINDOW) == pytest.approx((300 + 200) / 1000)
    assert counter_offload_hit_rate(frame, "a", WINDOW) == pytest.approx(200 / 1000)


def test_a_vllm_without_a_connector_has_no_offload_figure() -> None:
    frame = _vllm(connector=False)
    assert counter_hit_rate(frame, "a", WINDOW) == pytest.approx(300 / 1000)
    assert math.isnan(counter_offload_hit_rate(frame, "a", WINDOW))
    # A real vLLM exports the connector's counters at 0 without a connector.
    zeros = pd.concat(
        [
            frame,
            pd.DataFrame(_rows("vllm:external_prefix_cache_hits_total", (0, 0, 0))),
            pd.DataFrame(_rows("vllm:external_prefix_cache_queries_total", (0, 0, 0))),
        ]
    )
    assert counter_hit_rate(zeros, "a", WINDOW) == pytest.approx(300 / 1000)
    assert math.isnan(counter_offload_hit_rate(zeros, "a", WINDOW))


def test_sglang_hicache_host_and_storage_tokens() -> None:
    frame = pd.DataFrame(
        [
            *_rows("sglang:prompt_tokens_total", (0, 1000, 3000)),
            *_rows("sglang:cached_tokens_total", (0, 100, 700), cache_source="device"),
            *_rows("sglang:cached_tokens_total", (0, 50, 450), cache_source="host"),
            *_rows("sglang:cached_tokens_total", (0, 0, 100), cache_source="storage"),
        ]
    )
    # Every source counts as a hit; host and storage are the offloaded ones.
    assert counter_hit_rate(frame, "a", WINDOW) == pytest.approx((600 + 400 + 100) / 2000)
    assert counter_offload_hit_rate(frame, "a", WINDOW) == pytest.approx(500 / 2000)


def test_sglang_without_sources_and_a_frame_without_labels() -> None:
    plain = pd.DataFrame(
        [
            *_rows("sglang:prompt_tokens_total", (0, 1000, 3000)),
            *_rows("sglang:cached_tokens_total", (0, 100, 700)),
        ]
    )
    assert math.isnan(counter_offload_hit_rate(plain, "a", WINDOW))
    no_labels = _vllm(connector=True).drop(columns=["labels"])
    assert math.isnan(counter_offload_hit_rate(no_labels, "a", WINDOW))
    assert counter_hit_rate(no_labels, "a", WINDOW) == pytest.approx(0.5)
