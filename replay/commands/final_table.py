"""The table `replay run` prints at the end: the run's numbers, engines as columns, under a
title that says what they are (`analysis.provenance`), with the seed band of an emulated run
(`replay.band`) beside them and the notes a reader needs to read them right."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from analysis.registry import Metric, flag_of, in_view, row_title, text
from replay.commands.common import err_console

if TYPE_CHECKING:
    from replay.band import Band
    from replay.client.orchestrate import RunOutcome

# Hit rate (the measured requests' cached ÷ prompt tokens) and the engine's own counter hit
# rate (hits ÷ queries over the window) count different things; apart by more than this
# (points of percentage), the table says how.
HIT_GAP = 0.05


def final_table(outcome: RunOutcome, band: Band | None = None) -> Table:
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
    t = Table(title=escape(title(outcome, band)), caption=caption(engines), caption_justify="left")
    # Engines as columns, metrics as rows: fits a terminal however many metrics there are.
    t.add_column("metric", justify="left")
    for name in engines:
        t.add_column(name, justify="right")
    for m in in_view("final"):  # the registry's metrics for this table, in its order
        if m.only_when and all(v.get(m.key) is None for v in engines.values()):
            continue  # produced under a condition no engine of the run meets
        cells = [_cell(m, v.get(m.key, econ.get(n, {}).get(m.key))) for n, v in engines.items()]
        t.add_row(row_title(m), *cells)
    if band is not None:
        _band_rows(t, band, list(engines))
    return t


def title(outcome: RunOutcome, band: Band | None) -> str:
    """ "run ID: status" and the run's provenance (executor, corpus, profile, load, seeds,
    window, version)."""
    from analysis.provenance import provenance
    from replay.rundir import RunDirError, read_manifest

    head = f"run {outcome.run_dir.name}: {outcome.status}"
    try:
        return f"{head}\n{provenance(read_manifest(outcome.run_dir), band).line()}"
    except (RunDirError, OSError, ValueError):
        return head


def caption(engines: dict[str, dict[str, Any]]) -> str | None:
    """The notes the rows need: a hit rate apart from the engine's counter hit rate, and the
    throughput and profit of a saturated engine being its ceiling."""
    lines = []
    apart = []
    for name, m in engines.items():
        hit, counter = _num(m.get("hit_rate")), _num(m.get("counter_hit_rate"))
        if hit is None or counter is None:
            continue
        gap = hit - counter
        if abs(gap) > HIT_GAP:
            apart.append(f"{name} {100 * gap:+.1f}")
    if apart:
        lines.append(
            "hit rate: cached ÷ prompt tokens of the measured requests (first token in the "
            "window, finished); counter hit: the engine's own prefix-cache counters over the "
            "window (every lookup: priming, unfinished and re-queued requests too, at block "
            f"granularity); apart by more than {HIT_GAP:.0%} points: " + ", ".join(apart)
        )
    saturated = [n for n, m in engines.items() if m.get("saturated")]
    if saturated:
        lines.append(
            f"saturated ({', '.join(saturated)}): throughput, revenue and profit are the "
            "engine's ceiling, not the workload's demand; a ratio between them compares "
            "ceilings, and TTFT is mostly queueing"
        )
    return escape("\n".join(lines)) if lines else None


def _band_rows(t: Table, band: Band, names: list[str]) -> None:
    n = len(band.seeds)
    t.add_section()
    t.add_row(
        f"seed band ({n} seeds, simulated)", *["" for _ in names], style="dim", end_section=False
    )
    fields = (
        ("hit rate, band", "hit_rate", 100.0, "%"),
        ("TTFT p50, band", "ttft_p50_s", 1.0, " s"),
    )
    for label, key, k, unit in fields:
        cells = []
        for name in names:
            e = band.engine(name)
            if e is None or not e.points:
                cells.append("–")
                continue
            lo, mean, hi = (k * x for x in e.span(key))
            digits = 0 if unit == "%" else 1
            cells.append(f"{lo:.{digits}f}–{hi:.{digits}f}{unit} (mean {mean:.{digits}f})")
        t.add_row(label, *cells)
    held = []
    for name in names:
        e = band.engine(name)
        if e is None:
            held.append("–")
            continue
        cell = f"{e.held} of {len(e.points)}"
        held.append(f"[bold yellow]{cell} (on the cliff)[/]" if e.on_cliff else cell)
    t.add_row("held the cliff (seeds)", *held)


def _num(x: Any) -> float | None:
    """A finite number as a float, else None."""
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def _cell(m: Metric, value: Any) -> str:
    """A value as the registry formats it; a raised flag in bold red."""
    out = text(m, value)
    return f"[bold red]{out}[/]" if m.fmt == "flag" and flag_of(m, value) else out
