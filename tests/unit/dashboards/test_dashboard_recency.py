"""The pages open the newest run (by the manifest's start), not the last name in the list."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboards.recency import newest, newest_first, started_at

# Names sort the other way round from their starts: the alphabetically last is the oldest.
STARTS = {
    "b-middle": "2026-12-02T09:00:00+00:00",
    "a-newest": "2026-12-03T09:00:00+00:00",
    "z-oldest": "2026-12-01T09:00:00+00:00",
}


def _runs(root: Path, synth: dict[str, Any]) -> None:
    for name, start in STARTS.items():
        run = synth["write_synthetic_run"](root / name, n_requests=200, seed=1)
        path = run / "manifest.json"
        data = json.loads(path.read_text())
        data["start"] = start
        path.write_text(json.dumps(data))


def test_newest_by_the_manifest_start(tmp_path: Path, synth: dict) -> None:
    _runs(tmp_path, synth)
    names = sorted(STARTS)
    assert newest(tmp_path, names) == "a-newest"
    assert newest_first(tmp_path, names) == ["a-newest", "b-middle", "z-oldest"]
    assert newest(tmp_path, []) is None


@pytest.mark.rundir_unchecked  # a broken manifest on purpose
def test_without_a_start_the_folder_time_counts(tmp_path: Path, synth: dict) -> None:
    _runs(tmp_path, synth)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    later = started_at(tmp_path / "a-newest")[0] + 3600
    os.utime(tmp_path / "broken", (later, later))
    assert newest(tmp_path, [*sorted(STARTS), "broken"]) == "broken"


def test_same_second_starts_are_told_apart_by_the_folder_time(tmp_path: Path, synth: dict) -> None:
    _runs(tmp_path, synth)
    for name in ("b-middle", "z-oldest"):
        data = json.loads((tmp_path / name / "manifest.json").read_text())
        data["start"] = STARTS["a-newest"]
        (tmp_path / name / "manifest.json").write_text(json.dumps(data))
    base = started_at(tmp_path / "a-newest")[1]
    for i, name in enumerate(("a-newest", "z-oldest", "b-middle")):
        os.utime(tmp_path / name, (base + i, base + i))
    assert newest_first(tmp_path, sorted(STARTS)) == ["b-middle", "z-oldest", "a-newest"]


def _page(module: str, root: str) -> None:
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize(
    ("page", "key"),
    [("replay", "replay_run"), ("sessions", "sessions_run"), ("pricing_whatif", "pricing_run")],
)
def test_pages_open_on_the_newest_run(tmp_path: Path, synth: dict, page: str, key: str) -> None:
    _runs(tmp_path, synth)
    at = AppTest.from_function(_page, args=(page, str(tmp_path)), default_timeout=60).run()
    assert not at.exception
    assert at.selectbox(key=key).value == "a-newest"
    assert at.selectbox(key=key).options == sorted(STARTS)  # the list stays in name order


@pytest.mark.usefixtures("fresh_cache")
def test_live_lists_running_runs_first_then_newest_first(tmp_path: Path, synth: dict) -> None:
    _runs(tmp_path, synth)
    running = synth["write_synthetic_run"](tmp_path / "m-running", n_requests=200, close=False)
    data = json.loads((running / "manifest.json").read_text())
    data["start"] = "2026-11-01T09:00:00+00:00"  # the oldest start, but still running
    (running / "manifest.json").write_text(json.dumps(data))
    at = AppTest.from_function(_page, args=("live", str(tmp_path)), default_timeout=60).run()
    assert not at.exception
    assert at.selectbox(key="live_run").options == [
        "m-running",
        "a-newest",
        "b-middle",
        "z-oldest",
    ]
