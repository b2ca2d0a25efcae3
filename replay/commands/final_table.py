"""The table `replay run` prints at the end: the run's numbers, engines as columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from analysis.registry import Metric, flag_of, in_view, row_title, text
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
    # Engines as columns, metrics as rows: fits a terminal however many metrics there are.
    t.add_column("metric", justify="left")
    for name in engines:
        t.add_column(name, justify="right")
    for m in in_view("final"):  # the registry's metrics for this table, in its order
        cells = [_cell(m, v.get(m.key, econ.get(n, {}).get(m.key))) for n, v in engines.items()]
        t.add_row(row_title(m), *cells)
    return t


def _cell(m: Metric, value: Any) -> str:
    """A value as the registry formats it; a raised flag in bold red."""
    out = text(m, value)
    return f"[bold red]{out}[/]" if m.fmt == "flag" and flag_of(m, value) else out
