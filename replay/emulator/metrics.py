"""`/metrics` in Prometheus text, with the real engines' metric names and labels.

vLLM (v1 engine): `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total` count
prompt tokens looked up and found, `vllm:prompt_tokens_by_source_total{source=...}` splits
prompt tokens into `local_compute` / `local_cache_hit` / `external_kv_transfer`,
`vllm:kv_cache_usage_perc` is a 0..1 fraction, and `vllm:cache_config_info` carries the block
size in its labels. SGLang: `sglang:prompt_tokens_total`, `sglang:cached_tokens_total`,
`sglang:token_usage` (0..1), `sglang:num_running_reqs`, `sglang:num_queue_reqs`. Rendered
with `prometheus_client`, so the text is exactly what its parser (and Prometheus) reads.

An emulator whose cache has tiers (issue 34: host memory, an external store) splits its
cached tokens as the engines do; one without exports exactly what it did before tiers.

- vLLM 0.32: tokens a KV connector loads are `external_kv_transfer`
  (vllm/v1/metrics/stats.py:426-470, `PromptTokenStats`: local_cache_hit +
  external_kv_transfer = cached), `vllm:prefix_cache_hits` counts the GPU's own hits only and
  `vllm:external_prefix_cache_hits` / `_queries` the connector's (loggers.py:683-706,
  1167-1186; queries: the prompt tokens past the local hit, v1/core/sched/scheduler.py:1039-1042),
  and `vllm:prompt_tokens_cached_by_source` names the tier (loggers.py:782-795,
  v1/metrics/cache_hit_source.py): `device` for the GPU's hits, `host` for the offloading
  connector's CPU tier (v1/kv_offload/cpu/manager.py:201), `external_unspecified` for the
  store (`MooncakeStoreConnector` sets no source: kv_connector/v1/base.py:185, 551).
- SGLang 0.5.22: `sglang:cached_tokens_total` carries a `cache_source` label, `device`,
  `host` and `storage` (srt/observability/metrics_collector.py:1869-1873, 2049-2065; the
  request's `cached_tokens_details`, scheduler_components/output_streamer.py:86-115).
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
    # Of `cached_tokens`, those served from host memory and from the external store; None:
    # the cache has no tiers (the metrics are those of an untiered engine).
    cached_host: int | None = None
    cached_external: int = 0

    @property
    def cached_device(self) -> int:
        """Cached tokens the GPU cache itself held."""
        return self.cached_tokens - (self.cached_host or 0) - self.cached_external


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
        local = s.cached_device  # = cached_tokens without tiers
        yield counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of tokens.", local)
        yield _family(
            CounterMetricFamily,
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [*labels, "source"],
            [
                ([*base, "local_compute"], s.prompt_tokens - s.cached_tokens),
                ([*base, "local_cache_hit"], local),
                ([*base, "external_kv_transfer"], s.cached_tokens - local),
            ],
        )
        if s.cached_host is not None:
            yield from self._vllm_connector(labels, base)
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

    def _vllm_connector(self, labels: list[str], base: list[str]) -> Iterator[Family]:
        """A tiered vLLM's connector counters: its hits and queries, the tier of each hit."""
        s = self.s
        host = s.cached_host or 0
        external = host + s.cached_external
        for name, doc, value in (
            (
                "vllm:external_prefix_cache_queries",
                "External prefix cache queries from KV connector cross-instance cache "
                "sharing, in terms of number of queried tokens.",
                s.prompt_tokens - s.cached_device,
            ),
            (
                "vllm:external_prefix_cache_hits",
                "External prefix cache hits from KV connector cross-instance cache "
                "sharing, in terms of number of cached tokens.",
                external,
            ),
            (
                "vllm:prompt_tokens_cached",
                "Number of cached prompt tokens (local + external).",
                s.cached_tokens,
            ),
        ):
            yield _family(CounterMetricFamily, name, doc, labels, [(base, value)])
        yield _family(
            CounterMetricFamily,
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them.",
            [*labels, "source"],
            [
                # vLLM creates every source's sample at start (loggers.py:792-796).
                ([*base, "device"], s.cached_device),
                ([*base, "host"], host),
                ([*base, "p2p"], 0),
                ([*base, "disk"], 0),
                ([*base, "external_unspecified"], s.cached_external),
            ],
        )

    def _sglang_cached_by_source(self, labels: list[str], base: list[str]) -> Family:
        """HiCache's cached tokens by `cache_source`: device and host, and storage once the
        store served any (SGLang creates a source's sample on its first tokens,
        metrics_collector.py:2053-2065; device and host are always shown here)."""
        s = self.s
        samples = [
            ([*base, "device"], float(s.cached_device)),
            ([*base, "host"], float(s.cached_host or 0)),
        ]
        if s.cached_external:
            samples.append(([*base, "storage"], float(s.cached_external)))
        return _family(
            CounterMetricFamily,
            "sglang:cached_tokens",
            "Number of cached prompt tokens by source (device/host/storage).",
            [*labels, "cache_source"],
            samples,
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
            if name == "sglang:cached_tokens" and s.cached_host is not None:
                yield self._sglang_cached_by_source(labels, base)
                continue
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
