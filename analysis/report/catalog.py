"""The report's tables, in the order the report shows them, made from `ReportData`."""

from __future__ import annotations

import math

import pandas as pd

from analysis.metrics import METRICS
from analysis.report.content import ReportData
from analysis.report.tables import Column, Table


def metric_text(metric: str, value: float) -> str:
    """A panel value with its unit: "82.6%", "17.59 s", "372,824 tok/min/GPU", "$5.29"."""
    if value is None or not math.isfinite(value):
        return "–"
    if metric.endswith("hit_rate"):
        return f"{value * 100:.1f}%"
    if metric.startswith(("ttft", "e2e")):
        return f"{value:.2f} s"
    if metric == "user_cost_per_m_input":
        return f"${value:.4f}"
    if metric.endswith("per_gpu_hour"):
        return f"-${-value:,.2f}" if value < 0 else f"${value:,.2f}"
    unit = METRICS.get(metric, ("", "", ""))[1]
    return f"{value:,.0f} {unit}".strip()


def _with_text(panel: pd.DataFrame) -> pd.DataFrame:
    return panel.assign(
        value_text=[
            metric_text(m, v) for m, v in zip(panel["metric"], panel["value"], strict=True)
        ],
        best_other_text=[
            metric_text(m, v)
            for m, v in zip(panel["metric"], panel["best_other_value"], strict=True)
        ],
    )


def _c(
    key: str, label: str, unit: str = "", kind: str = "num", digits: int = 1, se: bool = False
) -> Column:
    return Column(key, label, unit, kind, digits, f"{key}_se" if se else None)  # type: ignore[arg-type]


def make_tables(data: ReportData) -> list[Table]:
    """Every table of the report, in the order the report shows them."""
    multi = len(data.runs) > 1
    run_col = [_c("run_id", "Run", kind="text")] if multi else []
    m = data.metrics
    tables = [
        Table(
            "throughput",
            "Throughput and cache hit rates per engine (measured window, per GPU)",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("sessions", "Sessions", kind="int"),
                _c("gpus", "GPUs", kind="int"),
                _c("requests", "Requests", kind="int"),
                _c("output_tokens_per_min_per_gpu", "Output", "tok/min/GPU", "num", 0, True),
                _c("prefill_tokens_per_min_per_gpu", "Prefill", "tok/min/GPU", "num", 0, True),
                _c("hit_rate", "Hit rate", "%", "pct", 1, True),
                _c("ideal_hit_rate", "Ideal hit", "%", "pct", 1),
                _c("counter_hit_rate", "Counter hit", "%", "pct", 1),
                _c("trajectories_finished", "Finished", "traj.", "int"),
            ],
            "± one standard error from time bins.",
        ),
        Table(
            "latency",
            "Latency from scheduled time, errors and overflows",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("ttft_p50", "TTFT p50", "s", "num", 2, True),
                _c("ttft_p90", "TTFT p90", "s", "num", 2, True),
                _c("ttft_p99", "TTFT p99", "s", "num", 2),
                _c("e2e_p50", "E2E p50", "s", "num", 2, True),
                _c("e2e_mean", "E2E mean", "s", "num", 2, True),
                _c("error_rate", "Errors", "%", "pct", 2),
                _c("overflow_rate", "Overflow", "%", "pct", 2),
            ],
            "TTFT and end-to-end latency are measured from each request's scheduled time.",
        ),
        Table(
            "misses",
            "Uncached and redundant prefill per request, and its split (Equation 5)",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("uncached_tokens_per_request", "Uncached mean", "tok", "num", 0, True),
                _c("uncached_tokens_p50", "Uncached p50", "tok", "num", 0),
                _c("redundant_prefill_per_request", "Redundant", "tok", "num", 0, True),
                _c("placement_miss_per_request", "Placement", "tok", "num", 0),
                _c("dependency_miss_per_request", "Dependency", "tok", "num", 0),
                _c("capacity_miss_per_request", "Capacity", "tok", "num", 0),
                _c("miss_source", "Source", kind="text"),
            ],
            "Redundant = ideal − actual resume position; live runs know only the total "
            "(ideal − reported cached tokens).",
        ),
        Table(
            "economics",
            "Provider economics and user cost per engine",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("gpu", "GPU", kind="text"),
                _c("gpu_rate_per_hour", "GPU rate", "$/GPU-h", "usd", 2),
                _c("user_cost_per_m_input", "User cost", "$/1M input", "usd", 4),
                _c("revenue_per_gpu_hour", "Revenue", "$/GPU-h", "usd", 2),
                _c("profit_per_gpu_hour", "Profit", "$/GPU-h", "usd", 2),
                _c("break_even_hit_rate", "Break-even hit", "%", "pct", 1),
            ],
            f"Price sheet {m['sheet'].dropna().iloc[0] if m['sheet'].notna().any() else '–'}.",
        ),
    ]
    panels = [
        _with_text(a.panel).assign(run_id=a.run.run_id) for a in data.runs if not a.panel.empty
    ]
    if panels:
        tables.append(
            Table(
                "comparison",
                "Each engine against the best other engine (the demo's ratio labels)",
                pd.concat(panels, ignore_index=True),
                [
                    *run_col,
                    _c("engine", "Engine", kind="text"),
                    _c("label", "Metric", kind="text"),
                    Column("value_text", "Value", kind="text"),
                    _c("best_other", "Best other", kind="text"),
                    Column("best_other_text", "Its value", kind="text"),
                    _c("better_by", "Better by", kind="ratio", digits=2),
                ],
                "Better by > 1: higher throughput, hit rate or profit, or lower latency or cost.",
            )
        )
    sig = [
        a.significance.assign(run_id=a.run.run_id) for a in data.runs if not a.significance.empty
    ]
    if sig:
        tables.append(
            Table(
                "significance",
                "Differences against the best other engine, significant at two standard errors",
                pd.concat(sig, ignore_index=True),
                [
                    *run_col,
                    _c("engine", "Engine", kind="text"),
                    _c("label", "Metric", kind="text"),
                    _c("reference", "Against", kind="text"),
                    Column("diff", "Difference", "", "num", 3, "se_diff"),
                    _c("ratio", "Ratio", kind="ratio", digits=2),
                    _c("significant", "Significant", kind="bool"),
                ],
            )
        )
    paired = [a.paired.assign(run_id=a.run.run_id) for a in data.runs if not a.paired.empty]
    if paired:
        tables.append(
            Table(
                "paired",
                "Paired per-request deltas where both engines replayed the same requests",
                pd.concat(paired, ignore_index=True),
                [
                    *run_col,
                    _c("engine", "Engine", kind="text"),
                    _c("reference", "Against", kind="text"),
                    _c("quantity", "Quantity", kind="text"),
                    _c("pairs", "Pairs", kind="int"),
                    _c("mean", "Mean", digits=2),
                    _c("reference_mean", "Against mean", digits=2),
                    Column("mean_delta", "Delta", "", "num", 2, "se"),
                    _c("significant", "Significant", kind="bool"),
                ],
                "Matched on session, trajectory, agent and turn; TTFT and E2E in s, tokens in tok.",
            )
        )
    if not data.paired_across.empty:
        tables.append(
            Table(
                "paired_across_runs",
                "Paired per-request deltas between runs of the same seeded workload",
                data.paired_across,
                [
                    _c("engine", "Engine", kind="text"),
                    _c("run_id", "Run", kind="text"),
                    _c("reference", "Against", kind="text"),
                    _c("reference_run", "Its run", kind="text"),
                    _c("quantity", "Quantity", kind="text"),
                    _c("pairs", "Pairs", kind="int"),
                    Column("mean_delta", "Delta", "", "num", 2, "se"),
                    _c("significant", "Significant", kind="bool"),
                ],
                "Same session count, seed and window; matched on session, trajectory, agent, turn.",
            )
        )
    tables += _rollup_tables(data, run_col)
    if multi:
        tables.append(_sweep_table(data))
    return tables


def _rollup_tables(data: ReportData, run_col: list[Column]) -> list[Table]:
    titles = {
        "tool_gap": (
            "hit_rate_by_tool_gap",
            "Hit rate against the idle time before the request",
            "Idle gap",
        ),
        "turn_depth": ("by_turn_depth", "Hit rate and uncached tokens by turn depth", "Turn"),
        "prompt_length": (
            "by_prompt_length",
            "Hit rate and uncached tokens by prompt length",
            "Prompt",
        ),
        "session": ("by_session", "Hit rate and uncached tokens by session", "Session"),
    }
    out = []
    for key, (name, title, bucket) in titles.items():
        frames = [a.rollups[key].assign(run_id=a.run.run_id) for a in data.runs]
        out.append(
            Table(
                name,
                title,
                pd.concat(frames, ignore_index=True),
                [
                    *run_col,
                    _c("engine", "Engine", kind="text"),
                    _c("bucket", bucket, kind="text"),
                    _c("requests", "Requests", kind="int"),
                    _c("hit_rate", "Hit rate", "%", "pct", 1),
                    _c("ideal_hit_rate", "Ideal hit", "%", "pct", 1),
                    _c("uncached_tokens_per_request", "Uncached", "tok", "num", 0),
                    _c("redundant_prefill_per_request", "Redundant", "tok", "num", 0),
                    _c("ttft_p50", "TTFT p50", "s", "num", 2),
                ],
                targets=frozenset({"md"}) if key == "session" else frozenset({"md", "tex", "html"}),
            )
        )
    return out


def _sweep_table(data: ReportData) -> Table:
    return Table(
        "sweep",
        "Against load: mean over runs per session count",
        data.sweep,
        [
            _c("engine", "Engine", kind="text"),
            _c("sessions", "Sessions", kind="int"),
            _c("runs", "Runs", kind="int"),
            _c("output_tokens_per_min_per_gpu", "Output", "tok/min/GPU", "num", 0, True),
            _c("prefill_tokens_per_min_per_gpu", "Prefill", "tok/min/GPU", "num", 0, True),
            _c("hit_rate", "Hit rate", "%", "pct", 1, True),
            _c("ttft_p50", "TTFT p50", "s", "num", 2, True),
            _c("working_set_ratio", "Working set / capacity", "", "num", 2),
            _c("se_source", "Errors from", kind="text"),
        ],
        "± one standard error, across seeds where a session count has two or more runs.",
    )


__all__ = ["make_tables", "metric_text"]
