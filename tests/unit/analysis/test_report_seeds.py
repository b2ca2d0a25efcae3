"""`replay report` pools runs as seeds only when their manifests differ in the seed alone
(`analysis.configs`, `analysis.sweeps`): runs of two routers, or of two host-memory sizes
(`replay plan-host`), are rows of their own labelled by what differs; the same run directory
given twice is counted once, and a copy of a run (same configuration and seed) is one seed.
And a `--window` report's figure caption states the window the report measured. Real run
directories, written by `replay simulate` and `replay plan-host` at tiny sizes."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis import load_run
from analysis.configs import config_key
from analysis.sweeps import aggregate_sweep, sweep_rows
from replay.cli import app

SMALL = ["--sessions", "4", "--duration-min", "3", "--timing", "engine"]
ROUTERS = ["--policies", "vllm", "--replicas", "2", "--router", "round_robin,state_aware"]


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report_seeds")


@pytest.fixture(scope="module")
def routers(root: Path) -> Path:
    """Two routers, two seeds each: four run directories."""
    res = invoke("simulate", *ROUTERS, *SMALL, "--seeds", "2", "--out", str(root / "routers"))
    assert res.exit_code == 0, said(res)
    return root / "routers"


@pytest.fixture(scope="module")
def hosts(root: Path) -> Path:
    """`replay plan-host` at 0 and 20 GiB: two runs of one run id, in two folders."""
    out = root / "hosts"
    res = invoke("plan-host", "--host-gb", "0,20", "--sessions", "4", "--duration-min", "3",
                 "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    return out


@pytest.fixture(scope="module")
def six_min(root: Path) -> Path:
    out = root / "six"
    res = invoke("simulate", "--policies", "vllm", "--sessions", "4", "--duration-min", "6",
                 "--timing", "engine", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def report(tmp: Path, *runs: Path, extra: tuple[str, ...] = ()) -> tuple[Any, Path]:
    out = tmp / "rep"
    res = invoke("report", *map(str, runs), "--out", str(out), "--no-static", "--no-figures",
                 "--format", "md", *extra)  # fmt: skip
    assert res.exit_code == 0, said(res)
    return res, out


def sweep_csv(out: Path) -> list[dict[str, str]]:
    with open(out / "tables" / "sweep.csv", newline="") as f:
        return list(csv.DictReader(f))


def hit_rate(run: Path) -> float:
    return float(json.loads((run / "summary.json").read_text())["engines"]["vllm"]["hit_rate"])


def test_two_routers_are_two_rows_each_pooling_its_own_seeds(routers: Path, tmp_path: Path) -> None:
    _, out = report(tmp_path, routers)
    rows = sweep_csv(out)
    assert [(r["engine"], r.get("config_label"), r["runs"]) for r in rows] == [
        ("vllm", "router round_robin", "2"),
        ("vllm", "router state_aware", "2"),
    ]
    for row in rows:
        router = row["config_label"].removeprefix("router ")
        runs = sorted(routers.glob(f"vllm-r2-{router}-s4-seed*"))
        assert len(runs) == 2
        assert float(row["hit_rate"]) == pytest.approx(sum(map(hit_rate, runs)) / 2)
    assert float(rows[0]["hit_rate"]) < float(rows[1]["hit_rate"])  # never one pooled mean
    md = (out / "report.md").read_text()
    assert "| vllm | router round_robin | 4 | 2 |" in md
    assert "| Run | Configuration |" in md  # the table of runs says it too


def test_the_dashboards_sweep_rows_group_the_same_way(routers: Path) -> None:
    """One concept, one place: the dashboard's Compare page aggregates `sweep_rows`."""
    runs = [load_run(p) for p in sorted(routers.iterdir()) if p.is_dir()]
    agg = aggregate_sweep(sweep_rows(runs))
    assert list(agg["runs"]) == [2, 2] and list(agg["se_source"]) == ["seeds", "seeds"]
    assert list(agg["series"]) == ["vllm · router round_robin", "vllm · router state_aware"]


def test_the_configuration_key_ignores_the_seed_and_nothing_else(routers: Path) -> None:
    keys = {p.name: config_key(load_run(p).manifest) for p in routers.iterdir() if p.is_dir()}
    assert keys["vllm-r2-round_robin-s4-seed0"] == keys["vllm-r2-round_robin-s4-seed1"]
    assert keys["vllm-r2-round_robin-s4-seed0"] != keys["vllm-r2-state_aware-s4-seed0"]


def test_plan_host_sizes_are_rows_of_their_own(hosts: Path, tmp_path: Path) -> None:
    _, out = report(tmp_path, hosts)
    rows = sweep_csv(out)
    assert [(r["engine"], r.get("config_label"), r["runs"]) for r in rows] == [
        ("sglang", "host 0 GiB", "1"),
        ("sglang", "host 20 GiB", "1"),
    ]
    assert all(r["se_source"] == "time bins" for r in rows)  # no "± 0.0 across seeds"


def test_the_same_run_twice_is_one_run(six_min: Path, tmp_path: Path) -> None:
    res, out = report(tmp_path, six_min, six_min.parent / ".." / six_min.parent.name / six_min.name)
    assert "given 2 times; counted once" in said(res)
    md = (out / "report.md").read_text()
    assert "Paper table" not in md and md.count("## Run `") == 1  # one run, not a sweep
    assert "given 2 times; counted once" in md


def test_a_copy_of_a_run_is_one_seed(six_min: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(six_min, copy)
    res, out = report(tmp_path, six_min, copy)
    (row,) = sweep_csv(out)
    assert row["runs"] == "1" and row["se_source"] == "time bins"
    assert "the same configuration and seed (0)" in said(res)
    assert "counted once across seeds" in (out / "report.md").read_text()


def test_a_report_window_is_the_window_its_caption_states(six_min: Path, tmp_path: Path) -> None:
    _, out = report(tmp_path, six_min, extra=("--window", "0-3"))
    md = (out / "report.md").read_text()
    assert "Measured window:** `0–180 s (--window 0-3 min)`" in md
    caption = next(line for line in md.splitlines() if line.startswith("Every figure:"))
    assert "window 0–3 min of 6 (--window 0-3 min)" in caption
    assert "2–6 min" not in caption
    # Without --window the caption is the manifest's window, as it always was.
    _, own = report(tmp_path / "own", six_min)
    caption = next(
        line for line in (own / "report.md").read_text().splitlines() if "Every figure:" in line
    )
    assert "window 2–6 min of 6;" in caption


def _key(**fields: Any) -> str:
    return json.dumps(fields, sort_keys=True)


def test_a_label_says_each_difference_once_and_the_flags_only_when_nothing_else() -> None:
    from analysis.configs import config_labels

    short = _key(**{"config.duration_s": 180.0, "spec.workload.duration_min": 3.0,
                    "config.window": [60.0, 180.0], "engines.0.flags": ["a=1"]})  # fmt: skip
    long = _key(**{"config.duration_s": 240.0, "spec.workload.duration_min": 4.0,
                   "config.window": [80.0, 240.0], "engines.0.flags": ["a=2"]})  # fmt: skip
    assert config_labels([[short, long]]) == {
        short: "3 min run, window 1–3 min",
        long: "4 min run, window 1.33–4 min",
    }
    a, b = _key(**{"engines.0.flags": ["a=1"]}), _key(**{"engines.0.flags": ["a=2"]})
    assert config_labels([[a, b]]) == {a: "flags a=1", b: "flags a=2"}
    # Alone in its cell (another session count), a configuration needs no label.
    assert config_labels([[a], [b]]) == {a: "", b: ""}


def test_a_figure_tells_two_routers_of_one_engine_apart(root: Path, tmp_path: Path) -> None:
    """Two configurations of one engine are two lines in the engine's colour, each its own
    dash: in the same colour and dash they could only be told apart by the legend's text."""
    sweep = root / "routers-two-loads"
    res = invoke("simulate", *ROUTERS, "--sessions", "2,4", "--duration-min", "3",
                 "--timing", "engine", "--out", str(sweep))  # fmt: skip
    assert res.exit_code == 0, said(res)
    out = tmp_path / "rep"
    res = invoke("report", str(sweep), "--out", str(out), "--no-static", "--format", "md")
    assert res.exit_code == 0, said(res)
    fig = json.loads((out / "figures" / "hit_rate_vs_sessions.json").read_text())
    lines = [(d["name"], d["line"]["color"], d["line"].get("dash")) for d in fig["data"]]
    assert [name for name, _, _ in lines] == [
        "vllm · router round_robin",
        "vllm · router state_aware",
    ]
    assert lines[0][1] == lines[1][1] and lines[0][2] != lines[1][2]
