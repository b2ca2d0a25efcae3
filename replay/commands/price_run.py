"""`replay price RUN_DIR`: price every engine of a run at its measured window metrics.

The per-GPU prompt and output token rates and the hit rate come from `analysis.metrics.
window_metrics` (prefill tokens per minute per GPU, output tokens per minute per GPU, reported
cached ÷ prompt tokens); the GPU is the manifest's `gpu_type` unless `--gpu` overrides it.
Beside profit at raw throughput it shows profit at goodput (only the tokens of requests that
met the run's SLO) and what a user pays per finished agent task (`analysis.verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table

from analysis.metrics import window_metrics
from analysis.runs import Run, load_run
from analysis.verdicts import with_verdicts
from pricing import (
    Economics,
    GpuRate,
    PriceSheet,
    PricingError,
    UnknownNameError,
    cost_per_task,
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
    at_goodput: Economics | None = None  # only the tokens of requests within the SLO
    per_task: Decimal | None = None  # user cost of a finished agent task (mean)
    saturated: bool | None = None
    slo: str = ""

    def extra(self) -> dict[str, Any]:
        g = self.at_goodput
        return {
            "saturated": self.saturated,
            "slo": self.slo,
            "user_cost_per_task": None if self.per_task is None else float(self.per_task),
            "revenue_per_gpu_hour_at_goodput": None if g is None else float(g.revenue_per_gpu_hour),
            "profit_per_gpu_hour_at_goodput": None if g is None else float(g.profit_per_gpu_hour),
        }


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


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
            good_p = rec.get("goodput_prefill_tokens_per_min_per_gpu")
            good_o = rec.get("goodput_output_tokens_per_min_per_gpu")
            at_good = None
            if _finite(good_p) and _finite(good_o):
                at_good = provider_economics(
                    sheet,
                    gpu,
                    hit_rate=h,
                    prompt_tokens_per_min_per_gpu=float(good_p),  # type: ignore[arg-type]
                    output_tokens_per_min_per_gpu=float(good_o),  # type: ignore[arg-type]
                    write_fraction=write_fraction,
                )
            task = [
                rec.get(f"task_{c}_mean")
                for c in ("prompt_tokens", "cached_tokens", "output_tokens")
            ]
            per_task = None
            if all(_finite(v) for v in task):
                p, c, o = (float(v) for v in task)  # type: ignore[arg-type]
                per_task = cost_per_task(sheet, p, min(c, p), o, write_fraction)
        except PricingError as err:
            fail(f"{run.path}: engine '{engine}': {err}")
        slo = rec.get("slo")
        priced.append(
            EnginePrice(
                engine,
                int(rec["gpus"]),
                int(rec["requests"]),
                gpu,
                econ,
                at_good,
                per_task,
                rec.get("saturated"),
                slo.get("text", "") if isinstance(slo, dict) else "",
            )
        )
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
        metrics = with_verdicts(run, window_metrics(run, win), win or run.default_window())
    except RunDirError as err:
        fail(str(err))
    if metrics.empty:
        fail(f"{run.path}: the run has no engines with request records")
    notes = list(run.notes)
    rows, skipped = _price_engines(run, metrics, sheet, forced, write_fraction, pricing_dir, notes)
    start, end = float(metrics["window_start_s"].iloc[0]), float(metrics["window_end_s"].iloc[0])
    if as_json:
        engines = [
            {
                "engine": r.engine,
                "gpus": r.gpus,
                "requests": r.requests,
                **r.economics.as_dict(),
                **r.extra(),
            }
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
