"""A hostile engine cannot poison a run directory (issue 36): a token count or a replica
header out of range or of the wrong type fails that request, by name; the run goes on and
ends; its run directory reads back (requests.parquet, `replay price`, `replay report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from analysis.summary import summary_of_dir
from replay.cli import app
from replay.client.config import EngineSpec
from replay.client.fleet import MAX_REPLICAS, REPLICA_HEADER, FleetSpec, replica_id
from replay.client.orchestrate import RunPlan, check_engines, run_live
from replay.engines.adapters import make_adapter
from replay.engines.adapters.base import EngineValueError, engine_count
from replay.rundir import read_manifest, read_requests
from replay.workload import WorkloadConfig


def _plan(url: str, trace: Any, out: Path, external: bool = False) -> RunPlan:
    wl = WorkloadConfig(sessions=2, duration_s=4.0, window=(0.0, 4.0))
    return RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=url)],
        trace=trace,
        workload=wl,
        out_dir=out,
        retries=0,
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.2,
        summarize=summary_of_dir,
        fleets={"vllm": FleetSpec(urls=(url,), router="external")} if external else {},
    )


def _reads_back(out: Path) -> None:
    """The run ended (not `running`) and every reader opens its directory."""
    assert read_manifest(out).status != "running"
    runner = CliRunner()
    for args in (["price", str(out)], ["report", str(out), "--out", str(out / "r.md")]):
        res = runner.invoke(app, args)
        # 2: a clear refusal (every request failed: nothing to price), never a traceback.
        assert res.exit_code in (0, 2), (args, res.output, res.exception)
        assert isinstance(res.exception, (SystemExit, type(None))), res.exception


@pytest.mark.parametrize(
    ("value", "said"),
    [(1e23, "= 1e+23: outside 0..16,777,216 tokens"), ("abc", "= 'abc': not a whole number"),
     (-5, "= -5: outside 0..16,777,216"), (True, "not a whole number"), (7.5, "not a whole")],
)  # fmt: skip
def test_an_engine_count_is_a_whole_number_in_range(value: object, said: str) -> None:
    with pytest.raises(EngineValueError) as e:
        engine_count(value, "usage.prompt_tokens")
    assert "the engine sent usage.prompt_tokens = " in str(e.value)
    assert said in str(e.value) and "the request is recorded as an error" in str(e.value)
    assert engine_count(12.0, "x") == 12 and engine_count(0, "x") == 0


@pytest.mark.parametrize(
    "value",
    ["9223372036854775808", "9" * 30, "²", "٣", str(10**12), str(MAX_REPLICAS), "-1", "1e3"],
)
def test_a_replica_header_is_an_index_below_the_fleet_limit(value: str) -> None:
    with pytest.raises(ValueError) as e:
        replica_id(value)
    assert f"{REPLICA_HEADER}: {value!r}: not a replica index 0..{MAX_REPLICAS - 1}" in str(e.value)
    assert replica_id(" 3 ") == 3 and replica_id(str(MAX_REPLICAS - 1)) == MAX_REPLICAS - 1


async def test_a_huge_cached_count_fails_its_request_by_name(fake_engine: Any) -> None:
    fake_engine.usage_override = {"prompt_tokens_details": {"cached_tokens": 1e23}}
    adapter = make_adapter("vllm", fake_engine.url, "m")
    try:
        res = await adapter.generate(adapter.build_body(np.arange(40), 4))
    finally:
        await adapter.close()
    assert res.status == "error" and res.cached_tokens is None
    assert res.error is not None
    assert "usage.prompt_tokens_details.cached_tokens = 1e+23" in res.error


async def test_a_run_against_an_engine_reporting_1e23_cached_tokens_goes_on(
    fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(*(helpers.growing_trajectory(f"t{i}", turns=6) for i in range(2)))
    out = tmp_path / "r"
    plan = _plan(fake_engine.url, trace, out)
    reports = await check_engines(plan)  # preflight refuses such an engine: turn it after
    fake_engine.usage_override = {"prompt_tokens_details": {"cached_tokens": 1e23}}
    outcome = await run_live(plan, reports=reports)
    assert outcome.status in ("completed", "degraded")
    df = read_requests(out)
    df = df[df["status"] != "cancelled"]  # in flight at the end
    assert len(df) and (df["status"] == "error").all()
    assert df["error"].str.contains("usage.prompt_tokens_details.cached_tokens = 1e\\+23").all()
    _reads_back(out)


@pytest.mark.parametrize("header", ["9223372036854775808", "9" * 30, "²"])
async def test_a_router_naming_an_impossible_replica_fails_the_request_not_the_run(
    header: str, fake_engine: Any, helpers: Any, tmp_path: Path
) -> None:
    trace = helpers.trace_of(*(helpers.growing_trajectory(f"t{i}", turns=6) for i in range(2)))
    out = tmp_path / "r"
    plan = _plan(fake_engine.url, trace, out, external=True)
    reports = await check_engines(plan)
    fake_engine.headers = {REPLICA_HEADER: header}
    outcome = await run_live(plan, reports=reports)
    assert outcome.status in ("completed", "degraded")
    df = read_requests(out)
    df = df[df["status"] != "cancelled"]
    assert len(df) and (df["status"] == "error").all() and df["replica"].isna().all()
    assert df["error"].str.contains(f"{REPLICA_HEADER}: {header!r}", regex=False).all()
    _reads_back(out)
