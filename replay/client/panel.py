"""The live panel of `replay run`: one row per engine, rebuilt every tick.

Builds `rich` renderables only; the command layer owns the console and the `Live` display.
"""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text

from replay.client.session import LiveStats


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def panel(stats: dict[str, LiveStats], elapsed_s: float, duration_s: float) -> Group:
    now = time.perf_counter_ns()
    table = Table(title=None, expand=False, pad_edge=False)
    for col, just in (
        ("engine", "left"),
        ("sessions", "right"),
        ("in flight", "right"),
        ("done", "right"),
        ("out tok/min", "right"),
        ("hit rate", "right"),
        ("ideal", "right"),
        ("TTFT p50 ms", "right"),
        ("TTFT p90 ms", "right"),
        ("errors", "right"),
        ("overflow", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for name, s in stats.items():
        ideal = s.ideal_cached_tokens / s.prompt_tokens if s.prompt_tokens else None
        table.add_row(
            name,
            str(s.sessions),
            str(s.in_flight),
            f"{s.done:,}",
            f"{s.output_per_min(now):,.0f}",
            _pct(s.hit_rate),
            _pct(ideal),
            _ms(s.ttft_pct(50)),
            _ms(s.ttft_pct(90)),
            Text(str(s.errors), style="red" if s.errors else ""),
            str(s.overflows),
        )
    head = Text(
        f"replay run: {elapsed_s:,.0f} s of {duration_s:,.0f} s "
        f"({min(elapsed_s / duration_s, 1.0) if duration_s else 0:.0%})  — Ctrl-C stops cleanly",
        style="bold",
    )
    errs = [f"{n}: {s.last_error}" for n, s in stats.items() if s.last_error]
    parts: list[Text | Table] = [head, table]
    if errs:
        parts.append(Text("last error  " + " | ".join(errs)[:300], style="dim red"))
    return Group(*parts)


def progress_line(stats: dict[str, LiveStats], elapsed_s: float, duration_s: float) -> str:
    """One plain line for non-interactive output (logs, CI)."""
    bits = []
    for name, s in stats.items():
        bits.append(
            f"{name}: done {s.done} err {s.errors} hit {_pct(s.hit_rate)} "
            f"p50 {_ms(s.ttft_pct(50))} ms"
        )
    return f"[{elapsed_s:,.0f}/{duration_s:,.0f} s] " + "; ".join(bits)
