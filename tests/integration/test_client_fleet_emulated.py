"""A 4-replica emulated fleet per engine (issue 26): 4 emulator servers each for flashstate,
vLLM and SGLang, the client routing with round_robin and with session_hash (~1 min). Every
sent request's record names its replica (tests/unit/replay/client/test_client_fleet.py
checks, on fake engines, that it is the replica that received it); round_robin uses all
four, session_hash keeps every conversation on one replica; the manifest counts every
replica's GPUs; the summary's per-replica figures cover every replica seen."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.fleet import FleetSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.emulator.config import EmulatorConfig
from replay.emulator.launch import start_fleet
from replay.rundir import read_manifest, read_requests
from replay.traces import load_trace
from replay.traces.synth import Knobs, SynthConfig, write_synth
from replay.workload import WorkloadConfig

X = 30.0  # emulators and workload 30x faster than the modelled GPU: 3 minutes in 6 s
ENGINES = ("flashstate", "vllm", "sglang")


def _conversations(df: Any) -> Any:
    df = df[df.attempt == 0].sort_values("scheduled_s").copy()
    g = df.groupby(["session", "agent"])
    new = df.priming | (df.turn <= g.turn.shift(fill_value=-1))
    df["conv"] = new.astype(int).groupby([df.session, df.agent]).cumsum()
    return df.groupby(["session", "agent", "conv"])["replica"]


def test_a_four_replica_fleet_per_engine_replays_with_each_router(tmp_path: Path) -> None:
    knobs = Knobs(top_turns=(10.0, 0.4), sub_turns=(3.0, 0.4), tool_gap=(2.0, 2.0))
    write_synth(tmp_path / "t.jsonl", SynthConfig(n_trajectories=24, seed=0, scale=16), knobs=knobs)
    trace = load_trace(tmp_path / "t.jsonl")
    configs = [EmulatorConfig(engine=e, port=0, time_scale=X, token_scale=16) for e in ENGINES]
    with start_fleet(configs, 4) as group:
        fleet = group.fleet
        for router in ("round_robin", "session_hash"):
            out = tmp_path / router
            plan = RunPlan(
                engines=[EngineSpec(name=e, kind=e, url=fleet[e][0], gpus=2) for e in ENGINES],
                fleets={e: FleetSpec(tuple(fleet[e]), router) for e in ENGINES},
                trace=trace,
                workload=WorkloadConfig(sessions=8, duration_s=180.0, window=(30.0, 180.0)),
                out_dir=out,
                time_scale=X,
                clock_scale=X,
                summarize=summary_of_dir,
                scrape_interval_s=1.0,
            )
            outcome = asyncio.run(run_live(plan))
            assert outcome.status == "completed", outcome.summary
            df = read_requests(out)
            summary = json.loads((out / "summary.json").read_text())
            man = read_manifest(out)
            for e in ENGINES:
                mine = df[(df.engine == e) & df.sent_s.notna()]
                assert len(mine) > 10 and mine.replica.notna().all(), e
                assert (mine.router == router).all()
                assert set(mine.replica.astype(int)) <= set(range(4))
                if router == "session_hash":
                    assert (_conversations(mine).nunique() == 1).all(), e
                else:
                    counts = mine.replica.value_counts()
                    assert len(counts) == 4 and counts.max() - counts.min() <= 3 * 8, counts
                entry = next(x for x in man.engines if x.name == e)
                assert entry.replicas == 4 and entry.gpus == 8
                eng = summary["engines"][e]
                if "fleet" in eng:  # per-replica figures (analysis.replicas)
                    assert eng["replicas"] == len(eng["fleet"]["per_replica"])


pytestmark = pytest.mark.slow
