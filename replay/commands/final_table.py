"""The table `replay run` prints at the end: the run's numbers, engines as columns."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from replay.commands.common import err_console

if TYPE_CHECKING:
    from replay.client.orchestrate import RunOutcome


def final_table(outcome: RunOutcome) -> Table:
    """The run's numbers, engines as columns, priced by `analysis.economics` (the one
    pricing of a run). A pricing error (an engine's GPU without a rate, a broken price file)
    leaves the price rows blank and is printed as a note; any other error is a bug and
    propagates."""
    import pandas as pd

    from analysis.economics import engine_economics
    from pricing import PricingError

    summary = outcome.summary or {}
    engines = summary.get("engines") or {}
    econ: dict[str, dict[str, Any]] = {}
    rows = [{"engine": n, **m} for n, m in engines.items()]
    try:
        for r in engine_economics(pd.DataFrame(rows)).to_dict(orient="records") if rows else []:
            econ[str(r["engine"])] = {str(k): v for k, v in r.items()}
    except PricingError as e:
        err_console.print(f"[yellow]note:[/] not priced: {escape(str(e))}", highlight=False)
    t = Table(title=f"run {outcome.run_dir.name}: {outcome.status}")
    cols = [
        ("engine", None, ""),
        ("out tok/min/GPU", "output_tokens_per_min_per_gpu", "n"),
        ("prefill tok/min/GPU", "prefill_tokens_per_min_per_gpu", "n"),
        ("hit rate", "hit_rate", "%"),
        ("counter hit", "counter_hit_rate", "%"),
        ("ideal hit", "ideal_hit_rate", "%"),
        ("TTFT p50 s", "ttft_p50", "s"),
        ("TTFT p90 s", "ttft_p90", "s"),
        ("E2E p50 s", "e2e_p50", "s"),
        ("E2E mean s", "e2e_mean", "s"),
        ("finished", "trajectories_finished", "n"),
        ("errors", "error_rate", "%"),
        ("overflow", "overflow_rate", "%"),
        ("profit $/GPU-h", "profit_per_gpu_hour", "$"),
        ("user $/1M in", "user_cost_per_m_input", "$"),
        ("saturated", "saturated", "sat"),
        ("tasks finished", "tasks_finished", "n"),
        ("task latency p50 s", "task_latency_p50_s", "s1"),
        ("task latency p90 s", "task_latency_p90_s", "s1"),
        ("task slowdown p50", "task_slowdown_p50", "x"),
        ("SLO requests", "slo_request_share", "%"),
        ("SLO tasks", "slo_task_share", "%"),
        ("goodput out tok/min/GPU", "goodput_output_tokens_per_min_per_gpu", "n"),
        ("profit at goodput $/GPU-h", "profit_per_gpu_hour_at_goodput", "$"),
        ("user $/task", "user_cost_per_task", "$4"),
        ("warm-start hit", "warm_start_hit_rate", "%"),
        ("drift", "drift", "drift"),
    ]
    # Engines as columns, metrics as rows: fits a terminal however many metrics there are.
    t.add_column("metric", justify="left")
    for name in engines:
        t.add_column(name, justify="right")

    def fmt(v: Any, kind: str) -> str:
        if kind == "sat":
            return "n/a" if v is None else "[bold red]YES[/]" if v else "no"
        if kind == "drift":
            if not isinstance(v, dict) or v.get("flagged") is None:
                return "n/a"
            return "[bold red]DRIFTED[/]" if v["flagged"] else "none"
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if kind == "s1":
            return f"{v:,.1f}"
        if kind == "x":
            return f"{v:.2f}×"
        if kind == "$4":
            return f"{v:,.4f}"
        if kind == "%":
            return f"{v:.1%}"
        if kind == "s":
            return f"{v:.3f}"
        if kind == "$":
            return f"{v:,.2f}"
        return f"{v:,.0f}"

    for title, key, kind in cols[1:]:
        assert key is not None
        cells = [fmt(m.get(key, econ.get(n, {}).get(key)), kind) for n, m in engines.items()]
        t.add_row(title, *cells)
    return t
