"""Each engine against the best *other* engine: the demo's comparison panel and its labels.

The demo states each engine against the better of the others ("2.0× higher profit" is against
the better of the two rivals). A ratio here is always in the engine's favour direction —
`better_by` > 1 means better by that factor (higher throughput, or lower latency or cost) —
and `ratio_label` words it the same way for every metric: "50× better" / "2.5× worse", with
the colour that goes with it. The report and the dashboard both label through it.
"""

from __future__ import annotations

import math
from typing import Literal

import pandas as pd

from replay.metric_registry import in_view

# Panel rows: (metric column, label, higher is better): the registry's "comparison" view.
PANEL: tuple[tuple[str, str, bool], ...] = tuple(
    (m.key, m.label, m.higher_is_better) for m in in_view("comparison")
)

Colour = Literal["green", "red", "gray"]
# Within this of 1 a ratio reads as a tie (gray): 1.0004× is noise in the last digit shown.
TIE = 5e-4


def better_by(value: float, best_other: float, higher_is_better: bool) -> float:
    """The factor by which `value` beats `best_other` in the metric's direction (> 1 better,
    < 1 worse); NaN where a ratio would mislead: either side zero, negative or not finite
    (a loss of $6 is not "1.6×" a loss of $4)."""
    if not (math.isfinite(value) and math.isfinite(best_other)):
        return math.nan
    if value <= 0 or best_other <= 0:
        return math.nan
    return value / best_other if higher_is_better else best_other / value


def _factor(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}×"
    if x >= 10:
        return f"{x:.1f}×"
    return f"{x:.2f}×"


def ratio_label(better: float) -> tuple[str, Colour]:
    """ "N× better" (green) or "N× worse" (red) for a `better_by` factor, "same" (gray)
    within `TIE`; ("", "gray") when there is no ratio (NaN, ≤ 0)."""
    if not (math.isfinite(better) and better > 0):
        return "", "gray"
    if abs(better - 1.0) <= TIE:
        return "same", "gray"
    if better > 1.0:
        return f"{_factor(better)} better", "green"
    return f"{_factor(1.0 / better)} worse", "red"


def comparison_panel(table: pd.DataFrame) -> pd.DataFrame:
    """The demo's panel: for each engine and panel metric, its value, the best other engine,
    the ratio in the engine's favour direction (`better_by`) and its `label`."""
    rows = []
    for metric, label, higher in PANEL:
        if metric not in table.columns:
            continue
        values = {
            str(e): float(v)
            for e, v in zip(table["engine"], table[metric], strict=True)
            if v is not None and not math.isnan(float(v))
        }
        for engine, value in values.items():
            others = {k: v for k, v in values.items() if k != engine}
            if not others:
                continue
            best = (max if higher else min)(others, key=lambda k: others[k])
            ratio = better_by(value, others[best], higher)
            rows.append(
                {
                    "engine": engine,
                    "metric": metric,
                    "label": label,
                    "value": value,
                    "best_other": best,
                    "best_other_value": others[best],
                    "better_by": ratio,
                    "ratio_label": ratio_label(ratio)[0],
                }
            )
    return pd.DataFrame(rows)


__all__ = ["PANEL", "TIE", "better_by", "comparison_panel", "ratio_label"]
