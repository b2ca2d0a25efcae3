"""The load-only routers: round-robin, least-load (join the shortest queue) and a
consistent hash on the session.

- `round_robin`: SMG model_gateway/src/policies/round_robin.rs (a counter modulo the
  healthy workers).
- `least_load`: the fewest in-flight requests as the router counts them, ties to the
  fewest requests routed so far, then the lowest index: SMG's min-load pick inside
  `cache_aware` (model_gateway/src/policies/cache_aware.rs, `select_worker`, the
  `(load, processed, idx)` key of #1714) and aiperf's least-loaded first turn. (SMG's own
  `least_load` policy now scores token work over throughput plus a KV barrier,
  least_load.rs; it needs the backend's load poll, which a router here does not have.)
- `session_hash`: SMG's consistent-hash ring (model_gateway/src/worker/hash_ring.rs): 150
  virtual nodes per worker at hash("{url}#{vnode}"), the key hashed onto the ring and the
  first node clockwise taken. The routing key is the session id (SMG's
  `X-SMG-Routing-Key` header; inference-perf pins a session by hash of its id). SMG
  hashes with blake3; we use blake2b (hashlib), so which replica a given key lands on
  differs from SMG's, but the distribution and the stickiness are the same.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import ClassVar

from replay.fleet.base import Decision, Param, ReplicaView, Router, RouterContext, RouteRequest


def least_loaded(replicas: Sequence[ReplicaView]) -> int:
    """SMG's min-load index: smallest (in_flight, processed, index)."""
    return min(replicas, key=lambda r: (r.in_flight, r.processed, r.index)).index


class RoundRobin(Router):
    name = "round_robin"
    source = "smg model_gateway/src/policies/round_robin.rs"

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        self._next = 0

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        i = self._next % len(replicas)
        self._next += 1
        return Decision(i, "round_robin")


class LeastLoad(Router):
    name = "least_load"
    source = "smg model_gateway/src/policies/cache_aware.rs select_worker (min-load key)"

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        return Decision(
            least_loaded(replicas), "least_load", tuple(float(r.in_flight) for r in replicas)
        )


def _position(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


class SessionHash(Router):
    name = "session_hash"
    source = "smg model_gateway/src/worker/hash_ring.rs, policies/consistent_hashing.rs"
    params: ClassVar[Mapping[str, Param]] = {
        "virtual_nodes": Param(150, "smg hash_ring.rs VIRTUAL_NODES_PER_WORKER = 150"),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        vnodes = self.int_param("virtual_nodes")
        ring = sorted(
            (_position(f"replica-{i}#{v}"), i) for i in range(ctx.replicas) for v in range(vnodes)
        )
        self._pos = [p for p, _ in ring]
        self._owner = [i for _, i in ring]

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        k = bisect_left(self._pos, _position(req.session)) % len(self._pos)
        return Decision(self._owner[k], "hash")
