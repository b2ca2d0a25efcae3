"""The command line itself (`replay.cli`): its help shows a flag as a switch, and loading it
loads none of the heavy libraries, so that every `--help` answers at once (issue 32; the
timings: scripts/bench_help.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from typer.testing import CliRunner

from replay.cli import app


def _help(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    return res.output


def test_a_flag_shows_no_type_and_an_option_with_a_value_shows_its_own() -> None:
    out = _help("simulate")
    assert re.search(r"--json\s", out) and not re.search(r"--json\s+<bool>", out)
    assert re.search(r"--help\s", out) and not re.search(r"--help\s+<bool>", out)
    assert re.search(r"--seed\s+<int>", out)
    assert re.search(r"--workers\s+<int range>", out)
    assert "<bool>" not in _help() + _help("run") + _help("engines", "launch")


def test_loading_the_command_line_loads_no_heavy_library() -> None:
    # Every command registers its flags when replay.cli loads; what a command runs on is
    # imported inside it. A fresh interpreter: this one has loaded everything already.
    heavy = ("numpy", "pandas", "streamlit", "pyarrow", "plotly", "aiohttp", "openai")
    code = f"import sys, replay.cli; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == [], f"`import replay.cli` loads {out.stdout.strip()}"


def test_the_reports_default_formats_are_the_analysis_formats() -> None:
    # replay.commands.report writes them out so that its --help need not load the analysis.
    from analysis.report.build import FORMATS
    from replay.commands.report import DEFAULT_FORMATS

    assert ",".join(FORMATS) == DEFAULT_FORMATS
