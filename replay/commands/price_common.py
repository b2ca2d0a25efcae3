"""What both forms of `replay price` (a point, and a run: `price_run`) share: resolving the
sheet and GPU flags into a clear message, the break-even wording, the illustrative-figures
caveat and JSON output. The pricing itself is `pricing`'s (a point) and `analysis.economics`'
(a run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import typer
from rich.markup import escape

from analysis.economics import resolve_gpu as _gpu_rate
from analysis.economics import sheet_notes
from pricing import Economics, GpuRate, PriceSheet, PricingError, UnknownNameError, get_sheet
from replay.commands.common import err_console, fail


def print_json(obj: Any) -> None:
    """Plain stdout, not rich: JSON must reach pipes byte-for-byte."""
    typer.echo(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode())


def resolve_sheet(name: str | None, pricing_dir: Path | None) -> PriceSheet:
    """The sheet `--sheet` names (the file's default when None), or exit naming the flag."""
    try:
        return get_sheet(name, pricing_dir)
    except UnknownNameError as e:
        fail(f"--sheet: unknown price sheet '{e.name}'; choose one of: {', '.join(e.choices)}")
    except PricingError as e:
        fail(str(e))


def resolve_gpu(name: str | None, pricing_dir: Path | None) -> GpuRate:
    """The rate `--gpu` names (the file's default when None), or exit naming the flag."""
    try:
        return _gpu_rate(name, pricing_dir)
    except PricingError as e:
        fail(str(e))


def break_even_text(e: Economics) -> str:
    b = e.break_even
    if b.status == "crosses" and b.hit_rate is not None:
        side = "below" if b.profitable_below else "above"
        return f"{float(b.hit_rate):.2%} (profit {side} it)"
    return {
        "profit_everywhere": "none: profit at every hit rate",
        "loss_everywhere": "none: loss at every hit rate",
        "flat": "none: profit does not depend on it",
    }[b.status]


def sheet_caveats(sheet: PriceSheet, pricing_dir: Path | None) -> None:
    """A note for a cached price above the input price (`analysis.economics.sheet_notes`),
    on stderr: a point's JSON on stdout stays JSON."""
    for note in sheet_notes(sheet, pricing_dir):
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)


def caveats(sheet: PriceSheet, gpus: list[GpuRate]) -> None:
    """A note for each illustrative figure used: replace it before quoting."""
    for item in [sheet, *gpus]:
        if item.status == "illustrative":
            err_console.print(
                f"[yellow]note:[/] '{item.name}' figures are illustrative ({item.source}); "
                "replace them before quoting.",
                highlight=False,
            )
