"""Engine metrics: parse Prometheus `/metrics` text and scrape it on an interval.

Rows go to `server_metrics.parquet` in long form (the analysis layer's contract,
`analysis.counters`): `engine`, `t_s` (seconds from run start), `metric` (the sample name,
e.g. `vllm:prefix_cache_hits_total`), `labels` (JSON of the sample's labels) and `value`.
Only the metrics the summary and the dashboards use are kept, so an hour of scraping stays
small. The engine's KV block size is read from vLLM's `vllm:cache_config_info` info metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

# Sample names kept (vLLM, SGLang, and the emulators, which use the same names).
KEPT_METRICS: frozenset[str] = frozenset(
    {
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_by_source_total",
        # A KV connector's hits (vLLM with host memory or a store: issue 34).
        "vllm:external_prefix_cache_hits_total",
        "vllm:external_prefix_cache_queries_total",
        "vllm:prompt_tokens_cached_by_source_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "sglang:cached_tokens_total",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:token_usage",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:cache_hit_rate",
    }
)

METRICS_SCHEMA = pa.schema(
    [
        ("engine", pa.string()),
        ("t_s", pa.float64()),
        ("metric", pa.string()),
        ("labels", pa.string()),
        ("value", pa.float64()),
    ]
)


class MetricsError(Exception):
    """`/metrics` text that the Prometheus parser rejects."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def parse_metrics(text: str, keep: frozenset[str] | None = None) -> list[Sample]:
    """Every sample in Prometheus exposition `text` (only names in `keep` when given)."""
    out: list[Sample] = []
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if keep is None or s.name in keep:
                    out.append(Sample(s.name, dict(s.labels), float(s.value)))
    except ValueError as e:
        raise MetricsError(f"unparseable /metrics text: {e}") from e
    return out


def cache_config(text: str) -> dict[str, str]:
    """The labels of `vllm:cache_config_info` (block_size, enable_prefix_caching, ...), or {}."""
    for s in parse_metrics(text):
        if s.name.startswith("vllm:cache_config_info"):
            return dict(s.labels)
    return {}


def block_size_from_metrics(text: str) -> int | None:
    """The engine's prefix-cache block size: vLLM's `cache_config_info` `block_size` label
    (not 16 on the CPU build: 128), or None where the engine does not publish it."""
    labels = cache_config(text)
    for key in ("block_size", "effective_attention_block_size"):
        v = labels.get(key)
        if v not in (None, "", "None"):
            try:
                return int(float(v))
            except ValueError:
                continue
    return None


@dataclass
class MetricsScraper:
    """Scrapes each engine's `/metrics` every `interval_s` into long-form rows.

    A failed scrape is counted, never raised: an engine that went away comes back into the
    series when it answers again."""

    urls: dict[str, str]  # engine name -> base url
    t0_ns: int
    interval_s: float = 5.0
    clock_scale: float = 1.0  # t_s = wall seconds since t0 × clock_scale (see the client)
    session: aiohttp.ClientSession | None = None
    rows: dict[str, list[Any]] = field(
        default_factory=lambda: {n: [] for n in METRICS_SCHEMA.names}
    )
    failures: dict[str, int] = field(default_factory=dict)
    last_error: dict[str, str] = field(default_factory=dict)

    async def scrape_once(self) -> None:
        assert self.session is not None
        await asyncio.gather(*(self._one(n, u) for n, u in self.urls.items()))

    async def _one(self, engine: str, url: str) -> None:
        assert self.session is not None
        try:
            async with self.session.get(
                url.rstrip("/") + "/metrics", timeout=aiohttp.ClientTimeout(total=10)
            ) as resp:
                if resp.status != 200:
                    raise MetricsError(f"HTTP {resp.status}")
                text = await resp.text()
            t_s = (time.perf_counter_ns() - self.t0_ns) / 1e9 * self.clock_scale
            samples = parse_metrics(text, KEPT_METRICS)
        except (aiohttp.ClientError, OSError, TimeoutError, MetricsError) as e:
            self.failures[engine] = self.failures.get(engine, 0) + 1
            self.last_error[engine] = f"{type(e).__name__}: {e}"
            return
        r = self.rows
        for s in samples:
            r["engine"].append(engine)
            r["t_s"].append(t_s)
            r["metric"].append(s.name)
            r["labels"].append(orjson.dumps(s.labels).decode() if s.labels else "")
            r["value"].append(s.value)

    async def run(self, stop: asyncio.Event, marks_s: list[float] | None = None) -> None:
        """Scrape every interval until `stop` is set, then once more. `marks_s` (wall seconds
        after t0) add scrapes at chosen moments: the window's edges, so counter deltas cover
        exactly the measured window."""
        own = self.session is None
        if own:
            self.session = aiohttp.ClientSession()
        pending = sorted(marks_s or [])
        try:
            next_tick = 0.0
            while not stop.is_set():
                elapsed = (time.perf_counter_ns() - self.t0_ns) / 1e9
                while pending and pending[0] <= elapsed:
                    pending.pop(0)
                    next_tick = elapsed  # a mark is due: scrape now
                if elapsed >= next_tick:
                    await self.scrape_once()
                    next_tick = elapsed + self.interval_s
                wake = min([next_tick, *pending[:1]]) - elapsed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(wake, 0.01))
            await self.scrape_once()
        finally:
            if own and self.session is not None:
                await self.session.close()

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.rows, schema=METRICS_SCHEMA)

    @property
    def num_rows(self) -> int:
        return len(self.rows["engine"])
