"""Cache hits by tier for the pages (issue 34; docs/cache-tiers.md): one row per engine whose
cache has tiers (its records carry `cached_tokens_host` / `cached_tokens_external`), with the
registry's "tiers" view as text. A run without tiers gets nothing, so its pages are as they
were. A plain function over analysis' metrics, testable without Streamlit."""

from __future__ import annotations

import pandas as pd

from analysis.registry import BY_KEY, in_view, row_title, text

# The table's columns: the engine, its whole hit rate, then the registry's "tiers" view.
COLUMNS = {
    "engine": "engine",
    "hit_rate": row_title(BY_KEY["hit_rate"]),
    **{m.key: row_title(m) for m in in_view("tiers")},
}


def tier_table(metrics: pd.DataFrame) -> pd.DataFrame | None:
    """One row per tiered engine (`COLUMNS`, values as the registry formats them), or None
    when no engine of the run has hits by tier."""
    if "host_hit_rate" not in metrics.columns:
        return None
    rows = []
    for rec in metrics.to_dict(orient="records"):
        value = rec.get("host_hit_rate")
        if value is None or value != value:  # an engine without tiers (NaN)
            continue
        row = {"engine": str(rec["engine"])}
        row.update({k: text(BY_KEY[k], rec.get(k)) for k in COLUMNS if k != "engine"})
        rows.append(row)
    if not rows:
        return None
    return pd.DataFrame(rows).rename(columns=COLUMNS)


__all__ = ["COLUMNS", "tier_table"]
