"""Every page through Streamlit's AppTest, on real run directories written to disk."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[3] / "dashboards" / "app.py"
TIMEOUT = 60  # seconds per script run: generous for a loaded 2-core CI machine


def _page(module: str, root: str) -> None:
    # Runs as a script inside AppTest: imports must be inside.
    import importlib
    from pathlib import Path

    importlib.import_module(f"dashboards.views.{module}").render(Path(root))


def page_test(module: str, root: Path) -> AppTest:
    return AppTest.from_function(_page, args=(module, str(root)), default_timeout=TIMEOUT)


def _errors(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.error]


@pytest.fixture(autouse=True)
def _clean(fresh_cache: None) -> None:
    """Each test starts with an empty data cache."""


def test_app_opens_on_replay_with_a_panel_per_engine(
    runs_root: Path, app_argv: Callable[[Path], None]
) -> None:
    app_argv(runs_root)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert not _errors(at)
    assert [h.value for h in at.header] == ["Replay"]
    assert [s.value for s in at.subheader] == ["flashstate", "vllm", "sglang"]
    labels = [m.label for m in at.metric]
    assert labels.count("Output/min/GPU") == 3
    assert labels.count("User $/1M in") == 3
    # Each engine is compared with the best of the others.
    deltas = [str(m.proto.delta) for m in at.metric]
    assert all(d.endswith(" vs best other") for d in deltas)
    # Ratios where both are positive, in the metric's direction: "N× better" or "N× worse".
    assert (
        sum(d.endswith(("× better vs best other", "× worse vs best other")) for d in deltas) >= 18
    )
    # Green when better, red when worse, whichever way the metric points (TTFT: lower).
    for m in at.metric:
        if "× better" in m.proto.delta:
            assert m.proto.color == m.proto.GREEN, m.proto.delta
        elif "× worse" in m.proto.delta:
            assert m.proto.color == m.proto.RED, m.proto.delta
    assert str(runs_root) in at.sidebar.caption[0].value  # tmp is outside the cwd: in full


def test_app_shows_a_folder_under_the_cwd_relative(
    runs_root: Path, app_argv: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(runs_root.parent)
    app_argv(Path(runs_root.name))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert at.sidebar.caption[0].value == f"Runs folder: `{runs_root.name}`"


def _counted_caption(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("At "))


def test_replay_slider_counts_fewer_requests_earlier(runs_root: Path) -> None:
    at = page_test("replay", runs_root).run()
    assert not at.exception
    at.selectbox(key="replay_run").set_value("small").run()
    full = _counted_caption(at)
    slider = at.slider(key="replay_t")
    slider.set_value(slider.max * 2 // 3).run()  # past the measured window's start
    assert not at.exception
    early = _counted_caption(at)

    def counted(text: str) -> int:
        return int(text.split(": ")[1].split(" ")[0].replace(",", ""))

    assert 0 < counted(early) < counted(full)


def test_replay_play_control_advances_time(runs_root: Path) -> None:
    at = page_test("replay", runs_root).run()
    at.select_slider(key="replay_speed").set_value(100).run()
    end = at.slider(key="replay_t").value
    at.button(key="replay_play").click().run()
    # At the end, Play starts again from 0; the next frame moves forward at 100×.
    assert at.session_state["replay_playing"] is True
    time.sleep(0.3)
    at.run()
    t = at.slider(key="replay_t").value
    assert 0 < t < end
    assert at.button(key="replay_play").label == "Pause"
    at.button(key="replay_play").click().run()
    assert at.session_state["replay_playing"] is False


def test_replay_chart_is_opt_in(runs_root: Path) -> None:
    at = page_test("replay", runs_root).run()
    assert not at.get("plotly_chart")
    at.toggle(key="replay_chart").set_value(True).run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1


def test_replay_counts_the_measured_window_by_default(runs_root: Path) -> None:
    at = page_test("replay", runs_root).run()
    assert at.toggle[0].value is True
    assert "(the measured window)" in _counted_caption(at)
    at.slider(key="replay_t").set_value(0).run()
    assert not at.exception and not _errors(at)
    assert any("The count starts at 900 s" in i.value for i in at.info)
    at.toggle[0].set_value(False).run()  # from the run's start: counts the warm-up as well
    assert not at.exception and not _errors(at)
    assert "(the measured window)" not in _counted_caption(at)


def test_single_engine_run_has_panels_without_comparisons(tmp_path: Path, synth: dict) -> None:
    synth["write_synthetic_run"](tmp_path / "solo", n_requests=300, engines=("vllm",))
    at = page_test("replay", tmp_path).run()
    assert not at.exception and not _errors(at)
    assert [s.value for s in at.subheader] == ["vllm"]
    assert len(at.metric) == 8
    assert all(not m.proto.delta for m in at.metric)  # no other engine to compare with


def test_replay_of_a_run_still_being_written(tmp_path: Path, synth: dict) -> None:
    synth["write_synthetic_run"](tmp_path / "running", n_requests=300, close=False)
    at = page_test("replay", tmp_path).run()
    assert not at.exception and not _errors(at)
    assert len(at.subheader) == 3


def test_compare_page_plots_every_run(runs_root: Path) -> None:
    at = page_test("compare", runs_root).run()
    assert not at.exception and not _errors(at)
    table = at.dataframe[0].value
    assert sorted(set(table["run_id"])) == ["larger", "small"]
    assert len(table) == 6  # two runs × three engines
    assert len(at.get("plotly_chart")) == 5
    # The field's figures in the table say where their definitions come from (issue 35).
    assert any("SemiAnalysisAI/InferenceX" in c.value for c in at.caption)


def test_pricing_sliders_move_profit_by_the_rate_change(runs_root: Path) -> None:
    at = page_test("pricing_whatif", runs_root).run()
    assert not at.exception and not _errors(at)
    before = at.dataframe[0].value.set_index("engine")["profit_per_gpu_hour"]
    rate = next(s for s in at.slider if s.label.startswith("GPU rate"))
    assert rate.value == pytest.approx(8.60)
    rate.set_value(10.60).run()
    after = at.dataframe[0].value.set_index("engine")["profit_per_gpu_hour"]
    assert (before - after).to_numpy() == pytest.approx([2.0, 2.0, 2.0])
    # No cached discount: cached tokens cost full input, so every user pays the input price.
    disc = next(s for s in at.slider if s.label.startswith("Cached discount"))
    disc.set_value(0.0).run()
    costs = at.dataframe[0].value["user_cost_per_m_input"]
    assert costs.to_numpy() == pytest.approx([0.15, 0.15, 0.15])


def test_pricing_sheet_choice(runs_root: Path) -> None:
    at = page_test("pricing_whatif", runs_root).run()
    at.selectbox(key="whatif_sheet").set_value("openai-style").run()
    assert not at.exception and not _errors(at)
    inp = next(s for s in at.slider if s.label.startswith("Input price"))
    assert inp.value == pytest.approx(2.0)


def test_sessions_page_drills_into_a_slot(runs_root: Path) -> None:
    at = page_test("sessions", runs_root).run()
    assert not at.exception and not _errors(at)
    at.selectbox(key="sessions_engine").set_value("vllm").run()
    at.selectbox(key="sessions_slot").set_value(1).run()
    turns = at.dataframe[0].value
    assert {"prompt_tokens", "cached_tokens", "ideal_cached_tokens", "redundant_tokens"} <= set(
        turns.columns
    )
    assert {"ttft_s", "tool_gap_s"} <= set(turns.columns)
    assert len(turns) > 0
    assert not at.exception
    # Narrow to one trajectory of the slot.
    first = turns["trajectory"].iloc[0]
    at.selectbox(key="sessions_trajectory").set_value(first).run()
    narrowed = at.dataframe[0].value
    assert set(narrowed["trajectory"]) == {first}
    assert len(narrowed) == (turns["trajectory"] == first).sum()


def test_live_page_shows_status_and_refreshes_on_change(tmp_path: Path, synth: dict) -> None:
    run = synth["write_synthetic_run"](tmp_path / "live-run", n_requests=300, close=False)
    at = page_test("live", tmp_path).run()
    assert not at.exception and not _errors(at)
    assert at.metric[0].value == "running"
    before = at.metric[1].value
    synth["write_synthetic_run"](tmp_path / "other", n_requests=600, close=True)
    # The run grows: rewrite it bigger (new stamp), and the next rerun shows it.
    import shutil

    shutil.rmtree(run)
    synth["write_synthetic_run"](run, n_requests=900, close=True)
    at.run()
    assert at.metric[0].value == "completed"
    assert at.metric[1].value != before


def test_live_page_refuses_paths_outside_the_folder(runs_root: Path) -> None:
    at = page_test("live", runs_root).run()
    at.text_input(key="live_path").input("../../etc").run()
    assert not at.exception
    assert any("outside the runs folder" in e for e in _errors(at))
    assert not at.metric  # nothing was opened


def test_deep_link_outside_the_folder_is_refused(runs_root: Path) -> None:
    at = page_test("replay", runs_root)
    at.query_params["run"] = "../"
    at.run()
    assert not at.exception
    assert any("Ignoring `?run=../`" in e and "outside the runs folder" in e for e in _errors(at))


def test_deep_link_inside_opens_that_run(runs_root: Path) -> None:
    at = page_test("sessions", runs_root)
    at.query_params["run"] = "small"
    at.run()
    assert at.selectbox(key="sessions_run").value == "small"


def _broken_runs(root: Path, synth: dict) -> None:
    synth["write_synthetic_run"](root / "ok", n_requests=200)
    (root / "bad-manifest").mkdir()
    (root / "bad-manifest" / "manifest.json").write_text("{not json")
    (root / "no-requests").mkdir()
    (root / "no-requests" / "manifest.json").write_text('{"status": "running"}')
    bad_pq = synth["write_synthetic_run"](root / "bad-parquet", n_requests=200)
    (bad_pq / "requests.jsonl").unlink()
    (bad_pq / "requests.parquet").write_bytes(b"PAR1 this is not parquet")


BROKEN = {
    "bad-manifest": "manifest.json: not valid JSON",
    "no-requests": "requests.parquet: missing",
    "bad-parquet": "requests.parquet: unreadable parquet",
}


@pytest.mark.rundir_unchecked  # broken runs on purpose
@pytest.mark.parametrize("page", ["replay", "pricing_whatif", "sessions"])
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_run_gets_a_message_not_a_traceback(
    tmp_path: Path, synth: dict, page: str, name: str
) -> None:
    _broken_runs(tmp_path, synth)
    at = page_test(page, tmp_path)
    at.query_params["run"] = name
    at.run()
    assert not at.exception
    errors = _errors(at)
    assert len(errors) == 1 and errors[0].startswith("Cannot open this run:")
    assert BROKEN[name] in errors[0]


@pytest.mark.rundir_unchecked  # broken runs on purpose
def test_compare_skips_broken_runs_with_a_warning(tmp_path: Path, synth: dict) -> None:
    _broken_runs(tmp_path, synth)
    at = page_test("compare", tmp_path).run()
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 3 and all(w.startswith("Skipped ") for w in warnings)
    assert set(at.dataframe[0].value["run_id"]) == {"ok"}


@pytest.mark.rundir_unchecked  # broken runs on purpose
def test_live_broken_run_says_it_retries(tmp_path: Path, synth: dict) -> None:
    _broken_runs(tmp_path, synth)
    at = page_test("live", tmp_path).run()
    at.text_input(key="live_path").input("no-requests").run()
    assert not at.exception
    assert "requests.parquet: missing" in _errors(at)[0]
    assert "retries" in at.caption[-1].value


@pytest.mark.parametrize("page", ["replay", "compare", "pricing_whatif", "sessions", "live"])
def test_empty_runs_folder_explains_what_to_do(tmp_path: Path, page: str) -> None:
    at = page_test(page, tmp_path).run()
    assert not at.exception
    assert any("No run directories under" in i.value for i in at.info)


@pytest.mark.parametrize("page", ["replay", "pricing_whatif"])
def test_broken_price_data_is_a_message(
    runs_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    (tmp_path / "pricing").mkdir()
    (tmp_path / "pricing" / "sheets.yaml").write_text("default: x\nsheets:\n  x: {input: -1}\n")
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(tmp_path))
    at = page_test(page, runs_root).run()
    assert not at.exception
    errors = _errors(at)
    assert len(errors) == 1 and errors[0].startswith("Cannot read the price data:")
    assert "sheets.yaml" in errors[0]
    if page == "replay":  # the panels still show, without dollars
        assert len(at.subheader) == 3
        profit = [m.value for m in at.metric if m.label == "Profit/GPU-h"]
        assert profit == ["—", "—", "—"]


def test_replay_end_position_counts_every_request(runs_root: Path) -> None:
    from analysis.runs import load_run

    at = page_test("replay", runs_root).run()
    at.selectbox(key="replay_run").set_value("small").run()
    at.toggle[0].set_value(False).run()  # from the run's start: the racing counters
    run = load_run(runs_root / "small")
    measured = run.requests[~run.requests["priming"].astype(bool)]
    counted = int(_counted_caption(at).split(": ")[1].split(" ")[0].replace(",", ""))
    assert at.slider(key="replay_t").value >= measured["done_s"].max()
    assert counted == measured["first_token_s"].notna().sum()
