"""`replay price`: user cost and provider profit from price sheets and token rates.

Three forms:

- `replay price --sheet NAME --gpu NAME --hit-rate H --prompt-tokens-per-min-per-gpu P
  --output-tokens-per-min-per-gpu O [--json]`: one operating point, priced exactly.
- `replay price RUN_DIR [--sheet NAME] [--gpu NAME] [--window A-B] [--host-usd-per-gb-hour R]
  [--json]`: every engine of a run, at the token rates and hit rate its window metrics
  measured (analysis package); an engine with host memory also at its host cost.
- `replay price --list [--json]`: the price sheets and GPU rates on file.

The arithmetic lives in `pricing`; this module parses flags, names the bad one, and prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replay.commands.common import console, fail
from replay.runspec import flags as F

if TYPE_CHECKING:
    from rich.table import Table

    from analysis.economics import HostRate
    from pricing import Economics, GpuRate, HostMemoryRate, PriceSheet
    from pricing.sheets import Catalog

# `pricing` and the run pricing (pandas, the analysis) are imported where they are used, so
# that `replay price --help` loads neither: tests/unit/replay/test_cli.py.

# The flags of a single operating point, in the order a message lists them.
_POINT_FLAGS = (
    ("hit_rate", "--hit-rate"),
    ("prompt", "--prompt-tokens-per-min-per-gpu"),
    ("output", "--output-tokens-per-min-per-gpu"),
)


# What a GiB of host memory costs the provider per hour: `replay price RUN_DIR` and
# `replay plan-host` take it from this one definition; `analysis.economics.host_rate` checks
# and resolves it (docs/pricing.md, "Host memory").
HostUsdPerGbHour = Annotated[
    float | None,
    typer.Option(
        "--host-usd-per-gb-hour",
        help="What a GiB of host memory costs the provider per hour, USD (default: gpus.yaml's "
        "host_memory rate; 0: unpriced, as RAM within a rented GPU node's, docs/pricing.md).",
    ),
]


def resolve_host_rate(given: float | None, pricing_dir: Path | None = None) -> HostRate:
    """The host-memory rate `--host-usd-per-gb-hour` gives, else the pricing data's, else 0
    (unpriced); exits naming the flag (or the file's field) on a bad one."""
    from analysis.economics import host_rate
    from pricing import PricingError

    try:
        return host_rate(None if given is None else _unsigned_zero(given), pricing_dir)
    except PricingError as e:
        fail(str(e))


def _unsigned_zero(value: float) -> float:
    """-0.0 as 0.0 (every other value as given): the flags' checks pass -0.0, and it reached
    `--json` as `"hit_rate": -0.0`."""
    return 0.0 if value == 0 else value


def _check_fraction(value: float, flag: str) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        fail(f"{flag}: must be a fraction within [0, 1] (0.87 for 87%), got {value:g}")


def _check_rate(value: float, flag: str) -> None:
    from pricing.sheets import MAX_TOKEN_RATE

    if not (math.isfinite(value) and value >= 0.0):
        fail(f"{flag}: must be a token rate ≥ 0 (tokens per minute per GPU), got {value:g}")
    if value > MAX_TOKEN_RATE:
        fail(
            f"{flag}: must be at most {MAX_TOKEN_RATE:,} tokens per minute per GPU (a million "
            f"times the fastest engine measured), got {value:g}"
        )


def _refuse_with_list(
    run_dir: object, sheet: object, gpu: object, window: object, host: object,
    point: dict[str, float | None],
) -> None:  # fmt: skip
    """--list prices nothing: a flag of a point or a run beside it was ignored in silence
    (`--list --host-usd-per-gb-hour 5` still listed the file's rate)."""
    given = {"RUN_DIR": run_dir, "--sheet": sheet, "--gpu": gpu, "--window": window,
             "--host-usd-per-gb-hour": host}  # fmt: skip
    given |= {flag: point[key] for key, flag in _POINT_FLAGS}
    for flag, value in given.items():
        if value is not None:
            fail(
                f"{flag}: not used with --list (which lists every sheet and rate); drop one of them"
            )


def _label(status: str) -> str:
    return {
        "published": "published",
        "reported": "reported",
        "illustrative": "[yellow]illustrative[/]",
    }[status]


def _list(pricing_dir: Path | None, as_json: bool) -> None:
    from pricing import PricingError, get_host_memory_rate, load_gpu_rates, load_sheets
    from replay.commands.price_common import print_json, sheet_caveats

    try:
        sheets, gpus = load_sheets(pricing_dir), load_gpu_rates(pricing_dir)
        host = get_host_memory_rate(pricing_dir)
    except PricingError as e:
        fail(str(e))
    for sheet in sheets.entries.values():
        sheet_caveats(sheet, pricing_dir)
    if as_json:
        print_json(
            {
                "default_sheet": sheets.default,
                "default_gpu": gpus.default,
                "sheets": [_jsonable(s.model_dump()) for s in sheets.entries.values()],
                "gpus": [_jsonable(g.model_dump()) for g in gpus.entries.values()],
                "host_memory": None if host is None else _jsonable(host.model_dump()),
            }
        )
        return
    _sheets_table(sheets)
    _gpu_table(gpus)
    if host is None:
        console.print("Host memory: unpriced (no host_memory rate in gpus.yaml)", highlight=False)
    else:
        console.print(
            f"Host memory: ${host.usd_per_gb_hour} per GiB-hour ({_label(host.status)}, "
            f"{host.date}; --host-usd-per-gb-hour overrides it)",
            highlight=False,
        )
        _sources([host])


def _sheets_table(sheets: Catalog[PriceSheet]) -> None:
    from rich.table import Table

    t = Table(title=f"Price sheets (USD per 1M tokens) — {sheets.path}")
    for col in ("name", "input", "cached", "cache write", "output", "status", "date"):
        t.add_column(col, justify="right" if col in _MONEY_COLUMNS else "left")
    for s in sheets.entries.values():
        write = "—" if s.cache_write is None else _price(s.cache_write)
        t.add_row(
            _marked(s.name, sheets.default),
            _price(s.input),
            _price(s.cached),
            write,
            _price(s.output),
            _label(s.status),
            s.date,
        )
    console.print(t)
    _sources(sheets.entries.values())


def _gpu_table(gpus: Catalog[GpuRate]) -> None:
    from rich.table import Table

    g = Table(title=f"GPU rates (USD per GPU-hour) — {gpus.path}")
    for col in ("name", "gpu", "provider", "rate", "status", "date"):
        g.add_column(col, justify="right" if col == "rate" else "left")
    for r in gpus.entries.values():
        g.add_row(
            _marked(r.name, gpus.default),
            r.gpu,
            r.provider,
            _price(r.rate_per_gpu_hour),
            _label(r.status),
            r.date,
        )
    console.print(g)
    _sources(gpus.entries.values())


def _jsonable(fields: dict[str, Any]) -> dict[str, Any]:
    # Prices as JSON numbers (float of the exact decimal), not strings.
    return {k: float(v) if isinstance(v, Decimal) else v for k, v in fields.items()}


_MONEY_COLUMNS = ("input", "cached", "cache write", "output")


def _price(amount: Decimal) -> str:
    """A list price as written, but with at least cents ($0.5 → $0.50, $0.028 stays)."""
    from pricing import usd

    return usd(amount, max(2, -int(amount.normalize().as_tuple().exponent)))


def _marked(name: str, default: str) -> str:
    return f"{name} (default)" if name == default else name


def _sources(entries: Iterable[PriceSheet | GpuRate | HostMemoryRate]) -> None:
    # Sources are long prose: printed under the table, not squeezed into a column.
    for item in entries:
        console.print(f"  [dim]{item.name}:[/] {item.source}", highlight=False)


def _point_table(e: Economics, sheet: PriceSheet, gpu: GpuRate) -> Table:
    from rich.table import Table

    from pricing import usd
    from replay.commands.price_common import break_even_text

    t = Table(title=f"{sheet.name} prices on {gpu.name} ({usd(gpu.rate_per_gpu_hour, 2)}/GPU-hour)")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("hit rate", f"{float(e.hit_rate):.2%}")
    t.add_row("prompt tokens / min / GPU", f"{float(e.prompt_tokens_per_min_per_gpu):,.0f}")
    t.add_row("output tokens / min / GPU", f"{float(e.output_tokens_per_min_per_gpu):,.0f}")
    t.add_row("user cost per 1M input tokens", usd(e.user_cost_per_m_input, 4))
    t.add_row("input revenue / GPU-hour", usd(e.input_revenue_per_gpu_hour, 2))
    t.add_row("output revenue / GPU-hour", usd(e.output_revenue_per_gpu_hour, 2))
    t.add_row("revenue / GPU-hour", usd(e.revenue_per_gpu_hour, 2))
    t.add_row("GPU rate / GPU-hour", usd(e.gpu_rate_per_hour, 2))
    t.add_row("[bold]profit / GPU-hour[/]", f"[bold]{usd(e.profit_per_gpu_hour, 2)}[/]")
    t.add_row("break-even GPU rate", usd(e.break_even_gpu_rate, 2))
    t.add_row("break-even hit rate", break_even_text(e))
    return t


def _price_point(
    sheet: PriceSheet,
    gpu: GpuRate,
    hit_rate: float,
    prompt: float,
    output: float,
    write_fraction: float,
    as_json: bool,
    pricing_dir: Path | None = None,
) -> None:
    from pricing import PricingError, provider_economics
    from replay.commands.price_common import caveats, print_json, sheet_caveats

    try:
        econ = provider_economics(
            sheet,
            gpu,
            hit_rate=hit_rate,
            prompt_tokens_per_min_per_gpu=prompt,
            output_tokens_per_min_per_gpu=output,
            write_fraction=write_fraction,
        )
    except PricingError as e:
        fail(str(e))
    sheet_caveats(sheet, pricing_dir)
    if as_json:
        print_json(econ.as_dict())
        return
    console.print(_point_table(econ, sheet, gpu))
    caveats(sheet, [gpu])


_HELP = {
    "run_dir": "A run directory: price every engine at its measured window metrics.",
    "sheet": "Price sheet name (see --list; default: the file's default).",
    "gpu": "GPU rate name or model, e.g. b200 (see --list). With RUN_DIR: overrides the "
    "manifest's GPU type.",
    "hit": "Cache hit rate, cached ÷ prompt tokens, as a fraction in [0, 1].",
    "prompt": "Prompt tokens (cached and computed) per minute per GPU.",
    "output": "Output tokens per minute per GPU (an engine's rate ÷ its GPUs).",
    "write": "Share of uncached prompt tokens billed at the sheet's cache-write price.",
    "dir": "Folder holding sheets.yaml and gpus.yaml (default: configs/pricing).",
    "list": "List the price sheets and GPU rates.",
    "json": "Print JSON instead of a table.",
}


def register(app: typer.Typer) -> None:
    @app.command("price")
    def price(
        run_dir: Annotated[Path | None, typer.Argument(help=_HELP["run_dir"])] = None,
        sheet: Annotated[str | None, typer.Option("--sheet", help=_HELP["sheet"])] = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help=_HELP["gpu"])] = None,
        hit_rate: Annotated[float | None, typer.Option("--hit-rate", help=_HELP["hit"])] = None,
        prompt: Annotated[
            float | None, typer.Option("--prompt-tokens-per-min-per-gpu", help=_HELP["prompt"])
        ] = None,
        output: Annotated[
            float | None, typer.Option("--output-tokens-per-min-per-gpu", help=_HELP["output"])
        ] = None,
        write_fraction: Annotated[
            float, typer.Option("--write-fraction", help=_HELP["write"])
        ] = 1.0,
        window: F.RunWindow = None,
        host_usd_per_gb_hour: HostUsdPerGbHour = None,
        pricing_dir: Annotated[
            Path | None, typer.Option("--pricing-dir", help=_HELP["dir"])
        ] = None,
        list_: Annotated[bool, typer.Option("--list", help=_HELP["list"])] = False,
        as_json: Annotated[bool, typer.Option("--json", help=_HELP["json"])] = False,
    ) -> None:
        """Price an operating point or a run: user cost per 1M input tokens, provider revenue,
        profit and break-evens per GPU-hour."""
        from replay.commands.price_common import resolve_gpu, resolve_sheet
        from replay.commands.price_run import price_run

        _check_fraction(write_fraction, "--write-fraction")
        write_fraction = _unsigned_zero(write_fraction)
        given = {"hit_rate": hit_rate, "prompt": prompt, "output": output}
        if list_:
            _refuse_with_list(run_dir, sheet, gpu, window, host_usd_per_gb_hour, given)
            _list(pricing_dir, as_json)
            return
        if run_dir is not None:
            clash = [flag for key, flag in _POINT_FLAGS if given[key] is not None]
            if clash:
                fail(
                    f"{clash[0]}: not used with RUN_DIR (the run's measured value is used); "
                    "drop it, or drop RUN_DIR to price a point"
                )
            host = resolve_host_rate(host_usd_per_gb_hour, pricing_dir)
            price_run(run_dir, sheet, gpu, window, write_fraction, pricing_dir, as_json, host)
            return
        for flag, value in (("--window", window), ("--host-usd-per-gb-hour", host_usd_per_gb_hour)):
            if value is not None:
                fail(f"{flag}: only used with RUN_DIR")
        missing = [flag for key, flag in _POINT_FLAGS if given[key] is None]
        if missing:
            fail(f"missing {', '.join(missing)} (or pass RUN_DIR to price a run, or --list)")
        assert hit_rate is not None and prompt is not None and output is not None
        _check_fraction(hit_rate, "--hit-rate")
        _check_rate(prompt, "--prompt-tokens-per-min-per-gpu")
        _check_rate(output, "--output-tokens-per-min-per-gpu")
        hit_rate, prompt, output = (_unsigned_zero(v) for v in (hit_rate, prompt, output))
        chosen_sheet = resolve_sheet(sheet, pricing_dir)
        chosen_gpu = resolve_gpu(gpu, pricing_dir)
        _price_point(
            chosen_sheet, chosen_gpu, hit_rate, prompt, output, write_fraction, as_json,
            pricing_dir,
        )  # fmt: skip
