"""`/metrics` in Prometheus text, with the real engines' metric names and labels.

vLLM (v1 engine): `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total` count
prompt tokens looked up and found, `vllm:prompt_tokens_by_source_total{source=...}` splits
prompt tokens into `local_compute` / `local_cache_hit` / `external_kv_transfer`,
`vllm:kv_cache_usage_perc` is a 0..1 fraction, and `vllm:cache_config_info` carries the block
size in its labels. SGLang: `sglang:prompt_tokens_total`, `sglang:cached_tokens_total`,
`sglang:token_usage` (0..1), `sglang:num_running_reqs`, `sglang:num_queue_reqs`. Rendered
with `prometheus_client`, so the text is exactly what its parser (and Prometheus) reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

Family = CounterMetricFamily | GaugeMetricFamily


@dataclass(frozen=True)
class MetricsSnapshot:
    """The values one scrape reports."""

    prompt_tokens: int
    cached_tokens: int
    generation_tokens: int
    requests_finished: int
    running: int
    waiting: int
    usage: float  # fraction of cache blocks in use
    block_tokens: int
    blocks: int


class _EngineCollector(Collector):
    def __init__(self, flavour: str, model_name: str, snapshot: MetricsSnapshot) -> None:
        self.flavour = flavour
        self.model_name = model_name
        self.s = snapshot

    def collect(self) -> Iterator[Family]:
        if self.flavour == "sglang":
            yield from self._sglang()
        else:
            yield from self._vllm()

    def _vllm(self) -> Iterator[Family]:
        s = self.s
        labels = ["model_name", "engine"]
        base = [self.model_name, "0"]

        def counter(name: str, doc: str, value: float) -> Family:
            return _family(CounterMetricFamily, name, doc, labels, [(base, value)])

        def gauge(name: str, doc: str, value: float) -> Family:
            return _family(GaugeMetricFamily, name, doc, labels, [(base, value)])

        yield counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of tokens.",
            s.prompt_tokens,
        )
        yield counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of tokens.", s.cached_tokens
        )
        yield _family(
            CounterMetricFamily,
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [*labels, "source"],
            [
                ([*base, "local_compute"], s.prompt_tokens - s.cached_tokens),
                ([*base, "local_cache_hit"], s.cached_tokens),
                ([*base, "external_kv_transfer"], 0),
            ],
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
        yield counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", s.generation_tokens
        )
        yield _family(
            CounterMetricFamily,
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            [([*base, "length"], s.requests_finished)],
        )
        yield gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", s.running
        )
        yield gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.waiting
        )
        yield gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.usage
        )
        bt = str(s.block_tokens)
        yield _family(
            GaugeMetricFamily,
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [
                "block_size",
                "effective_attention_block_size",
                "mamba_block_size",
                "enable_prefix_caching",
                "num_gpu_blocks",
            ],
            [([bt, bt, bt, "True", str(s.blocks)], 1.0)],
        )

    def _sglang(self) -> Iterator[Family]:
        s = self.s
        labels = ["model_name"]
        base = [self.model_name]
        for name, doc, value in (
            ("sglang:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens),
            ("sglang:cached_tokens", "Number of cached prompt tokens.", s.cached_tokens),
            (
                "sglang:generation_tokens",
                "Number of generation tokens processed.",
                s.generation_tokens,
            ),
            ("sglang:num_requests", "Number of requests processed.", s.requests_finished),
        ):
            yield _family(CounterMetricFamily, name, doc, labels, [(base, value)])
        hit = s.cached_tokens / s.prompt_tokens if s.prompt_tokens else 0.0
        for name, doc, gvalue in (
            ("sglang:num_running_reqs", "The number of running requests.", float(s.running)),
            (
                "sglang:num_queue_reqs",
                "The number of requests in the waiting queue.",
                float(s.waiting),
            ),
            ("sglang:token_usage", "The token usage.", s.usage),
            ("sglang:cache_hit_rate", "The prefix cache hit rate.", hit),
        ):
            yield _family(GaugeMetricFamily, name, doc, labels, [(base, gvalue)])


def _family(
    kind: type[Family],
    name: str,
    doc: str,
    labels: list[str],
    samples: list[tuple[list[str], float]],
) -> Family:
    """One metric family (a counter or a gauge) with its samples: label values, value."""
    family = kind(name, doc, labels=labels)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def render_metrics(flavour: str, model_name: str, snapshot: MetricsSnapshot) -> bytes:
    """Prometheus text exposition for one scrape (`flavour`: "vllm" or "sglang")."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_EngineCollector(flavour, model_name, snapshot))
    return generate_latest(registry)
