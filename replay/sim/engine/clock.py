"""The engine's step clock: how long one forward pass takes, in physical parameters.

One clock for every engine on the same model and GPU (the profile's fields; no per-engine
factor): a step costs

    step_s = decode_s_per_step                 # fixed: weights read, launch, sampling
           + decode_s_per_seq · decoding       # each running sequence's attention read
           + clock_prefill_scale · cost(a, b)  # per prefill chunk [a, b): the paper's cost
                                               # model D·(b−a) + E·(b²−a²)/2 (by position)

The parameters are fitted for GLM-5.3-Flash on 2×B200 in configs/models/glm-5.3-flash.yaml,
with the derivation beside them.

Token scale. A trace whose lengths were divided by S (the bundled sample) is replayed so
that it costs the modelled time of the full-size trace: one step of the scaled engine stands
for S real steps. In S real steps every decoding sequence produces S real tokens (one scaled
token) and prefill gets S·(budget − decoding) real tokens (budget − decoding scaled tokens),
a request at most S·cap real tokens (cap scaled tokens). So the scheduler's budgets keep
their real-token values when counted in scaled tokens per scaled step, the fixed and
per-sequence decode costs are paid S times, and prefill costs what the real positions
[a·S, b·S) cost (the scaled profile's D·S and E·S² say exactly that).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replay.profiles import ModelProfile
from replay.sim.cache.cost import PrefillCost


@dataclass(frozen=True)
class StepClock:
    """Step durations and scheduler budgets of one engine on a (possibly scaled) profile.

    `profile` is the profile the cache uses (positions in the trace's tokens: for a scaled
    trace, `replay.sim.engine.scale.scaled_profile`); `token_scale` is S."""

    profile: ModelProfile
    token_scale: float = 1.0
    cost: PrefillCost = field(init=False, repr=False, compare=False)  # read off `profile`

    def __post_init__(self) -> None:
        object.__setattr__(self, "cost", PrefillCost(self.profile))

    @property
    def budget_tokens(self) -> int:
        """Tokens one step may compute (decode tokens included): vLLM's
        `--max-num-batched-tokens`. Per scaled step in scaled tokens, which is the same number."""
        return self.profile.max_batched_tokens

    @property
    def prefill_cap_tokens(self) -> int:
        """Most prompt tokens one request computes per step: vLLM's
        `--long-prefill-token-threshold` (the unscaled `chunk_tokens`)."""
        return self.profile.prefill_cap_tokens

    def decode_seconds(self, decoding: int) -> float:
        """The step's cost without prefill: S real steps of `decoding` sequences."""
        p = self.profile
        return self.token_scale * (p.decode_s_per_step + p.decode_s_per_seq * decoding)

    def prefill_seconds(self, a: int, b: int) -> float:
        """Prefill of positions [a, b) (trace tokens) given [0, a) is cached."""
        return self.cost.clock_seconds(a, b)

    def step_seconds(self, decoding: int, chunks: list[tuple[int, int]]) -> float:
        if not chunks:  # a decode-only step (most): the same sum without its empty part
            return self.decode_seconds(decoding)
        return self.decode_seconds(decoding) + sum(self.prefill_seconds(a, b) for a, b in chunks)

    def describe(self) -> dict[str, float | int]:
        """The parameters, for manifests and server info (real-token units)."""
        p = self.profile
        return {
            "token_scale": self.token_scale,
            "step_s": p.decode_s_per_step,
            "decode_s_per_seq": p.decode_s_per_seq,
            "clock_prefill_scale": p.clock_prefill_scale,
            "prefill_cost_d": p.prefill_cost_d / self.token_scale,
            "prefill_cost_e": p.prefill_cost_e / self.token_scale**2,
            "max_batched_tokens": self.budget_tokens,
            "prefill_cap_tokens": self.prefill_cap_tokens,
        }
