"""Static figure export (PNG, SVG, PDF) through kaleido and the system Chromium.

Kaleido drives a headless Chromium; where none is installed the export is skipped with a
message that says how to get one, and the rest of the report is still written.
`REPLAY_CHROMIUM` names the browser to use (an empty or missing path means: none).
"""

from __future__ import annotations

import logging
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


class _Held(logging.Handler):
    """Keeps the first line of each record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage().splitlines()[0]}")


@contextmanager
def _held_browser_logs() -> Iterator[list[str]]:
    """The browser driver's log records (choreographer, kaleido), held instead of printed
    while figures export: choreographer logs a whole traceback for a browser message it
    cannot decode and then ignores ("JSONError decoding message. Ignoring"; 2 of 10 reports
    in the probes of 2026-12-07, every figure still written). The lines are named only
    where the export fails. kaleido is imported first: its loggers must be made by its
    logging library (logistro), whose logger class has methods plain ones lack."""
    import kaleido  # noqa: F401

    held = _Held()
    loggers = [logging.getLogger(name) for name in ("choreographer", "kaleido")]
    old = [lg.propagate for lg in loggers]
    for lg in loggers:
        lg.addHandler(held)
        lg.propagate = False
    try:
        yield held.lines
    finally:
        for lg, propagate in zip(loggers, old, strict=True):
            lg.removeHandler(held)
            lg.propagate = propagate


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
    with _held_browser_logs() as logged:
        try:
            with _browser_env(browser):
                pio.write_images(figs, paths)
        except Exception as e:  # kaleido failing must not lose the report
            done = [p for p in paths if p.exists()]
            said = f"; its driver logged: {'; '.join(logged[:3])}" if logged else ""
            why = f"static figures skipped: kaleido with {browser} failed ({e}){said}"
            return StaticResult(done, why)
    return StaticResult(paths)


__all__ = ["NO_BROWSER", "STATIC_FORMATS", "StaticResult", "export_static", "find_browser"]
