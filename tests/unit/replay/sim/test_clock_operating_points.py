"""The step clock against the source's published operating points (issue 22, the pressure
clause): the fit's positions are the ones the replay computes at, the shipped clock serves
all three engines' published prefill there (SGLang's, which the fit does not use, near
saturation as its queue says), and the clock charges a chunk at its own positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.profiles import load_profile
from replay.sim.engine.clock import StepClock
from replay.sim.engine.scale import scaled_profile
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace, sample_path
from replay.workload import TIMED_WARMUP_S
from tests.scripts import load_experiment, load_script

ROOT = Path(__file__).resolve().parents[4]


def test_the_shipped_clock_serves_every_published_point_at_the_measured_positions() -> None:
    fit = load_script("fit_clock")
    p = load_profile("glm-5.3-flash")
    c0, c1, k = p.decode_s_per_step, p.decode_s_per_seq, p.clock_prefill_scale
    pos = fit.POSITIONS[fit.FIT]
    for engine in ("flashstate", "vllm"):  # the fitted points: their step times come back
        out_min, prompt_min_gpu, hit, e2e, ttft = fit.POINTS[engine]
        load = fit.load(out_min, prompt_min_gpu, hit, pos[engine], c1, k)
        assert load < 1
        assert c0 / (1 - load) == pytest.approx((e2e - ttft) / fit.MEDIAN_OUT, rel=0.02)
    # SGLang's point is not in the fit: the clock must serve it, and only just (TTFT p50
    # 56.3 s is a queue). A clock 25% slower or 25% faster fails one side.
    sglang = fit.load(*fit.SGLANG, pos["sglang"], c1, k)
    assert 0.8 <= sglang < 1.0
    assert fit.load(*fit.SGLANG, pos["sglang"], c1, 1.25 * k) > 1.0
    assert fit.load(*fit.SGLANG, pos["sglang"], c1, 0.75 * k) < 0.8
    # The check discriminates: the clock fitted at the old positions (the mean prompt's end
    # for FlashState, an average prompt's middle for vLLM) cannot serve vLLM's and SGLang's
    # published prefill at the positions the replay computes at.
    old_c0, _, old_k = fit.fit("old")
    assert old_k == pytest.approx(0.383, abs=0.001) and old_c0 == pytest.approx(0.00299, abs=1e-5)
    assert fit.load(*fit.POINTS["vllm"][:3], pos["vllm"], c1, old_k) > 1.0
    assert fit.load(*fit.SGLANG, pos["sglang"], c1, old_k) > 1.0
    # Every subagent reading gives a clock within 11% of the shipped one (skip −10%, concurrent +9%).
    for reading in ("skip", "concurrent"):
        assert fit.fit(reading)[2] == pytest.approx(k, rel=0.11)


@pytest.mark.parametrize(("engine", "blocks"), [("flashstate", 3216), ("vllm", 1657)])
def test_the_fit_positions_are_what_clock_positions_measures(engine: str, blocks: int) -> None:
    """One run of experiments/clock_positions.py's bisection, at the cache size it settled on:
    the demo's hit rate within 1.5 points, the position the fit uses within 1%."""
    fit, probe = load_script("fit_clock"), load_experiment("clock_positions")
    trace = load_trace(sample_path())
    profile = load_profile("glm-5.3-flash")
    cfg = SimConfig(
        policy=engine,
        sessions=48,
        token_scale=16,
        warmup_s=TIMED_WARMUP_S,
        subagents="inline",
        capacity_blocks=blocks,
    )
    res = simulate(trace, cfg, profile)
    hit, _prompt, pos = probe.cost_position(res.records, profile, 16, cfg.window)
    assert hit == pytest.approx(probe.DEMO_HIT[engine], abs=0.015)
    assert pos == pytest.approx(fit.POSITIONS["inline"][engine], rel=0.01)


def test_cost_position_names_an_empty_window() -> None:
    probe = load_experiment("clock_positions")
    with pytest.raises(ValueError, match="no computed prefill in the window"):
        probe.cost_position([], load_profile("glm-5.3-flash"), 1, (0.0, 1.0))


def test_a_chunk_costs_its_tokens_at_their_own_positions_at_any_token_scale() -> None:
    p = load_profile("glm-5.3-flash")
    clock = StepClock(p)
    u = p.cost_unit_tokens
    # t tokens centred on position q cost t · (D + E·q) (the marginal is linear in position):
    # what the fit's "cost per computed token at p_eff" assumes.
    for q, t in ((134_874, 564), (163_714, 3_464), (500_000, 8_704)):
        got = clock.step_seconds(28, [(q - t // 2, q + t // 2)])
        want = p.decode_s_per_step + 28 * p.decode_s_per_seq
        want += p.clock_prefill_scale * t * (p.prefill_cost_d + p.prefill_cost_e * q / u)
        assert got == pytest.approx(want, rel=1e-9)
    # A 1/16 trace: a scaled chunk costs its full-size positions, a scaled step 16 real steps.
    s = 16
    scaled = StepClock(scaled_profile(p, s), s)
    assert scaled.prefill_seconds(1_000, 9_000) == pytest.approx(
        clock.prefill_seconds(1_000 * s, 9_000 * s), rel=1e-9
    )
    assert scaled.decode_seconds(20) == pytest.approx(s * clock.decode_seconds(20), rel=1e-12)


def test_pacing_experiment_derives_the_demo_line_from_the_panel() -> None:
    pace = load_experiment("pacing_experiment")
    fs = pace.demo_line("flashstate")
    assert fs["rate"] == pytest.approx(4.74e6 * 2 / 218_922 / 60)  # 0.722 requests/s
    assert fs["in_flight"] == pytest.approx(fs["rate"] * 27.8)
    assert fs["mean_out"] == pytest.approx(61.7e3 / 60 / fs["rate"])
    # Re-paced: the streams a run kept (rate × (E2E + gap)) cycling at the demo's E2E.
    d = {"rate": 2.0, "e2e": 10.0, "gap": 20.0, "mean_prompt": 100_000.0, "mean_out": 900.0}
    r = pace.repaced(d, 40.0)
    assert r["rate"] == pytest.approx(2.0 * 30.0 / 60.0)
    assert r["prompt_min_gpu"] == pytest.approx(1.0 * 100_000 * 60 / 2)
    assert pace.repaced({"rate": None}, 40.0) == {}


def test_vllm_state_release_counts_dependency_misses_of_quick_returns_only() -> None:
    from replay.records import RequestRecord

    exp = load_experiment("vllm_state_release")

    def rec(gap: float, t: float, dep: int, prompt: int = 1000) -> RequestRecord:
        return RequestRecord(
            engine="vllm", session=0, trajectory="t", agent="main", turn=1, scheduled_s=t,
            sent_s=t, first_token_s=t, done_s=t + 1, prompt_tokens=prompt,
            dependency_miss=dep, tool_gap_s=gap,
        )  # fmt: skip

    rs = [rec(0.5, 10, 600), rec(1.5, 10, 0), rec(5.0, 10, 1000), rec(0.1, 99, 1000)]
    # the quick returns inside the window: (600 + 0) / 2000; the 5 s gap and t = 99 left out
    assert exp.short_gap_dependency(rs, (0.0, 50.0)) == pytest.approx(0.3)
    assert exp.short_gap_dependency([], (0.0, 50.0)) == 0.0
