"""`state_aware`: ours. A hybrid model's turn can resume only from a point where the replica
holds a state checkpoint *and* the KV before it (the source's resume position); a KV-only
router (SMG's tree, llm-d's blocks, Dynamo's KV events) sees the KV and not the state, so it
can send a turn where the KV is warm but no checkpoint is, and the turn recomputes.

The rule: for each replica i, ask it where it could resume this request (`resumable`,
tokens: the longest prefix with a checkpoint and its KV resident) and price it on the
engine's step clock (`RouterContext.prefill_seconds`, replay.sim.clock.StepClock):

    saved_i = prefill_s(0, P) − prefill_s(resume_i, P)      # prefill seconds it saves
    wait_i  = Σ prefill_s(resume, P) of the requests routed to i not yet at first token
    score_i = saved_i − wait_i

and take the highest score (ties: the fewest in flight, then the lowest index). Branch
"resume" when the chosen replica resumes the request somewhere, "queue" when it starts cold.
Without a clock it prices in tokens (saved = resume_i, wait = the queued prefill tokens).
A replica that publishes no lookup counts as resuming nothing.

What a replica must publish for it: the lookup "where would you resume this prompt"
(the emulator and the simulator answer it from their cache; a real FlashState or vLLM
server would need an endpoint over its prefix cache that reports the deepest position with
both a state checkpoint and its KV resident — vLLM's KV events are emitted for hybrid
models only on inflated blocks and carry no state checkpoints, SGLang's for the full
attention part only, and Dynamo drops events of non-attention cache kinds, issue 26).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replay.fleet.base import Decision, ReplicaView, Router, RouterContext, RouteRequest


class StateAware(Router):
    name = "state_aware"
    source = "ours (replay.fleet.state_aware); prices on replay.sim.clock.StepClock"

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        self.pending = [0.0] * ctx.replicas  # predicted prefill seconds (or tokens) queued
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
        scores = [full - c - self.pending[i] for i, c in enumerate(costs)]
        pick = max(range(len(replicas)), key=lambda i: (scores[i], -replicas[i].in_flight, -i))
        self.pending[pick] += costs[pick]
        self._owed[id(req)] = (pick, costs[pick])
        branch = "resume" if resume[pick] > 0 else "queue"
        return Decision(pick, branch, tuple(scores), resume[pick])

    def _release(self, req: RouteRequest) -> None:
        owed = self._owed.pop(id(req), None)
        if owed is not None:
            i, amount = owed
            self.pending[i] = max(self.pending[i] - amount, 0.0)

    def on_first_token(self, req: RouteRequest, replica: int) -> None:
        self._release(req)

    def on_finish(self, req: RouteRequest, replica: int, ok: bool) -> None:
        self._release(req)
