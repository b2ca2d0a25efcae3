"""round_robin, least_load, session_hash, llmd, dynamo and state_aware, decision by decision
(hand-computed), and the registry's messages."""

from __future__ import annotations

import pytest

from replay.fleet import Fleet, ReplicaView, RouterContext, RouteRequest, make_router
from replay.fleet.registry import UnknownRouter


class Keys:
    """A prefix identity for tests: token ids, key = the tuple of the first p."""

    def __init__(self, tokens: list[int]):
        self.tokens = tokens

    @property
    def length(self) -> int:
        return len(self.tokens)

    def key_at(self, p: int) -> int:
        return hash(tuple(self.tokens[:p]))


def req(tokens: list[int], session: str = "s", now: float | None = None) -> RouteRequest:
    return RouteRequest("e", session, len(tokens), prefix=Keys(tokens), now_s=now)


def idle(n: int) -> list[ReplicaView]:
    return [ReplicaView(i) for i in range(n)]


def test_round_robin_cycles() -> None:
    r = make_router("round_robin", RouterContext(3))
    assert [r.route(req([1]), idle(3)).replica for _ in range(5)] == [0, 1, 2, 0, 1]


def test_least_load_counts_in_flight_then_processed_then_index() -> None:
    r = make_router("least_load", RouterContext(3))
    vs = [ReplicaView(0, 2), ReplicaView(1, 1, processed=4), ReplicaView(2, 1, processed=3)]
    assert r.route(req([1]), vs).replica == 2


def test_least_load_through_the_fleet_book() -> None:
    f = Fleet(make_router("least_load", RouterContext(2)))
    a = f.route(req([1] * 10))
    b = f.route(req([2] * 10))
    assert (a.replica, b.replica) == (0, 1)
    f.finish(a)
    assert f.book.in_flight == [0, 1] and f.book.queued_prefill == [0, 10]
    assert f.route(req([3])).replica == 0


def test_session_hash_is_sticky_and_spreads() -> None:
    r = make_router("session_hash", RouterContext(4))
    picks = {s: r.route(req([1], session=f"conv-{s}"), idle(4)).replica for s in range(200)}
    assert all(r.route(req([9], session=f"conv-{s}"), idle(4)).replica == picks[s] for s in picks)
    counts = [list(picks.values()).count(i) for i in range(4)]
    assert min(counts) > 20  # 150 virtual nodes each: no replica starves


def test_llmd_weighted_sum_hand_computed() -> None:
    r = make_router("llmd", RouterContext(3))
    tokens = list(range(64))  # 4 blocks of 16
    # replica 1 holds the whole prompt (routed there before), replica 2 none
    r.route(req(tokens), [ReplicaView(0, 5), ReplicaView(1, 0), ReplicaView(2, 5)])
    vs = [
        ReplicaView(0, 0, kv_utilisation=0.2),  # queue 1.0, kv 0.8, prefix 0 → 2+1.6 = 3.6
        ReplicaView(1, 4, kv_utilisation=0.5),  # queue 0.0, kv 0.5, prefix 1 → 1+3 = 4.0
        ReplicaView(2, 2, kv_utilisation=0.0),  # queue 0.5, kv 1.0, prefix 0 → 1+2 = 3.0
    ]
    d = r.route(req(tokens + [7] * 16), vs)  # 5 blocks, 4 held by 1: prefix 0.8 → 3.4
    assert d.scores == pytest.approx((3.6, 3.4, 3.0))
    assert (d.replica, d.branch, d.predicted_overlap) == (0, "load", 0)
    # the request just routed to 0 put its blocks in 0's index: now both hold all 4
    d2 = r.route(req(tokens), vs)
    assert d2.scores == pytest.approx((6.6, 4.0, 3.0))
    assert (d2.replica, d2.branch, d2.predicted_overlap) == (0, "prefix", 64)


def test_llmd_prefix_cap_makes_long_prompts_alike() -> None:
    r = make_router("llmd", RouterContext(2))
    base = list(range(256 * 16))
    r.route(req(base + [1] * 1000), idle(2))  # → 0 (tie broken at random, seed 0)
    first = r.route(req(base + [1] * 1000), idle(2)).replica
    d = r.route(req(base + [2] * 5000), [ReplicaView(0), ReplicaView(1)])
    assert d.replica == first and d.predicted_overlap == 4096  # differs only past the cap


def test_dynamo_cost_hand_computed() -> None:
    r = make_router("dynamo", RouterContext(2))
    rq = req(list(range(64)))  # 4 blocks
    vs = [
        # raw (32 + 64)/16 = 6, overlap 4 → max(6 − 4, 0) = 2; decode (160 + 64)/16 = 14 → 16
        ReplicaView(0, queued_prefill_tokens=32, active_tokens=160, cached_prefix=lambda q: 64),
        # raw 4, overlap 0 → 4; decode (128 + 64)/16 = 12 → 16: a tie
        ReplicaView(1, queued_prefill_tokens=0, active_tokens=128, cached_prefix=lambda q: 0),
    ]
    d = r.route(rq, vs)
    assert d.scores == (16.0, 16.0) and d.branch == "min_cost"
    vs[1] = ReplicaView(1, active_tokens=144, cached_prefix=lambda q: 0)  # 4 + 13 = 17
    d = r.route(rq, vs)
    assert (d.replica, d.predicted_overlap) == (0, 64)


def test_dynamo_without_events_uses_its_routing_with_a_ttl() -> None:
    r = make_router("dynamo", RouterContext(2), {"prefill_load_scale": 10.0})
    tokens = list(range(64))
    assert (
        r.route(req(tokens, now=0.0), [ReplicaView(0, active_tokens=16), ReplicaView(1)]).replica
        == 1
    )
    # replica 1 has the 4 blocks (approximate indexer): 10·0 + 4 vs 10·4 + 4
    d = r.route(req(tokens, now=100.0), idle(2))
    assert (d.replica, d.predicted_overlap) == (1, 64)
    d = r.route(req(tokens, now=250.0), [ReplicaView(0), ReplicaView(1, active_tokens=16)])
    assert d.replica == 0  # 150 s later the blocks have expired (TTL 120 s)


def test_dynamo_softmax_spreads() -> None:
    r = make_router("dynamo", RouterContext(2), {"router_temperature": 1.0})
    picks = {
        r.route(req([1] * 16), [ReplicaView(0), ReplicaView(1, active_tokens=16)]).replica
        for _ in range(50)
    }
    assert picks == {0, 1}


def test_state_aware_prices_resume_against_the_queue() -> None:
    ctx = RouterContext(2, prefill_seconds=lambda a, b: (b - a) * 0.001)  # 1 ms per token
    r = make_router("state_aware", ctx)
    f = Fleet(r, resumable=[lambda q: 0, lambda q: 900])
    a = f.route(req(list(range(1000))))  # saves 0.9 s on replica 1
    assert (a.replica, a.decision.branch, a.decision.predicted_overlap) == (1, "resume", 900)
    assert a.decision.scores == pytest.approx((0.0, 0.9))
    # replica 1 now owes 0.1 s; a second resume there still saves 0.8 s net
    b = f.route(req(list(range(1000))))
    assert b.replica == 1 and b.decision.scores == pytest.approx((0.0, 0.8))
    # a cold request goes where the queue is shorter
    f2 = Fleet(make_router("state_aware", ctx), resumable=[lambda q: 0, lambda q: 0])
    c = f2.route(req(list(range(500))))
    d = f2.route(req(list(range(500))))
    assert (c.replica, d.replica, d.decision.branch) == (0, 1, "queue")
    f2.first_token(c)
    assert f2.router.pending == pytest.approx([0.0, 0.5])  # type: ignore[attr-defined]


def test_state_aware_moves_off_a_long_queue() -> None:
    ctx = RouterContext(2, prefill_seconds=lambda a, b: (b - a) * 0.001)
    f = Fleet(make_router("state_aware", ctx), resumable=[lambda q: 0, lambda q: 500])
    for _ in range(3):
        f.route(req(list(range(2000))))  # each owes 1.5 s on replica 1 (saves 0.5 s)
    # replica 1: 0.5 − 4.5 owed < replica 0: 0 − 2.0 owed (one cold request of 2 s)
    d = f.route(req(list(range(2000))))
    assert d.replica == 0 and d.decision.branch == "queue"


def test_registry_messages() -> None:
    with pytest.raises(UnknownRouter, match="unknown router 'best'; choose one of round_robin"):
        make_router("best", RouterContext(2))
    with pytest.raises(ValueError, match="at least 1 replica"):
        make_router("round_robin", RouterContext(0))


@pytest.mark.parametrize(("queue_model", "expected"), [("sharing", 1), ("fcfs", 0)])
def test_state_aware_queue_models(queue_model: str, expected: int) -> None:
    """Replica 1 holds the conversation (resume 1800 of 2000: 0.2 s left) behind one cold
    10 s prefill. Sharing: 0.2 × 2 = 0.4 s there, 1.6 s saved: stay. FCFS: 0.2 + 10 s:
    worse than 2 s cold on the idle replica 0: move."""
    ctx = RouterContext(2, prefill_seconds=lambda a, b: (b - a) * 0.001)
    r = make_router("state_aware", ctx, {"queue_model": queue_model})
    cold = Fleet(r, resumable=[lambda q: 10_000, lambda q: 0]).route(req(list(range(10_000))))
    assert cold.replica == 0  # (replica 0 then resumes it: a fleet view per call)
    r.pending, r.prefilling = [0.0, 10.0], [0, 1]  # type: ignore[attr-defined]
    f = Fleet(r, resumable=[lambda q: 0, lambda q: 1800])
    d = f.route(req(list(range(2000))))
    assert d.replica == expected
    with pytest.raises(ValueError, match="queue_model must be one of sharing, fcfs"):
        make_router("state_aware", ctx, {"queue_model": "lifo"})
