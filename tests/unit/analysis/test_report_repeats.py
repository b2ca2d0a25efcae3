"""A live run of a seed is a measurement; a copy of its directory is not (`analysis.measurements`).

`replay report` counts a copy of a live run (its run id again) once, and a simulated seed run
twice once (the simulator is deterministic), but keeps two live or emulated runs of one seed
with distinct run ids as two measurements: their ± is run-to-run noise, and the paper table,
its notes and the figures say "repeats", not seeds ("1 seed × 2 repeats", "2 seeds × 2
repeats"). Real run directories: live ones written with `RunWriter` (conftest's builder),
simulated ones by `replay simulate`."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis import load_run
from analysis.report.content import analyze
from analysis.report.figures import ttft_cdf, versus_sessions
from analysis.sweeps import aggregate_sweep, sweep_rows
from replay.cli import app

Builder = Callable[[], Any]


def _live(builder: Builder, name: str, seed: int, cached: int, emulated: bool = False) -> Path:
    """A live run of engine `vllm` at 4 sessions and `seed` whose hit rate is cached / 1000;
    its run id is `name` (what `RunWriter` gives a run that names none), its start now."""
    b = builder()
    for turn, t in enumerate((10.0, 40.0, 70.0)):
        b.req("vllm", t, turn=turn, prompt=1000, cached=cached, ideal=1000)
    return b.write(
        name,
        executor="live",
        emulated=emulated,
        engines=[{"name": "vllm", "gpus": 1, "kind": "vllm"}],
        config={"window": [0, 120], "duration_s": 120, "sessions": 4, "seed": seed},
    )


def _report(tmp: Path, *runs: Path) -> Path:
    out = tmp / "rep"
    res = CliRunner().invoke(app, ["report", *map(str, runs), "--out", str(out), "--no-static",
                                   "--no-figures", "--format", "md"])  # fmt: skip
    said = " ".join((res.output + res.stderr).split())
    assert res.exit_code == 0, said
    return out


def _sweep(out: Path) -> list[dict[str, str]]:
    with open(out / "tables" / "sweep.csv", newline="") as f:
        return list(csv.DictReader(f))


def _md(out: Path) -> str:
    return " ".join((out / "report.md").read_text().split())


def test_a_copy_of_a_live_run_is_one_measurement(builder: Builder, tmp_path: Path) -> None:
    run = _live(builder, "live-a", 0, 600)
    copy = tmp_path / "copied" / "live-a-copy"
    shutil.copytree(run, copy)
    assert load_run(copy).run_id == "live-a"  # a copy keeps its run id
    out = _report(tmp_path, run, copy)
    (row,) = _sweep(out)
    assert (row["runs"], row["spread"], row["se_source"]) == ("1", "1 seed", "time bins")
    assert float(row["hit_rate"]) == pytest.approx(0.6)
    assert (
        "one measurement repeated (copies of one live run, with its run id and start), "
        "counted once" in _md(out)
    )


def test_two_live_runs_of_one_seed_are_two_repeats(builder: Builder, tmp_path: Path) -> None:
    first, second = _live(builder, "live-a", 0, 600), _live(builder, "live-b", 0, 800)
    out = _report(tmp_path, first, second)
    (row,) = _sweep(out)
    assert row["runs"] == "2"  # the second live run is a measurement, not a copy
    assert (row["spread"], row["se_source"]) == ("1 seed × 2 repeats", "repeats")
    assert float(row["hit_rate"]) == pytest.approx(0.7)  # both measurements, averaged
    assert float(row["hit_rate_se"]) == pytest.approx(0.1)  # their run-to-run spread
    md = _md(out)
    assert "the same configuration and seed (0) measured 2 times" in md
    assert "mean ± SE across repeats of one seed: run-to-run noise" in md
    assert "| Runs | Seeds × repeats |" in md
    assert "| vllm | 4 | 2 | 1 seed × 2 repeats |" in md
    assert "| repeats |" in md and "across seeds)" not in md
    assert "| Seeds |" not in md  # two runs of one seed are never "2 seeds"


def test_emulated_reruns_are_repeats_too(builder: Builder, tmp_path: Path) -> None:
    runs = [load_run(_live(builder, n, 3, c, emulated=True)) for n, c in (("e1", 500), ("e2", 900))]
    (row,) = aggregate_sweep(sweep_rows(runs)).to_dict(orient="records")
    assert (row["runs"], row["spread"], row["se_source"]) == (2, "1 seed × 2 repeats", "repeats")


def test_two_simulated_runs_of_one_seed_are_one_measurement(tmp_path: Path) -> None:
    """The simulator is deterministic: the same seed twice is the same result, counted once
    even under two run ids."""
    dirs = []
    for out in ("sim-1", "sim-2"):
        res = CliRunner().invoke(app, ["simulate", "--policies", "vllm", "--sessions", "4",
                                       "--duration-min", "3", "--timing", "engine",
                                       "--out", str(tmp_path / out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        (run,) = [p for p in (tmp_path / out).iterdir() if p.is_dir()]
        dirs.append(run)
    renamed = tmp_path / "sim-2" / "another-id"
    manifest = json.loads((dirs[1] / "manifest.json").read_text())
    manifest["run_id"] = "another-id"
    dirs[1].rename(renamed)
    (renamed / "manifest.json").write_text(json.dumps(manifest))
    out = _report(tmp_path, dirs[0], renamed)
    (row,) = _sweep(out)
    assert (row["runs"], row["spread"], row["se_source"]) == ("1", "1 seed", "time bins")
    md = _md(out)
    assert "a simulation, which is deterministic: the same seed, the same result" in md
    assert "counted once across seeds" in md
    # one run a row: its ± is the run's own time bins, and the title says so
    assert "mean ± SE from each run's time bins" in md and "(mean ± SE across seeds)" not in md


def test_two_seeds_each_run_twice_are_two_seeds_by_two_repeats(
    builder: Builder, tmp_path: Path
) -> None:
    runs = [
        _live(builder, name, seed, cached)
        for name, seed, cached in (("a0", 0, 500), ("b0", 0, 700), ("a1", 1, 600), ("b1", 1, 800))
    ]
    copy = tmp_path / "copy-of-a0"
    shutil.copytree(runs[0], copy)  # a copy among the repeats is still one measurement
    out = _report(tmp_path, *runs, copy)
    (row,) = _sweep(out)
    assert row["runs"] == "4"
    assert (row["spread"], row["se_source"]) == ("2 seeds × 2 repeats", "seeds × repeats")
    assert float(row["hit_rate"]) == pytest.approx(0.65)
    md = _md(out)
    assert "mean ± SE across seeds and repeats" in md
    assert "| vllm | 4 | 4 | 2 seeds × 2 repeats |" in md
    assert "measured 2 times" in md and "copies of one live run" in md


def test_the_words_for_uneven_and_unrecorded_seeds() -> None:
    from analysis.measurements import spread

    assert spread(pd.DataFrame({"seed": [0, 0, 1]})) == ("seeds × repeats", "2 seeds × 1–2 repeats")
    assert spread(pd.DataFrame({"seed": [0, 1, 2]})) == ("seeds", "3 seeds")
    assert spread(pd.DataFrame({"seed": [None, None]})) == (
        "seeds",
        "2 seeds (2 without a recorded seed)",
    )


def test_figures_name_each_repeat_and_say_their_bars_are_run_to_run_noise(
    builder: Builder,
) -> None:
    runs = [load_run(_live(builder, n, 0, c)) for n, c in (("live-a", 600), ("live-b", 800))]
    data = analyze(runs)
    bars = versus_sessions(data, "hit_rate", "Hit rate").data[0]
    assert list(bars.hovertext) == ["± SE over 1 seed × 2 repeats (repeats: run-to-run noise)"]
    names = [trace.name for trace in ttft_cdf(data).data]
    assert names == ["vllm · 4 sessions · seed 0 · live-a", "vllm · 4 sessions · seed 0 · live-b"]
