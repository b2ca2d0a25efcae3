"""`build_report`: run directories in, a report folder out.

```
OUT/
  report.md  report.html  report.tex       (as --format asks; md,tex,html by default)
  tables/<name>.csv  (always)  .md  .tex
  figures/<name>.json (plotly)  .png .svg .pdf (when a Chromium is present)
```
Each run's `summary.json` is (re)written too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from analysis.manifest import Window
from analysis.report.catalog import make_tables
from analysis.report.content import ReportData, analyze
from analysis.report.document import render_html, render_markdown, render_tex, write_text
from analysis.report.export import STATIC_FORMATS, export_static
from analysis.report.figures import all_figures
from analysis.report.tables import Table
from analysis.runs import Run, load_run
from analysis.summary import summary_from_table, write_summary

FORMATS = ("md", "tex", "html")


class ReportError(ValueError):
    """Bad report options (formats, output folder); the message says what to change."""


def parse_formats(value: str | Iterable[str]) -> set[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    formats = {f.strip().lower() for f in items if f.strip()}
    unknown = sorted(formats - set(FORMATS))
    if unknown or not formats:
        raise ReportError(
            f"--format: unknown {', '.join(unknown) or '(empty)'}; choose from {','.join(FORMATS)}"
        )
    return formats


@dataclass
class ReportResult:
    out: Path
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    static_skipped: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


def write_tables(data: ReportData, out: Path, formats: set[str]) -> tuple[list[Table], list[Path]]:
    """Analysis tables to `out/tables/` (CSV always, plus md/tex as asked)."""
    tables = make_tables(data)
    files: list[Path] = []
    for t in tables:
        files += t.write(out / "tables", formats)
    return tables, files


def write_summaries(data: ReportData, bin_s: float, custom_window: bool = False) -> list[Path]:
    """Rewrite each run's summary.json from the metrics already computed. With a custom
    `--window` the summary keeps the run's own (manifest) window, computed afresh."""
    paths = []
    for a in data.runs:
        if custom_window:
            paths.append(write_summary(a.run))
            continue
        summary = summary_from_table(a.run, a.window, a.metrics, bin_s)
        paths.append(write_summary(a.run, summary=summary))
    return paths


def build_report(
    run_dirs: Sequence[str | Path] | Sequence[Run],
    out: str | Path,
    formats: str | Iterable[str] = FORMATS,
    *,
    sheet: str | None = None,
    gpu: str | None = None,
    window: Window | tuple[float, float] | str | None = None,
    figures: bool = True,
    static: bool = True,
    pricing_dir: Path | None = None,
    bin_s: float = 60.0,
) -> ReportResult:
    """Analyse the runs and write the report; `window`: as `analysis.metrics.resolve_window`
    takes it (a command's `--window` text too). `RunDirError` (bad run directory),
    `replay.windows.WindowError` (bad `--window` text), `ReportError` (bad options) and
    `pricing.PricingError` (unknown sheet/GPU) propagate."""
    fmts = parse_formats(formats)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out}: exists and is not a directory")
    if not run_dirs:
        raise ReportError("no run directories given")
    result = ReportResult(out)
    t0 = time.perf_counter()
    runs = [r if isinstance(r, Run) else load_run(r) for r in run_dirs]
    result.timings["load_s"] = time.perf_counter() - t0
    t = time.perf_counter()
    data = analyze(runs, window, sheet, gpu, pricing_dir, bin_s)
    result.notes = list(data.notes)
    result.timings["analyze_s"] = time.perf_counter() - t
    try:
        return _write(data, out, fmts, result, figures, static, window, bin_s)
    except OSError as e:  # a full disk, a read-only folder, /proc: said, not a traceback
        where = e.filename or out
        raise ReportError(
            f"--out {out}: cannot write {where} ({e.strerror or e}); free some space or "
            "choose another --out"
        ) from None


def _write(
    data: ReportData,
    out: Path,
    fmts: set[str],
    result: ReportResult,
    figures: bool,
    static: bool,
    window: Window | tuple[float, float] | str | None,
    bin_s: float,
) -> ReportResult:
    """The report's files into `out` (`build_report`'s second half)."""
    t = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    tables, files = write_tables(data, out, fmts)
    result.files += files + write_summaries(data, bin_s, custom_window=window is not None)
    result.timings["tables_s"] = time.perf_counter() - t
    t = time.perf_counter()
    figs = all_figures(data) if figures else {}
    fig_dir = out / "figures"
    fig_dir.mkdir(exist_ok=True)
    for name, fig in figs.items():
        result.files.append(write_text(fig_dir / f"{name}.json", fig.to_json() or "{}"))
    shown: dict[str, str] = {name: f"figures/{name}.json" for name in figs}
    pdfs: dict[str, str] = {}
    if static and figs:
        exported = export_static(figs, fig_dir, STATIC_FORMATS)
        result.files += exported.written
        result.static_skipped = exported.skipped
        for name in figs:
            if (fig_dir / f"{name}.png").exists():
                shown[name] = f"figures/{name}.png"
            if (fig_dir / f"{name}.pdf").exists():
                pdfs[name] = f"figures/{name}.pdf"
    elif figs:
        result.static_skipped = "static figures not requested (--no-static)"
    result.timings["figures_s"] = time.perf_counter() - t
    messages = [result.static_skipped] if result.static_skipped else []
    if "md" in fmts:
        result.files.append(write_text(out / "report.md", render_markdown(data, tables, shown)))
    if "html" in fmts:
        result.files.append(
            write_text(out / "report.html", render_html(data, tables, figs, messages))
        )
    if "tex" in fmts:
        result.files.append(write_text(out / "report.tex", render_tex(data, tables, pdfs)))
    return result


__all__ = [
    "FORMATS",
    "ReportError",
    "ReportResult",
    "build_report",
    "parse_formats",
    "write_tables",
]
