"""The metric registry: every per-engine figure of a run, written once.

Each `Metric` says what summary.json's key is called, how a person reads it (label, unit,
format, which direction is better), which executors can know it (and why not, for those that
cannot), and where it is shown (`views`). Everything that prints or stores a metric reads it
from here: summary.json (`analysis.summary`, typed by `replay.rundir_models.EngineSummary`),
`replay run`'s final table, the report's tables, the dashboard's pages and the verdicts.

Adding a metric is one entry here (in the order it should appear wherever it is shown) plus
its computation (the module named in `source`); tests/unit/analysis/test_registry.py checks
that every key a real summary.json holds is an entry and that every entry meant for the
summary is produced, or null with its reason.

The definitions sit in `replay` (not in `analysis`) so that the run directory's own model
(`replay.rundir_models`) can type summary.json from them; they import nothing of ours.
`analysis.registry` adds the lookups and renderings the readers use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Who wrote the run: the live client against real engines, the live client against emulators
# (`replay serve-sim`), or the simulator with an engine clock or with the trace's own clock.
Executor = Literal["live", "emulated", "sim-engine", "sim-trace"]
EXECUTORS: tuple[Executor, ...] = ("live", "emulated", "sim-engine", "sim-trace")
# How a value is shown: a count, a number with `digits` decimals, a share (×100, "%"), dollars,
# a factor ("2.00×"), a flag (YES / no, or the metric's `flag_words`), yes/no, text, or a JSON
# object (evidence; shown through its `flagged` member where it has one).
Format = Literal["int", "num", "pct", "usd", "ratio", "flag", "bool", "text", "json"]
# The Python type of the stored value (all nullable: NaN is stored as null).
Value = Literal["int", "float", "bool", "str", "json"]
Better = Literal["higher", "lower"]
Severity = Literal["error", "warning"]
# Where a metric is listed (each view lists its metrics in registry order):
View = Literal[
    "final",  # `replay run`'s final table
    "panel",  # the dashboard's Replay page, one panel per engine
    "live",  # the dashboard's Live page: its table of the runs in progress
    "comparison",  # analysis.comparison: each engine against the best other (report, demo)
    "compare",  # the dashboard's Compare page: its table
    "compare.figure",  # ... and its figures against sessions
    "pricing",  # the dashboard's Pricing what-if table
    "verdicts",  # the dashboard's verdict table
    "sweep",  # analysis.sweeps: averaged across seeds at each session count
    "report.throughput",
    "report.latency",
    "report.misses",
    "report.economics",
    "report.verdicts",
    "report.fidelity",
    "report.sweep",
    "report.rollup",
    "report.significance",  # differences against the best other engine, at two SEs
    "report.tiers",  # the report's hits-by-tier table (a run whose cache has tiers)
    "tiers",  # the dashboard's Replay page: its hits-by-tier table (likewise)
]

# Why an executor cannot know a metric (stored in summary.json's per-engine `unknown`).
TRACE_TIMING_REASON = (
    "trace-timing simulation: no GPU clock (every request takes the trace's own time), so "
    "throughput and latency say nothing about the policy; rerun with --timing engine"
)
NOT_LIVE_REASON = "not a live run: the simulator replays the trace's lengths exactly"
_TRACE: dict[Executor, str] = {"sim-trace": TRACE_TIMING_REASON}
_LIVE_ONLY: dict[Executor, str] = {"sim-engine": NOT_LIVE_REASON, "sim-trace": NOT_LIVE_REASON}


@dataclass(frozen=True)
class Metric:
    """One per-engine figure. `unknown` maps each executor that cannot know it to why (every
    other executor can); `se`: a time-bin standard error is stored as `<key>_se`; `summary`:
    stored in summary.json (False: computed where it is shown, e.g. a price at the page's
    GPU rate); `plain_in`: views that show it without its standard error; `only_when`: the
    condition under which it is produced at all (absent otherwise); `short`: the label
    where two must fit side by side (the dashboard's panels); `severity`: how loud the
    warning it raises is (`analysis.summary.engine_warnings`)."""

    key: str
    label: str
    unit: str = ""
    fmt: Format = "num"
    digits: int = 0
    value: Value = "float"
    better: Better | None = None
    description: str = ""
    source: str = "analysis.metrics"
    views: frozenset[View] = frozenset()
    unknown: dict[Executor, str] = field(default_factory=dict)
    se: bool = False
    summary: bool = True
    plain_in: frozenset[View] = frozenset()
    only_when: str | None = None
    short: str | None = None
    severity: Severity | None = None
    flag_words: tuple[str, str] = ("YES", "no")

    @property
    def known_by(self) -> tuple[Executor, ...]:
        return tuple(e for e in EXECUTORS if e not in self.unknown)

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


def _v(*names: View) -> frozenset[View]:
    return frozenset(names)


_TPUT = "tok/min/GPU"
_TIERED = "the engine's records carry cached tokens by tier (a cache with tiers, issue 34)"
_HOST = "the engine's spec gives it host memory (--host-memory-gb > 0, issue 34)"
_M = Metric
# fmt: off
METRICS: tuple[Metric, ...] = (
    # identity of the row
    _M("run_id", "Run", fmt="text", value="str", description="the run's id", views=_v("compare")),
    _M("sessions", "Sessions", fmt="int", value="int", description="concurrent sessions",
       views=_v("report.throughput", "compare")),
    _M("gpus", "GPUs", fmt="int", value="int", description="the engine's GPUs",
       views=_v("report.throughput")),
    _M("gpu_type", "GPU type", fmt="text", value="str", description="the engine's GPU"),
    _M("window_start_s", "Window start", "s", digits=1, description="the measured window's start"),
    _M("window_end_s", "Window end", "s", digits=1, description="the measured window's end"),
    _M("window_s", "Window", "s", digits=1, description="the measured window's length"),
    # requests and tokens
    _M("requests", "Requests", fmt="int", value="int", better="higher",
       description="requests finished ok with the first token in the window", severity="warning",
       views=_v("live", "report.throughput", "compare", "report.rollup")),
    _M("requests_scheduled", "Scheduled", fmt="int", value="int",
       description="requests scheduled in the window"),
    _M("prompt_tokens", "Prompt tokens", "tok",
       description="prompt tokens of the measured requests"),
    _M("cached_tokens", "Cached tokens", "tok",
       description="reported cached tokens of the measured requests"),
    _M("ideal_cached_tokens", "Ideal cached", "tok",
       description="ideal cached tokens of the measured requests"),
    _M("output_tokens", "Output tokens", "tok",
       description="output tokens generated in the window"),
    _M("output_tokens_per_min", "Output", "tok/min",
       description="output tokens per minute (all GPUs)"),
    _M("output_tokens_per_min_per_gpu", "Output", _TPUT, better="higher", se=True,
       short="Output/min/GPU",
       description="output tokens per minute per GPU", unknown=_TRACE,
       views=_v("live", "final", "panel", "comparison", "compare", "compare.figure", "pricing",
                "verdicts", "sweep", "report.throughput", "report.sweep", "report.significance")),
    _M("prefill_tokens_per_min_per_gpu", "Prefill", _TPUT, better="higher", se=True,
       description="prompt tokens (cached and computed) per minute per GPU", unknown=_TRACE,
       views=_v("final", "comparison", "compare", "compare.figure", "pricing", "sweep",
                "report.throughput", "report.significance")),
    # InferenceX's tok/s/GPU (issue 35, point 2; docs/field-numbers.md): github
    # SemiAnalysisAI/InferenceX utils/agentic/aggregation/request_metrics.py
    # `compute_throughput_stats` (Σ input + Σ output tokens over max request end − min
    # request start, aiperf's profiling-phase records without an error) and
    # process_agentic_result.py `build_agg` (÷ GPUs). Per second, cached input included.
    _M("inferencex_total_tok_s_per_gpu", "InferenceX total", "tok/s/GPU", better="higher",
       unknown=_TRACE, short="InferenceX tok/s/GPU",
       description="InferenceX's total tok/s/GPU (SemiAnalysisAI/InferenceX "
       "request_metrics.py compute_throughput_stats ÷ GPUs): prompt tokens (cached included) "
       "+ output tokens of the measured requests ÷ (last end − first start) ÷ GPUs",
       views=_v("compare", "report.throughput")),
    # hit rates
    _M("hit_rate", "Hit rate", "%", "pct", 1, better="higher", se=True,
       description="reported cached ÷ prompt tokens", plain_in=_v("report.fidelity"),
       views=_v("live", "final", "panel", "comparison", "compare", "compare.figure", "pricing",
                "sweep", "report.throughput", "report.fidelity", "report.sweep", "report.rollup",
                "report.significance")),
    _M("ideal_hit_rate", "Ideal hit", "%", "pct", 1, better="higher", se=True,
       description="ideal cached ÷ prompt tokens", plain_in=_v("report.throughput"),
       views=_v("final", "sweep", "report.throughput", "report.sweep", "report.rollup")),
    # aiperf's theoretical prefix-cache hit rate, as InferenceX publishes it (issue 35, point
    # 2; docs/field-numbers.md): aiperf dataset/loader/weka_metric_prepass.py
    # `compute_shared_prefix_cache_metrics` and metrics/theoretical_prefix_cache.py. Per
    # trace (root + subagents, one seen-set, trace clock), in hash blocks; ours,
    # ideal_hit_rate, is engine-wide over what this run computed, in tokens.
    _M("theoretical_hit_rate_aiperf", "aiperf theoretical hit", "%", "pct", 1,
       better="higher", short="aiperf theoretical",
       description="aiperf's theoretical prefix-cache hit rate (weka_metric_prepass.py "
       "compute_shared_prefix_cache_metrics): Σ leading hash blocks already sent by the same "
       "trace (root + subagents, trace clock) ÷ Σ blocks, over the measured requests",
       views=_v("compare", "report.throughput")),
    # hits by cache tier (issue 34; docs/cache-tiers.md): only where the engine's records
    # carry `cached_tokens_host` / `cached_tokens_external` (a cache with tiers); an untiered
    # run's summary.json holds none of them. The GPU's share is the rest of `cached_tokens`.
    _M("cached_tokens_host", "Host cached", "tok", only_when=_TIERED,
       description="cached tokens of the measured requests that host memory served"),
    _M("cached_tokens_external", "External cached", "tok", only_when=_TIERED,
       description="cached tokens of the measured requests that an external store served"),
    _M("gpu_hit_rate", "GPU hit", "%", "pct", 1, only_when=_TIERED,
       description="cached tokens the GPU cache served ÷ prompt tokens (cached − host − "
       "external)", views=_v("report.tiers", "tiers")),
    _M("host_hit_rate", "Host hit", "%", "pct", 1, only_when=_TIERED,
       description="cached tokens host memory served ÷ prompt tokens",
       views=_v("report.tiers", "tiers")),
    _M("external_hit_rate", "External hit", "%", "pct", 1, only_when=_TIERED,
       description="cached tokens an external store served ÷ prompt tokens",
       views=_v("report.tiers", "tiers")),
    _M("host_hit_share", "Of hits from host", "%", "pct", 1, only_when=_TIERED,
       description="cached tokens host memory served ÷ cached tokens",
       views=_v("report.tiers", "tiers")),
    _M("host_hit_requests", "Host-hit requests", fmt="int", value="int", only_when=_TIERED,
       description="measured requests with cached tokens from host memory",
       views=_v("report.tiers", "tiers")),
    _M("host_memory_gb", "Host memory", "GiB", digits=0, only_when=_HOST,
       description="host memory of the engine's cache tier, all its replicas (its spec's "
       "host_memory_gb × replicas)", views=_v("report.economics", "pricing")),
    _M("external_memory_gb", "External store", "GiB", digits=0, only_when=_HOST,
       description="the external store behind host memory, all replicas (unpriced: the "
       "pricing data has no rate for it)"),
    _M("counter_hit_rate", "Counter hit", "%", "pct", 1, better="higher",
       description="engine counters' hits ÷ queries over the window",
       views=_v("final", "sweep", "report.throughput")),
    _M("counter_offload_hit_rate", "Counter host+store hit", "%", "pct", 1,
       only_when="the engine's counters carry offloaded tokens (a vLLM KV connector, SGLang's "
       "HiCache sources)",
       description="engine counters' prompt tokens loaded from host memory or an external store "
       "÷ prompt tokens over the window: vLLM's KV-connector tokens (external_kv_transfer), "
       "SGLang's host and storage cached tokens; host memory and external store together",
       views=_v("final")),
    _M("trajectories_finished", "Finished", "traj.", "int", value="int", better="higher",
       description="trajectories finished in the window",
       views=_v("panel", "sweep", "report.throughput")),  # the final table: tasks_finished
    # latency
    _M("ttft_p50", "TTFT p50", "s", digits=2, better="lower", se=True, unknown=_TRACE,
       description="time to first token from scheduled time, median",
       views=_v("live", "final", "panel", "comparison", "compare", "compare.figure", "sweep",
                "report.latency", "report.sweep", "report.rollup", "report.significance")),
    _M("ttft_p90", "TTFT p90", "s", digits=2, better="lower", se=True, unknown=_TRACE,
       description="time to first token from scheduled time, 90th percentile",
       views=_v("final", "panel", "compare", "compare.figure", "sweep", "report.latency")),
    _M("ttft_p99", "TTFT p99", "s", digits=2, better="lower", unknown=_TRACE,
       description="time to first token from scheduled time, 99th percentile",
       views=_v("sweep", "report.latency")),
    _M("e2e_p50", "E2E p50", "s", digits=2, better="lower", se=True, unknown=_TRACE,
       description="end-to-end latency from scheduled time, median",
       views=_v("final", "panel", "comparison", "compare", "sweep", "report.latency")),
    _M("e2e_mean", "E2E mean", "s", digits=2, better="lower", se=True, unknown=_TRACE,
       description="end-to-end latency from scheduled time, mean",
       views=_v("final", "sweep", "report.latency")),
    # errors
    _M("errors", "Errors", fmt="int", value="int", better="lower",
       views=_v("live"),
       description="errors and timeouts among the requests scheduled in the window"),
    _M("error_rate", "Errors", "%", "pct", 2, better="lower",
       description="errors and timeouts ÷ requests scheduled in the window",
       views=_v("final", "sweep", "report.latency")),
    _M("overflow_rate", "Overflow", "%", "pct", 2, better="lower",
       description="prompts over the context ÷ requests scheduled",
       views=_v("final", "sweep", "report.latency")),
    _M("overflow_flagged", "Overflow flagged", fmt="bool", value="bool", source="analysis.summary",
       description="overflow rate over 1%"),
    _M("error_flagged", "Error flagged", fmt="bool", value="bool", source="analysis.summary",
       description="error share over 5%: degraded"),
    # misses (Equation 5)
    _M("uncached_tokens_per_request", "Uncached mean", "tok/req", better="lower", se=True,
       description="prompt − cached tokens, mean",
       views=_v("sweep", "report.misses", "report.rollup")),
    _M("uncached_tokens_p50", "Uncached p50", "tok/req", better="lower",
       description="prompt − cached tokens, median", views=_v("report.misses")),
    _M("redundant_prefill_per_request", "Redundant", "tok/req", better="lower", se=True,
       description="ideal − actual resume position, mean",
       views=_v("sweep", "report.misses", "report.sweep", "report.rollup")),
    _M("placement_miss_per_request", "Placement", "tok/req", better="lower",
       description="placement misses per request, mean", views=_v("sweep", "report.misses")),
    _M("dependency_miss_per_request", "Dependency", "tok/req", better="lower",
       description="dependency misses per request, mean", views=_v("sweep", "report.misses")),
    _M("capacity_miss_per_request", "Capacity", "tok/req", better="lower",
       description="capacity misses per request, mean", views=_v("sweep", "report.misses")),
    _M("miss_source", "Source", fmt="text", value="str",
       description="where the redundant prefill came from (simulated, ideal − reported, mixed)",
       views=_v("report.misses")),
    _M("working_set_ratio", "Working set ÷ cache", digits=2,
       description="working set ÷ cache capacity (summary.json, else the manifest)",
       views=_v("compare", "sweep", "report.sweep")),
    # verdicts: saturation, tasks, SLOs, goodput (analysis.verdicts)
    _M("saturated", "Saturated", fmt="flag", value="bool", better="lower", severity="error",
       source="analysis.saturation", description="the engine did not keep up (see `saturation`)",
       views=_v("final", "verdicts")),
    _M("saturation", "Saturation evidence", fmt="json", value="json", source="analysis.saturation",
       description="the saturation verdict's evidence (queue, TTFT and send-lag trends)"),
    _M("tasks_finished", "Tasks finished", fmt="int", value="int", better="higher",
       source="analysis.tasks",
       description="agent tasks (trajectories) finished in the window",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("task_latency_p50_s", "Task latency p50", "s", digits=1, better="lower", unknown=_TRACE,
       source="analysis.tasks", description="a finished task's latency, median",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("task_latency_p90_s", "Task latency p90", "s", digits=1, better="lower", unknown=_TRACE,
       source="analysis.tasks", description="a finished task's latency, 90th percentile",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("task_slowdown_p50", "Slowdown p50", "×", "ratio", 2, better="lower", unknown=_TRACE,
       source="analysis.tasks", description="task time ÷ the trace's own, median",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("task_slowdown_p90", "Slowdown p90", "×", "ratio", 2, better="lower", unknown=_TRACE,
       source="analysis.tasks", description="task time ÷ the trace's own, 90th percentile"),
    _M("tasks_per_hour_per_gpu", "Tasks", "/h/GPU", digits=1, better="higher", unknown=_TRACE,
       source="analysis.tasks", description="tasks finished per hour per GPU",
       views=_v("report.verdicts")),
    _M("task_requests_mean", "Task requests", "req", digits=1, source="analysis.tasks",
       description="requests of a finished task, mean"),
    _M("slo", "SLO", fmt="json", value="json", source="analysis.slo",
       description="the SLO judged against, with its source and text"),
    _M("slo_request_share", "SLO requests", "%", "pct", 1, better="higher", unknown=_TRACE,
       source="analysis.verdicts", description="requests that met the SLO ÷ measured requests",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("slo_task_share", "SLO tasks", "%", "pct", 1, better="higher", unknown=_TRACE,
       source="analysis.verdicts", description="finished tasks within the slowdown SLO",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("goodput_output_tokens_per_min_per_gpu", "Goodput out", _TPUT, better="higher",
       unknown=_TRACE, source="analysis.verdicts",
       description="output tokens per minute per GPU of the requests within the SLO",
       views=_v("final", "verdicts", "report.verdicts")),
    _M("goodput_prefill_tokens_per_min_per_gpu", "Goodput prefill", _TPUT, better="higher",
       unknown=_TRACE, source="analysis.verdicts",
       description="prompt tokens per minute per GPU of the requests within the SLO"),
    _M("task_prompt_tokens_mean", "Task prompt", "tok", source="analysis.verdicts",
       description="a finished task's prompt tokens, mean (full size)"),
    _M("task_cached_tokens_mean", "Task cached", "tok", source="analysis.verdicts",
       description="a finished task's cached tokens, mean (full size)"),
    _M("task_output_tokens_mean", "Task output", "tok", source="analysis.verdicts",
       description="a finished task's output tokens, mean (full size)"),
    # replay fidelity (analysis.fidelity)
    _M("warm_start_s", "Warm-start span", "s", digits=0, source="analysis.fidelity",
       description="the first minutes the warm-start check reads"),
    _M("warm_start_requests", "Warm-start requests", fmt="int", value="int",
       source="analysis.fidelity", description="requests of the first minutes"),
    _M("warm_start_hit_rate", "First minutes hit", "%", "pct", 1, source="analysis.fidelity",
       description="hit rate of the first minutes",
       views=_v("final", "verdicts", "report.fidelity")),
    _M("warm_start_excess_hit_rate", "Unexplained hits", "%", "pct", 2, better="lower",
       source="analysis.fidelity", description="hits on prefixes the run had not computed",
       views=_v("verdicts", "report.fidelity")),
    _M("warm_start_flagged", "Warm start", fmt="bool", value="bool", severity="warning",
       source="analysis.fidelity", description="the cache was warm at the start",
       views=_v("report.fidelity")),
    _M("drift", "Drift", fmt="flag", value="json", severity="warning",
       flag_words=("DRIFTED", "none"),
       unknown=_LIVE_ONLY, source="analysis.fidelity",
       description="replay drift from the trace (output and prompt lengths, continuations)",
       views=_v("final", "verdicts")),
    _M("false_hits", "False hits", fmt="int", value="int", better="lower", severity="warning",
       unknown=_TRACE, source="analysis.claimed_hits",
       description="reported cache hits whose TTFT says the prefill was done anyway (whole run)",
       views=_v("verdicts", "report.fidelity")),
    _M("claimed_hits", "Claimed-hit check", fmt="json", value="json", unknown=_TRACE,
       source="analysis.claimed_hits",
       description="the false-hit check's evidence: prefill rate, noise, requests assessed"),
    _M("unknown", "Unknown", fmt="json", value="json", source="analysis.verdicts",
       description="{metric: why this run cannot know it}"),
    # an engine of replicas behind a router (issue 26; analysis.replicas)
    _M("replicas", "Replicas", fmt="int", value="int", source="analysis.replicas",
       only_when="the engine's records name replicas",
       description="replicas that served in the window"),
    _M("fleet", "Fleet", fmt="json", value="json", source="analysis.replicas",
       only_when="the engine's records name replicas",
       description="per replica: requests, share, hit rate, TTFT p50; the router's balance "
       "and branches, predicted overlap ÷ cached"),
    # economics at the default sheet (analysis.economics; pricing)
    _M("sheet", "Sheet", fmt="text", value="str", source="analysis.economics",
       description="the price sheet"),
    _M("gpu", "GPU", fmt="text", value="str", source="analysis.economics",
       description="the GPU rate priced", views=_v("report.economics")),
    _M("gpu_rate_per_hour", "GPU rate", "$/GPU-h", "usd", 2, summary=False,
       source="analysis.economics", description="the GPU's rate per hour",
       views=_v("report.economics")),
    _M("user_cost_per_m_input", "User cost", "$/1M input", "usd", 4, better="lower",
       source="analysis.economics", short="User $/1M in",
       description="what a user pays per 1M input tokens at this hit rate",
       views=_v("final", "panel", "comparison", "pricing", "report.economics")),
    _M("revenue_per_gpu_hour", "Revenue", "$/GPU-h", "usd", 2, better="higher", summary=False,
       source="analysis.economics", description="provider revenue per GPU-hour",
       views=_v("pricing", "report.economics")),
    _M("profit_per_gpu_hour", "Profit", "$/GPU-h", "usd", 2, better="higher", short="Profit/GPU-h",
       source="analysis.economics",
       description="provider profit per GPU-hour at the price sheet and GPU rate",
       views=_v("final", "panel", "comparison", "pricing", "report.economics")),
    _M("break_even_gpu_rate", "Break-even", "$/GPU-h", "usd", 2, summary=False,
       source="analysis.economics", description="the GPU rate at which profit is zero",
       views=_v("pricing")),
    _M("break_even_hit_rate", "Break-even hit", "%", "pct", 1, summary=False,
       source="analysis.economics", description="the hit rate at which profit is zero",
       views=_v("report.economics")),
    _M("host_usd_per_gb_hour", "Host rate", "$/GiB-h", "usd", 5, only_when=_HOST,
       source="analysis.economics",
       description="what a GiB of host memory costs the provider per hour (replay price's "
       "--host-usd-per-gb-hour, else gpus.yaml's host_memory rate, else 0: unpriced)"),
    _M("host_rate_source", "Host rate source", fmt="text", value="str", only_when=_HOST,
       source="analysis.economics", description="where the host-memory rate comes from"),
    _M("host_cost_per_gpu_hour", "Host cost", "$/GPU-h", "usd", 4, better="lower",
       only_when=_HOST, source="analysis.economics",
       description="the engine's host memory at the host rate, per GPU-hour (GiB × rate ÷ GPUs)",
       views=_v("pricing", "report.economics")),
    _M("net_profit_per_gpu_hour", "Net profit", "$/GPU-h", "usd", 2, better="higher",
       only_when=_HOST, source="analysis.economics",
       description="profit per GPU-hour less the host memory's cost",
       views=_v("pricing", "report.economics")),
    _M("user_cost_per_task", "User cost", "$/task", "usd", 4, better="lower",
       source="analysis.economics", description="what a user pays for one finished agent task",
       views=_v("final", "pricing", "report.verdicts")),
    _M("revenue_per_gpu_hour_at_goodput", "Revenue at goodput", "$/GPU-h", "usd", 2,
       better="higher", source="analysis.economics",
       description="revenue per GPU-hour counting only the requests within the SLO"),
    _M("profit_per_gpu_hour_at_goodput", "Profit at goodput", "$/GPU-h", "usd", 2, better="higher",
       source="analysis.economics",
       description="profit per GPU-hour counting only the requests within the SLO",
       views=_v("final", "pricing", "report.verdicts")),
)
# fmt: on

BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
assert len(BY_KEY) == len(METRICS), "a metric key is registered twice"


def metric(key: str) -> Metric:
    """The registered metric `key` (KeyError naming it when it is not registered)."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"{key!r} is not a registered metric (replay/metric_registry.py)") from None


def in_view(view: View) -> tuple[Metric, ...]:
    """The metrics `view` lists, in registry order."""
    return tuple(m for m in METRICS if view in m.views)


def summary_keys() -> tuple[str, ...]:
    """Every per-engine key summary.json may hold: the stored metrics and their `_se`."""
    keys = [m.key for m in METRICS if m.summary]
    return (*keys, *(f"{m.key}_se" for m in METRICS if m.summary and m.se))


def unknown_to(executor: Executor) -> dict[str, str]:
    """{metric: why} for the metrics `executor` cannot know, in registry order."""
    return {m.key: m.unknown[executor] for m in METRICS if executor in m.unknown}


__all__ = [
    "BY_KEY",
    "EXECUTORS",
    "METRICS",
    "NOT_LIVE_REASON",
    "TRACE_TIMING_REASON",
    "Executor",
    "Format",
    "Metric",
    "Severity",
    "View",
    "in_view",
    "metric",
    "summary_keys",
    "unknown_to",
]
