"""The load a run offers, measured as the demo measures its own: prompt tokens per minute per
GPU at the demo's pace.

The source's demo panel (seed document, "What I ran": 48 Claude Code agents on GLM-5.3-Flash,
two B200s per engine) serves FlashState 4.74M prompt tokens/min/GPU at an E2E mean of 27.8 s.
A workload's offered load is found from inputs only: its sessions are replayed on the trace's
own clock (trace timing: the recorded latencies, no engine model, no output of ours), and
Little's law re-paces the streams it kept (main sessions and concurrent subagents) to the demo's
E2E: streams = rate × (E2E + tool gap), each then cycling in (27.8 s + the same gap). The
offered prompt throughput over the demo's is the load "× the demo's" that results print
(`experiments/pacing_experiment.py` has the experiment; the embedded default's session count is the
one nearest 1.0, configs/workloads/default.yaml).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replay.records import RequestRecord
    from replay.traces.model import Trace

DEMO_PROMPT_PER_GPU = 4.74e6  # FlashState's prompt tokens/min/GPU (seed document's panel)
DEMO_E2E_S = 27.8  # FlashState's E2E mean, s (seed document's panel)
DEMO_GPUS = 2  # two B200s per engine (seed document, "Hardware")


def finished_in_window(
    records: Iterable[RequestRecord], window: tuple[float, float]
) -> list[RequestRecord]:
    """The measured requests the paper's throughput counts: not priming, finished ok, first
    token inside [start, end), with their send, first-token and done times known."""
    lo, hi = window
    return [
        r
        for r in records
        if not r.priming
        and r.status == "ok"
        and r.first_token_s is not None
        and r.done_s is not None
        and r.sent_s is not None
        and lo <= r.first_token_s < hi
    ]


def repace(
    records: Iterable[RequestRecord], window: tuple[float, float], token_scale: float
) -> dict[str, float] | None:
    """The window's served streams re-paced to the demo's E2E (full-size tokens): rate (req/s),
    mean prompt, E2E and tool gap as run, and `prompt_per_gpu` at the demo's pace. None when
    no request finished in the window."""
    lo, hi = window
    done = finished_in_window(records, window)
    if not done:
        return None
    rate = len(done) / (hi - lo)
    prompt = token_scale * statistics.fmean(r.prompt_tokens for r in done)
    e2e = statistics.fmean(r.done_s - r.sent_s for r in done)  # type: ignore[operator]
    gap = statistics.fmean(r.tool_gap_s for r in done)
    paced = rate * (e2e + gap) / (DEMO_E2E_S + gap)
    return {
        "rate": rate,
        "mean_prompt": prompt,
        "e2e": e2e,
        "gap": gap,
        "paced_rate": paced,
        "prompt_per_gpu": paced * prompt * 60 / DEMO_GPUS,
    }


def offered_vs_demo(trace: Trace, **config: Any) -> float | None:
    """The offered load of a point (`SimConfig` fields: sessions, seed, token_scale,
    subagents, duration, window, warm-up, gap cap) over the demo's, from a trace-timing
    replay; None when nothing finished in its window."""
    from replay.sim.runner import SimConfig, simulate

    cfg = SimConfig(**{**config, "policy": "flashstate", "timing": "trace"})
    res = simulate(trace, cfg)
    paced = repace(res.records, cfg.window, cfg.token_scale)
    return None if paced is None else paced["prompt_per_gpu"] / DEMO_PROMPT_PER_GPU


__all__ = [
    "DEMO_E2E_S",
    "DEMO_GPUS",
    "DEMO_PROMPT_PER_GPU",
    "finished_in_window",
    "offered_vs_demo",
    "repace",
]
