"""Soak: 500 sessions against two emulators with injected faults (5% errors, stalled streams,
one crash and restart). Checks that the run completes, that no record is lost or doubled
(every scheduled request appears exactly once, with a status), and that the emulators'
memory stays flat. Bounded to about two minutes of wall time."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.summary import summary_of_dir
from replay.client.config import EngineSpec
from replay.client.orchestrate import RunPlan, run_live
from replay.emulator.config import EmulatorConfig, FaultConfig
from replay.emulator.launch import EmulatorGroup, start_emulator_group
from replay.engines.adapters import Limits
from replay.profiles import load_profile
from replay.records import STATUSES
from replay.traces import load_trace
from replay.traces.synth import SynthConfig, write_synth
from replay.workload import WorkloadConfig

SESSIONS = 500
DURATION_S = 600.0  # modelled seconds
TIME_SCALE = 8.0  # → 75 s of wall time
TOKEN_SCALE = 64.0


def _cheap_profile(tmp: Path) -> Path:
    """GLM's cache layout with a fast GPU: the soak tests the plumbing, not the model."""
    p = load_profile("glm-5.3-flash").model_dump()
    p.update(
        name="soak-fast",
        block_tokens=68,
        chunk_tokens=4096,
        prefill_cost_d=2e-6,
        prefill_cost_e=0.0,
        decode_s_per_step=0.01,
        decode_s_per_seq=0.00002,
        context_tokens=32_768,
    )
    path = tmp / "soak-fast.yaml"
    path.write_text(yaml.safe_dump(p))
    return path


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _sample_memory(
    group: EmulatorGroup, stop: threading.Event, out: list[tuple[float, int]]
) -> None:
    t0 = time.monotonic()
    while not stop.wait(2.0):
        pids = [c.proc.pid for c in group._children.values() if c.proc is not None and c.alive()]
        out.append((time.monotonic() - t0, sum(_rss_kib(p) for p in pids)))


def _replays(g: pd.DataFrame) -> list[pd.DataFrame]:
    """Split one (engine, slot, trajectory, agent)'s records into its replays: a slot may be
    assigned the same trajectory again, which starts over (with a priming request)."""
    g = g.sort_values(["scheduled_s", "attempt"])
    # A first attempt at a turn no later than the last one starts over: a one-turn trajectory
    # replayed again in its slot repeats its turn (the corpus at the real pace, issue 22).
    back = g.turn.diff() <= 0
    starts = (g.priming & (g.attempt == 0)) | (g.turn.diff() < 0) | (back & (g.attempt == 0))
    ids = starts.cumsum()
    return [part for _, part in g.groupby(ids)]


def _check_no_lost_records(df: pd.DataFrame) -> None:
    """Every scheduled request appears exactly once, with a status: within each replay of a
    trajectory the turns follow one another without a gap, each turn's attempts count up from
    0, only failed attempts are retried, and only the very last record may be cancelled."""
    assert df.status.notna().all() and set(df.status) <= set(STATUSES)
    key = ["engine", "session", "trajectory", "agent", "turn", "attempt", "scheduled_s"]
    dup = df[df.duplicated(key, keep=False)]
    assert dup.empty, f"records doubled:\n{dup[key].head()}"
    for name, g in df.groupby(["engine", "session", "trajectory", "agent"]):
        replays = _replays(g)
        for k, r in enumerate(replays):
            turns = r.turn.drop_duplicates().tolist()
            assert turns == list(range(turns[0], turns[0] + len(turns))), (name, turns)
            for turn, t in r.groupby("turn"):
                assert t.attempt.tolist() == list(range(len(t))), (name, turn)
                assert (t.status.iloc[:-1] != "ok").all(), (name, turn, "retried an ok")
            cancelled = r.status == "cancelled"
            assert not cancelled.iloc[:-1].any(), (name, "cancelled mid-run")
            if k < len(replays) - 1:
                assert not cancelled.iloc[-1], (name, "a replay after a cancelled one")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_soak_500_sessions_with_faults_loses_no_record(tmp_path: Path) -> None:
    trace_path = tmp_path / "soak.jsonl.gz"
    write_synth(trace_path, SynthConfig(n_trajectories=120, seed=11, scale=TOKEN_SCALE))
    trace = load_trace(trace_path)
    model = str(_cheap_profile(tmp_path))
    faults = dict(error_rate=0.05, stall_rate=0.02, stall_s=3.0, seed=5)
    configs = [
        EmulatorConfig(
            engine="vllm",
            model=model,
            port=0,
            time_scale=TIME_SCALE,
            blocks=3000,
            faults=FaultConfig(crash_after=1500, **faults),
        ),
        EmulatorConfig(
            engine="sglang",
            model=model,
            port=0,
            time_scale=TIME_SCALE,
            blocks=3000,
            faults=FaultConfig(**faults),
        ),
    ]
    memory: list[tuple[float, int]] = []
    stop = threading.Event()
    with start_emulator_group(configs, restart=True, timeout_s=60) as group:
        sampler = threading.Thread(target=_sample_memory, args=(group, stop, memory), daemon=True)
        sampler.start()
        specs = [
            EngineSpec(name=e, kind=e, url=u, gpus=2, gpu_type="B200", vocab_size=151_552)
            for e, u in group.urls.items()
        ]
        plan = RunPlan(
            engines=specs,
            trace=trace,
            workload=WorkloadConfig(
                sessions=SESSIONS, duration_s=DURATION_S, window=(200.0, DURATION_S), seed=1
            ),
            out_dir=tmp_path / "run",
            time_scale=TIME_SCALE,
            clock_scale=TIME_SCALE,
            summarize=summary_of_dir,
            limits=Limits(stall_timeout_s=1.5, first_token_timeout_s=60, request_timeout_s=120),
            retries=2,
            backoff_s=0.2,
            scrape_interval_s=2.0,
        )
        t0 = time.monotonic()
        outcome = asyncio.run(run_live(plan))
        wall = time.monotonic() - t0
        stop.set()
        restarts = group.restarts()
    # 5% injected errors plus a crash put an engine near the 5% error flag: the run is
    # `degraded` exactly when the summary flags an engine, `completed` otherwise.
    flagged = any(m.get("error_flagged") for m in outcome.summary["engines"].values())
    assert outcome.status == ("degraded" if flagged else "completed")
    assert restarts == {"vllm": 1, "sglang": 0}
    df = pd.read_parquet(outcome.run_dir / "requests.parquet")
    journal = sum(1 for _ in (outcome.run_dir / "requests.jsonl").open())
    assert len(df) == journal == outcome.records
    _check_no_lost_records(df)
    errors = df[df.status == "error"]
    assert len(errors) > 0.02 * len(df)  # the injected 5% (and the crash) were seen
    assert (df.status == "timeout").any()  # stalls were seen
    assert df.session.nunique() >= SESSIONS * 0.9
    # Memory: the emulators' RSS in the last third of the run is within 50% of the middle's.
    mid = [m for t, m in memory if wall / 3 <= t < 2 * wall / 3]
    end = [m for t, m in memory if t >= 2 * wall / 3]
    print(
        f"soak: {len(df)} records, {df.status.value_counts().to_dict()}, wall {wall:.0f} s, "
        f"emulator RSS MiB mid {max(mid) / 1024:.0f} end {max(end) / 1024:.0f}, pid {os.getpid()}"
    )
    assert max(end) < 1.5 * max(mid)
