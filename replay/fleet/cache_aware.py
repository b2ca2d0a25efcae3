"""SMG's `cache_aware` policy (the Shepherd Model Gateway, formerly sglang's sgl-router),
pinned to smg 1.13.0 on PyPI and checked against it request by request
(scripts/router_agreement.py: the real smg in front of emulator replicas; the figures are
in docs/router-agreement.md).

Sources. 1.13.0's Rust source is not in the repositories we can read (the newest,
smg-project/smg at f8daa88, is 1.9.0+); its rules are read from three places: that source
(model_gateway/src/policies/cache_aware.rs: `select_worker` :1001, `gate_selected_candidate`
:1172, `select_matched_candidate` :1195, `argmax_with_random_ties` :1412, the text path
`select_worker_with_text` :1874 with its match rate :1895; least_load.rs:
`select_min_expected_wait` :246, its reservoir tie-break :317, the tally credit :356,
`update_loads` resetting it :388), 1.13.0's own help text and defaults (smg/router_args.py
in the wheel), and 1.13.0's debug decision line ("Cache-aware selection": branch tree_match
/ spill / expected_wait_fallback, matched and input units), which the agreement script
reads beside every request.

The rule, per request:

1. KV pressure (fleet-wide), where replicas publish KV utilisation: the hottest above
   `overload_token_usage_threshold` or hottest − coldest above
   `balance_token_usage_threshold` (both 1.0 by default: never fire) → the cache-miss pick
   (branch "imbalanced"; 1.13.0's kv_pressure_expected_wait). Request counts alone no
   longer abandon affinity fleet-wide (cache_aware.rs `select_worker`: "request-count
   pressure is applied per request to the selected candidate").
2. Match against the approximate tree (replay.fleet.radix) in characters on SMG's HTTP
   path, tokens on gRPC: rate = matched ÷ input units. Above `cache_threshold`: among the
   replicas holding the deepest matched prefix, the least in flight, ties at random
   (`select_matched_candidate`, `argmax_with_random_ties`; branch "cache_hit"). That pick
   spills (branch "spill") when its load exceeds the fleet mean × `balance_rel_threshold`
   AND the mean + a margin: `balance_abs_threshold` capped at the in-flight count's natural
   swing at the mean, 2·√mean, never under 4 unless the threshold is lower (1.13.0's help
   for --balance-abs-threshold). A spill goes where a miss would (measured on 1.13.0: its
   spills spread at random over the idle replicas; 1.9.0's `gate_selected_candidate` took
   the min-load key (load, processed, index) of #1714).
3. Otherwise (branch "cache_miss") the miss rule: `expected_wait` (1.13.0's
   expected_wait_fallback, least_load.rs `select_min_expected_wait`): the lowest
   (queued + since-poll dispatched tokens) / throughput + `kv_pressure_weight`·k/(1−k)
   for a replica with a load snapshot, its in-flight count × `mean_prefill_tokens` /
   throughput for one without while others have one, and plain in-flight counts (join
   the shortest queue) while no replica has one; ties at random. Every request dispatched
   (any branch: measured, see `record`) is credited `mean_prefill_tokens` on the HTTP path
   (its token count is unknown there), else its prompt tokens. Snapshots come from the router's load poll every `load_monitor_interval`
   s: an executor that sees the real poll calls `load_poll` with each replica's work
   ahead (waiting requests and, measured on 1.13.0, running ones, each at
   `mean_prefill_tokens` where the record gives no token count); otherwise the model polls
   itself on `RouteRequest.now_s` (its in-flight requests at the mean prefill, and each
   replica's published KV utilisation). `min_load` (the 1.9.0 code) and `smallest_tree`
   (the file's header comment, sgl-router's Python router) are the older rules.
4. The request is inserted into the tree for the chosen replica; every
   `eviction_interval_secs` of `now_s` each replica's part is cut to `max_tree_size`.

Not modelled (toggled off in smg when agreement is measured, and counted from smg's log
when it is not): 1.13.0's warm-up slice (--worker-warmup-*: for 60 s after a worker
becomes routable one cache miss in 4 goes to a warming worker, one hit in 8 to a thin
one) and worker overload protection (a worker reporting ≥ 8 waiting requests or ≥ 0.8 KV
usage is left out).

`route` is `decide` then `record` of the choice; an executor that learns the real router's
choice (the agreement script) calls `decide` and then `record` with that choice.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import ClassVar

from replay.fleet.base import Decision, Param, ReplicaView, Router, RouterContext, RouteRequest
from replay.fleet.radix import ApproxTree, chunk_keys

_ARGS = "smg 1.13.0 smg/router_args.py RouterArgs"
MISS_RULES = ("expected_wait", "min_load", "smallest_tree")
TIES = ("random", "first")


def min_load_key(replicas: Sequence[ReplicaView]) -> int:
    """SMG's min-load index: smallest (in_flight, processed, index) (#1714)."""
    return min(replicas, key=lambda r: (r.in_flight, r.processed, r.index)).index


class CacheAware(Router):
    name = "cache_aware"
    source = "smg model_gateway/src/policies/cache_aware.rs, least_load.rs (1.13.0: see doc)"
    params: ClassVar[Mapping[str, Param]] = {
        "cache_threshold": Param(0.3, f"{_ARGS}.cache_threshold"),
        "balance_abs_threshold": Param(64, f"{_ARGS}.balance_abs_threshold"),
        "balance_rel_threshold": Param(1.5, f"{_ARGS}.balance_rel_threshold"),
        "balance_token_usage_threshold": Param(1.0, f"{_ARGS}.balance_token_usage_threshold"),
        "overload_token_usage_threshold": Param(1.0, f"{_ARGS}.overload_token_usage_threshold"),
        "eviction_interval_secs": Param(60.0, f"{_ARGS}.eviction_interval_secs"),
        "max_tree_size": Param(2**26, f"{_ARGS}.max_tree_size"),
        "miss_rule": Param(
            "expected_wait",
            "smg 1.13.0's decision line: branch expected_wait_fallback on every miss",
            " | ".join(MISS_RULES),
        ),
        "mean_prefill_tokens": Param(1024, f"{_ARGS}.least_load_mean_prefill_tokens"),
        "default_throughput": Param(2000.0, f"{_ARGS}.least_load_default_throughput"),
        "kv_pressure_weight": Param(0.15, f"{_ARGS}.least_load_kv_pressure_weight"),
        "load_monitor_interval": Param(10.0, f"{_ARGS}.load_monitor_interval"),
        "ties": Param(
            "random",
            "cache_aware.rs argmax_with_random_ties, least_load.rs reservoir tie-break",
            "random | first (the lowest index, for reproducible hand checks)",
        ),
        "granularity": Param(
            16,
            "model's chunk (units) for the tree; 16 = smg's block_size default "
            f"({_ARGS}.block_size)",
        ),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        for key, allowed in (("miss_rule", MISS_RULES), ("ties", TIES)):
            if self.str_param(key) not in allowed:
                raise ValueError(
                    f"router cache_aware: {key} must be one of {', '.join(allowed)}, "
                    f"not {self.p[key]!r}"
                )
        g = self.int_param("granularity")
        if g < 1:
            raise ValueError(f"router cache_aware: granularity must be ≥ 1, not {g}")
        self.tree = ApproxTree(g)
        self._last_evict: float | None = None
        self._rng = random.Random(ctx.seed)
        n = ctx.replicas
        self.tally = [0] * n  # tokens credited since each replica's last load snapshot
        self.snapshot: list[tuple[float, float] | None] = [None] * n  # (queued tokens, kv)
        self._next_poll: float | None = None

    # -- inputs ---------------------------------------------------------------------------

    def _keys(self, req: RouteRequest) -> tuple[list[int], int, float]:
        """(chunk keys, input units, tokens per unit)."""
        g = self.tree.g
        if req.text is not None:
            units = len(req.text)
            per = req.prompt_tokens / units if units else 0.0
            return chunk_keys(req.text, g), units, per
        if req.tokens is not None:
            return chunk_keys(req.tokens, g), len(req.tokens), 1.0
        return req.block_keys(g), req.prompt_tokens, 1.0

    def load_poll(
        self, replicas: Sequence[int], queued_tokens: Sequence[float], kv: Sequence[float]
    ) -> None:
        """The router's load poll answered for `replicas`: a fresh snapshot each (tokens of
        work ahead, KV utilisation) and their since-poll tallies reset (least_load.rs
        `update_loads`)."""
        for i, q, k in zip(replicas, queued_tokens, kv, strict=True):
            self.snapshot[i] = (float(q), float(k))
            self.tally[i] = 0

    def _self_poll(self, now: float | None, replicas: Sequence[ReplicaView]) -> None:
        if now is None:
            return
        every = self.float_param("load_monitor_interval")
        if self._next_poll is None:
            self._next_poll = now
        if now >= self._next_poll:
            pbar = self.int_param("mean_prefill_tokens")
            self.load_poll(
                [r.index for r in replicas],
                [float(r.in_flight * pbar) for r in replicas],
                [r.kv_utilisation or 0.0 for r in replicas],
            )
            self._next_poll = now + every

    def _maybe_evict(self, now: float | None) -> None:
        if now is None:
            return
        if self._last_evict is None:
            self._last_evict = now
        elif now - self._last_evict >= self.float_param("eviction_interval_secs"):
            self._last_evict = now
            self.tree.evict(self.int_param("max_tree_size"))

    # -- rules ----------------------------------------------------------------------------

    def imbalanced(self, replicas: Sequence[ReplicaView]) -> bool:
        """The fleet-wide KV triggers (cache_aware.rs `is_kv_imbalanced`)."""
        kv = [r.kv_utilisation for r in replicas if r.kv_utilisation is not None]
        if not kv:
            return False
        return max(kv) > self.float_param("overload_token_usage_threshold") or (
            max(kv) - min(kv) > self.float_param("balance_token_usage_threshold")
        )

    def spill_margin(self, mean: float) -> float:
        """The absolute part of the spill gate at fleet mean load `mean`."""
        given = float(self.int_param("balance_abs_threshold"))
        if given < 4:
            return given
        return min(given, max(4.0, 2.0 * math.sqrt(mean)))

    def spills(self, load: int, replicas: Sequence[ReplicaView]) -> bool:
        mean = sum(r.in_flight for r in replicas) / len(replicas)
        return load > mean * self.float_param("balance_rel_threshold") and (
            load > mean + self.spill_margin(mean)
        )

    def wait_scores(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> list[float]:
        """Expected-wait score per replica (lower is better), least_load.rs `score`."""
        tp = self.float_param("default_throughput")
        pbar = self.int_param("mean_prefill_tokens")
        w = self.float_param("kv_pressure_weight")
        if all(s is None for s in self.snapshot):
            return [float(r.in_flight) for r in replicas]
        out = []
        for r in replicas:
            snap = self.snapshot[r.index]
            if snap is None:
                out.append(r.in_flight * pbar / tp)
            else:
                k = min(max(snap[1], 0.0), 0.999)
                out.append((snap[0] + self.tally[r.index]) / tp + w * k / (1.0 - k))
        return out

    def _argmin(self, scores: Sequence[float]) -> int:
        best = min(scores)
        tied = [i for i, s in enumerate(scores) if s == best]
        if len(tied) == 1 or self.str_param("ties") == "first":
            return tied[0]
        return self._rng.choice(tied)

    def _miss(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> tuple[int, list[float]]:
        rule = self.str_param("miss_rule")
        if rule == "smallest_tree":
            sizes = [float(self.tree.tenant_size(r.index)) for r in replicas]
            return min(range(len(replicas)), key=lambda i: (sizes[i], i)), sizes
        if rule == "min_load":
            return min_load_key(replicas), [float(r.in_flight) for r in replicas]
        scores = self.wait_scores(req, replicas)
        return self._argmin(scores), scores

    def holders(self, keys: Sequence[int]) -> tuple[int, list[int]]:
        """(chunks matched, replicas attached to the deepest matched chunk)."""
        m, node = 0, None
        for k in keys:
            nxt = self.tree.nodes.get(k)
            if nxt is None:
                break
            node, m = nxt, m + 1
        return m, sorted(node.access) if node is not None else []

    # -- decide, record -------------------------------------------------------------------

    def decide(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        """The choice for `req`, without recording it. `scores` are the chosen branch's:
        expected wait (or load, or tree size) per replica on a miss; on a hit each
        holder's in-flight count and +inf for the others."""
        self._maybe_evict(req.now_s)
        self._self_poll(req.now_s, replicas)
        keys, units, per = self._keys(req)
        if self.imbalanced(replicas):
            pick, scores = self._miss(req, replicas)
            return self._decision(req, keys, per, pick, "imbalanced", scores)
        matched, holders = self.holders(keys)
        rate = matched * self.tree.g / units if units else 0.0
        if rate > self.float_param("cache_threshold") and holders:
            loads = [float(r.in_flight) if r.index in holders else math.inf for r in replicas]
            pick = self._argmin(loads)
            if self.spills(replicas[pick].in_flight, replicas):
                target, scores = self._miss(req, replicas)
                return self._decision(req, keys, per, target, "spill", scores)
            return self._decision(req, keys, per, pick, "cache_hit", loads)
        pick, scores = self._miss(req, replicas)
        return self._decision(req, keys, per, pick, "cache_miss", scores)

    def _decision(
        self,
        req: RouteRequest,
        keys: Sequence[int],
        per: float,
        pick: int,
        branch: str,
        scores: Sequence[float],
    ) -> Decision:
        held = self.tree.held_by(keys, pick)
        overlap = min(round(held * self.tree.g * per), req.prompt_tokens)
        return Decision(pick, branch, tuple(scores), overlap)

    def record(self, req: RouteRequest, replica: int) -> None:
        """`req` went to `replica`: its prefix is inserted there, and the replica is credited
        with the request's work until its next load snapshot. Every dispatch is credited,
        hits too: measured on smg 1.13.0, whose expected-wait picks follow the requests
        dispatched since the last poll, all branches (31 of 31 misses within ties on the
        sample, scripts/router_agreement.py); in 1.9.0's least_load.rs only the picks
        `select_min_expected_wait` makes were."""
        keys, _, _ = self._keys(req)
        self.tree.insert(keys, replica)
        pbar = self.int_param("mean_prefill_tokens")
        self.tally[replica] += pbar if req.text is not None else req.prompt_tokens

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        d = self.decide(req, replicas)
        self.record(req, d.replica)
        return d
