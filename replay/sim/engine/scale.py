"""A model profile for a trace whose token lengths were divided by a token scale S.

The bundled sample trace is the full-size corpus with every length divided by S, so a laptop
can replay it; the profile is scaled the same way so that a scaled context fills as many
cache blocks and costs as much modelled time as the full-size context it stands for:

- block, placement-chunk and context sizes shrink by S, the block count stays;
- the prefill cost coefficients grow so a scaled span costs what the full span costs:
  D' = D·S and, with positions in the quadratic term also shrunk, E' = E·S²;
- the scheduler's budgets (`max_batched_tokens`, `prefill_cap_tokens`) and the decode costs
  keep their real values: `replay.sim.engine.clock.StepClock` runs one scaled step as S real steps.
"""

from __future__ import annotations

from replay.profiles import ModelProfile


def scaled_profile(base: ModelProfile, token_scale: float) -> ModelProfile:
    """`base` for a trace whose token lengths were divided by `token_scale` (≥ 1)."""
    s = float(token_scale)
    if s == 1.0:
        return base
    if s < 1.0:
        raise ValueError(f"token_scale must be >= 1, got {token_scale}")
    return base.model_copy(
        update={
            "name": f"{base.name}/{s:g}",
            "block_tokens": max(1, round(base.block_tokens / s)),
            "chunk_tokens": max(1, round(base.chunk_tokens / s)),
            "context_tokens": max(1, int(base.context_tokens / s)),
            "prefill_cost_d": base.prefill_cost_d * s,
            "prefill_cost_e": base.prefill_cost_e * s * s,
        }
    )
