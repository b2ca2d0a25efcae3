"""One colour per engine, everywhere: the dashboard's figures and the report's read it here.

A known engine (the three engines compared and the simulator's policies) has a fixed colour;
a variant of one (`vllm-native`, `flashstate-eq7`) a shade of its family's. Any other name
gets a colour from `OTHERS` chosen by a hash of its name, so the same name has the same colour
on every page, in every report and in every process, whatever else is drawn beside it.
Names are matched without regard to case.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# The FlashState demo's three first, then the simulator's policies (replay.sim.cache.policies).
KNOWN: dict[str, str] = {
    "flashstate": "#2a9d8f",
    "vllm": "#e76f51",
    "sglang": "#264653",
    "flashstate-eq7": "#83c5be",
    "vllm-like": "#f4a261",
    "vllm-native": "#9d3a22",
    "sglang-native": "#5c7d99",
    "dense": "#8d99ae",
    "asc-lru": "#e9c46a",
    "asc-unit-lru": "#b8962e",
    "marconi": "#6a4c93",
    "tail-replay": "#b56576",
    "ideal": "#4a4a4a",
}
# For every other name: none of these is a known engine's colour.
OTHERS: tuple[str, ...] = (
    "#1f77b4",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#d62728",
    "#2ca02c",
)


def engine_color(name: str) -> str:
    """The colour of the engine called `name` (see the module docstring)."""
    key = str(name).strip().casefold()
    if key in KNOWN:
        return KNOWN[key]
    digest = hashlib.sha256(key.encode()).digest()
    return OTHERS[int.from_bytes(digest[:4], "big") % len(OTHERS)]


def engine_colors(names: Iterable[str]) -> dict[str, str]:
    """{name: colour} for each of `names` (the figures' lookup)."""
    return {str(n): engine_color(str(n)) for n in names}


# Lines of one engine told apart by their dash (its configurations in a sweep, or groups of
# runs in the dashboard): the colour says the engine, the dash which line of it.
LINE_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def line_dash(index: int) -> str:
    """The dash of an engine's `index`-th line (0: solid)."""
    return LINE_DASHES[index % len(LINE_DASHES)]


__all__ = ["KNOWN", "LINE_DASHES", "OTHERS", "engine_color", "engine_colors", "line_dash"]
