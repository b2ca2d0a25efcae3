"""The report's tables, in the order the report shows them, made from `ReportData`."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis.manifest import manifest_seed, manifest_sessions
from analysis.registry import BY_KEY, View, field_sources, in_view, text
from analysis.report.content import ReportData
from analysis.report.tables import Column, Kind, Table
from analysis.saturation import verdict_text
from analysis.slo_search import read_search, search_rows
from analysis.sweeps import first_saturated


def metric_text(metric: str, value: float) -> str:
    """A panel value with its unit, as the registry formats it: "82.6%", "17.59 s",
    "372,824 tok/min/GPU", "$5.29"."""
    if value is None or not math.isfinite(value):
        return "–"
    m = BY_KEY.get(metric)
    if m is None:
        return f"{value:,.0f}"
    if m.fmt == "pct":
        return f"{value * 100:.{m.digits}f}%"
    if m.unit == "s":
        return f"{value:.{m.digits}f} s"
    if m.fmt == "usd":
        return text(m, value, dollar=True)
    return f"{value:,.0f} {m.unit}".strip()


_KINDS: dict[str, Kind] = {"flag": "text", "json": "text"}


# AA-AgentPerf's unit, as the SLO search gives it (analysis.slo_search).
AGENTPERF_SOURCE = (
    "AA-AgentPerf (artificialanalysis.ai/methodology/agentperf) reports concurrent agents "
    "per accelerator under per-agent TTFT and output-speed targets"
)


def _cols(view: View) -> list[Column]:
    """The registry's metrics for one of the report's tables, as its columns (with their
    standard errors unless the registry says the table shows the value plain)."""
    return [
        Column(
            m.key,
            m.label,
            m.unit,
            _KINDS.get(m.fmt, m.fmt),  # type: ignore[arg-type]
            m.digits,
            f"{m.key}_se" if m.se and view not in m.plain_in else None,
        )
        for m in in_view(view)
    ]


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


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _flat(m: pd.DataFrame) -> pd.DataFrame:
    """The verdicts' nested evidence as plain columns for tables."""
    rows = []
    for rec in m.to_dict(orient="records"):
        sat = _dict(rec.get("saturation"))
        queue = _dict(sat.get("queue"))
        drift = _dict(rec.get("drift"))
        verdict = verdict_text(rec.get("saturated"), sat)
        drift_text = text(BY_KEY["drift"], rec.get("drift"))
        rows.append(
            {
                "saturation_text": verdict.split(":")[0].split(" (")[0],
                "saturation_source": sat.get("source", "–"),
                "queue_busy_share": queue.get("busy_share"),
                "queue_mean": queue.get("mean"),
                "drift_text": drift_text,
                "drift_output_mismatches": drift.get("output_mismatches"),
                "drift_output_compared": drift.get("output_compared"),
                "drift_prompt_mismatches": drift.get("prompt_mismatches"),
                "drift_continuation_exact_share": drift.get("continuation_exact_share"),
            }
        )
    return pd.concat([m.reset_index(drop=True), pd.DataFrame(rows)], axis=1)


def _verdict_tables(m: pd.DataFrame, run_col: list[Column]) -> list[Table]:
    if "saturated" not in m.columns:
        return []
    flat = _flat(m)
    slo = next((s.get("text") for s in m.get("slo", []) if isinstance(s, dict)), None)
    return [
        Table(
            "verdicts",
            "Saturation, agent tasks, SLOs and goodput (Agent tasks, SLOs and goodput)",
            flat,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("saturation_text", "Saturated", kind="text"),
                _c("queue_busy_share", "Queue busy", "%", "pct", 0),
                *_cols("report.verdicts"),
            ],
            "Saturated: the engine's queue held requests in at least half the window's scrapes "
            "or grew, or TTFT / send lag grew through the window (evidence in summary.json). "
            f"SLO: {slo or 'defaults'}; goodput counts only requests within it. Tasks: "
            "trajectories finished in the window; slowdown = task time ÷ the trace's own.",
        ),
        Table(
            "fidelity",
            "Replay fidelity: drift from the trace and the warm-start check",
            flat,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                _c("drift_text", "Drift", kind="text"),
                _c("drift_output_mismatches", "Output mism.", kind="int"),
                _c("drift_output_compared", "Of", kind="int"),
                _c("drift_prompt_mismatches", "Prompt mism.", kind="int"),
                _c("drift_continuation_exact_share", "Exact continuation", "%", "pct", 1),
                *_cols("report.fidelity"),
            ],
            "Drift (live runs): outputs or prompts whose length differs from the trace's, and "
            "continuation turns that do not extend the turn they continue exactly. Unexplained "
            "hits: cached beyond what this run had computed in its first minutes (a warm cache).",
        ),
    ]


def tiered(m: pd.DataFrame) -> bool:
    """Whether any engine of the metrics table has hits by cache tier (its records carry
    `cached_tokens_host` / `cached_tokens_external`: a cache with tiers, issue 34)."""
    return "host_hit_rate" in m.columns and bool(m["host_hit_rate"].notna().any())


def _tier_tables(m: pd.DataFrame, run_col: list[Column]) -> list[Table]:
    """Cached tokens by tier (issue 34), only where a run's cache has tiers: an untiered
    report has no such table."""
    if not tiered(m):
        return []
    rows = m[m["host_hit_rate"].notna()]
    return [
        Table(
            "tiers",
            "Cache hits by tier: GPU, host memory, external store (measured window)",
            rows,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                Column("hit_rate", "Hit rate", "%", "pct", 1),
                *_cols("report.tiers"),
            ],
            "Of the measured requests' prompt tokens, those each tier served (GPU + host + "
            "external = hit rate); of-hits-from-host: host ÷ cached tokens. Engines whose "
            "cache has no tiers are left out (docs/cache-tiers.md).",
        )
    ]


def _economics_table(m: pd.DataFrame, run_col: list[Column]) -> Table:
    """Prices per engine; the host-memory columns (issue 34 point 4) only where an engine has
    host memory, with the rate's source in the caption, so an untiered report is unchanged."""
    cols = [
        c
        for c in _cols("report.economics")
        if not BY_KEY[c.key].only_when or (c.key in m and m[c.key].notna().any())
    ]
    caption = f"Price sheet {m['sheet'].dropna().iloc[0] if m['sheet'].notna().any() else '–'}."
    if "host_rate_source" in m and m["host_rate_source"].notna().any():
        hosted = m[m["host_rate_source"].notna()]
        rates = sorted(
            set(zip(hosted["host_usd_per_gb_hour"], hosted["host_rate_source"], strict=True))
        )
        said = "; ".join(f"${r:g} per GiB-hour ({src})" for r, src in rates)
        caption += (
            f" Host memory at {said}; net profit = profit − host GiB × rate ÷ GPUs (engines "
            "without host memory: none)."
        )
    return Table(
        "economics",
        "Provider economics and user cost per engine",
        m,
        [*run_col, _c("engine", "Engine", kind="text"), *cols],
        caption,
    )


def make_tables(data: ReportData) -> list[Table]:
    """Every table of the report, in the order the report shows them. A sweep (several
    runs) leads with the paper table and a table of its runs."""
    multi = len(data.runs) > 1
    run_col = [_c("run_id", "Run", kind="text")] if multi else []
    m = data.metrics
    tables = [_sweep_table(data), _runs_table(data)] if multi else []
    tables += [
        Table(
            "throughput",
            "Throughput and cache hit rates per engine (measured window, per GPU)",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                *_cols("report.throughput"),
            ],
            "± one standard error from time bins. " + field_sources("report.throughput"),
        ),
        Table(
            "latency",
            "Latency from scheduled time, errors and overflows",
            m,
            [
                *run_col,
                _c("engine", "Engine", kind="text"),
                *_cols("report.latency"),
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
                *_cols("report.misses"),
            ],
            "Redundant = ideal − actual resume position; live runs know only the total "
            "(ideal − reported cached tokens).",
        ),
        _economics_table(m, run_col),
    ]
    tables += _tier_tables(m, run_col)
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
                    Column("ratio_label", "Against it", kind="text"),
                ],
                "Better: higher throughput, hit rate or profit, or lower latency or cost.",
            )
        )
    tables += _verdict_tables(m, run_col)
    sig = [
        a.significance.assign(
            run_id=a.run.run_id,
            label=[BY_KEY[x].label if x in BY_KEY else x for x in a.significance["metric"]],
        )
        for a in data.runs
        if not a.significance.empty
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
    # The SLO search's answer leads (after a sweep's paper table and its runs).
    lead = 2 if multi else 0
    return [*tables[:lead], *_slo_search_tables(data), *tables[lead:]]


def _slo_search_tables(data: ReportData) -> list[Table]:
    """The largest load meeting an SLO (`replay slo-search`, analysis.slo_search), where a
    run's folder holds its `slo_search.json`: per engine the answer, agents per GPU and the
    confirmation seeds' band. Each search once, however many of its runs are reported."""
    tables: list[Table] = []
    for folder in dict.fromkeys(a.run.path.parent for a in data.runs):
        search = read_search(folder)
        if search is None:
            continue
        seeds = ", ".join(map(str, search.seeds))
        tables.append(
            Table(
                "slo_search" if not tables else f"slo_search_{len(tables) + 1}",
                f"Largest load meeting the SLO ({search.tier}), as AA-AgentPerf's agents per GPU",
                pd.DataFrame(search_rows(search)),
                [
                    _c("engine", "Engine", kind="text"),
                    _c("sessions", "Sessions", kind="int"),
                    _c("capped", "At the limit", kind="bool"),
                    _c("gpus", "GPUs", kind="int"),
                    _c("agents_per_gpu", "Agents per GPU", digits=2),
                    _c("held", "Seeds meeting it", kind="text"),
                    _c("share_min", "SLO share min", "%", kind="pct"),
                    _c("share_mean", "SLO share mean", "%", kind="pct"),
                    _c("share_max", "SLO share max", "%", kind="pct"),
                    _c("hit_min", "Hit rate min", "%", kind="pct"),
                    _c("hit_max", "Hit rate max", "%", kind="pct"),
                    _c("probes", "Probes", kind="int"),
                ],
                f"replay slo-search, {search.how}: the largest session count whose "
                f"measured requests met the SLO on seed {search.seed} (bracketing, then "
                f"bisection, {search.start}..{search.limit} sessions), rerun on seeds {seeds}; "
                "agents per GPU = sessions ÷ the engine's GPUs, as "
                f"{AGENTPERF_SOURCE}; the tier is judged at the share of requests shown "
                "(docs/field-numbers.md).",
            )
        )
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
                    *_cols("report.rollup"),
                ],
                targets=frozenset({"md"}) if key == "session" else frozenset({"md", "tex", "html"}),
            )
        )
    return out


def _config_col(table: pd.DataFrame) -> list[Column]:
    """The configuration column, where runs of one engine and session count differ in more
    than their seed (`analysis.sweeps.label_configs`); none where every label is empty."""
    labels = table.get("config_label", pd.Series(dtype=object))
    return [_c("config_label", "Configuration", kind="text")] if labels.astype(bool).any() else []


def _sweep_table(data: ReportData) -> Table:
    sweep = data.sweep
    first = first_saturated(data.metrics)
    sweep = sweep.assign(
        first_saturated=[
            "here" if first.get(str(line)) == s else ""
            for line, s in zip(sweep["series"], sweep["sessions"], strict=True)
        ]
        if len(sweep)
        else []
    )
    unknown = any(bool(u) for u in data.metrics.get("unknown", pd.Series(dtype=object)) if u)
    configs = _config_col(sweep)
    sources = set(sweep.get("se_source", pd.Series(dtype=object))) - {"time bins"}
    repeats = bool(sources - {"seeds"})
    return Table(
        "sweep",
        f"Paper table: each policy or engine against sessions (mean ± SE {_across(sources)})",
        sweep,
        [
            _c("engine", "Policy / engine", kind="text"),
            *configs,
            _c("sessions", "Sessions", kind="int"),
            _c("runs", "Runs", kind="int"),
            _c("spread", "Seeds × repeats", kind="text"),
            *_cols("report.sweep"),
            _c("first_saturated", "First saturated", kind="text"),
            _c("se_source", "Errors from", kind="text"),
        ],
        "± one standard error, across a row's runs where it has two or more, else from the "
        "run's time bins; Errors from says over what: seeds, or repeats (live runs of one "
        "seed measured again: run-to-run noise, not a spread over seeds), or both. "
        + (
            "A row's repeats are live runs with distinct run ids; a copy of a run, or a "
            "simulated seed run twice, counts once. "
            if repeats
            else ""
        )
        + "Runs are pooled only when their manifests differ in the seed alone"
        + ("; Configuration says what sets a row's runs apart. " if configs else ". ")
        + "First saturated: the smallest session count at which the engine did not keep up."
        + (" A dash is a figure the runs cannot know; the notes say why." if unknown else ""),
    )


def _across(sources: set[str]) -> str:
    """What the paper table's ± spans, for its title: "across seeds" unless a row pools
    repeats of one seed (run-to-run noise); "from each run's time bins" where no row has two
    runs (`sources` holds no other source)."""
    if not sources:
        return "from each run's time bins"
    if sources <= {"seeds"}:
        return "across seeds"
    if sources == {"repeats"}:
        return "across repeats of one seed: run-to-run noise"
    return "across seeds and repeats"


def _run_labels(metrics: pd.DataFrame) -> dict[str, str]:
    """{run directory (resolved): its configuration's label} from the report's metrics."""
    if not {"run_dir", "config_label"} <= set(metrics.columns):
        return {}
    return {
        str(d): str(label)
        for d, label in zip(metrics["run_dir"], metrics["config_label"], strict=True)
    }


def _runs_table(data: ReportData) -> Table:
    """Every run of a sweep in one table (its manifest citation, one row per run)."""
    rows = []
    labels = _run_labels(data.metrics)
    for a in data.runs:
        m = a.run.manifest
        rows.append(
            {
                "run_id": a.run.run_id,
                "config_label": labels.get(str(a.run.path.resolve()), ""),
                "engines": ", ".join(a.run.engines),
                "sessions": manifest_sessions(m),
                "seed": manifest_seed(m),
                "window": f"{a.window.start_s:g}–{a.window.end_s:g} s",
                "timing": m.config.timing or m.executor or "–",
                "status": m.status or "not recorded",
            }
        )
    table = pd.DataFrame(rows)
    return Table(
        "runs",
        "Runs in this report",
        table,
        [
            _c("run_id", "Run", kind="text"),
            *_config_col(table),
            _c("engines", "Engines", kind="text"),
            _c("sessions", "Sessions", kind="int"),
            _c("seed", "Seed", kind="int"),
            _c("window", "Window", kind="text"),
            _c("timing", "Timing", kind="text"),
            _c("status", "Status", kind="text"),
        ],
        "What the runs share (trace, command, harness) is listed once under Provenance.",
    )


__all__ = ["make_tables", "metric_text", "tiered"]
