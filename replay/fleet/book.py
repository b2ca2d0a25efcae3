"""The router's own count of what it sent where (`LoadBook`), and the fleet front a
executor calls (`Fleet`): route a request, then report its first token and its end.

What a router counts is what it can know without asking a replica: requests in flight
(SMG's `Worker::load`, incremented when it routes and decremented when the response ends),
prompt tokens still to prefill (Dynamo's `ActiveSequences` prefill tokens, released at the
first token) and the tokens its in-flight requests occupy (Dynamo's active blocks). What a
replica publishes (KV utilisation, a resume lookup) comes from the executor, per call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from replay.fleet.base import Decision, ReplicaView, Resumable, Router, RouteRequest


@dataclass(slots=True)
class Ticket:
    """One routed request's bookkeeping, handed back to `first_token` / `finish`."""

    request: RouteRequest
    decision: Decision
    pending_prefill: int  # tokens counted in the replica's queued prefill until first token
    active: int  # tokens counted in the replica's active tokens until it finishes
    prefilled: bool = False
    finished: bool = False

    @property
    def replica(self) -> int:
        return self.decision.replica


class LoadBook:
    """Per replica: in-flight requests, queued prefill tokens and active tokens."""

    __slots__ = ("active_tokens", "in_flight", "processed", "queued_prefill")

    def __init__(self, replicas: int):
        self.in_flight = [0] * replicas
        self.queued_prefill = [0] * replicas
        self.active_tokens = [0] * replicas
        self.processed = [0] * replicas

    def views(
        self,
        kv_utilisation: Sequence[float | None] | None = None,
        resumable: Sequence[Resumable | None] | None = None,
        cached_prefix: Sequence[Resumable | None] | None = None,
        waiting: Sequence[int | None] | None = None,
    ) -> list[ReplicaView]:
        n = len(self.in_flight)
        return [
            ReplicaView(
                index=i,
                in_flight=self.in_flight[i],
                queued_prefill_tokens=self.queued_prefill[i],
                active_tokens=self.active_tokens[i],
                kv_utilisation=kv_utilisation[i] if kv_utilisation is not None else None,
                resumable=resumable[i] if resumable is not None else None,
                cached_prefix=cached_prefix[i] if cached_prefix is not None else None,
                waiting_requests=waiting[i] if waiting is not None else None,
                processed=self.processed[i],
            )
            for i in range(n)
        ]

    def start(self, req: RouteRequest, decision: Decision) -> Ticket:
        r = decision.replica
        pending = max(req.prompt_tokens - decision.predicted_overlap, 0)
        active = req.prompt_tokens + req.expected_output_tokens
        self.in_flight[r] += 1
        self.processed[r] += 1
        self.queued_prefill[r] += pending
        self.active_tokens[r] += active
        return Ticket(req, decision, pending, active)

    def first_token(self, t: Ticket) -> None:
        if not t.prefilled:
            t.prefilled = True
            self.queued_prefill[t.replica] -= t.pending_prefill

    def finish(self, t: Ticket) -> None:
        if t.finished:
            return
        self.first_token(t)
        t.finished = True
        self.in_flight[t.replica] -= 1
        self.active_tokens[t.replica] -= t.active


class Fleet:
    """A router and its book: what each executor holds for one engine's replicas."""

    def __init__(
        self,
        router: Router,
        kv_utilisation: Callable[[int], float | None] | None = None,
        resumable: Sequence[Resumable | None] | None = None,
        cached_prefix: Sequence[Resumable | None] | None = None,
        waiting: Callable[[int], int | None] | None = None,
    ):
        self.router = router
        self.replicas = router.ctx.replicas
        self.book = LoadBook(self.replicas)
        self._kv = kv_utilisation
        self._resumable = resumable
        self._cached = cached_prefix
        self._waiting = waiting

    def route(self, req: RouteRequest) -> Ticket:
        kv = [self._kv(i) for i in range(self.replicas)] if self._kv is not None else None
        wait = [self._waiting(i) for i in range(self.replicas)] if self._waiting else None
        views = self.book.views(kv, self._resumable, self._cached, wait)
        decision = self.router.route(req, views)
        if not 0 <= decision.replica < self.replicas:
            raise RuntimeError(
                f"router {self.router.name} chose replica {decision.replica} of {self.replicas}"
            )
        return self.book.start(req, decision)

    def first_token(self, t: Ticket) -> None:
        if not t.prefilled:
            self.book.first_token(t)
            self.router.on_first_token(t.request, t.replica)

    def finish(self, t: Ticket, ok: bool = True) -> None:
        if not t.finished:
            self.book.finish(t)
            self.router.on_finish(t.request, t.replica, ok)
