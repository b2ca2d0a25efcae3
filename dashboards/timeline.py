"""Metrics "as of" a moment of the run: what the Replay page's slider and play control show.

Analysis computes window metrics over a whole run; the replay view needs them over the
requests that had *completed* by time t. `metrics_at` cuts the run at t (a shallow copy with
fewer request rows) and calls `analysis.metrics.window_metrics` on the window [start, t), so
every definition (priming excluded, TTFT from scheduled time, per-GPU rates) stays analysis'.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.comparison import CEILING_NOTE, TIE, Colour, better_by, ratio_label
from analysis.metrics import window_metrics
from analysis.registry import Metric, in_view
from analysis.runs import Run
from analysis.verdicts import TRACE_TIMING_UNKNOWN, run_clock

# The play control's speeds: multiples of the run's own time.
SPEEDS: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100)


@dataclass(frozen=True)
class PanelMetric:
    """One number on an engine's panel: where it comes from and which way is better.

    Labels are short so two fit side by side in a panel; `help` says exactly what it is."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    help: str


def panel_unit(m: Metric) -> str:
    """How `dashboards.views.common.fmt` shows it: "%", "s", "$", or a count ("")."""
    if m.fmt == "pct":
        return "%"
    if m.fmt == "usd":
        return "$"
    return "s" if m.unit == "s" else ("tok" if m.unit.startswith("tok") else "")


# The registry's "panel" view: one number each on an engine's panel.
PANEL: tuple[PanelMetric, ...] = tuple(
    PanelMetric(
        m.key,
        m.short or m.label,
        panel_unit(m),
        m.higher_is_better,
        m.description[:1].upper() + m.description[1:],
    )
    for m in in_view("panel")
)


def run_end_s(requests: pd.DataFrame) -> float:
    """The run's last event (seconds from start); 1.0 for a run with no timed event yet."""
    cols = [c for c in ("done_s", "first_token_s", "scheduled_s") if c in requests]
    if requests.empty or not cols:
        return 1.0
    last = max(float(pd.to_numeric(requests[c], errors="coerce").max()) for c in cols)
    return last if math.isfinite(last) and last > 0 else 1.0


def truncate(run: Run, t: float) -> Run:
    """The run as it stood at time t: only requests that had completed by then. At or after
    the run's last event, the whole run: a request still in flight when the run stopped never
    completes, but its prefill was served and the report counts it."""
    if t >= run_end_s(run.requests):
        return run
    done = pd.to_numeric(run.requests["done_s"], errors="coerce")
    mask = (done <= t).to_numpy()
    if mask.all():
        return run  # the run's end: nothing to cut, no copy of every column
    return dataclasses.replace(run, requests=run.requests[mask])


def counting_window(run: Run, measured_only: bool) -> tuple[float, float]:
    """Where the counting starts and stops: the manifest's measured window (what the report,
    summary.json and `replay price` count; the page's default), or the whole run from 0."""
    if not measured_only:
        return 0.0, math.inf
    win = run.default_window()
    return win.start_s, win.end_s


def slider_end(run: Run, stop: float) -> float:
    """The slider's range: the run's last event, or the counting window's end when later,
    so that the slider's end counts exactly the window the report counts."""
    end = run_end_s(run.requests)
    return max(end, stop) if math.isfinite(stop) else end


def metrics_at(run: Run, t: float, start: float = 0.0, stop: float = math.inf) -> pd.DataFrame:
    """Per-engine window metrics over [start, min(t, stop)) of the requests completed by t:
    at t ≥ the run's end with the measured window as (start, stop), exactly the report's.

    Before `start` (or at it) there is nothing to count yet: the frame has the engines and
    NaN/zero metrics rather than an error, so the panels can say "not yet".
    """
    end = max(min(t, stop), start + 1e-6)
    frame = window_metrics(truncate(run, t), (start, end))
    if run_clock(run.manifest) == "trace":
        # No GPU clock: throughputs and latencies would be the trace's, the same for every
        # policy. Blank them (the panels show a dash; the page says why).
        for key in TRACE_TIMING_UNKNOWN:
            if key in frame.columns:
                frame[key] = np.nan
    return frame.set_index("engine", drop=False)


def best_other(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """For each engine, the best value among the *other* engines (highest for a
    higher-is-better metric, lowest otherwise); NaN where no other engine has a value."""
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    out = pd.Series(np.nan, index=values.index, dtype=float)
    for name in values.index:
        others = numbers.drop(index=name).dropna()
        if not others.empty:
            out[name] = float(others.max() if higher_is_better else others.min())
    return out


def ratio_vs_best_other(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Each engine's value divided by the best value among the other engines.

    A ratio above 1 means "more than the best rival" either way; the panel colours it by
    direction. NaN where there is no rival, and where a ratio would mislead: a zero or
    negative value on either side (a loss of $6 is not "1.6×" a loss of $4; the panel shows
    the difference instead, see `diff_vs_best_other`).
    """
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    best = best_other(values, higher_is_better)
    ok = (numbers >= 0) & (best > 0)
    return (numbers / best).where(ok)


def diff_vs_best_other(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Each engine's value minus the best value among the other engines (NaN: no rival)."""
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    return numbers - best_other(values, higher_is_better)


def versus_best_other(
    value: float,
    best: float,
    higher_is_better: bool,
    show: Callable[[float], str],
    ceilings: bool = False,
) -> tuple[str, Colour] | None:
    """A panel number against the best other engine's: "N× better" (green) or "N× worse"
    (red) in the metric's direction where both are positive (`analysis.comparison`); else
    the difference, shown with `show`, "$2.10 better" / "$2.10 worse" (losses, zeros);
    None when there is no rival or nothing to compare. `ceilings`: an engine of the run was
    saturated and the metric is a throughput (`analysis.comparison.of_ceilings`): the ratio is
    labelled a ratio of ceilings."""
    if not (math.isfinite(value) and math.isfinite(best)):
        return None
    ratio = better_by(value, best, higher_is_better)
    if math.isfinite(ratio):
        return ratio_label(ratio, ceilings)
    diff = value - best
    if diff == 0 and value == 0:
        return None
    gain = diff if higher_is_better else -diff
    if abs(gain) <= TIE * max(abs(value), abs(best)):
        return "same", "gray"
    if ceilings:
        word = "better" if gain > 0 else "worse"
        return f"{show(abs(diff))} {word} ({CEILING_NOTE})", "gray"
    return (
        (f"{show(abs(diff))} better", "green") if gain > 0 else (f"{show(abs(diff))} worse", "red")
    )


def advance(t: float, speed: float, elapsed_s: float, end_s: float) -> tuple[float, bool]:
    """The slider's next time after `elapsed_s` of wall time at `speed`× (and whether the
    run's end was reached, which stops the play control)."""
    nxt = t + speed * elapsed_s
    return (end_s, True) if nxt >= end_s else (nxt, False)
