"""`replay run`'s final table says what it shows: the run's provenance in its title, the seed
band's rows and cliff verdict, the hit-rate note and the ceilings note in its caption, and no
row that repeats another."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from analysis.comparison import comparison_panel
from analysis.provenance import run_provenance
from replay.band import Band, EngineBand, SeedPoint, write_band
from replay.client.orchestrate import RunOutcome
from replay.commands.final_table import final_table

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rundir_v1" / "live"


def _run(tmp_path: Path, **engine: Any) -> RunOutcome:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["engines"]["vllm"].update(engine)
    return RunOutcome(run, "completed", summary, 10, [], {})


def _text(outcome: RunOutcome, band: Band | None = None) -> str:
    console = Console(width=400, record=True)
    console.print(final_table(outcome, band))
    return " ".join(console.export_text().split())  # the title and caption wrap to the table


def _band() -> Band:
    pts = [SeedPoint(k, h, 0.98, 1.0 + k, 1e4) for k, h in enumerate([0.8, 0.3, 0.7])]
    return Band(37, [0, 1, 2], "engine", "sim-engine", [EngineBand("vllm", "vllm", pts)], [0.98])


def test_the_title_says_what_the_run_is(tmp_path: Path) -> None:
    out = _text(_run(tmp_path))
    for words in (
        "emulated",
        "sample-weka.jsonl.gz",
        "÷16",
        "2 sessions",
        "seed 0",
        "agent-replay",
    ):
        assert words in out, words
    assert "load against the demo's not measured" in out


def test_the_band_rows_and_the_cliff(tmp_path: Path) -> None:
    outcome = _run(tmp_path)
    band = _band()
    write_band(outcome.run_dir, band)
    out = _text(outcome, band)
    assert "0.98× the demo's offered load" in out
    assert "seed band 0–2 (3 seeds, simulated, engine timing)" in out
    assert "30–80% (mean 60)" in out
    assert "2 of 3 (on the cliff)" in out
    assert "held the cliff (seeds)" in out
    # the provenance read back from the run directory carries the band too
    assert "0.98×" in run_provenance(outcome.run_dir).load


def test_hit_rate_apart_from_the_counter_is_explained_and_close_is_not(tmp_path: Path) -> None:
    far = _text(_run(tmp_path / "a", hit_rate=0.40, counter_hit_rate=0.30))
    assert "counter hit: the engine's own prefix-cache counters" in far
    assert "vllm +10.0" in far
    near = _text(_run(tmp_path / "b", hit_rate=0.40, counter_hit_rate=0.38))
    assert "counter hit: the engine's own" not in near


def test_a_saturated_engine_is_said_to_report_its_ceiling(tmp_path: Path) -> None:
    out = _text(_run(tmp_path, saturated=True))
    assert "saturated (vllm): throughput, revenue and profit are the engine's ceiling" in out


def test_no_row_repeats_another(tmp_path: Path) -> None:
    out = _text(_run(tmp_path))
    assert "tasks finished" in out
    assert "finished traj." not in out


def test_a_ratio_with_a_saturated_side_is_a_ratio_of_ceilings() -> None:
    import pandas as pd

    table = pd.DataFrame(
        {
            "engine": ["a", "b"],
            "output_tokens_per_min_per_gpu": [100.0, 200.0],
            "hit_rate": [0.8, 0.4],
            "saturated": [False, True],
        }
    )
    panel = comparison_panel(table).set_index(["engine", "metric"])
    assert panel.loc[("a", "output_tokens_per_min_per_gpu"), "ratio_label"] == (
        "2.00× worse (ratio of ceilings: saturated)"
    )
    assert panel.loc[("a", "hit_rate"), "ratio_label"] == "2.00× better"  # not a throughput
    calm = comparison_panel(table.assign(saturated=False)).set_index(["engine", "metric"])
    assert calm.loc[("a", "output_tokens_per_min_per_gpu"), "ratio_label"] == "2.00× worse"


def test_the_offload_hit_row_only_for_an_engine_whose_counters_carry_it(tmp_path: Path) -> None:
    assert "counter host+store hit" not in _text(_run(tmp_path / "a"))
    out = _text(_run(tmp_path / "b", counter_offload_hit_rate=0.25))
    assert "counter host+store hit │ 25.0% │" in out
