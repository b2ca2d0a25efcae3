"""One pricing of a run: every engine of a window-metrics table, through `pricing`.

`replay run`'s final table, `replay price RUN_DIR`, the report, summary.json and the
dashboard all price a run here, so they cannot disagree. Each engine is priced at its measured
per-GPU prompt and output token rates and its reported hit rate: user cost per 1M input tokens,
revenue, profit and break-evens per GPU-hour, profit at goodput (only the tokens of requests
within the run's SLO) and a user's cost per finished agent task.

The GPU rule, the same for every caller:
- `gpu` given (`--gpu`, the dashboard's GPU choice, a what-if rate): every engine at that rate;
- else the engine's `gpu_type` in the manifest (the engine config's `gpu_type`, or the model
  profile's for an emulator), looked up in `configs/pricing/gpus.yaml`;
- a manifest that names no GPU type: the catalogue's default rate, with a note;
- a GPU type the catalogue lacks: `UnknownGpuError`, naming the GPU, the engine and `--gpu`.
  Pricing a run on the wrong GPU silently would be worse than stopping.
The sheet defaults to the catalogue's (Z.ai GLM list). An engine with nothing measured to price
(no hit rate or token rate in the window) is skipped with a reason, never an error.

Host memory (issue 34 point 4): an engine whose spec gives it a host-memory tier
(`host_memory_gb` > 0 in the window metrics, from the manifest's spec) costs its provider that
memory at a rate per GiB-hour (`HostRate`: `--host-usd-per-gb-hour`, else `gpus.yaml`'s
`host_memory` entry, else unpriced at 0), spread over its GPUs; its price adds the host cost
per GPU-hour and the profit net of it. An external store's GiB are named, unpriced: the
pricing data has no rate for one. An engine without a tier is priced exactly as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

import pricing
from pricing import Economics, GpuRate, PriceSheet
from pricing.formulas import Number
from pricing.sheets import MAX_HOST_RATE as FILE_MAX_HOST_RATE
from pricing.sheets import SHEETS_FILE
from replay.tier_limits import MAX_TIER_GB

# The float columns `engine_economics` adds to a metrics table, beside `sheet`, `gpu` and
# `host_rate_source`; the host ones are NaN for an engine without a host-memory tier.
PRICE_COLUMNS = (
    "gpu_rate_per_hour",
    "user_cost_per_m_input",
    "revenue_per_gpu_hour",
    "profit_per_gpu_hour",
    "break_even_gpu_rate",
    "break_even_hit_rate",
    "user_cost_per_task",
    "revenue_per_gpu_hour_at_goodput",
    "profit_per_gpu_hour_at_goodput",
    "host_usd_per_gb_hour",
    "host_cost_per_gpu_hour",
    "net_profit_per_gpu_hour",
)
# The text columns beside them.
TEXT_COLUMNS = ("sheet", "gpu", "host_rate_source")
HOST_FLAG = "--host-usd-per-gb-hour"
# The flag's bound (USD per GiB-hour) is the pricing file's (pricing.sheets.MAX_HOST_RATE).
MAX_HOST_RATE = float(FILE_MAX_HOST_RATE)


class UnknownGpuError(pricing.PricingError):
    """A GPU with no rate in the catalogue: names the GPU, where it came from and the fix."""

    def __init__(self, gpu: str, choices: list[str], where: Path, engine: str | None) -> None:
        self.gpu, self.choices, self.where, self.engine = gpu, choices, where, engine
        listed = ", ".join(choices) or "none"
        if engine is None:
            msg = f"--gpu: unknown GPU '{gpu}'; choose one of: {listed} (the rates in {where})"
        else:
            msg = (
                f"engine '{engine}' runs on GPU '{gpu}' (gpu_type in the run's manifest, set by "
                f"the engine's gpu_type in --config or its model profile), which {where} has no "
                f"rate for; pass --gpu NAME to price it at another GPU's rate (one of: {listed}), "
                f"or add a rate for '{gpu}' to that file"
            )
        super().__init__(msg)


def resolve_gpu(
    gpu: str | GpuRate | None, pricing_dir: Path | None = None, engine: str | None = None
) -> GpuRate:
    """The rate for `gpu` (a name or GPU model, e.g. "b200"; the default when None).
    `engine`, when given, says the name came from that engine's manifest entry."""
    if isinstance(gpu, GpuRate):
        return gpu
    try:
        return pricing.get_gpu_rate(gpu, pricing_dir)
    except pricing.UnknownNameError as e:
        raise UnknownGpuError(e.name, e.choices, e.where, engine) from e


def gpu_for_engine(
    engine: str,
    gpu_type: Any,
    forced: GpuRate | None,
    pricing_dir: Path | None,
    notes: list[str],
) -> GpuRate:
    """The module docstring's GPU rule for one engine."""
    if forced is not None:
        return forced
    if not isinstance(gpu_type, str) or not gpu_type:
        rate = resolve_gpu(None, pricing_dir)
        notes.append(f"{engine}: the manifest names no GPU type; priced at {rate.name}")
        return rate
    return resolve_gpu(gpu_type, pricing_dir, engine)


@dataclass(frozen=True)
class HostRate:
    """What a GiB of host memory costs a provider per hour (USD), and where that comes from:
    the flag, the pricing data's `host_memory` entry, or nothing (unpriced, 0)."""

    usd_per_gb_hour: Decimal
    source: str


def host_rate(given: Number | None = None, pricing_dir: Path | None = None) -> HostRate:
    """`given` (`--host-usd-per-gb-hour`, checked: a finite rate in [0, `MAX_HOST_RATE`]),
    else `gpus.yaml`'s `host_memory` rate (`pricing.get_host_memory_rate`), else 0 with a
    source that says host memory is unpriced. Raises `PricingError` naming the flag or the
    file's field."""
    if given is not None:
        try:
            rate = pricing.dec(given, HOST_FLAG)
        except pricing.PricingError:
            rate = Decimal("NaN")
        if not (rate.is_finite() and 0 <= rate <= Decimal(repr(MAX_HOST_RATE))):
            shown = f"{given:g}" if isinstance(given, float) else str(given)
            raise pricing.PricingError(
                f"{HOST_FLAG}: {shown} is not a rate in [0, {MAX_HOST_RATE:g}] USD per GiB-hour "
                "(the shipped one is 0.00072; 0: host memory costs nothing beyond the GPU rate)"
            )
        return HostRate(rate, HOST_FLAG)
    entry = pricing.get_host_memory_rate(pricing_dir)
    if entry is None:
        return HostRate(Decimal(0), "no host_memory rate in the pricing folder's gpus.yaml")
    return HostRate(
        entry.usd_per_gb_hour, f"gpus.yaml host_memory, {entry.status}: docs/pricing.md"
    )


@dataclass(frozen=True)
class HostCost:
    """An engine's host memory (GiB, all its replicas) priced per GPU-hour at `rate`; the
    external store's GiB behind it, which no rate prices."""

    gb: float
    rate: HostRate
    per_gpu_hour: Decimal
    external_gb: float = 0.0


@dataclass(frozen=True)
class EnginePrice:
    """One engine of a run, priced (exact `Decimal`s in `Economics`)."""

    engine: str
    gpus: int
    requests: int
    gpu: GpuRate
    economics: Economics
    at_goodput: Economics | None = None  # only the tokens of requests within the SLO
    per_task: Decimal | None = None  # user cost of a finished agent task (mean)
    saturated: bool | None = None
    slo: str = ""
    # The shares of its cached tokens host memory and an external store served (issue 34),
    # None for an engine whose cache has no tiers.
    tiers: tuple[float, float] | None = None
    cached_price: Decimal = Decimal(0)  # USD per 1M cached tokens, blended by tier
    host: HostCost | None = None  # None: the engine has no host-memory tier

    @property
    def net_profit_per_gpu_hour(self) -> Decimal:
        """Profit per GPU-hour less the host memory's cost (the profit, without a tier)."""
        cost = Decimal(0) if self.host is None else self.host.per_gpu_hour
        return self.economics.profit_per_gpu_hour - cost

    def host_extra(self) -> dict[str, Any]:
        """The host memory's figures, JSON-ready; empty for an engine without a tier."""
        h = self.host
        if h is None:
            return {}
        out = {
            "host_memory_gb": h.gb,
            "host_usd_per_gb_hour": float(h.rate.usd_per_gb_hour),
            "host_rate_source": h.rate.source,
            "host_cost_per_gpu_hour": float(h.per_gpu_hour),
            "net_profit_per_gpu_hour": float(self.net_profit_per_gpu_hour),
        }
        if h.external_gb:
            out["external_memory_gb"] = h.external_gb
            out["external_cost"] = "unpriced: the pricing data has no external-store rate"
        return out

    def extra(self) -> dict[str, Any]:
        """Verdicts and the goodput and per-task prices, JSON-ready; an engine whose cache
        has tiers adds the shares of its hits each tier served and the cached price they were
        billed at (the sheet's own unless it prices a tier apart)."""
        g = self.at_goodput
        tiers: dict[str, Any] = {}
        if self.tiers is not None:
            host, external = self.tiers
            tiers = {
                "host_hit_share": host,
                "external_hit_share": external,
                "cached_price_per_m": float(self.cached_price),
            }
        return {
            **tiers,
            **self.host_extra(),
            "saturated": self.saturated,
            "slo": self.slo,
            "user_cost_per_task": None if self.per_task is None else float(self.per_task),
            "revenue_per_gpu_hour_at_goodput": None if g is None else float(g.revenue_per_gpu_hour),
            "profit_per_gpu_hour_at_goodput": None if g is None else float(g.profit_per_gpu_hour),
        }

    def as_dict(self) -> dict[str, Any]:
        """Everything about this engine's price, JSON-ready (`replay price RUN_DIR --json`)."""
        return {
            "engine": self.engine,
            "gpus": self.gpus,
            "requests": self.requests,
            **self.economics.as_dict(),
            **self.extra(),
        }


@dataclass
class RunPrices:
    """Every engine of a run priced on one sheet; `skipped` engines had nothing to price."""

    sheet: PriceSheet
    engines: list[EnginePrice] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> list[GpuRate]:
        """The GPU rates used, once each."""
        return list({r.gpu.name: r.gpu for r in self.engines}.values())


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _skip_reason(rec: Mapping[Any, Any]) -> str | None:
    if rec.get("requests") == 0:
        return "no served requests in the window"
    if not _finite(rec.get("hit_rate")):
        return "no prompt tokens with a reported cached count in the window"
    unknown = rec.get("unknown") or {}
    for key, name in (
        ("prefill_tokens_per_min_per_gpu", "prefill tokens/min/GPU"),
        ("output_tokens_per_min_per_gpu", "output tokens/min/GPU"),
    ):
        if not _finite(rec.get(key)):
            why = unknown.get(key) if isinstance(unknown, dict) else None
            return f"no {name}" + (f": {why}" if why else " in the window")
    return None


def tier_shares(rec: Mapping[Any, Any]) -> tuple[float, float] | None:
    """The shares of an engine's cached tokens host memory and an external store served
    (analysis.metrics.tier_metrics), or None for an engine without tiers or without hits."""
    values = [rec.get(k) for k in ("cached_tokens_host", "cached_tokens_external", "cached_tokens")]
    if not all(_finite(v) for v in values):
        return None
    host, external, cached = (float(v) for v in values)  # type: ignore[arg-type]
    if cached <= 0:
        return None
    h = min(max(host / cached, 0.0), 1.0)
    return h, min(max(external / cached, 0.0), 1.0 - h)


def _tiered(rec: Mapping[Any, Any], sheet: PriceSheet) -> PriceSheet:
    """The sheet with its cached price blended by the engine's tier shares (issue 34 point
    4, `pricing.tier_sheet`): the sheet itself unless it prices a tier apart and the engine's
    cache has tiers, so every run priced on today's sheets is priced as before."""
    shares = tier_shares(rec) if sheet.prices_tiers else None
    return sheet if shares is None else pricing.tier_sheet(sheet, *shares)


def host_sizes(rec: Mapping[Any, Any]) -> tuple[float, float]:
    """An engine's host-memory and external-store GiB (all replicas; window metrics'
    `host_memory_gb`, `external_memory_gb`), 0 where it has none."""
    sizes = [rec.get(k) for k in ("host_memory_gb", "external_memory_gb")]
    host, ext = (float(v) if _finite(v) and float(v) > 0 else 0.0 for v in sizes)  # type: ignore[arg-type]
    return host, ext


def _host_cost(rec: Mapping[Any, Any], gpus: int, rate: Callable[[], HostRate]) -> HostCost | None:
    host, ext = host_sizes(rec)
    if not host:
        return None
    r = rate()
    cost = pricing.host_memory_cost_per_gpu_hour(host, r.usd_per_gb_hour, gpus)
    return HostCost(host, r, cost, ext)


def _price_one(
    rec: Mapping[Any, Any],
    sheet: PriceSheet,
    gpu: GpuRate,
    write_fraction: float,
    host: Callable[[], HostRate],
) -> EnginePrice:
    hit = min(max(float(rec["hit_rate"]), 0.0), 1.0)
    tiers = tier_shares(rec)
    sheet = _tiered(rec, sheet)

    def econ(prompt: Any, output: Any) -> Economics:
        return pricing.provider_economics(
            sheet,
            gpu,
            hit_rate=hit,
            prompt_tokens_per_min_per_gpu=float(prompt),
            output_tokens_per_min_per_gpu=float(output),
            write_fraction=write_fraction,
        )

    good = (
        rec.get("goodput_prefill_tokens_per_min_per_gpu"),
        rec.get("goodput_output_tokens_per_min_per_gpu"),
    )
    task = [rec.get(f"task_{c}_mean") for c in ("prompt_tokens", "cached_tokens", "output_tokens")]
    per_task = None
    if all(_finite(v) for v in task):
        p, c, o = (float(v) for v in task)  # type: ignore[arg-type]
        per_task = pricing.cost_per_task(sheet, p, min(c, p), o, write_fraction)
    slo = rec.get("slo")
    saturated = rec.get("saturated")
    gpus: Any = rec.get("gpus")
    gpus = int(gpus) if _finite(gpus) and gpus >= 1 else 1
    requests: Any = rec.get("requests")
    return EnginePrice(
        engine=str(rec["engine"]),
        gpus=gpus,
        requests=int(requests) if _finite(requests) else 0,
        gpu=gpu,
        economics=econ(rec["prefill_tokens_per_min_per_gpu"], rec["output_tokens_per_min_per_gpu"]),
        at_goodput=econ(*good) if all(_finite(v) for v in good) else None,
        per_task=per_task,
        saturated=saturated if isinstance(saturated, bool) else None,
        slo=str(slo.get("text", "")) if isinstance(slo, dict) else "",
        tiers=tiers,
        cached_price=sheet.cached,
        host=_host_cost(rec, gpus, host),
    )


def sheet_notes(sheet: PriceSheet, pricing_dir: Path | None = None) -> list[str]:
    """A note for each cached-token price of `sheet` above its `input` price: a hit would
    cost the user more than a miss, the cache a cost instead of a saving, which no provider's
    list does (a typo, or a what-if). Said, not refused: the arithmetic holds and a what-if
    sheet may mean it; every figure then uses the prices as written."""
    path = Path(pricing_dir or pricing.default_pricing_dir()) / SHEETS_FILE
    prices = (
        ("cached", sheet.cached),
        ("cached_host", sheet.cached_host),
        ("cached_external", sheet.cached_external),
    )
    return [
        f"{path}: sheet '{sheet.name}': field '{key}' ({value} USD per 1M tokens) is above "
        f"'input' ({sheet.input}): a cache hit costs the user more than a miss, which no "
        "provider's list does; priced as written, check fields "
        f"'sheets.{sheet.name}.{key}' and 'sheets.{sheet.name}.input'"
        for key, value in prices
        if value is not None and value > sheet.input
    ]


def price_engines(
    metrics: pd.DataFrame,
    sheet: str | PriceSheet | None = None,
    gpu: str | GpuRate | None = None,
    pricing_dir: Path | None = None,
    write_fraction: float = 1.0,
    host: HostRate | None = None,
) -> RunPrices:
    """Price every engine (row) of `metrics` — analysis' window metrics, with the verdicts'
    goodput and task columns where present. `host`: the host-memory rate (`host_rate`; read
    from the pricing data when None, and only if an engine has host memory). Raises
    `PricingError` for an unknown sheet or GPU (`UnknownGpuError` for a GPU, naming it and
    `--gpu`) and for bad numbers."""
    chosen = sheet if isinstance(sheet, PriceSheet) else pricing.get_sheet(sheet, pricing_dir)
    forced = None if gpu is None else resolve_gpu(gpu, pricing_dir)
    out = RunPrices(chosen)
    out.notes.extend(sheet_notes(chosen, pricing_dir))
    loaded: list[HostRate] = [] if host is None else [host]

    def rate() -> HostRate:
        if not loaded:
            loaded.append(host_rate(None, pricing_dir))
        return loaded[0]

    for rec in metrics.to_dict(orient="records"):
        engine = str(rec["engine"])
        reason = _skip_reason(rec)
        if reason is not None:
            out.skipped.append({"engine": engine, "reason": reason})
            out.notes.append(f"{engine}: not priced: {reason}")
            continue
        gpu_rate = gpu_for_engine(engine, rec.get("gpu_type"), forced, pricing_dir, out.notes)
        out.engines.append(_price_one(rec, chosen, gpu_rate, write_fraction, rate))
        out.notes.extend(_unpriced_tiers(out.engines[-1]))
    return out


def _unpriced_tiers(p: EnginePrice) -> list[str]:
    """A note for an engine whose hits came from host memory or a store while the run's spec
    gives it no host memory (a manifest without `host_memory_gb`, or a real engine whose host
    tier is its server's own flags): its host memory is not in the price."""
    if p.host is not None or p.tiers is None or not sum(p.tiers):
        return []
    return [
        f"{p.engine}: {sum(p.tiers):.1%} of its cache hits came from host memory or an external "
        "store, but the run's spec gives it no host_memory_gb (manifest spec.engines[]): host "
        "memory is not priced, profit is before it"
    ]


def _row(p: EnginePrice) -> dict[str, Any]:
    e = p.economics
    return {
        "engine": p.engine,
        "sheet": e.sheet,
        "gpu": p.gpu.gpu,
        "gpu_rate_per_hour": float(e.gpu_rate_per_hour),
        "user_cost_per_m_input": float(e.user_cost_per_m_input),
        "revenue_per_gpu_hour": float(e.revenue_per_gpu_hour),
        "profit_per_gpu_hour": float(e.profit_per_gpu_hour),
        "break_even_gpu_rate": float(e.break_even_gpu_rate),
        "break_even_hit_rate": math.nan
        if e.break_even_hit_rate is None
        else float(e.break_even_hit_rate),
        **{k: math.nan if v is None else v for k, v in p.extra().items() if k in PRICE_COLUMNS},
        "host_rate_source": None if p.host is None else p.host.rate.source,
    }


def engine_economics(
    metrics: pd.DataFrame,
    sheet: str | PriceSheet | None = None,
    gpu: str | GpuRate | None = None,
    pricing_dir: Path | None = None,
    notes: list[str] | None = None,
    write_fraction: float = 1.0,
    host: HostRate | None = None,
) -> pd.DataFrame:
    """`price_engines` as a float table: one row per row of `metrics` (`engine`,
    `TEXT_COLUMNS` and `PRICE_COLUMNS`; NaN prices for a skipped engine, NaN host figures for
    one without host memory), for merging onto the metrics. Its notes are appended to
    `notes`."""
    prices = price_engines(metrics, sheet, gpu, pricing_dir, write_fraction, host)
    if notes is not None:
        notes.extend(prices.notes)
    priced = {p.engine: _row(p) for p in prices.engines}
    unpriced = {"sheet": prices.sheet.name}
    rows = [priced.get(str(e), {"engine": str(e), **unpriced}) for e in metrics.get("engine", [])]
    table = pd.DataFrame(rows, columns=["engine", *TEXT_COLUMNS, *PRICE_COLUMNS])
    for col in PRICE_COLUMNS:
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    return table


__all__ = [
    "HOST_FLAG",
    "MAX_HOST_RATE",
    "MAX_TIER_GB",
    "PRICE_COLUMNS",
    "TEXT_COLUMNS",
    "EnginePrice",
    "HostCost",
    "HostRate",
    "RunPrices",
    "UnknownGpuError",
    "engine_economics",
    "gpu_for_engine",
    "host_rate",
    "host_sizes",
    "price_engines",
    "resolve_gpu",
    "sheet_notes",
    "tier_shares",
]
