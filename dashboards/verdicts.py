"""What a run's numbers mean, for the pages: warnings (saturated, drifted, warm-started) and
one row per engine of agent-task, SLO, goodput and fidelity figures. Plain functions over
analysis' metrics (with `analysis.verdicts` columns), testable without Streamlit."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from analysis.summary import run_warnings

COLUMNS = {
    "engine": "engine",
    "saturated": "saturated",
    "tasks_finished": "tasks finished",
    "task_latency_p50_s": "task p50 (s)",
    "task_latency_p90_s": "task p90 (s)",
    "task_slowdown_p50": "slowdown p50",
    "slo_request_share": "SLO requests",
    "slo_task_share": "SLO tasks",
    "goodput_output_tokens_per_min_per_gpu": "goodput out tok/min/GPU",
    "output_tokens_per_min_per_gpu": "raw out tok/min/GPU",
    "warm_start_hit_rate": "first minutes hit",
    "warm_start_excess_hit_rate": "unexplained hits",
    "drift": "drift",
}


def warnings(metrics: pd.DataFrame) -> list[tuple[str, str]]:
    """(level, text) per warning: "error" for a saturated engine, "warning" otherwise."""
    out = []
    for rec in metrics.to_dict(orient="records"):
        for text in run_warnings(str(rec["engine"]), rec):
            out.append(("error" if "SATURATED" in text else "warning", text))
    return out


def _yes_no(value: Any, flag: str = "YES") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return flag if value else "no"


def verdict_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per engine with `COLUMNS` (labels as headers; flags as text)."""
    if "saturated" not in metrics.columns:
        return pd.DataFrame(columns=list(COLUMNS.values()))
    rows = []
    for rec in metrics.to_dict(orient="records"):
        row = {k: rec.get(k) for k in COLUMNS}
        row["saturated"] = _yes_no(rec.get("saturated"))
        drift = rec.get("drift")
        flagged = drift.get("flagged") if isinstance(drift, dict) else None
        row["drift"] = _yes_no(flagged, "DRIFTED") if flagged is not None else "n/a"
        if row["drift"] == "no":
            row["drift"] = "none"
        rows.append(row)
    return pd.DataFrame(rows).rename(columns=COLUMNS)


def unknown_notes(metrics: pd.DataFrame) -> list[str]:
    """Why some figures are n/a (e.g. a trace-timing simulation has no GPU clock)."""
    seen: dict[str, list[str]] = {}
    for rec in metrics.to_dict(orient="records"):
        for key, why in (rec.get("unknown") or {}).items():
            keys = seen.setdefault(str(why), [])
            if key not in keys:
                keys.append(str(key))
    return [f"n/a ({', '.join(keys)}): {why}" for why, keys in seen.items()]


def slo_text(metrics: pd.DataFrame) -> str:
    for s in metrics.get("slo", pd.Series(dtype=object)):
        if isinstance(s, dict) and s.get("text"):
            return f"{s['text']} ({s.get('source', 'defaults')})"
    return "defaults"


__all__ = ["COLUMNS", "slo_text", "unknown_notes", "verdict_table", "warnings"]
