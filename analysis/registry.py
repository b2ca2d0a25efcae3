"""The metric registry as its readers use it: lookups, which executor wrote a run, and the
few ways a metric is rendered (a table header, a row title, a figure label, a value).

The metrics themselves are defined once, in `replay.metric_registry` (where the run
directory's model types summary.json from them); this module re-exports them for the
layers above (`dashboards` reads `analysis`, not `replay`'s internals).
"""

from __future__ import annotations

import math
from typing import Any

from replay.metric_registry import (
    BY_KEY,
    EXECUTORS,
    METRICS,
    NOT_LIVE_REASON,
    TRACE_TIMING_REASON,
    Executor,
    Metric,
    Severity,
    View,
    in_view,
    metric,
    summary_keys,
    unknown_to,
)
from replay.rundir_models import Manifest


def executor_of(manifest: Manifest) -> Executor:
    """Which executor wrote the run: `live` / `emulated` (the client against real engines or
    emulators), `sim-engine` / `sim-trace` (the simulator's clock). A manifest that does not
    name its executor (an older run) is read as it always was: an engine clock, not live."""
    if manifest.executor == "live":
        return "emulated" if manifest.emulated else "live"
    if manifest.executor == "simulator" and manifest.config.timing in (None, "trace"):
        return "sim-trace"
    return "sim-engine"


def keys(view: View) -> tuple[str, ...]:
    """The keys of the metrics `view` lists, in registry order."""
    return tuple(m.key for m in in_view(view))


def header(m: Metric) -> str:
    """A table header: "Output (tok/min/GPU)", "Hit rate (%)", "Requests"."""
    return f"{m.label} ({m.unit})" if m.unit else m.label


def _lower_first(label: str) -> str:
    # "Hit rate" -> "hit rate"; an acronym keeps its case ("TTFT p50", "SLO requests").
    if len(label) > 1 and label[0].isupper() and label[1].islower():
        return label[0].lower() + label[1:]
    return label


def row_title(m: Metric) -> str:
    """A row title in running text (the final table, the verdict table): "hit rate",
    "task latency p50 s", "goodput out tok/min/GPU" (a share's % and a factor's × are in
    its cells)."""
    label = _lower_first(m.label)
    return f"{label} {m.unit}" if m.unit and m.fmt not in ("pct", "ratio") else label


def figure_label(m: Metric) -> str:
    """An axis or figure title: "Output tokens/min/GPU", "Hit rate (%)", "TTFT p50 (s)"."""
    if m.unit.startswith("tok/"):
        return f"{m.label} tokens/{m.unit.removeprefix('tok/')}"
    return header(m)


def missing(value: Any) -> bool:
    """None or NaN: nothing to show."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def flag_of(m: Metric, value: Any) -> bool | None:
    """A flag metric's state: its own bool, or the `flagged` member of its evidence."""
    if isinstance(value, dict):
        flagged = value.get("flagged")
        return None if flagged is None else bool(flagged)
    if missing(value):
        return None
    return bool(value)


def text(m: Metric, value: Any, dollar: bool = False) -> str:
    """A value as the registry formats it: "97.2%", "0.12", "1,234", "2.00×", "YES" /
    "no" (a flag's words; "n/a" when unknown), "–" for nothing; `dollar` prefixes "$"."""
    if m.fmt == "flag":
        state = flag_of(m, value)
        return "n/a" if state is None else m.flag_words[0] if state else m.flag_words[1]
    if missing(value):
        return "–"
    if m.fmt in ("text", "json"):
        return str(value)
    if m.fmt == "bool":
        return "yes" if value else "no"
    v = float(value)
    if m.fmt == "pct":
        return f"{v:.{m.digits}%}"
    if m.fmt == "int":
        return f"{v:,.0f}"
    if m.fmt == "ratio":
        return f"{v:.{m.digits}f}×"
    out = f"{v:,.{m.digits}f}"
    if m.fmt == "usd" and dollar:
        out = f"-${out[1:]}" if out.startswith("-") else f"${out}"
    return out


# The field's figures shown beside ours (issue 35, docs/field-numbers.md): where a table or
# page shows them, it says where each definition comes from (the registry's description).
FIELD_FIGURES = ("inferencex_total_tok_s_per_gpu", "theoretical_hit_rate_aiperf")


def field_sources(view: View) -> str:
    """The sources of the field's figures a view shows, a sentence each ('' for none)."""
    return " ".join(f"{m.label}: {m.description}." for m in in_view(view) if m.key in FIELD_FIGURES)


def column_format(m: Metric) -> str:
    """A Streamlit NumberColumn format for the metric: "percent", "localized", "%.2f",
    "dollar" or "$%.4f"."""
    if m.fmt == "pct":
        return "percent"
    if m.fmt == "usd":
        return "dollar" if m.digits == 2 else f"$%.{m.digits}f"
    if m.fmt == "int" or m.digits == 0:
        return "localized"
    return f"%.{m.digits}f"


def severity(key: str) -> Severity:
    """How loud a warning raised by metric `key` is (the registry's `severity`)."""
    return metric(key).severity or "warning"


__all__ = [
    "BY_KEY",
    "EXECUTORS",
    "FIELD_FIGURES",
    "METRICS",
    "NOT_LIVE_REASON",
    "TRACE_TIMING_REASON",
    "Executor",
    "Metric",
    "Severity",
    "View",
    "column_format",
    "executor_of",
    "field_sources",
    "figure_label",
    "flag_of",
    "header",
    "in_view",
    "keys",
    "metric",
    "missing",
    "row_title",
    "severity",
    "summary_keys",
    "text",
    "unknown_to",
]
