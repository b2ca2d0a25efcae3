from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from analysis.runs import load_run
from dashboards.sessions import TURN_COLUMNS, session_overview, session_turns
from replay.rundir import RunWriter
from replay.rundir_models import Manifest


def _row(session: int, turn: int, **kw: Any) -> dict[str, Any]:
    row = {
        "engine": "vllm",
        "session": session,
        "trajectory": "traj-abcdefgh",
        "agent": "main",
        "turn": turn,
        "scheduled_s": 10.0 * turn,
        "sent_s": 10.0 * turn,
        "first_token_s": 10.0 * turn + 0.5,
        "done_s": 10.0 * turn + 2.0,
        "prompt_tokens": 1000 * (turn + 1),
        "cached_tokens": 800 * turn,
        "ideal_cached_tokens": 900 * turn,
        "output_tokens": 10,
        "expected_output_tokens": 10,
        "status": "ok",
        "tool_gap_s": 3.0 * turn,
        "priming": False,
        "attempt": 0,
    }
    row.update(kw)
    return row


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    w = RunWriter(
        tmp_path / "run", Manifest.model_validate({"engines": [{"name": "vllm", "gpus": 1}]})
    ).open()
    w.add(_row(0, 0, priming=True))  # warms the context; not measured
    w.add(_row(0, 2))
    w.add(_row(0, 1))  # written out of order: the page sorts by scheduled time
    w.add(_row(0, 3, agent="sub-123456789", resume_pos=2000))
    w.add(_row(1, 1, prompt_tokens=500, cached_tokens=None))
    w.close()
    return tmp_path / "run"


def test_turns_in_scheduled_order_with_redundant_tokens(run_dir: Path) -> None:
    turns = session_turns(load_run(run_dir), "vllm", 0)
    assert tuple(turns.columns) == TURN_COLUMNS
    assert list(turns["turn"]) == [1, 2, 3]  # priming left out, sorted
    first = turns.iloc[0]
    assert first["prompt_tokens"] == 2000
    assert first["cached_tokens"] == 800
    assert first["ideal_cached_tokens"] == 900
    assert first["redundant_tokens"] == 100  # ideal − reported cached (no resume_pos)
    assert first["computed_tokens"] == 2000 - 800 - 100
    assert first["ttft_s"] == pytest.approx(0.5)
    assert first["tool_gap_s"] == pytest.approx(3.0)
    # Where the executor knows the resume position, redundant = ideal − resume.
    sub = turns.iloc[2]
    assert sub["redundant_tokens"] == 2700 - 2000
    assert sub["label"] == "3. traj-abc·sub-12#3"


def test_empty_slot_gives_the_columns(run_dir: Path) -> None:
    turns = session_turns(load_run(run_dir), "vllm", 42)
    assert turns.empty and tuple(turns.columns) == TURN_COLUMNS


def test_overview_per_slot(run_dir: Path) -> None:
    ov = session_overview(load_run(run_dir).requests, "vllm").set_index("session")
    assert ov.loc[0, "requests"] == 3
    assert ov.loc[0, "hit_rate"] == pytest.approx((800 + 1600 + 2400) / (2000 + 3000 + 4000))
    assert math.isnan(ov.loc[1, "hit_rate"])  # cached unknown: no hit rate (as analysis)
    assert session_overview(load_run(run_dir).requests, "sglang").empty
