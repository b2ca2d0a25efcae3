"""SMG's cache_aware, decision by decision (hand-computed on small streams). `ties="first"`
makes smg's random tie-breaks reproducible where a test needs one pick; the rules are those
of smg 1.13.0 as scripts/router_agreement.py measures them against the real router."""

from __future__ import annotations

import pytest

from replay.fleet import ReplicaView, RouterContext, RouteRequest, make_router
from replay.fleet.cache_aware import CacheAware
from replay.fleet.radix import chunk_keys


def ca(n: int = 3, **over: object) -> CacheAware:
    over.setdefault("ties", "first")
    r = make_router("cache_aware", RouterContext(n), over)
    assert isinstance(r, CacheAware)
    return r


def views(loads: list[int], kv: list[float] | None = None) -> list[ReplicaView]:
    return [
        ReplicaView(i, in_flight=x, kv_utilisation=kv[i] if kv else None)
        for i, x in enumerate(loads)
    ]


def req(tokens: list[int], now: float | None = None) -> RouteRequest:
    return RouteRequest("e", "s", len(tokens), tokens=tokens, now_s=now)


A = list(range(64))


def test_defaults_are_smg_launch_1_13_0() -> None:
    r = ca()
    assert r.p["cache_threshold"] == 0.3
    assert r.p["balance_abs_threshold"] == 64
    assert r.p["balance_rel_threshold"] == 1.5
    assert r.p["eviction_interval_secs"] == 60.0
    assert r.p["max_tree_size"] == 2**26
    assert r.p["miss_rule"] == "expected_wait"
    assert r.p["mean_prefill_tokens"] == 1024 and r.p["load_monitor_interval"] == 10.0
    assert make_router("cache_aware", RouterContext(2)).p["ties"] == "random"


def test_miss_on_empty_tree_takes_least_loaded_with_smg_tie_break() -> None:
    # min_load (1.9.0's code): ties on load go to fewer processed, then the lower index
    r = ca(miss_rule="min_load")
    d = r.route(req(A), views([2, 1, 1]))
    assert (d.replica, d.branch, d.predicted_overlap) == (1, "cache_miss", 0)
    vs = [
        ReplicaView(0, 1, processed=5),
        ReplicaView(1, 1, processed=2),
        ReplicaView(2, 1, processed=2),
    ]
    assert ca(miss_rule="min_load").route(req(A), vs).replica == 1


def test_expected_wait_miss_rule() -> None:
    # No load snapshot yet anywhere: join the shortest queue on in-flight counts.
    r = ca()
    assert r.route(req(A), views([2, 1, 1])).replica == 1
    # After a poll: work dispatched since it (every branch), in mean-prefill units on text.
    r = ca()
    r.load_poll([0, 1, 2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    first = r.route(RouteRequest("e", "s", 4, text="abcd" * 8), views([5, 5, 5]))
    assert (first.replica, first.scores) == (0, (0.0, 0.0, 0.0))
    d = r.route(RouteRequest("e", "s", 4, text="wxyz" * 8), views([0, 0, 0]))
    assert d.replica == 1 and d.scores[0] == 1024 / 2000.0
    # A hit counts too, so the next miss avoids 0 and 1 although nothing is in flight.
    assert r.route(RouteRequest("e", "s", 4, text="abcd" * 16), views([0, 0, 0])).replica == 0
    assert r.route(RouteRequest("e", "s", 4, text="qrst" * 8), views([0, 0, 0])).replica == 2
    # Queued work and the KV barrier of a snapshot; a replica without one is priced by its
    # in-flight count at the mean prefill.
    s = ca()
    s.load_poll([0, 1], [2000.0, 0.0], [0.0, 0.5])
    scores = s.wait_scores(req(A), views([0, 0, 3]))
    assert scores == [1.0, 0.15, 3 * 1024 / 2000.0]
    # The model polls itself every load_monitor_interval of the executor's clock.
    t = ca(load_monitor_interval=10.0)
    t.route(req(A, now=0.0), views([0, 0, 0]))
    assert t.tally[0] == 64 and t.snapshot[0] == (0.0, 0.0)
    u = ca(load_monitor_interval=10.0)  # a poll sees running requests at the mean prefill
    assert u.route(req(A, now=0.0), views([2, 1, 3])).replica == 1
    assert u.snapshot[:3] == [(2048.0, 0.0), (1024.0, 0.0), (3072.0, 0.0)]
    t.route(req(list(range(200, 264)), now=5.0), views([0, 0, 0]))
    assert t.tally == [64, 64, 0]
    t.route(req(list(range(300, 364)), now=10.0), views([0, 0, 0]))
    assert t.tally == [64, 0, 0]  # reset at 10 s, then the new request credited to 0


def test_random_ties_spread_over_the_tied_replicas() -> None:
    r = make_router("cache_aware", RouterContext(4, seed=3), {"miss_rule": "min_load"})
    picks = {
        make_router("cache_aware", RouterContext(4, seed=k)).route(req(A), views([0] * 4)).replica
        for k in range(20)
    }
    assert picks == {0, 1, 2, 3}
    assert r.route(req(A), views([0, 0, 0, 0])).replica == 0  # min_load: its fixed key


def test_hit_goes_to_the_worker_the_tree_names() -> None:
    r = ca()
    assert r.route(req(A), views([3, 3, 0])).replica == 2  # miss → replica 2, inserted there
    d = r.route(req(A + list(range(100, 132))), views([0, 0, 5]))  # 64 of 96 matched: 0.67
    assert (d.replica, d.branch, d.predicted_overlap) == (2, "cache_hit", 64)


def test_match_rate_must_exceed_the_threshold() -> None:
    r = ca(cache_threshold=0.5)
    r.route(req(A[:32]), views([0, 1, 1]))  # → 0
    d = r.route(req(A), views([1, 0, 1]))  # 32 of 64 = 0.5, not above 0.5: a miss
    assert (d.replica, d.branch) == (1, "cache_miss")
    assert d.predicted_overlap == 0  # replica 1 holds nothing of it
    # 64 of 66 matched; the deepest node (A[32:64]) was made by replica 1's insert
    d2 = r.route(req(A + [999] * 2), views([1, 1, 0]))
    assert (d2.replica, d2.branch, d2.predicted_overlap) == (1, "cache_hit", 64)
    # The granularity's edge (replay.fleet.radix): 40 tokens match 2 whole chunks, whose
    # last node replica 0 made; SMG's match would end inside the edge A[32:64] (made by 1).
    d3 = r.route(req(A[:40]), views([1, 1, 0]))
    assert (d3.replica, d3.predicted_overlap) == (0, 32)


def test_a_hit_takes_the_least_loaded_holder() -> None:
    r = ca(2)
    r.route(req(A), views([0, 1]))  # held by 0
    r.record(req(A), 1)  # and by 1 (a spill would do this)
    assert r.holders(chunk_keys(A, 16)) == (4, [0, 1])
    d = r.route(req(A), views([2, 1]))
    assert (d.replica, d.branch, d.scores) == (1, "cache_hit", (2.0, 1.0))
    assert ca(2).route(req(A), views([0, 0])).branch == "cache_miss"


@pytest.mark.parametrize(
    ("loads", "spills"),
    [
        # mean 24.3: margin min(64, max(4, 2·√24.3 = 9.9)); 70 > 36.5 and 70 > 34.2
        ([70, 0, 3], True),
        ([30, 20, 25], False),  # 30 ≤ 1.5 × 25 = 37.5
        ([9, 0, 0], True),  # mean 3: margin 4; 9 > 4.5 and 9 > 7
        ([6, 0, 0], False),  # 6 > 3 but 6 ≤ 2 + 4
        ([200, 135, 150], False),  # 200 ≤ 1.5 × 161.7
        ([400, 100, 150], True),  # both, margin 2·√216.7 = 29.4
    ],
)
def test_both_count_conditions(loads: list[int], spills: bool) -> None:
    r = ca()
    r.route(req(A), views([0, 1, 1]))  # A on 0: a balanced stream would hit 0
    d = r.route(req(A), views(loads))
    assert (d.branch == "spill") is spills
    if spills:
        assert d.replica == loads.index(min(loads))
    else:
        assert (d.replica, d.branch) == (0, "cache_hit")


def test_spill_margin_is_capped_at_the_natural_swing() -> None:
    r = ca()
    assert r.spill_margin(0.0) == 4.0 and r.spill_margin(100.0) == 20.0
    assert r.spill_margin(10_000.0) == 64.0
    assert ca(balance_abs_threshold=2).spill_margin(100.0) == 2.0
    assert not r.imbalanced(views([100, 0, 0]))  # counts alone never abandon affinity


def test_kv_triggers() -> None:
    r = ca(overload_token_usage_threshold=0.9)
    assert r.imbalanced(views([1, 1, 1], [0.95, 0.9, 0.9]))
    assert not r.imbalanced(views([1, 1, 1], [0.9, 0.9, 0.9]))
    s = ca(balance_token_usage_threshold=0.5)
    assert s.imbalanced(views([1, 1, 1], [0.7, 0.3, 0.1]))
    assert not s.imbalanced(views([1, 1, 1], [0.5, 0.3, 0.1]))
    assert not ca().imbalanced(views([1, 1, 1], [1.0, 0.0, 0.5]))  # default 1.0: never fires


def test_imbalanced_still_inserts_for_the_chosen_worker() -> None:
    r = ca(2, overload_token_usage_threshold=0.9)
    d = r.route(req(A), views([1, 0], [0.95, 0.1]))
    assert (d.replica, d.branch) == (1, "imbalanced")
    assert r.route(req(A), views([0, 0])).replica == 1


def test_smallest_tree_miss_rule() -> None:
    r = ca(3, miss_rule="smallest_tree")
    r.route(req(A), views([0, 0, 0]))  # all trees empty → 0
    d = r.route(req(list(range(500, 532))), views([0, 0, 9]))
    assert (d.replica, d.branch) == (1, "cache_miss")  # 1 and 2 hold nothing; 1 first
    d = r.route(req(list(range(700, 716))), views([0, 0, 9]))
    assert d.replica == 2  # replica 2 still holds nothing, load does not count


def test_eviction_cuts_each_worker_to_max_tree_size() -> None:
    r = ca(2, max_tree_size=32, eviction_interval_secs=10.0)
    r.route(req(A, now=0.0), views([0, 0]))  # 4 chunks on 0
    r.route(req(list(range(300, 316)), now=5.0), views([1, 0]))  # 1 chunk on 1
    assert r.tree.tenant_size(0) == 64
    d = r.route(req(A, now=10.0), views([0, 0]))  # evicts first: 0 keeps its first 2 chunks
    assert r.tree.tenant_size(0) in (32, 64)  # (the routed request re-inserts after)
    assert (d.replica, d.branch, d.predicted_overlap) == (0, "cache_hit", 32)


def test_text_counts_characters_and_scales_the_overlap_to_tokens() -> None:
    r = ca(2)
    text = "abcdefgh" * 8  # 64 chars
    r.route(RouteRequest("e", "s", 16, text=text), views([0, 1]))
    d = r.route(RouteRequest("e", "s", 32, text=text * 2), views([1, 0]))  # 64 of 128 chars
    assert (d.replica, d.branch, d.predicted_overlap) == (0, "cache_hit", 16)


def test_bad_parameters_say_which() -> None:
    with pytest.raises(
        ValueError, match="miss_rule must be one of expected_wait, min_load, smallest_tree"
    ):
        ca(miss_rule="newest")
    with pytest.raises(ValueError, match="ties must be one of random, first"):
        ca(ties="never")
    with pytest.raises(ValueError, match="unknown parameter 'threshold'"):
        ca(threshold=0.2)
    with pytest.raises(ValueError, match="cache_threshold wants a float"):
        ca(cache_threshold="high")
