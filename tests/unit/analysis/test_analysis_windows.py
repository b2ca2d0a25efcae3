"""A window past the data (issue 24): `replay price` and `replay report` refuse one that
starts after the run's data ends and clip one that ends after it, with a note, dividing the
rates by the time actually covered; an interrupted run's own window is clipped the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis.metrics import resolve_window, window_metrics
from analysis.runs import covered_s, load_run
from replay.cli import app
from replay.rundir import RunDirError
from replay.windows import WindowError


def _run(builder: Any, status: str | None = None) -> Path:
    b = builder()
    for i in range(18):  # one request every 10 s over a 3-minute run
        b.req("a", 10.0 * i, session=i % 3, turn=i, prompt=1000, cached=500, ideal=500)
    run_dir = b.write(config={"window": [60.0, 180.0], "duration_s": 180.0})
    if status is not None:
        man = json.loads((run_dir / "manifest.json").read_text())
        man["status"] = status
        (run_dir / "manifest.json").write_text(json.dumps(man))
    return run_dir


def test_a_window_past_the_end_is_clipped_and_rates_use_the_covered_time(builder: Any) -> None:
    run = load_run(_run(builder))
    assert covered_s(run) == 180.0
    win = resolve_window(run, (60.0, 6000.0))
    assert (win.start_s, win.end_s) == (60.0, 180.0) and "clipped" in win.source
    assert any("ends after the data: clipped to 60-180 s" in n for n in run.notes)
    wide = window_metrics(run, (60.0, 6000.0)).set_index("engine")
    own = window_metrics(run, (60.0, 180.0)).set_index("engine")
    assert wide.loc["a", "prefill_tokens_per_min_per_gpu"] == pytest.approx(
        own.loc["a", "prefill_tokens_per_min_per_gpu"]
    )
    assert wide.loc["a", "window_s"] == 120.0


def test_a_window_that_starts_after_the_data_is_refused(builder: Any) -> None:
    run = load_run(_run(builder))
    with pytest.raises(RunDirError, match=r"window 5-10 min \(argument\) starts after the run"):
        resolve_window(run, (300.0, 600.0))


def test_an_interrupted_run_covers_only_up_to_its_last_event(builder: Any) -> None:
    run = load_run(_run(builder, status="interrupted"))
    end = covered_s(run)
    assert end is not None and 172.0 <= end < 172.01  # the last done_s: 170 + 2
    win = resolve_window(run, None)
    assert win.end_s == end and "clipped" in win.source
    assert resolve_window(run, win) == win  # passed on again (price, report): kept


def test_an_interrupted_run_that_stopped_before_its_window_is_noted_not_refused(
    builder: Any,
) -> None:
    """The torn-tail probe: killed before its own window began; price still reads it."""
    b = builder()
    b.req("a", 10.0)
    run_dir = b.write(config={"window": [200.0, 600.0], "duration_s": 600.0})
    man = json.loads((run_dir / "manifest.json").read_text())
    man["status"] = "interrupted"
    (run_dir / "manifest.json").write_text(json.dumps(man))
    run = load_run(run_dir)
    win = resolve_window(run, None)
    assert (win.start_s, win.end_s) == (200.0, 600.0) and resolve_window(run, win) == win
    assert any("lies after the run's data ends" in n for n in run.notes)
    assert window_metrics(run, win).set_index("engine").loc["a", "requests"] == 0


def test_price_and_report_say_the_clip(builder: Any, tmp_path: Path) -> None:
    run_dir = _run(builder)
    res = CliRunner().invoke(app, ["price", str(run_dir), "--gpu", "b200", "--window", "1-100"])
    assert res.exit_code == 0, res.output + res.stderr
    said = " ".join((res.output + res.stderr).split())
    assert "window 60–180 s" in said and "clipped to 60-180 s" in said
    res = CliRunner().invoke(app, ["price", str(run_dir), "--gpu", "b200", "--window", "5-10"])
    assert res.exit_code == 2 and "--window 5-10 min) starts after the run ends" in res.stderr
    out = tmp_path / "rep"
    res = CliRunner().invoke(
        app, ["report", str(run_dir), "--out", str(out), "--no-figures", "--format", "md",
              "--window", "1-100"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output + res.stderr
    text = (out / "report.md").read_text()
    assert "60–180 s" in text and "clipped to the data's end at 180 s" in text


def test_a_window_with_no_measured_request_is_noted(builder: Any) -> None:
    """The mid-run endpoint hang: requests before the window, none finished inside it; the
    run's summary (what `replay run` prints, and the report) says so."""
    from analysis.summary import build_summary

    b = builder()
    for i in range(5):
        b.req("a", 10.0 * i, turn=i)
    b.req("a", 70.0, turn=9, first=None, done=None, status="cancelled")
    run = load_run(b.write(config={"window": [60.0, 180.0], "duration_s": 180.0}))
    notes = build_summary(run).notes
    assert any(n.startswith("a: no request was measured in the window") for n in notes), notes


def test_a_commands_window_text_is_read_in_minutes_and_refused_naming_the_flag(
    builder: Any,
) -> None:
    run = load_run(_run(builder))
    win = resolve_window(run, "1-2")  # `--window` as given (price, report): minutes
    assert (win.start_s, win.end_s, win.source) == (60.0, 120.0, "--window 1-2 min")
    with pytest.raises(WindowError, match="--window 9-3: need 0 ≤ A < B"):
        resolve_window(run, "9-3")
    with pytest.raises(WindowError, match="--window x: expected A-B in minutes"):
        resolve_window(run, "x")
