"""Cancelled requests (cut off at a run's end) count as cancelled, never as completed: on the
Live page's table and chart, and on the Sessions page. And those pages say they count the whole
run, beside the window the report counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analysis.runs import load_run
from dashboards.figures import throughput_over_time_figure
from dashboards.sessions import session_overview
from dashboards.statuses import status_counts
from replay.rundir import RunWriter
from replay.rundir_models import Manifest

END_S = 600.0


def _row(i: int, status: str = "ok", engine: str = "vllm", **kw: Any) -> dict[str, Any]:
    """Request i of session i % 2, scheduled every 10 s; a cancelled one is cut off at the
    run's end (its `done_s` is the end, as the live client records it)."""
    t = 10.0 * i
    row = {
        "engine": engine,
        "session": i % 2,
        "trajectory": f"traj-{i % 2}",
        "agent": "main",
        "turn": i // 2,
        "scheduled_s": t,
        "sent_s": t,
        "first_token_s": t + 0.5,
        "done_s": END_S if status == "cancelled" else t + 2.0,
        "prompt_tokens": 1000,
        "cached_tokens": 500 if status == "ok" else None,
        "ideal_cached_tokens": 600,
        "output_tokens": 10,
        "expected_output_tokens": 10,
        "status": status,
        "tool_gap_s": 1.0,
        "priming": False,
        "attempt": 0,
    }
    row.update(kw)
    return row


def _write(run_dir: Path, cancelled: int = 4, close: bool = True) -> Path:
    manifest = Manifest.model_validate(
        {
            "engines": [{"name": "vllm", "gpus": 1}],
            "config": {"window": [120.0, END_S], "duration_s": END_S, "sessions": 2},
        }
    )
    w = RunWriter(run_dir, manifest).open()
    for i in range(50):
        w.add(_row(i))
    w.add(_row(50, status="error"))
    for i in range(51, 51 + cancelled):
        w.add(_row(i, status="cancelled"))
    w.close("completed" if close else "interrupted")
    return run_dir


def test_status_counts_keep_cancelled_apart() -> None:
    req = pd.DataFrame(
        [_row(i) for i in range(3)]
        + [_row(3, status="cancelled"), _row(4, status="timeout"), _row(5, engine="sglang")]
    )
    counts = status_counts(req).set_index("engine")
    assert counts.loc["vllm", "completed"] == 3
    assert counts.loc["vllm", "cancelled at the end"] == 1
    assert counts.loc["vllm", "timeouts"] == 1
    assert counts.loc["vllm", "recorded"] == 5
    assert counts.loc["sglang", "completed"] == 1 and counts.loc["sglang", "recorded"] == 1
    assert "other" not in counts.columns


def test_the_throughput_chart_does_not_count_cancelled_requests() -> None:
    ok = [_row(i, done_s=55.0) for i in range(6)]
    cut = [_row(10 + i, status="cancelled", done_s=55.0) for i in range(20)]
    fig = throughput_over_time_figure(pd.DataFrame(ok + cut), bins=1)
    (line,) = fig.data
    assert list(line.y) == pytest.approx([6.0])  # one 60 s bin: 6 completed, not 26
    assert "cancelled and failed requests not counted" in fig.layout.title.text
    assert "whole run" in fig.layout.title.text


def test_the_session_overview_counts_cancelled_apart(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path / "run"))
    ov = session_overview(run.requests, "vllm").set_index("session")
    assert int(ov["requests"].sum()) == 55
    assert int(ov["completed"].sum()) == 50
    assert int(ov["cancelled"].sum()) == 4
    assert ov.loc[0, "hit_rate"] == pytest.approx(0.5)  # completed requests only


def _page(module: str, root: str) -> None:
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
def test_live_page_counts_cancelled_as_cancelled(tmp_path: Path) -> None:
    _write(tmp_path / "run", cancelled=7)
    at = AppTest.from_function(_page, args=("live", str(tmp_path)), default_timeout=60).run()
    assert not at.exception and not at.error
    counts = at.dataframe[0].value.set_index("engine")  # how requests ended, first
    assert counts.loc["vllm", "completed"] == 50
    assert counts.loc["vllm", "cancelled at the end"] == 7
    assert counts.loc["vllm", "errors"] == 1
    # The whole run, said as such, beside the window the report counts.
    assert [h.value for h in at.subheader] == ["Whole run so far"]
    caption = next(c.value for c in at.caption if c.value.startswith("Everything below"))
    assert "whole run so far" in caption and "measured window 2–10 min" in caption
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(chart["data"]) == 1
    assert "cancelled and failed requests not counted" in chart["layout"]["title"]["text"]


@pytest.mark.usefixtures("fresh_cache")
def test_sessions_page_labels_whole_run_figures(tmp_path: Path) -> None:
    _write(tmp_path / "run")
    at = AppTest.from_function(_page, args=("sessions", str(tmp_path)), default_timeout=60).run()
    assert not at.exception and not at.error
    labels = [m.label for m in at.metric]
    assert labels == [
        "Requests (whole run)",
        "Trajectories (whole run)",
        "Hit rate (whole run)",
        "Redundant tokens (whole run)",
    ]
    requests = at.metric[0]
    assert "cancelled at the run's end" in requests.proto.help
    assert any("not the measured window 2–10 min" in c.value for c in at.caption)
