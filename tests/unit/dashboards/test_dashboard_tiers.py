"""Hits by cache tier on the dashboard (issue 34): the Replay page shows a table of them for a
run whose cache has tiers, and nothing new for one without (plain function and AppTest on
real run directories)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis import load_run, window_metrics
from dashboards.tiers import COLUMNS, tier_table
from replay.records import RequestRecord
from replay.rundir import RunWriter
from replay.rundir_models import Manifest


def _write(root: Path, name: str, tiered: bool) -> Path:
    """One engine, 60 requests of 1,000 prompt tokens with 500 cached; tiered: 100 of them
    from host memory on every request."""
    with RunWriter(
        root / name,
        Manifest.model_validate({"engines": [{"name": "e"}], "config": {"window": [0, 600]}}),
    ) as w:
        for i in range(60):
            t = i * 10.0
            tier = {"cached_tokens_host": 100, "cached_tokens_external": 0} if tiered else {}
            w.add(
                RequestRecord(
                    engine="e",
                    session=i,
                    trajectory=f"t{i}",
                    agent="main",
                    turn=0,
                    scheduled_s=t,
                    sent_s=t,
                    first_token_s=t + 1,
                    done_s=t + 2,
                    prompt_tokens=1000,
                    cached_tokens=500,
                    ideal_cached_tokens=500,
                    output_tokens=10,
                    expected_output_tokens=10,
                    **tier,  # type: ignore[arg-type]
                )
            )
    return root / name


def test_tier_table_for_a_tiered_run_and_none_otherwise(tmp_path: Path) -> None:
    tiered = tier_table(window_metrics(load_run(_write(tmp_path, "t", True))))
    assert tiered is not None
    assert list(tiered.columns) == list(COLUMNS.values())
    (row,) = tiered.to_dict(orient="records")
    assert row["engine"] == "e" and row["hit rate"] == "50.0%"
    assert row["GPU hit"] == "40.0%" and row["host hit"] == "10.0%"
    assert row["of hits from host"] == "20.0%" and row["host-hit requests"] == "60"
    assert tier_table(window_metrics(load_run(_write(tmp_path, "u", False)))) is None


def _page(root: str) -> None:
    from pathlib import Path

    from dashboards.views import replay

    replay.render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("tiered", [True, False])
def test_replay_page_shows_hits_by_tier_only_for_a_tiered_run(tmp_path: Path, tiered: bool) -> None:
    _write(tmp_path, "r", tiered)
    at = AppTest.from_function(_page, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception
    labels = [e.label for e in at.expander]
    shown = [label for label in labels if label.startswith("Cache hits by tier")]
    assert len(shown) == (1 if tiered else 0), labels
