"""What a run's numbers mean, for the pages: warnings (saturated, drifted, warm-started) and
one row per engine of agent-task, SLO, goodput and fidelity figures. Plain functions over
analysis' metrics (with `analysis.verdicts` columns), testable without Streamlit."""

from __future__ import annotations

import pandas as pd

from analysis.registry import Severity, in_view, row_title, text
from analysis.summary import engine_warnings

# The verdict table's columns: the registry's "verdicts" view, headed by their row titles.
COLUMNS = {"engine": "engine", **{m.key: row_title(m) for m in in_view("verdicts")}}


def warnings(metrics: pd.DataFrame) -> list[tuple[Severity, str]]:
    """(severity, text) per warning, the severity the registry's for the metric that raised
    it ("error" for a saturated engine, "warning" otherwise)."""
    out = []
    for rec in metrics.to_dict(orient="records"):
        for w in engine_warnings(str(rec["engine"]), rec):
            out.append((w.severity, w.text))
    return out


def verdict_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per engine with `COLUMNS` (labels as headers; flags as text)."""
    if "saturated" not in metrics.columns:
        return pd.DataFrame(columns=list(COLUMNS.values()))
    flags = [m for m in in_view("verdicts") if m.fmt == "flag"]
    rows = []
    for rec in metrics.to_dict(orient="records"):
        row = {k: rec.get(k) for k in COLUMNS}
        row.update({m.key: text(m, rec.get(m.key)) for m in flags})
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
