"""One pricing of a run, one measured window: for a short embedded-default run (`replay run`
against the built-in emulators) and a short simulated one (`replay simulate --timing engine`),
`replay price RUN_DIR --json`, summary.json, the report's tables and the numbers the
dashboard's first page (Replay) opens on give the same profit, hit rate and throughput per
engine.

The dashboard is checked at the data level: `panel_frame` over `metrics_at` at the slider's
first position and the default counting window is exactly what the page renders (the page
calls the same two functions through its cache)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.report.build import build_report
from analysis.runs import Run, load_run
from dashboards.combine import combine
from dashboards.timeline import counting_window, metrics_at, slider_end
from dashboards.views.common import PricingChoice
from dashboards.views.replay import _top, panel_frame
from pricing import get_sheet
from replay.cli import app

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("profit_per_gpu_hour", "hit_rate", "output_tokens_per_min_per_gpu")
# Short runs: 4 sessions, 6 modelled minutes, minutes 2-6 measured. The emulators run 60×
# faster than the GPU they model (about 20 s of wall time with start-up).
SHORT = ("--sessions", "4", "--duration-min", "6", "--window", "2-6")
Numbers = dict[str, dict[str, float]]


def _replay(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.Popen(
        [sys.executable, "-m", "replay", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait(proc: subprocess.Popen[str]) -> None:
    try:
        out, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"{proc.args} did not finish in 240 s:\n{out}")
    assert proc.returncode == 0, out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Path]]]:
    """The two runs' directories (the simulator writes one per policy)."""
    root = tmp_path_factory.mktemp("one-pricing")
    sample = ROOT / "replay" / "data" / "sample-weka.jsonl.gz"
    # Both at once: the live run mostly waits on its emulators' modelled clock.
    procs = [
        _replay("run", "--engines", "flashstate,vllm", *SHORT, "--time-scale", "60",
                "--no-panel", "--out", str(root / "embedded")),
        _replay("simulate", "--trace", str(sample), "--policies", "flashstate,vllm", *SHORT,
                "--timing", "engine", "--out", str(root / "sim")),
    ]  # fmt: skip
    for proc in procs:
        _wait(proc)
    yield {
        "embedded": [root / "embedded"],
        "simulated": sorted(p.parent for p in (root / "sim").glob("*/manifest.json")),
    }


@pytest.fixture(scope="module")
def summaries(runs: dict[str, list[Path]]) -> dict[str, Numbers]:
    """summary.json as each executor wrote it (read before a report rewrites it)."""
    return {kind: _summaries(dirs) for kind, dirs in runs.items()}


def _pick(row: dict[str, Any]) -> dict[str, float]:
    return {k: float(row.get(k, math.nan)) for k in KEYS}


def _price_json(run_dirs: list[Path]) -> Numbers:
    out: Numbers = {}
    for d in run_dirs:
        result = CliRunner().invoke(app, ["price", str(d), "--json"])
        assert result.exit_code == 0, result.output
        out.update({e["engine"]: _pick(e) for e in json.loads(result.stdout)["engines"]})
    return out


def _summaries(run_dirs: list[Path]) -> Numbers:
    out: Numbers = {}
    for d in run_dirs:
        engines = json.loads((d / "summary.json").read_text())["engines"]
        out.update({name: _pick(row) for name, row in engines.items()})
    return out


def _dashboard(run_dirs: list[Path]) -> Numbers:
    """What the Replay page opens on: the run (with its companions, as the page stacks
    them), the default counting window, the slider's first position, the default pricing
    (the file's sheet, each engine's own GPU)."""
    loaded = [load_run(d) for d in run_dirs]
    run: Run = loaded[0] if len(loaded) == 1 else combine(loaded)
    start, stop = counting_window(run, measured_only=True)
    t = _top(slider_end(run, stop))
    frame, why = panel_frame(metrics_at(run, t, start, stop), PricingChoice(get_sheet(), None))
    assert why is None
    return {str(e): _pick(r) for e, r in frame.to_dict(orient="index").items()}


def _report(run_dirs: list[Path], out: Path) -> Numbers:
    build_report(run_dirs, out, "md", figures=False, static=False)
    tables = out / "tables"
    money = pd.read_csv(tables / "economics.csv")
    rates = pd.read_csv(tables / "throughput.csv")
    both = rates.merge(money, on=[c for c in ("run_id", "engine") if c in money], how="left")
    return {str(r["engine"]): _pick(r) for r in both.to_dict(orient="records")}


def _same(a: Numbers, b: Numbers, what: str) -> None:
    assert set(a) == set(b), what
    for engine in a:
        for key in KEYS:
            assert a[engine][key] == pytest.approx(b[engine][key], rel=1e-9), (
                f"{what}: {engine} {key}"
            )


@pytest.mark.parametrize("kind", ["embedded", "simulated"])
def test_price_report_and_dashboard_agree(
    runs: dict[str, list[Path]], summaries: dict[str, Numbers], kind: str, tmp_path: Path
) -> None:
    dirs = runs[kind]
    priced = _price_json(dirs)
    assert set(priced) == {"flashstate", "vllm"}
    assert all(v["output_tokens_per_min_per_gpu"] > 0 for v in priced.values())
    _same(priced, _dashboard(dirs), f"{kind}: price --json vs the dashboard's first page")
    _same(priced, _report(dirs, tmp_path / "report"), f"{kind}: price --json vs the report")


def test_summary_of_a_live_run_agrees(
    runs: dict[str, list[Path]], summaries: dict[str, Numbers]
) -> None:
    priced = _price_json(runs["embedded"])
    _same(priced, summaries["embedded"], "embedded: price --json vs summary.json")


def test_summary_of_a_simulated_run_agrees(
    runs: dict[str, list[Path]], summaries: dict[str, Numbers]
) -> None:
    priced = _price_json(runs["simulated"])
    _same(priced, summaries["simulated"], "simulated: price --json vs summary.json")
