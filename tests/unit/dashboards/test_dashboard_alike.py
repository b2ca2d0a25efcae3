"""Compare groups runs that are alike and never joins unlike runs in one line: a trace-timing
simulation sweep and an emulated live run are two kinds, each its own lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analysis.sweeps import SWEEP_METRICS
from dashboards.alike import group, kind_of, window_words
from dashboards.figures import sweep_figure
from dashboards.views.compare import aggregate_groups
from replay.rundir_models import Manifest

SHA = "db0659326e09141c9ea124b805f11166ae50a61aade79c120ff42a45316d3058"


def _manifest(**config: Any) -> Manifest:
    """A simulator manifest on the bundled sample (trace timing), changed by `config` and the
    top-level keys given as `top_<key>`."""
    top = {k.removeprefix("top_"): config.pop(k) for k in list(config) if k.startswith("top_")}
    data: dict[str, Any] = {
        "executor": "simulator",
        "trace": {"path": "/x/sample-weka.jsonl.gz", "sha256": SHA, "token_scale": 16.0},
        "config": {
            "window": [120.0, 360.0],
            "duration_s": 360.0,
            "sessions": 2,
            "seed": 0,
            "subagents": "concurrent",
            "token_scale": 16.0,
            "model": "glm-5.3-flash",
            "timing": "trace",
            **config,
        },
        "engines": [{"name": "vllm"}],
        **top,
    }
    return Manifest.model_validate(data)


def test_runs_differing_in_sessions_and_seed_only_are_alike() -> None:
    base = kind_of(_manifest())
    assert kind_of(_manifest(sessions=16, seed=3)) == base
    assert base.label() == (
        "simulated, trace timing · 6 min run · window 2–6 min · sample-weka.jsonl.gz ÷16 · "
        "profile glm-5.3-flash"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"timing": "engine"},  # another executor: the engine clock
        {"duration_s": 2700.0},
        {"window": [60.0, 300.0]},
        {
            "token_scale": 1.0,
            "top_trace": {"path": "/x/sample-weka.jsonl.gz", "sha256": SHA, "token_scale": 1.0},
        },
        {"model": "other-profile"},
        {"subagents": "inline"},
        {"top_trace": {"path": "/x/sample-weka.jsonl.gz", "sha256": "0" * 64}},  # other corpus
    ],
)
def test_any_other_difference_makes_another_kind(change: dict[str, Any]) -> None:
    assert kind_of(_manifest(**change)).key() != kind_of(_manifest()).key()


def test_live_runs_are_told_apart_by_emulation_and_clock() -> None:
    live = {"top_executor": "live", "timing": None, "model": None}
    emulated = kind_of(_manifest(**live, top_emulated=True))
    real = kind_of(_manifest(**live, top_emulated=False))
    faster = kind_of(_manifest(**live, top_emulated=True, time_scale=20.0))
    assert (emulated.executor, real.executor) == ("emulated", "live")
    assert len({emulated.key(), real.key(), faster.key()}) == 3
    assert faster.label().startswith("emulated, clock ×20 · ")


def test_groups_are_lettered_by_size() -> None:
    sim = kind_of(_manifest())
    emulated = kind_of(_manifest(top_executor="live", top_emulated=True, sessions=48))
    letters = group({"emu": emulated, "sim-2": sim, "sim-4": sim, "sim-8": sim})
    assert letters == {"sim-2": "A", "sim-4": "A", "sim-8": "A", "emu": "B"}


def test_window_words() -> None:
    assert window_words(900.0, 2700.0) == "window 15–45 min"
    assert window_words(0.0, 90.0) == "window 0–1.5 min"
    assert window_words(0.0, float("inf")) == "whole run"


def _rows(group: str, sessions: list[int], hit: float) -> pd.DataFrame:
    """Sweep rows (`analysis.sweeps.sweep_rows`' columns) of one engine in one group; group A
    has no clock (no throughput), as a trace-timing simulation."""
    rows = pd.DataFrame({"group": group, "engine": "vllm", "sessions": sessions})
    for metric in SWEEP_METRICS:
        rows[metric] = float("nan")
    rows["hit_rate"] = hit
    rows["output_tokens_per_min_per_gpu"] = float("nan") if group == "A" else 1000.0
    return rows


def test_aggregation_never_averages_across_groups() -> None:
    # The same engine at the same session count in two kinds of run: two points, not one mean.
    table = pd.concat([_rows("A", [2, 4, 48], 0.9), _rows("B", [48], 0.3)], ignore_index=True)
    agg, _ = aggregate_groups(table)
    at48 = agg[agg["sessions"] == 48].set_index("group")["hit_rate"]
    assert at48.to_dict() == {"A": 0.9, "B": 0.3}


def test_a_line_never_spans_two_groups() -> None:
    table = pd.concat([_rows("A", [2, 4, 8], 0.9), _rows("B", [48], 0.3)], ignore_index=True)
    agg, _ = aggregate_groups(table)
    groups = {"A": "simulated, trace timing · window 2–6 min", "B": "emulated · window 15–45 min"}
    fig = sweep_figure(agg, "hit_rate", "Hit rate (%)", percent=True, groups=groups)
    lines = {(t.legendgroup, t.name): sorted(t.x) for t in fig.data}
    assert lines == {("A", "vllm"): [2, 4, 8], ("B", "vllm"): [48]}
    titles = {t.legendgroup: t.legendgrouptitle.text for t in fig.data}
    assert titles == {"A": f"A: {groups['A']}", "B": f"B: {groups['B']}"}
    # One engine, one colour; the group tells itself by its dash.
    assert len({t.line.color for t in fig.data}) == 1
    assert len({t.line.dash for t in fig.data}) == 2
    # A metric one group cannot know: only the other's line, and a note saying so.
    out = sweep_figure(agg, "output_tokens_per_min_per_gpu", "Output", groups=groups)
    assert [t.legendgroup for t in out.data] == ["B"]
    assert "no values for group A" in out.layout.annotations[0].text


def _unlike_folder(root: Path, synth: dict[str, Any]) -> None:
    """Three per-policy trace-timing simulation runs (2, 4, 8 sessions) and an emulated
    48-session run of 45 minutes: synthetic records under the manifests those executors
    write."""
    for sessions in (2, 4, 8):
        run = synth["write_synthetic_run"](
            root / "sweep" / f"vllm-s{sessions}-seed0",
            engines=("vllm",),
            seed=0,
            sessions=sessions,
            duration_s=360.0,
        )
        _patch(run, executor="simulator", config={"timing": "trace", "duration_s": 360.0})
    emulated = synth["write_synthetic_run"](root / "emulated-48", seed=0, sessions=48)
    _patch(emulated, executor="live", emulated=True, config={"duration_s": 2700.0})


def _patch(run: Path, config: dict[str, Any], **top: Any) -> None:
    path = run / "manifest.json"
    data = json.loads(path.read_text())
    data.update(top)
    data["trace"] = {"path": "/x/sample-weka.jsonl.gz", "sha256": SHA}
    data["config"].update(config)
    path.write_text(json.dumps(data))


def _compare(root: str) -> None:
    from pathlib import Path

    from dashboards.views import compare

    compare.render(Path(root))


@pytest.mark.usefixtures("fresh_cache")
def test_compare_page_draws_each_kind_apart_and_says_so(tmp_path: Path, synth: dict) -> None:
    _unlike_folder(tmp_path, synth)
    at = AppTest.from_function(_compare, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception and not at.error
    note = next(i.value for i in at.info if "unlike runs are never joined" in i.value)
    assert "**A**: simulated, trace timing · 6 min run · window 2–6 min" in note
    assert "**B**: emulated · 45 min run · window 15–45 min" in note
    table = at.dataframe[0].value
    assert dict(zip(table["run"], table["group"], strict=True)) == {
        "sweep/vllm-s2-seed0": "A",
        "sweep/vllm-s4-seed0": "A",
        "sweep/vllm-s8-seed0": "A",
        "emulated-48": "B",
    }
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        for trace in spec["data"]:
            assert trace.get("legendgroup") in ("A", "B")


@pytest.mark.usefixtures("fresh_cache")
def test_compare_page_of_alike_runs_says_they_are_joined(tmp_path: Path, synth: dict) -> None:
    for sessions in (2, 4):
        run = synth["write_synthetic_run"](
            tmp_path / f"vllm-s{sessions}", engines=("vllm",), seed=0, sessions=sessions
        )
        _patch(run, config={})
    at = AppTest.from_function(_compare, args=(str(tmp_path),), default_timeout=60).run()
    assert not at.exception and not at.error
    assert any("All chosen runs are alike" in c.value for c in at.caption)
    assert not any("unlike runs" in i.value for i in at.info)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(spec["data"]) == 1 and "window 15–45 min" in spec["layout"]["title"]["text"]
