"""`replay price RUN_DIR`: price every engine of a run at its measured window metrics.

The per-GPU prompt and output token rates and the hit rate come from `analysis.metrics.
window_metrics` (prefill tokens per minute per GPU, output tokens per minute per GPU, reported
cached ÷ prompt tokens); the GPU is the manifest's `gpu_type` unless `--gpu` overrides it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from analysis.metrics import window_metrics
from analysis.runs import Run, load_run
from pricing import (
    Economics,
    GpuRate,
    PriceSheet,
    PricingError,
    UnknownNameError,
    get_gpu_rate,
    provider_economics,
    usd,
)
from replay.commands.common import console, err_console, fail, window_option
from replay.commands.price import (
    _break_even_text,
    _caveats,
    _print_json,
    _resolve_gpu,
    _resolve_sheet,
)
from replay.rundir import RunDirError


def _gpu_for_engine(
    engine: str, gpu_type: Any, pricing_dir: Path | None, notes: list[str]
) -> GpuRate:
    """The rate for the GPU the manifest names; the default rate (with a note) when the
    manifest names none. A GPU the data lacks is an error: pricing a run on the wrong GPU
    silently would be worse than stopping."""
    if not isinstance(gpu_type, str) or not gpu_type:
        rate = _resolve_gpu(None, pricing_dir)
        notes.append(f"{engine}: the manifest names no GPU type; priced at {rate.name}")
        return rate
    try:
        return get_gpu_rate(gpu_type, pricing_dir)
    except UnknownNameError as e:
        fail(
            f"engine '{engine}' runs on GPU '{gpu_type}', which {e.where} lacks; pass --gpu "
            f"(one of: {', '.join(e.choices)}) or add a rate for it"
        )
    except PricingError as e:
        fail(str(e))


@dataclass(frozen=True)
class EnginePrice:
    """One engine of a run, priced."""

    engine: str
    gpus: int
    requests: int
    gpu: GpuRate
    economics: Economics


def _price_engines(
    run: Run,
    metrics: pd.DataFrame,
    sheet: PriceSheet,
    forced: GpuRate | None,
    write_fraction: float,
    pricing_dir: Path | None,
    notes: list[str],
) -> tuple[list[EnginePrice], list[dict[str, str]]]:
    priced: list[EnginePrice] = []
    skipped: list[dict[str, str]] = []
    for rec in metrics.to_dict("records"):
        engine = str(rec["engine"])
        h = rec["hit_rate"]
        if not (isinstance(h, float) and math.isfinite(h)):
            reason = "no prompt tokens with a reported cached count in the window"
            skipped.append({"engine": engine, "reason": reason})
            notes.append(f"{engine}: not priced: {reason}")
            continue
        gpu = forced or _gpu_for_engine(engine, rec["gpu_type"], pricing_dir, notes)
        try:
            econ = provider_economics(
                sheet,
                gpu,
                hit_rate=h,
                prompt_tokens_per_min_per_gpu=rec["prefill_tokens_per_min_per_gpu"],
                output_tokens_per_min_per_gpu=rec["output_tokens_per_min_per_gpu"],
                write_fraction=write_fraction,
            )
        except PricingError as err:
            fail(f"{run.path}: engine '{engine}': {err}")
        priced.append(EnginePrice(engine, int(rec["gpus"]), int(rec["requests"]), gpu, econ))
    return priced, skipped


def _table(run: Run, sheet: PriceSheet, start: float, end: float, rows: list[EnginePrice]) -> Table:
    # Engines as columns, quantities as rows: fits a terminal for the usual 2–4 engines.
    t = Table(title=f"{run.run_id}: {sheet.name} prices, window {start:g}–{end:g} s")
    t.add_column("")
    for r in rows:
        t.add_column(r.engine, justify="right")
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
        ("break-even hit rate", lambda r: _break_even_text(r.economics)),
    ]
    for label, cell in lines:
        t.add_row(label, *(cell(r) for r in rows))
    return t


def price_run(
    run_dir: Path,
    sheet_name: str | None,
    gpu_name: str | None,
    window: str | None,
    write_fraction: float,
    pricing_dir: Path | None,
    as_json: bool,
) -> None:
    """Print (or JSON-dump) every engine of `run_dir` priced at its window metrics."""
    sheet = _resolve_sheet(sheet_name, pricing_dir)
    forced = None if gpu_name is None else _resolve_gpu(gpu_name, pricing_dir)
    win = window_option(window)
    try:
        run = load_run(run_dir)
        metrics = window_metrics(run, win)
    except RunDirError as err:
        fail(str(err))
    if metrics.empty:
        fail(f"{run.path}: the run has no engines with request records")
    notes = list(run.notes)
    rows, skipped = _price_engines(run, metrics, sheet, forced, write_fraction, pricing_dir, notes)
    start, end = float(metrics["window_start_s"].iloc[0]), float(metrics["window_end_s"].iloc[0])
    if as_json:
        engines = [
            {"engine": r.engine, "gpus": r.gpus, "requests": r.requests, **r.economics.as_dict()}
            for r in rows
        ]
        _print_json(
            {
                "run_id": run.run_id,
                "run_dir": str(run.path),
                "window_s": [start, end],
                "sheet": sheet.name,
                "engines": engines,
                "skipped": skipped,
                "notes": notes,
            }
        )
    else:
        console.print(_table(run, sheet, start, end, rows))
        for note in notes:
            err_console.print(f"[yellow]note:[/] {note}", highlight=False)
        _caveats(sheet, list({r.gpu.name: r.gpu for r in rows}.values()))
    if not rows:
        fail(f"{run.path}: no engine could be priced ({'; '.join(s['reason'] for s in skipped)})")
