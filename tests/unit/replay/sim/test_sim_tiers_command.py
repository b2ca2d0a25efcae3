"""`replay simulate --host-memory-gb` through the real command line (issue 34): a tiered run
records hits by tier and says so in its summary row and spec; 0 leaves the run untiered."""

from __future__ import annotations

import csv

import pandas as pd
from typer.testing import CliRunner

from replay.cli import app
from replay.rundir import read_manifest

runner = CliRunner()
# The bundled sample on a tight cache, so the GPU evicts and host memory serves hits.
ARGS = [
    "simulate",
    "--policies",
    "vllm,sglang",
    "--sessions",
    "8",
    "--timing",
    "engine",
    "--duration-min",
    "12",
    "--window",
    "4-12",
    "--seed",
    "1",
    "--capacity-blocks",
    "300",
]


def _rows(out) -> list[dict[str, str]]:
    with (out / "summary.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_host_memory_gb_gives_a_tier_and_hits_by_tier(tmp_path) -> None:
    out = tmp_path / "tiered"
    res = runner.invoke(app, [*ARGS, "--host-memory-gb", "60", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = {r["policy"]: r for r in _rows(out)}
    for policy in ("vllm", "sglang"):
        row = rows[policy]
        assert 0 < float(row["host_hit_share"]) <= 1
        assert float(row["host_hit_rate"]) <= float(row["hit_rate"])
        df = pd.read_parquet(out / f"{policy}-s8-seed1" / "requests.parquet")
        assert {"cached_tokens_host", "cached_tokens_external"} <= set(df.columns)
        ok = df[df.status == "ok"]
        assert (ok.cached_tokens_host <= ok.cached_tokens).all()
        assert (ok.cached_tokens_external == 0).all()
        assert ok.cached_tokens_host.sum() > 0
        spec = read_manifest(out / f"{policy}-s8-seed1").spec
        assert spec is not None and spec["engines"][0]["host_memory_gb"] == 60


def test_zero_host_memory_is_the_untiered_run(tmp_path) -> None:
    plain, zero = tmp_path / "plain", tmp_path / "zero"
    assert runner.invoke(app, [*ARGS, "--out", str(plain)]).exit_code == 0
    res = runner.invoke(app, [*ARGS, "--host-memory-gb", "0", "--out", str(zero)])
    assert res.exit_code == 0, res.output
    for policy in ("vllm", "sglang"):
        a = pd.read_parquet(plain / f"{policy}-s8-seed1" / "requests.parquet")
        b = pd.read_parquet(zero / f"{policy}-s8-seed1" / "requests.parquet")
        assert "cached_tokens_host" not in a.columns
        assert a.equals(b)
    assert all("host_hit_share" not in r for r in _rows(zero))


def test_a_bad_host_memory_is_refused_naming_the_flag(tmp_path) -> None:
    res = runner.invoke(app, [*ARGS, "--host-memory-gb", "-1", "--out", str(tmp_path / "x")])
    assert res.exit_code != 0
    assert "--host-memory-gb" in res.output
    res = runner.invoke(
        app, [*ARGS, "--policies", "vllm-native", "--host-memory-gb", "8", "--out", str(tmp_path)]
    )
    assert res.exit_code != 0 and "host tier" in res.output


def test_host_memory_smaller_than_a_block_is_refused_naming_the_flag(tmp_path) -> None:
    """A tier of less than one block would hold nothing (it used to run as one of 0 blocks)."""
    res = runner.invoke(app, [*ARGS, "--host-memory-gb", "1e-9", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2, res.output
    assert "--host-memory-gb 1e-09: less than one cache block" in res.output
    assert not (tmp_path / "x").exists()
