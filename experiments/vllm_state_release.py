"""Experiment: when vLLM frees the state a request's next turn resumes from (issue 22, the
pressure clause; engine-model.md "At the demo's load").

    .venv/bin/python experiments/vllm_state_release.py        # inline subagents, seeds 0-2
    .venv/bin/python experiments/vllm_state_release.py --subagents concurrent --seeds 0

vLLM 0.32 frees a Mamba state block once the running state moves past it, right after the
prefill, and the request's KV only when the request ends (`replay/sim/cache/vllm_policy.py`
rule 4, `single_type_kv_cache_manager.py` MambaManager `remove_skipped_blocks`). Under
saturation a request decodes for minutes, and its replay-boundary state waits in the free
queue all that time. This script toggles that one rule:
- `released` is vLLM's rule, as shipped;
- `held` keeps the state until the request ends, with its KV. That is NOT vLLM's code, only
  the experiment.

It runs the `vllm` policy with engine timing on the bundled sample at 48 sessions, the
demo's load (experiments/pacing_experiment.py). It prints, per variant and seed:
- the hit rate, TTFT p50 and E2E mean, and the time per output token;
- the share of prompt tokens lost to dependency misses (KV resident, state gone) among
  requests whose session came back within 2 s.

It runs the interpreted cache modules (`REPLAY_SIM_INTERPRETED=1`), because a compiled
class cannot be patched; results are the same, only slower.
"""

from __future__ import annotations

import argparse
import os
import statistics

if __name__ == "__main__":  # before replay.sim is imported: patchable classes (not on import)
    os.environ["REPLAY_SIM_INTERPRETED"] = "1"

from replay.records import RequestRecord
from replay.sim.cache import vllm_policy
from replay.sim.runner import SimConfig, simulate
from replay.traces import load_trace, sample_path
from replay.traces.scale import resolve_token_scale
from replay.workload import SUBAGENT_MODES, TIMED_WARMUP_S

RELEASED = vllm_policy.ReplayBoundary.holds_last_state


def _held(self: vllm_policy.ReplayBoundary) -> bool:
    return True


def short_gap_dependency(records: list[RequestRecord], window: tuple[float, float]) -> float:
    """Dependency-miss share of the prompt tokens of requests sent within 2 s of their
    session's previous turn, over the requests whose first token is in `window`."""
    lo, hi = window
    sel = [
        r
        for r in records
        if not r.priming
        and r.status == "ok"
        and r.first_token_s is not None
        and lo <= r.first_token_s < hi
        and r.tool_gap_s < 2.0
    ]
    total = sum(r.prompt_tokens for r in sel)
    return sum(r.dependency_miss or 0 for r in sel) / total if total else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subagents", default="inline", choices=SUBAGENT_MODES)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--sessions", type=int, default=48)
    args = ap.parse_args()
    trace = load_trace(sample_path())
    scale = resolve_token_scale(trace, None)
    print(
        f"bundled sample, {args.sessions} sessions, subagents {args.subagents}, vllm, engine timing"
    )
    print("| variant | seed | hit | TTFT p50 s | E2E mean s | s/out token | dep. miss, gap < 2 s |")
    print("|---|---|---|---|---|---|---|")
    for variant in ("released", "held"):
        vllm_policy.ReplayBoundary.holds_last_state = RELEASED if variant == "released" else _held  # type: ignore[method-assign]
        for seed in (int(x) for x in args.seeds.split(",")):
            cfg = SimConfig(
                policy="vllm",
                sessions=args.sessions,
                seed=seed,
                timing="engine",
                token_scale=scale,
                warmup_s=TIMED_WARMUP_S,
                subagents=args.subagents,
            )
            res = simulate(trace, cfg)
            s = res.summary
            lo, hi = cfg.window
            tpot = [
                (r.done_s - r.first_token_s) / (scale * (r.output_tokens - 1))
                for r in res.records
                if r.status == "ok"
                and not r.priming
                and r.done_s is not None
                and r.first_token_s is not None
                and lo <= r.first_token_s < hi
                and r.output_tokens > 1
            ]
            print(
                f"| {variant} | {seed} | {s['hit_rate']:.1%} | {s['ttft_p50_s']:.1f} | "
                f"{s['latency_mean_s']:.1f} | {statistics.fmean(tpot):.3f} | "
                f"{short_gap_dependency(res.records, cfg.window):.1%} |"
            )
    vllm_policy.ReplayBoundary.holds_last_state = RELEASED  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
