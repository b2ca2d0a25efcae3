"""`replay price RUN_DIR`: print every engine of a run priced at its measured window metrics.

The metrics are `analysis.metrics.window_metrics` with the verdicts (`analysis.verdicts`:
goodput, per-task tokens, saturation); the pricing is `analysis.economics.price_engines`,
the one pricing of a run that the report, summary.json and the dashboard use as well (the
GPU rule is there). This module only prints: a table (engines as columns) or JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from analysis.economics import HOST_FLAG, EnginePrice, HostRate, RunPrices, price_engines
from analysis.manifest import Window
from analysis.metrics import resolve_window, window_metrics
from analysis.provenance import Provenance, measured_window, run_provenance
from analysis.runs import Run, load_run
from analysis.verdicts import with_verdicts
from pricing import PriceSheet, PricingError, usd
from replay.commands.common import console, err_console, fail
from replay.commands.price_common import (
    break_even_text,
    caveats,
    print_json,
    resolve_gpu,
    resolve_sheet,
)
from replay.rundir import RunDirError
from replay.windows import WindowError


def ceiling_note(rows: list[EnginePrice]) -> str | None:
    """Said beside the prices when an engine was saturated: its revenue and profit are its
    ceiling's, and comparing them across engines compares ceilings, not demand met."""
    saturated = [r.engine for r in rows if r.saturated]
    if not saturated:
        return None
    return (
        f"saturated ({', '.join(saturated)}): revenue and profit are priced at the engine's "
        "ceiling throughput, not the workload's demand; between engines they compare ceilings"
    )


def _table(
    run: Run, sheet: PriceSheet, used: Window, prov: Provenance, rows: list[EnginePrice]
) -> Table:
    # Engines as columns, quantities as rows: fits a terminal for the usual 2–4 engines.
    t = Table(
        title=escape(
            f"{run.run_id}: {sheet.name} prices, window {used.start_s:g}–{used.end_s:g} s\n"
            f"{prov.line()}"
        ),
        caption=escape(ceiling_note(rows) or "") or None,
        caption_justify="left",
    )
    t.add_column("")
    for r in rows:
        t.add_column(r.engine, justify="right")
    for label, cell in _lines(rows):
        t.add_row(label, *(cell(r) for r in rows))
    return t


def _lines(rows: list[EnginePrice]) -> list[tuple[str, Callable[[EnginePrice], str]]]:
    """The table's rows: a label and how each engine's cell is written."""
    lines: list[tuple[str, Callable[[EnginePrice], str]]] = [
        ("GPUs", lambda r: f"{r.gpus}× {r.gpu.gpu} at {usd(r.gpu.rate_per_gpu_hour, 2)}/h"),
        (
            "prompt tokens/min/GPU",
            lambda r: f"{float(r.economics.prompt_tokens_per_min_per_gpu):,.0f}",
        ),
        (
            "output tokens/min/GPU",
            lambda r: f"{float(r.economics.output_tokens_per_min_per_gpu):,.0f}",
        ),
        ("hit rate", lambda r: f"{float(r.economics.hit_rate):.1%}"),
        ("user cost per 1M input", lambda r: usd(r.economics.user_cost_per_m_input, 4)),
        ("revenue / GPU-hour", lambda r: usd(r.economics.revenue_per_gpu_hour, 2)),
        (
            "[bold]profit / GPU-hour[/]",
            lambda r: f"[bold]{usd(r.economics.profit_per_gpu_hour, 2)}[/]",
        ),
        ("break-even GPU rate", lambda r: usd(r.economics.break_even_gpu_rate, 2)),
        ("break-even hit rate", lambda r: break_even_text(r.economics)),
        (
            "profit / GPU-hour at goodput",
            lambda r: "n/a" if r.at_goodput is None else usd(r.at_goodput.profit_per_gpu_hour, 2),
        ),
        (
            "user cost per finished task",
            lambda r: "n/a" if r.per_task is None else usd(r.per_task, 4),
        ),
        (
            "saturated",
            lambda r: "n/a" if r.saturated is None else "[bold red]YES[/]" if r.saturated else "no",
        ),
    ]
    if any(r.host is not None for r in rows):  # issue 34: only a run with host memory
        lines[7:7] = [
            ("host memory", _host_memory),
            (
                "host cost / GPU-hour",
                lambda r: "–" if r.host is None else usd(r.host.per_gpu_hour, 4),
            ),
            (
                "[bold]net profit / GPU-hour[/]",
                lambda r: f"[bold]{usd(r.net_profit_per_gpu_hour, 2)}[/]",
            ),
        ]
    if any(r.tiers is not None for r in rows):  # issue 34: only a run whose cache has tiers
        lines[4:4] = [
            ("of hits from host / external", _tier_shares),
            ("cached price billed per 1M", lambda r: usd(r.cached_price, 4)),
        ]
    return lines


def _host_memory(r: EnginePrice) -> str:
    if r.host is None:
        return "none"
    rate = r.host.rate.usd_per_gb_hour
    shown = f"{r.host.gb:g} GiB at ${rate:g}/GiB-h" if rate else f"{r.host.gb:g} GiB, unpriced"
    return shown + (f" (+{r.host.external_gb:g} GiB store, unpriced)" if r.host.external_gb else "")


def host_notes(rows: list[EnginePrice], given: HostRate | None = None) -> list[str]:
    """Where the host-memory rate comes from, once, for a run with host memory; that
    `--host-usd-per-gb-hour` (`given`) priced nothing, for a run without."""
    rates = {r.host.rate for r in rows if r.host is not None}
    if not rates and given is not None and given.source == HOST_FLAG:
        return [f"{HOST_FLAG}: no engine of this run has host memory, so it prices nothing"]
    return [
        f"host memory priced at ${float(h.usd_per_gb_hour):g} per GiB-hour ({h.source}); net "
        "profit = profit − host GiB × rate ÷ GPUs"
        if h.usd_per_gb_hour
        else f"host memory unpriced ({h.source}): net profit = profit"
        for h in rates
    ]


def _tier_shares(r: EnginePrice) -> str:
    if r.tiers is None:
        return "no tiers"
    host, external = r.tiers
    return f"{host:.1%} / {external:.1%}"


def price_run(
    run_dir: Path,
    sheet_name: str | None,
    gpu_name: str | None,
    window: str | None,
    write_fraction: float,
    pricing_dir: Path | None,
    as_json: bool,
    host: HostRate | None = None,
) -> None:
    """Print (or JSON-dump) every engine of `run_dir` priced at its window metrics; `host`:
    the host-memory rate (`--host-usd-per-gb-hour`; the pricing data's when None)."""
    sheet = resolve_sheet(sheet_name, pricing_dir)
    forced = None if gpu_name is None else resolve_gpu(gpu_name, pricing_dir)
    try:
        run = load_run(run_dir)
        used = resolve_window(run, window)  # clipped to the data, with a note (run.notes)
        metrics = with_verdicts(run, window_metrics(run, used), used)
    except (RunDirError, WindowError) as err:
        fail(str(err))
    if metrics.empty:
        fail(f"{run.path}: the run has no engines with request records")
    try:
        prices: RunPrices = price_engines(metrics, sheet, forced, pricing_dir, write_fraction, host)
    except PricingError as err:
        fail(f"{run.path}: {err}")
    notes = [*run.notes, *prices.notes, *host_notes(prices.engines, host)]
    rows = prices.engines
    # The provenance says the window the prices count, not the manifest's (a --window).
    prov = run_provenance(run.path, measured_window(run, used))
    if as_json:
        print_json(
            {
                "run_id": run.run_id,
                "run_dir": str(run.path),
                "window_s": [used.start_s, used.end_s],
                "sheet": sheet.name,
                "engines": [r.as_dict() for r in rows],
                "skipped": prices.skipped,
                "notes": notes,
                "provenance": dict(prov.items()),
                "ceilings": ceiling_note(rows),
            }
        )
    else:
        console.print(_table(run, sheet, used, prov, rows))
        for note in notes:
            err_console.print(f"[yellow]note:[/] {note}", highlight=False)
        caveats(sheet, prices.gpus)
    if not rows:
        reasons = "; ".join(s["reason"] for s in prices.skipped)
        fail(f"{run.path}: no engine could be priced ({reasons})")
