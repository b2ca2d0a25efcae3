"""`replay price RUN_DIR` counts host memory (issue 34 point 4) on a real tiered simulated run:
the host cost line and the profit net of it, at gpus.yaml's rate or `--host-usd-per-gb-hour`,
the same figures in summary.json and the report's economics table; an untiered run's price is
unchanged; a bad rate names the flag."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analysis import load_run
from analysis.report.catalog import make_tables
from analysis.report.content import analyze
from replay.cli import app

SIM = [
    "simulate", "--policies", "sglang", "--sessions", "8", "--duration-min", "5",
    "--timing", "engine",
]  # fmt: skip
HOST_GB = 64.0
SHIPPED_RATE = 0.00072  # configs/pricing/gpus.yaml host_memory
GPUS = 2  # the glm-5.3-flash profile's engine


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("price_host")
    out: dict[str, Path] = {}
    for name, extra in (("tiered", ["--host-memory-gb", f"{HOST_GB:g}"]), ("plain", [])):
        res = invoke(*SIM, *extra, "--out", str(root / name))
        assert res.exit_code == 0, said(res)
        (out[name],) = [p for p in (root / name).iterdir() if p.is_dir()]
    return out


def _priced(run: Path, *extra: str) -> dict[str, Any]:
    res = invoke("price", str(run), "--json", *extra)
    assert res.exit_code == 0, said(res)
    (engine,) = json.loads(res.stdout)["engines"]
    return dict(engine) | {"notes": json.loads(res.stdout)["notes"]}


def test_a_tiered_run_is_priced_with_its_host_memory(runs: dict[str, Path]) -> None:
    e = _priced(runs["tiered"])
    cost = HOST_GB * SHIPPED_RATE / GPUS  # $0.02304 per GPU-hour
    assert e["gpus"] == GPUS and e["host_memory_gb"] == HOST_GB
    assert e["host_usd_per_gb_hour"] == SHIPPED_RATE
    assert e["host_rate_source"] == "gpus.yaml host_memory, reported: docs/pricing.md"
    assert e["host_cost_per_gpu_hour"] == pytest.approx(cost, rel=1e-12)
    assert e["net_profit_per_gpu_hour"] == pytest.approx(e["profit_per_gpu_hour"] - cost)
    assert any("host memory priced at $0.00072 per GiB-hour" in n for n in e["notes"])
    # The flag overrides the rate; 0 leaves net = profit.
    o = _priced(runs["tiered"], "--host-usd-per-gb-hour", "0.01")
    assert o["host_cost_per_gpu_hour"] == pytest.approx(0.32)
    assert o["net_profit_per_gpu_hour"] == pytest.approx(o["profit_per_gpu_hour"] - 0.32)
    assert o["host_rate_source"] == "--host-usd-per-gb-hour"
    free = _priced(runs["tiered"], "--host-usd-per-gb-hour", "0")
    assert free["net_profit_per_gpu_hour"] == free["profit_per_gpu_hour"]
    assert any("host memory unpriced" in n for n in free["notes"])
    # The table shows the host lines.
    res = invoke("price", str(runs["tiered"]))
    text = said(res)
    assert res.exit_code == 0, text
    assert "64 GiB at $0.00072/GiB-h" in text and "host cost / GPU-hour" in text
    assert "$0.0230" in text and "net profit / GPU-hour" in text


def test_summary_and_report_carry_the_same_host_figures(runs: dict[str, Path]) -> None:
    e = _priced(runs["tiered"])
    summary = json.loads((runs["tiered"] / "summary.json").read_text())["engines"]["sglang"]
    for key in ("host_memory_gb", "host_cost_per_gpu_hour", "net_profit_per_gpu_hour"):
        assert summary[key] == pytest.approx(e[key]), key
    assert summary["host_rate_source"] == e["host_rate_source"]
    (econ,) = [t for t in make_tables(analyze([load_run(runs["tiered"])])) if t.name == "economics"]
    md = econ.to_markdown()
    assert "Host cost ($/GPU-h)" in md and "Net profit ($/GPU-h)" in md
    assert "Host memory at $0.00072 per GiB-hour (gpus.yaml host_memory" in md


def test_an_untiered_run_is_priced_as_before(runs: dict[str, Path]) -> None:
    e = _priced(runs["plain"])
    hosted = {k for k in e if k.startswith(("host_", "net_profit", "external_"))}
    assert not hosted and math.isfinite(e["profit_per_gpu_hour"])
    assert not any("host memory" in n for n in e["notes"])
    summary = json.loads((runs["plain"] / "summary.json").read_text())["engines"]["sglang"]
    assert not {k for k in summary if k.startswith(("host_", "net_profit"))}
    text = said(invoke("price", str(runs["plain"])))
    assert "host" not in text.lower()
    (econ,) = [t for t in make_tables(analyze([load_run(runs["plain"])])) if t.name == "economics"]
    assert "Net profit" not in econ.to_markdown() and "Host" not in econ.to_markdown()


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "5000"])
def test_a_bad_host_rate_names_the_flag(runs: dict[str, Path], bad: str) -> None:
    res = invoke("price", str(runs["tiered"]), "--host-usd-per-gb-hour", bad)
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit), said(res)
    assert "--host-usd-per-gb-hour:" in said(res) and "is not a rate in [0, 1000]" in said(res)
    assert "Traceback" not in said(res)


def test_a_host_rate_given_for_an_untiered_run_says_it_prices_nothing(
    runs: dict[str, Path],
) -> None:
    """It used to be taken in silence: the user could not tell the rate priced nothing."""
    e = _priced(runs["plain"], "--host-usd-per-gb-hour", "0.01")
    line = "--host-usd-per-gb-hour: no engine of this run has host memory, so it prices nothing"
    assert e["notes"] == [line]
    assert line in said(invoke("price", str(runs["plain"]), "--host-usd-per-gb-hour", "0.01"))
    assert not _priced(runs["plain"])["notes"]  # without the flag, as before
    assert not any(
        "no engine" in n for n in _priced(runs["tiered"], "--host-usd-per-gb-hour", "0")["notes"]
    )


@pytest.mark.rundir_unchecked  # the manifest is broken on purpose
@pytest.mark.parametrize(
    ("value", "why"),
    [
        (1e30, "1e+30 is not a size in [0, 1,048,576] GiB"),  # was a decimal traceback
        (-5, "-5 is not a size in [0, 1,048,576] GiB"),  # was priced as no host memory
        (True, "True is not a number of GiB"),  # was priced as 1 GiB
        ("64", "'64' is not a number of GiB"),  # was priced as no host memory
    ],
)
def test_a_manifest_tier_size_out_of_range_is_named(
    runs: dict[str, Path], tmp_path: Path, value: object, why: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs["tiered"], run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["spec"]["engines"][0]["host_memory_gb"] = value
    (run / "manifest.json").write_text(json.dumps(manifest))
    for args in (["price", str(run)], ["price", str(run), "--json"]):
        res = invoke(*args)
        assert res.exit_code == 2 and "Traceback" not in said(res), said(res)
        assert f"manifest.json: field 'spec': engines.0.host_memory_gb: {why}" in said(res)
        assert "fix or restore the file" in said(res)


def test_the_host_rate_needs_a_run() -> None:
    res = invoke(
        "price", "--hit-rate", "0.5", "--prompt-tokens-per-min-per-gpu", "1000",
        "--output-tokens-per-min-per-gpu", "10", "--host-usd-per-gb-hour", "0.01",
    )  # fmt: skip
    assert res.exit_code != 0 and "--host-usd-per-gb-hour: only used with RUN_DIR" in said(res)


def test_the_list_names_the_host_memory_rate_and_its_source() -> None:
    res = invoke("price", "--list")
    assert res.exit_code == 0, said(res)
    assert "Host memory: $0.00072 per GiB-hour (reported, 2025" in said(res)
    assert "DDR5-6400" in said(res)  # its source, under the table
    listed = json.loads(invoke("price", "--list", "--json").stdout)["host_memory"]
    assert listed["usd_per_gb_hour"] == SHIPPED_RATE and listed["status"] == "reported"


@pytest.mark.parametrize(
    "extra",
    [
        ["--host-usd-per-gb-hour", "5"],  # listed the file's rate as if it had been taken
        ["--hit-rate", "5"],  # out of range, and ignored
        ["--sheet", "no-such-sheet"],
        ["--window", "1-2"],
        ["RUN_DIR"],
    ],
)
def test_the_list_refuses_a_flag_it_would_ignore(tmp_path: Path, extra: list[str]) -> None:
    args = [str(tmp_path) if a == "RUN_DIR" else a for a in extra]
    res = invoke("price", "--list", *args)
    assert res.exit_code == 2 and "Traceback" not in said(res), said(res)
    assert f"{extra[0]}: not used with --list" in said(res)
