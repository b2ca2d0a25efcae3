"""`state_aware`: ours. A hybrid model's turn can resume only from a point where the replica
holds a state checkpoint *and* the KV before it (the source's resume position); a KV-only
router (SMG's tree, llm-d's blocks, Dynamo's KV events) sees the KV and not the state, so it
can send a turn where the KV is warm but no checkpoint is, and the turn recomputes.

The rule: for each replica i, ask it where it could resume this request (`resumable`,
tokens: the longest prefix with a checkpoint and its KV resident), price the prefill left
on the engine's step clock (`RouterContext.prefill_seconds`, replay.sim.engine.clock.StepClock),
c_i = prefill_s(resume_i, P), and estimate the request's time to first token there against
the replica's queue. Two queue models (`queue_model`):

- `sharing` (the default): the replica's prefills share its token budget (chunked prefill,
  every running prefill advancing each step), so a request of c_i seconds arriving beside
  n_i others still in prefill takes about c_i × (1 + n_i) (processor sharing; n_i is the
  router's count of requests it sent there that have no first token yet);
- `fcfs`: the request waits for every prefill second routed there before it, c_i + Σ
  pending (a first-come-first-served prefill queue).

    score_i = prefill_s(0, P) − ttft_i      # prefill seconds saved against that queue

and the highest score wins (ties: the fewest in flight, then the lowest index). Branch
"resume" when the chosen replica resumes the request somewhere, "queue" when it starts
cold. Without a clock it prices in tokens. A replica that publishes no lookup counts as
resuming nothing.

Why `sharing`: with `fcfs` one cold prefill of a long agent context (seconds on the step
clock) made every conversation on that replica look cheaper elsewhere, and they moved and
recomputed (experiments/fleet_routers.py, the bundled sample, 8 replicas × 32 sessions,
flashstate: hit rate 56% against session_hash's 85%, half the turns sent cold); the engine
model does not serialise prefills that way (replay.sim.engine.core: running prefills share each
step's budget).

What a replica must publish for it: the lookup "where would you resume this prompt"
(the emulator and the simulator answer it from their cache; a real FlashState or vLLM
server would need an endpoint over its prefix cache that reports the deepest position with
both a state checkpoint and its KV resident — vLLM's KV events are emitted for hybrid
models only on inflated blocks and carry no state checkpoints, SGLang's for the full
attention part only, and Dynamo drops events of non-attention cache kinds, issue 26).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from replay.fleet.base import Decision, Param, ReplicaView, Router, RouterContext, RouteRequest

QUEUE_MODELS = ("sharing", "fcfs")


class StateAware(Router):
    name = "state_aware"
    source = "ours (replay.fleet.state_aware); prices on replay.sim.engine.clock.StepClock"
    params: ClassVar[Mapping[str, Param]] = {
        "queue_model": Param(
            "sharing",
            "ours: prefills share the step budget (replay.sim.engine.core)",
            "sharing | fcfs",
        ),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        if self.str_param("queue_model") not in QUEUE_MODELS:
            raise ValueError(
                f"router state_aware: queue_model must be one of {', '.join(QUEUE_MODELS)}, "
                f"not {self.p['queue_model']!r}"
            )
        self.pending = [0.0] * ctx.replicas  # predicted prefill seconds (or tokens) queued
        self.prefilling = [0] * ctx.replicas  # requests sent there without a first token
        self._owed: dict[int, tuple[int, float]] = {}  # id(request) -> (replica, amount)

    def _cost(self, a: int, b: int) -> float:
        f = self.ctx.prefill_seconds
        return f(a, b) if f is not None else float(max(b - a, 0))

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        p = req.prompt_tokens
        full = self._cost(0, p)
        resume = [
            min(max(r.resumable(req), 0), p) if r.resumable is not None else 0 for r in replicas
        ]
        costs = [self._cost(x, p) for x in resume]
        if self.str_param("queue_model") == "fcfs":
            ttft = [c + self.pending[i] for i, c in enumerate(costs)]
        else:
            ttft = [c * (1 + self.prefilling[i]) for i, c in enumerate(costs)]
        scores = [full - t for t in ttft]
        pick = max(range(len(replicas)), key=lambda i: (scores[i], -replicas[i].in_flight, -i))
        self.pending[pick] += costs[pick]
        self.prefilling[pick] += 1
        self._owed[id(req)] = (pick, costs[pick])
        branch = "resume" if resume[pick] > 0 else "queue"
        return Decision(pick, branch, tuple(scores), resume[pick])

    def _release(self, req: RouteRequest) -> None:
        owed = self._owed.pop(id(req), None)
        if owed is not None:
            i, amount = owed
            self.pending[i] = max(self.pending[i] - amount, 0.0)
            self.prefilling[i] -= 1

    def on_first_token(self, req: RouteRequest, replica: int) -> None:
        self._release(req)

    def on_finish(self, req: RouteRequest, replica: int, ok: bool) -> None:
        self._release(req)
