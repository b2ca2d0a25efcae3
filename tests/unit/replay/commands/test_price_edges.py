"""`replay price` at its edges, on a real simulated run: the provenance states the window the
prices count (`--window`), a manifest whose `config.duration_s` is no run length is refused
naming the file and field, a `--window` end too large to be seconds is refused naming the flag,
-0.0 never reaches the output, and a sheet whose cached price is above its input price is
priced with a note naming the file and fields."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app

DEMO_POINT = ["price", "--prompt-tokens-per-min-per-gpu", "300000",
              "--output-tokens-per-min-per-gpu", "2000"]  # fmt: skip
SHIPPED = Path(__file__).resolve().parents[4] / "configs" / "pricing"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6-minute engine-timing run: its own window is 2–6 min."""
    out = tmp_path_factory.mktemp("price_edges") / "sim"
    res = invoke("simulate", "--policies", "vllm", "--sessions", "4", "--duration-min", "6",
                 "--timing", "engine", "--out", str(out))  # fmt: skip
    assert res.exit_code == 0, said(res)
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def priced(*args: str) -> dict[str, Any]:
    res = invoke("price", *args, "--json")
    assert res.exit_code == 0, said(res)
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_the_provenance_states_the_window_the_prices_count(run: Path) -> None:
    p = priced(str(run), "--window=0-3")
    assert p["window_s"] == [0.0, 180.0]
    assert p["provenance"]["window"] == "window 0–3 min of 6 (--window 0-3 min)"
    res = invoke("price", str(run), "--window=0-3")
    assert res.exit_code == 0, said(res)
    assert "window 0–180 s" in said(res) and "2–6 min" not in said(res)
    # The run's own window reads as it always has.
    assert priced(str(run))["provenance"]["window"] == "window 2–6 min of 6"


def test_a_window_past_the_data_is_stated_clipped(run: Path) -> None:
    p = priced(str(run), "--window", "4-100")
    assert p["window_s"] == [240.0, 360.0]
    assert "clipped to the data's end at 360 s" in p["provenance"]["window"]


@pytest.mark.rundir_unchecked  # the manifest is broken on purpose
@pytest.mark.parametrize("duration", [-5, 0])
def test_a_manifest_duration_that_is_no_run_length_is_refused(
    run: Path, tmp_path: Path, duration: float
) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["config"]["duration_s"] = duration
    (bad / "manifest.json").write_text(json.dumps(manifest))
    for args in (("price", str(bad)), ("report", str(bad), "--out", str(tmp_path / "rep"))):
        res = invoke(*args)
        text = said(res)
        assert res.exit_code == 2, text
        assert f"{bad / 'manifest.json'}: field 'config.duration_s'" in text
        assert "Traceback" not in text


@pytest.mark.parametrize("window", ["0-1e308", "0-inf"])
def test_a_window_end_too_large_for_seconds_is_refused_naming_the_flag(
    run: Path, tmp_path: Path, window: str
) -> None:
    for args in (
        ("price", str(run), "--window", window),
        ("report", str(run), "--out", str(tmp_path / "rep"), "--window", window),
    ):
        res = invoke(*args)
        text = said(res)
        assert res.exit_code == 2, text
        assert f"--window {window}:" in text and "inf" not in text.replace("0-inf", "")


def test_minus_zero_is_zero_in_the_output(run: Path, tmp_path: Path) -> None:
    res = invoke(*DEMO_POINT, "--hit-rate", "-0.0", "--write-fraction", "-0.0", "--json")
    assert res.exit_code == 0, said(res)
    assert "-0.0" not in res.stdout
    assert json.loads(res.stdout)["hit_rate"] == 0.0
    point = invoke("price", "--hit-rate", "0.5", "--prompt-tokens-per-min-per-gpu", "-0.0",
                   "--output-tokens-per-min-per-gpu", "-0.0", "--json")  # fmt: skip
    assert point.exit_code == 0 and "-0.0" not in point.stdout
    free = invoke("price", str(run), "--host-usd-per-gb-hour", "-0.0", "--json")
    assert free.exit_code == 0 and "-0.0" not in free.stdout


def _dear_cache(tmp_path: Path) -> Path:
    """The shipped pricing files with the default sheet's cached price above its input."""
    folder = tmp_path / "pricing"
    shutil.copytree(SHIPPED, folder)
    sheets = folder / "sheets.yaml"
    text = sheets.read_text()
    assert "    input: 0.15\n    cached: 0.03\n" in text
    sheets.write_text(text.replace("    cached: 0.03\n", "    cached: 0.99\n", 1))
    return folder


def test_a_cached_price_above_the_input_price_is_noted_naming_the_fields(
    run: Path, tmp_path: Path
) -> None:
    folder = _dear_cache(tmp_path)
    field = "field 'cached' (0.99 USD per 1M tokens) is above 'input' (0.15)"
    point = invoke(*DEMO_POINT, "--hit-rate", "0.5", "--pricing-dir", str(folder), "--json")
    assert point.exit_code == 0, said(point)
    assert json.loads(point.stdout)["sheet"] == "zai-glm"  # stdout stays JSON
    assert f"{folder / 'sheets.yaml'}: sheet 'zai-glm': {field}" in " ".join(point.stderr.split())
    notes = priced(str(run), "--pricing-dir", str(folder))["notes"]
    assert any(field in n and "'sheets.zai-glm.cached'" in n for n in notes)
    listed = invoke("price", "--list", "--pricing-dir", str(folder))
    assert listed.exit_code == 0 and field in said(listed)
    # The shipped sheets say nothing.
    shipped = invoke(*DEMO_POINT, "--hit-rate", "0.5", "--json")
    assert "above 'input'" not in said(shipped)
    assert not any("above 'input'" in n for n in priced(str(run))["notes"])
