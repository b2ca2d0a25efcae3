"""The client routes an engine of replicas (issue 26): each record names the replica it was
sent to (checked against what every replica actually received), the router and its branch;
session_hash pins a conversation, round_robin spreads it; a router in front is read back
from its response header; bad fleets are refused with a message naming the flag."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.fleet import (
    REPLICA_HEADER,
    SMG_WORKER_HEADER,
    ClientFleet,
    FleetError,
    FleetSpec,
)
from replay.client.orchestrate import RunPlan, check_engines, run_live
from replay.engines.adapters import make_adapter
from replay.rundir import read_manifest, read_requests
from replay.workload import WorkloadConfig


@pytest.fixture
async def four(helpers: Any) -> Any:
    engines = [helpers.FakeEngine() for _ in range(4)]
    for e in engines:
        await e.start()
    try:
        yield engines
    finally:
        for e in engines:
            with contextlib.suppress(Exception):
                await e.stop()


def _plan(engines: list[Any], trace: Any, out: Path, router: str, **kw: Any) -> RunPlan:
    urls = tuple(e.url for e in engines)
    wl = WorkloadConfig(sessions=6, duration_s=3.0, window=(0.0, 3.0))
    return RunPlan(
        engines=[EngineSpec(name="vllm", kind="vllm", url=urls[0], gpus=2)],
        fleets={"vllm": FleetSpec(urls, router)},
        trace=trace,
        workload=wl,
        out_dir=out,
        backoff_s=0.05,
        scrape_interval_s=0.5,
        flush_interval_s=0.2,
        summarize=summary_of_dir,
        **kw,
    )


def _conversations(df: Any) -> Any:
    """Replicas per replayed conversation (a session's trajectory from its priming request
    on: a slot replays several, and the same trajectory again as a new conversation)."""
    df = df[df.attempt == 0].sort_values("scheduled_s").copy()
    g = df.groupby(["session", "agent"])
    new = df.priming | (df.turn <= g.turn.shift(fill_value=-1))
    df["conv"] = new.astype(int).groupby([df.session, df.agent]).cumsum()
    return df.groupby(["session", "agent", "conv"])["replica"]


@pytest.mark.parametrize("router", ["round_robin", "session_hash"])
async def test_each_record_names_the_replica_that_served_it(
    four: list[Any], helpers: Any, tmp_path: Path, router: str
) -> None:
    h = helpers
    trace = h.trace_of(*(h.growing_trajectory(f"t{i}", turns=8) for i in range(6)))
    plan = _plan(four, trace, tmp_path / "r", router)
    reports = await check_engines(plan)  # preflight probes every replica
    assert all(e.generations > 0 for e in four)
    before = [e.generations for e in four]
    outcome = await run_live(plan, reports=reports)
    assert outcome.status == "completed"
    df = read_requests(tmp_path / "r")
    sent = df[df.sent_s.notna()]
    assert sent.replica.notna().all() and (sent.router == router).all()
    # What each replica received is what the records say was sent there.
    got = Counter(sent.replica.astype(int))
    for i, eng in enumerate(four):
        assert got[i] == eng.generations - before[i], (i, got, [e.generations for e in four])
    per_conv = _conversations(sent).nunique()
    if router == "session_hash":
        assert (per_conv == 1).all() and set(sent.route_branch) == {"hash"}
        assert sent.replica.nunique() > 1  # 6+ conversations over 4 replicas
    else:
        assert max(got.values()) - min(got.values()) <= 1 and (per_conv > 1).any()
    fleet = (outcome.summary or {})["engines"]["vllm"]["fleet"]  # analysis.replicas
    assert outcome.summary["engines"]["vllm"]["replicas"] == 4  # type: ignore[index]
    assert [r["replica"] for r in fleet["per_replica"]] == [0, 1, 2, 3]
    assert fleet["routers"] == [router] and fleet["imbalance"] >= 1.0
    man = read_manifest(tmp_path / "r")
    entry = man.engines[0]
    assert entry.replicas == 4 and entry.gpus == 8  # pricing counts every replica's GPUs
    assert entry.fleet and entry.fleet["router"] == router
    assert len(entry.fleet["replica_urls"]) == 4


async def test_a_router_in_front_is_read_back_from_its_header(
    four: list[Any], helpers: Any
) -> None:
    from replay.client.session import SessionPolicy  # noqa: F401 - the module imports

    adapter = make_adapter("vllm", four[0].url, None)
    fleet = ClientFleet("vllm", FleetSpec((four[0].url,), "external"), [adapter])
    assert fleet._replica_from({REPLICA_HEADER: "3"}) == 3
    assert fleet._replica_from({SMG_WORKER_HEADER: "http://b:1/"}) == 0
    assert fleet._replica_from({SMG_WORKER_HEADER: "http://a:1"}) == 1
    assert fleet._replica_from({SMG_WORKER_HEADER: "http://b:1"}) == 0
    assert fleet.describe()["replica_urls"] == ["http://b:1", "http://a:1"]
    assert adapter.keep_headers == (REPLICA_HEADER, SMG_WORKER_HEADER)
    await adapter.close()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (FleetSpec(("http://a", "http://b"), "nope"), "--router nope: unknown router"),
        (FleetSpec(("http://a", "http://b"), "external"), "give the router's one URL"),
        (FleetSpec(("http://a",), "session_hash", {"bogus": 1}), "unknown parameter 'bogus'"),
        (FleetSpec(("http://a",), "session_hash", {"virtual_nodes": "x"}), "wants a int"),
        (FleetSpec((), "round_robin"), "at least one URL"),
    ],
)
def test_bad_fleets_are_named(spec: FleetSpec, message: str) -> None:
    with pytest.raises(FleetError, match=message.replace("(", r"\(")):
        ClientFleet("vllm", spec, [])


def test_the_header_names_agree_with_the_emulator_and_smg() -> None:
    from replay.emulator.server import REPLICA_HEADER as EMULATOR

    assert EMULATOR == REPLICA_HEADER
    smg = pytest.importorskip("replay.engines.smg")
    assert smg.ROUTED_HEADER == SMG_WORKER_HEADER
