"""The measured window on the command line: one unit (minutes), one parser, one default.

Every command's `--window A-B` (and a run config's `window:`) is in minutes of the run,
parsed here (`minutes_pair`) into one typed value, the spec's `Minutes` pair
(`WorkloadSpec.window`), whose field check it is. Without one, the window is the last two
thirds of the run (15-45 of a 45-minute run, the paper's), so a shorter `--duration-min` moves
the window with it; `resolve_window_min` says which window was used and why, for the command's
output. Records and manifests keep seconds; commands convert with `seconds()`.

A window read against a run that already exists (`replay price`, `replay report`) must lie
inside the time the run covers: `clip_to_covered` refuses one that starts after the data ends
and clips one that ends after it, with a note, so rates are divided by the time actually
covered (not by the window as asked).
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator

DEFAULT_FRACTION = 1 / 3  # the first third warms the caches (15 of 45 minutes)


class WindowError(ValueError):
    """A bad window; the message names the flag and shows the expected form."""


def minutes_pair(value: object) -> tuple[float, float]:
    """`A-B` in minutes (the command line's and a config file's form), a pair `[A, B]` (YAML,
    a manifest's JSON) or a (start_min, end_min) tuple, as (start_min, end_min): the one parser
    of a window, and the check of `WorkloadSpec.window` (`Minutes`). A ValueError says what
    the value must be, without naming who gave it."""
    try:
        if isinstance(value, list | tuple) and len(value) == 2:
            if any(isinstance(v, bool) for v in value):
                raise ValueError
            lo, hi = float(value[0]), float(value[1])
        else:
            a, sep, b = str(value).strip().partition("-")
            if not sep or isinstance(value, bool):
                raise ValueError
            lo, hi = float(a), float(b)
    except (TypeError, ValueError):
        raise ValueError("expected A-B in minutes of the run, e.g. 15-45") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or not 0 <= lo < hi:
        raise ValueError("need 0 ≤ A < B (minutes), e.g. 15-45")
    if not math.isfinite(hi * 60.0):  # 1e308 minutes: finite, but no number of seconds
        raise ValueError(
            "B is too large to be a time in seconds; give minutes of the run, e.g. 15-45"
        )
    return lo, hi


# The window inside the spec: minutes, parsed from any of `minutes_pair`'s forms.
Minutes = Annotated[tuple[float, float], BeforeValidator(minutes_pair)]


def shown(value: object) -> str:
    """A window as a message shows it: `15-45` (a pair as its text)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{value[0]}-{value[1]}"
    return str(value).strip()


def parse_window_min(text: object, flag: str = "--window") -> tuple[float, float]:
    """`minutes_pair`, its refusal a WindowError naming `flag` and the value as given."""
    try:
        return minutes_pair(text)
    except ValueError as e:
        raise WindowError(f"{flag} {shown(text)}: {e}") from None


def default_window_min(duration_min: float) -> tuple[float, float]:
    """The last two thirds of the run: 15-45 of 45 minutes, 1.67-5 of 5."""
    return duration_min * DEFAULT_FRACTION, float(duration_min)


def resolve_window_min(
    text: object | None, duration_min: float, flag: str = "--window"
) -> tuple[float, float, str]:
    """The window in minutes and a line saying which it is; a given window must lie inside
    the run (WindowError names `flag` and --duration-min)."""
    if text is None:
        lo, hi = default_window_min(duration_min)
        return (
            lo,
            hi,
            (
                f"window {lo:g}-{hi:g} min (none given: the last two thirds of the "
                f"{duration_min:g}-minute run)"
            ),
        )
    lo, hi = parse_window_min(text, flag)
    if hi > duration_min + 1e-9:
        raise WindowError(
            f"{flag} {lo:g}-{hi:g} ends after the run (--duration-min {duration_min:g}); "
            f"give a window inside 0-{duration_min:g}, or omit {flag} for the last two thirds"
        )
    return lo, hi, f"window {lo:g}-{hi:g} min ({flag})"


def seconds(window_min: tuple[float, float]) -> tuple[float, float]:
    return window_min[0] * 60.0, window_min[1] * 60.0


def clip_to_covered(
    lo_s: float, hi_s: float, covered_s: float, what: str, refuse_past: bool = True
) -> tuple[float, float, str | None]:
    """The window [lo_s, hi_s) (seconds) inside a run that covers 0..covered_s: unchanged
    (note None), or clipped to end at covered_s with a note naming `what` (the flag or the
    manifest). A window that starts at or after covered_s is a WindowError when
    `refuse_past` (an explicit flag), else kept whole with a note that it holds nothing."""
    if hi_s <= covered_s + 1e-9:
        return lo_s, hi_s, None
    span = f"window {lo_s / 60:g}-{hi_s / 60:g} min ({what})"
    data = f"the run's data covers 0-{covered_s / 60:.4g} min ({covered_s:.6g} s)"
    if lo_s >= covered_s:
        if refuse_past:
            raise WindowError(f"{span} starts after the run ends: {data}; give a window inside it")
        return lo_s, hi_s, f"{span} lies after the run's data ends ({data}): nothing measured"
    return (
        lo_s,
        covered_s,
        f"{span} ends after the data: clipped to {lo_s:g}-{covered_s:.6g} s ({data}); "
        "rates are per the clipped window's time",
    )


__all__ = [
    "Minutes",
    "WindowError",
    "clip_to_covered",
    "default_window_min",
    "minutes_pair",
    "parse_window_min",
    "resolve_window_min",
    "seconds",
]
