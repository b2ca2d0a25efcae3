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

from replay.metric_registry import BY_KEY, in_view

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


# Units of the figures a saturated engine reports at its ceiling: throughputs and what is
# priced from them (revenue, profit per GPU-hour, tasks per hour). Hit rates, latencies'
# meaning aside, and per-token prices are not throughputs.
CEILING_UNITS = frozenset({"tok/min/GPU", "tok/min", "$/GPU-h", "/h/GPU"})
CEILING_NOTE = "ratio of ceilings: saturated"


def of_ceilings(metric: str) -> bool:
    """Whether a saturated engine's `metric` is its ceiling rather than the demand met."""
    m = BY_KEY.get(metric)
    return m is not None and m.unit in CEILING_UNITS


def ratio_label(better: float, ceilings: bool = False) -> tuple[str, Colour]:
    """ "N× better" (green) or "N× worse" (red) for a `better_by` factor, "same" (gray)
    within `TIE`; ("", "gray") when there is no ratio (NaN, ≤ 0). `ceilings`: either side
    was saturated and the metric is a throughput (`of_ceilings`): the ratio compares the
    engines' ceilings, not the demand they met, and says so (gray: not a verdict)."""
    if not (math.isfinite(better) and better > 0):
        return "", "gray"
    colour: Colour
    if abs(better - 1.0) <= TIE:
        text, colour = "same", "gray"
    elif better > 1.0:
        text, colour = f"{_factor(better)} better", "green"
    else:
        text, colour = f"{_factor(1.0 / better)} worse", "red"
    if ceilings:
        return f"{text} ({CEILING_NOTE})", "gray"
    return text, colour


def comparison_panel(table: pd.DataFrame) -> pd.DataFrame:
    """The demo's panel: for each engine and panel metric, its value, the best other engine,
    the ratio in the engine's favour direction (`better_by`) and its `label`; `of_ceilings`:
    the ratio compares ceilings (either engine saturated, a throughput metric), as its label
    says."""
    saturated = (
        {str(e): bool(v) for e, v in zip(table["engine"], table["saturated"], strict=True)}
        if "saturated" in table.columns
        else {}
    )
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
            ceilings = of_ceilings(metric) and (
                saturated.get(engine, False) or saturated.get(best, False)
            )
            rows.append(
                {
                    "engine": engine,
                    "metric": metric,
                    "label": label,
                    "value": value,
                    "best_other": best,
                    "best_other_value": others[best],
                    "better_by": ratio,
                    "ratio_label": ratio_label(ratio, ceilings)[0],
                    "of_ceilings": ceilings,
                }
            )
    return pd.DataFrame(rows)


__all__ = [
    "CEILING_NOTE",
    "PANEL",
    "TIE",
    "better_by",
    "comparison_panel",
    "of_ceilings",
    "ratio_label",
]
