"""Static figure export (PNG, SVG, PDF) through kaleido and the system Chromium.

Kaleido drives a headless Chromium; where none is installed the export is skipped with a
message that says how to get one, and the rest of the report is still written.
`REPLAY_CHROMIUM` names the browser to use (an empty or missing path means: none).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

STATIC_FORMATS = ("png", "svg", "pdf")
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
NO_BROWSER = (
    "static figures (PNG/SVG/PDF) skipped: no Chromium found for kaleido "
    "(install it: `apt-get install -y chromium`, or set REPLAY_CHROMIUM=/path/to/chromium); "
    "the interactive report and all tables were written"
)


def find_browser() -> str | None:
    """The Chromium kaleido should use, or None."""
    if "REPLAY_CHROMIUM" in os.environ:
        path = os.environ["REPLAY_CHROMIUM"]
        return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class StaticResult:
    written: list[Path] = field(default_factory=list)
    skipped: str | None = None  # why nothing (or not everything) was exported


@contextmanager
def _browser_env(path: str) -> Iterator[None]:
    # choreographer (kaleido's browser driver) reads BROWSER_PATH.
    old = os.environ.get("BROWSER_PATH")
    os.environ["BROWSER_PATH"] = path
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("BROWSER_PATH", None)
        else:
            os.environ["BROWSER_PATH"] = old


def export_static(
    figures: dict[str, go.Figure], out: Path, formats: Sequence[str] = STATIC_FORMATS
) -> StaticResult:
    """Write `out/<name>.<fmt>` for each figure and format in one kaleido batch."""
    browser = find_browser()
    if browser is None:
        return StaticResult(skipped=NO_BROWSER)
    out.mkdir(parents=True, exist_ok=True)
    figs, paths = [], []
    for name, fig in figures.items():
        for fmt in formats:
            figs.append(fig)
            paths.append(out / f"{name}.{fmt}")
    try:
        with _browser_env(browser):
            pio.write_images(figs, paths)
    except Exception as e:  # kaleido failing must not lose the report
        done = [p for p in paths if p.exists()]
        return StaticResult(done, f"static figures skipped: kaleido with {browser} failed ({e})")
    return StaticResult(paths)


__all__ = ["NO_BROWSER", "STATIC_FORMATS", "StaticResult", "export_static", "find_browser"]
