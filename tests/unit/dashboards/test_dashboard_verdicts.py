"""The verdicts on the dashboard: the plain table and warnings, and the Replay page showing a
saturated engine's warning (AppTest on a real run directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis import load_run, window_metrics
from analysis.verdicts import with_verdicts
from dashboards.verdicts import unknown_notes, verdict_table, warnings
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest


def _write(root: Path, name: str, manifest: dict[str, object]) -> Path:
    """Engine "busy": TTFT grows 5 s a minute (records-based saturation); "idle": steady."""
    with RunWriter(
        root / name,
        Manifest.model_validate({"engines": [{"name": "busy"}, {"name": "idle"}], **manifest}),
    ) as w:
        for engine, growth in (("busy", 5.0), ("idle", 0.0)):
            for i in range(60):
                t = i * 10.0
                first = t + 2.0 + growth * t / 60.0
                w.add(
                    RequestRecord(
                        engine=engine,
                        session=i,
                        trajectory=f"t{i}",
                        agent="main",
                        turn=0,
                        scheduled_s=t,
                        sent_s=t,
                        first_token_s=first,
                        done_s=first + 1,
                        prompt_tokens=1000,
                        cached_tokens=500,
                        ideal_cached_tokens=500,
                        output_tokens=10,
                        expected_output_tokens=10,
                    )
                )
    return root / name


def test_table_and_warnings(tmp_path: Path) -> None:
    run = load_run(_write(tmp_path, "r", {"config": {"window": [0, 600]}}))
    metrics = with_verdicts(run, window_metrics(run), run.default_window())
    table = verdict_table(metrics).set_index("engine")
    assert table.loc["busy", "saturated"] == "YES" and table.loc["idle", "saturated"] == "no"
    assert table.loc["idle", "drift"] == "n/a"  # not a live run
    ((level, text),) = warnings(metrics)
    assert level == "error" and text.startswith("busy: SATURATED")
    assert any("not a live run" in n for n in unknown_notes(metrics))


def _page(root: str) -> None:
    from pathlib import Path

    from dashboards.views import replay

    replay.render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
def test_replay_page_warns_about_a_saturated_engine(tmp_path: Path) -> None:
    _write(tmp_path, "r", {"config": {"window": [0, 600]}})
    at = AppTest.from_function(_page, args=(str(tmp_path),), default_timeout=60).run()
    errors = [str(e.value) for e in at.error]
    assert any(e.startswith("busy: SATURATED") for e in errors), errors
    assert not any("idle" in e for e in errors)
