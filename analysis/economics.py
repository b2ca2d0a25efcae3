"""Pricing for every engine of a run, through `pricing/`, and the demo's comparison panel.

Each engine is priced at its measured per-GPU prompt and output token rates and its reported
hit rate: user cost per 1M input tokens, revenue, profit and break-even GPU rate per GPU-hour.
The GPU rate comes from `--gpu` when given, else the engine's `gpu_type` in the manifest,
else the catalogue's default (B200); the sheet defaults to the catalogue's (Z.ai GLM list).
The comparison panel states each engine against the best *other* engine, as the demo's
ratio labels do ("2.0× higher profit" is against the better of the two others).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

import pricing

# Panel rows: (metric column, label, higher is better)
PANEL: tuple[tuple[str, str, bool], ...] = (
    ("output_tokens_per_min_per_gpu", "output tokens/min/GPU", True),
    ("prefill_tokens_per_min_per_gpu", "prefill tokens/min/GPU", True),
    ("hit_rate", "cache hit rate", True),
    ("e2e_p50", "p50 end-to-end latency", False),
    ("ttft_p50", "p50 TTFT", False),
    ("profit_per_gpu_hour", "provider profit per GPU-hour", True),
    ("user_cost_per_m_input", "user cost per 1M input tokens", False),
)


def _gpu_for(
    gpu: str | None, gpu_type: Any, pricing_dir: Path | None, notes: list[str]
) -> pricing.GpuRate:
    if gpu is not None:
        return pricing.get_gpu_rate(gpu, pricing_dir)
    if isinstance(gpu_type, str) and gpu_type:
        try:
            return pricing.get_gpu_rate(gpu_type, pricing_dir)
        except pricing.UnknownNameError:
            notes.append(f"GPU type {gpu_type!r} has no rate in the catalogue; used the default")
    return pricing.get_gpu_rate(None, pricing_dir)


def engine_economics(
    metrics: pd.DataFrame,
    sheet: str | None = None,
    gpu: str | None = None,
    pricing_dir: Path | None = None,
    notes: list[str] | None = None,
) -> pd.DataFrame:
    """One row per row of `metrics` (needs engine, hit_rate, gpu_type and the per-GPU token
    rates): the sheet, GPU and its rate, user cost, revenue, profit and break-evens, as floats
    (exact `Decimal` arithmetic in `pricing`, converted only here). `PricingError` propagates
    for an unknown sheet or GPU name, with the valid names in its message."""
    notes = notes if notes is not None else []
    price_sheet = pricing.get_sheet(sheet, pricing_dir)
    rows: list[dict[str, Any]] = []
    for rec in metrics.to_dict(orient="records"):
        rate = _gpu_for(gpu, rec.get("gpu_type"), pricing_dir, notes)
        row: dict[str, Any] = {"engine": rec["engine"], "sheet": price_sheet.name, "gpu": rate.gpu}
        row["gpu_rate_per_hour"] = float(rate.rate_per_gpu_hour)
        values = (rec["hit_rate"], rec["prefill_tokens_per_min_per_gpu"])
        if any(not isinstance(v, int | float) or math.isnan(v) for v in values):
            if "prefill_tokens_per_min_per_gpu" not in (rec.get("unknown") or {}):
                notes.append(f"{rec['engine']}: no served requests in the window; not priced")
            rows.append(row)
            continue
        econ = pricing.provider_economics(
            price_sheet,
            rate,
            hit_rate=min(max(float(rec["hit_rate"]), 0.0), 1.0),
            prompt_tokens_per_min_per_gpu=float(rec["prefill_tokens_per_min_per_gpu"]),
            output_tokens_per_min_per_gpu=float(rec["output_tokens_per_min_per_gpu"]),
        )
        d = econ.as_dict()
        for key in (
            "user_cost_per_m_input",
            "revenue_per_gpu_hour",
            "profit_per_gpu_hour",
            "break_even_gpu_rate",
            "break_even_hit_rate",
        ):
            row[key] = d[key]
        row.update(_task_and_goodput(rec, price_sheet, rate))
        rows.append(row)
    return pd.DataFrame(rows)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _task_and_goodput(
    rec: dict[Any, Any], sheet: pricing.PriceSheet, rate: pricing.GpuRate
) -> dict[str, Any]:
    """User cost per finished agent task (the window's mean task tokens, at full size) and
    revenue and profit per GPU-hour counting only the tokens that met the SLO (goodput)."""
    out: dict[str, Any] = {}
    task = [rec.get(f"task_{c}_mean") for c in ("prompt_tokens", "cached_tokens", "output_tokens")]
    if all(_finite(v) for v in task):
        p, c, o = (float(v) for v in task)  # type: ignore[arg-type]
        out["user_cost_per_task"] = float(pricing.cost_per_task(sheet, p, min(c, p), o))
    good = (
        rec.get("goodput_prefill_tokens_per_min_per_gpu"),
        rec.get("goodput_output_tokens_per_min_per_gpu"),
    )
    if all(_finite(v) for v in good):
        econ = pricing.provider_economics(
            sheet,
            rate,
            hit_rate=min(max(float(rec["hit_rate"]), 0.0), 1.0),
            prompt_tokens_per_min_per_gpu=float(good[0]),  # type: ignore[arg-type]
            output_tokens_per_min_per_gpu=float(good[1]),  # type: ignore[arg-type]
        )
        out["revenue_per_gpu_hour_at_goodput"] = float(econ.revenue_per_gpu_hour)
        out["profit_per_gpu_hour_at_goodput"] = float(econ.profit_per_gpu_hour)
    return out


def comparison_panel(table: pd.DataFrame) -> pd.DataFrame:
    """The demo's panel: for each engine and panel metric, its value, the best other engine
    and the ratio in the engine's favour direction — `better_by` > 1 means this engine is
    better by that factor (higher throughput, or lower latency/cost), < 1 worse."""
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
            ref = others[best]
            if higher:
                ratio = value / ref if ref > 0 else math.nan
            else:
                ratio = ref / value if value > 0 else math.nan
            rows.append(
                {
                    "engine": engine,
                    "metric": metric,
                    "label": label,
                    "value": value,
                    "best_other": best,
                    "best_other_value": ref,
                    "better_by": ratio,
                }
            )
    return pd.DataFrame(rows)


__all__ = ["PANEL", "comparison_panel", "engine_economics"]
