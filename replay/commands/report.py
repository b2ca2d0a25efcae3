"""`replay report RUN_DIR ... --out DIR [--format md,tex,html]`: paper-ready tables and figures.

A RUN_DIR may also be a folder of runs (a `replay simulate --out` sweep): every run
directory under it is included; one that cannot be read is reported (file and problem) and
left out, and the report covers the rest. Each run's summary.json is rewritten on the way.
`--window A-B` is in minutes, as for `replay run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from replay.commands.common import console, err_console, fail
from replay.runspec import flags as F

if TYPE_CHECKING:
    from analysis.report.build import ReportResult
    from analysis.runs import Run

# The analysis (pandas, plotly) is imported where it is used, so that `replay report --help`
# loads none of it (tests/unit/replay/test_cli.py). Hence --format's default written out:
# analysis.report.build.FORMATS, joined, which that test holds it equal to.
DEFAULT_FORMATS = "md,tex,html"


def expand_run_dirs(paths: list[Path]) -> list[Path]:
    """Run directories as given, with folders of runs expanded (sorted)."""
    from analysis.runs import RunDirError, find_runs
    from replay.rundir import MANIFEST

    out: list[Path] = []
    for path in paths:
        if path.is_dir() and not (path / MANIFEST).exists():
            found = find_runs(path)
            if not found:
                raise RunDirError(f"{path}: holds no {MANIFEST}, and no run directories under it")
            out += found
        else:
            out.append(path)
    return out


def load_runs(dirs: list[Path]) -> tuple[list[Run], list[str]]:
    """Every run that loads, and one line per run that does not (the others go on)."""
    from analysis.runs import RunDirError, load_run

    runs: list[Run] = []
    bad: list[str] = []
    for d in dirs:
        try:
            runs.append(load_run(d))
        except RunDirError as e:
            bad.append(str(e))
    return runs, bad


def _print_result(result: ReportResult) -> None:
    from rich.table import Table

    summary = Table(title="Report", show_lines=False)
    for col in ("what", "count"):
        summary.add_column(col)
    kinds: dict[str, int] = {}
    for f in result.files:
        kinds[f.suffix or f.name] = kinds.get(f.suffix or f.name, 0) + 1
    for suffix, count in sorted(kinds.items()):
        summary.add_row(suffix, str(count))
    console.print(summary)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if result.static_skipped:
        err_console.print(f"[yellow]{result.static_skipped}[/]", highlight=False)
    main = [f for f in result.files if f.name.startswith("report.")]
    for f in main:
        console.print(f"wrote {f}", highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        run_dirs: Annotated[
            list[Path], typer.Argument(help="Run directories (or folders of them) to report on.")
        ],
        out: Annotated[Path, typer.Option("--out", help="Folder to write the report into.")],
        formats: Annotated[
            str, typer.Option("--format", help="Comma-separated: md, tex, html (CSV always).")
        ] = DEFAULT_FORMATS,
        sheet: Annotated[
            str | None, typer.Option("--sheet", help="Price sheet (default: Z.ai GLM list).")
        ] = None,
        gpu: Annotated[
            str | None,
            typer.Option("--gpu", help="GPU rate for every engine (default: its GPU type)."),
        ] = None,
        window: F.RunWindow = None,
        figures: Annotated[
            bool, typer.Option("--figures/--no-figures", help="Build figures.")
        ] = True,
        static: Annotated[
            bool, typer.Option("--static/--no-static", help="Export PNG/SVG/PDF (needs Chromium).")
        ] = True,
        bin_s: Annotated[
            float, typer.Option("--bin-s", min=1.0, help="Time bin for standard errors (s).")
        ] = 60.0,
    ) -> None:
        """Tables (Markdown, LaTeX, CSV), figures and a self-contained report.html."""
        from analysis.report.build import ReportError, build_report
        from analysis.runs import RunDirError
        from pricing import PricingError
        from replay.comma_list import CommaListError, comma_items
        from replay.windows import WindowError

        try:  # the list's shape; build_report checks each format's name
            comma_items(formats, "--format", "md,html")
        except CommaListError as e:
            fail(str(e))
        try:
            runs, bad = load_runs(expand_run_dirs(run_dirs))
        except RunDirError as e:
            fail(str(e))
        for problem in bad:
            err_console.print(
                f"[red]skipped a run:[/] {escape(problem)}", highlight=False, soft_wrap=True
            )
        if not runs:
            fail(f"no run could be read ({len(bad)} tried); fix the files named above")
        try:
            result = build_report(
                runs, out, formats, sheet=sheet, gpu=gpu, window=window, figures=figures,
                static=static, bin_s=bin_s,
            )  # fmt: skip
        except (RunDirError, ReportError, WindowError) as e:
            fail(str(e))
        except PricingError as e:
            fail(f"pricing: {e}")
        _print_result(result)
        if bad:
            err_console.print(
                f"[yellow]{len(bad)} of {len(bad) + len(runs)} runs were left out[/] (see above)",
                highlight=False,
            )
            raise typer.Exit(1)
