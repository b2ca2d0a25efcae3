"""SMG's `cache_aware` policy (the Shepherd Model Gateway, formerly sglang's sgl-router),
pinned to smg 1.13.0 on PyPI.

The rule (model_gateway/src/policies/cache_aware.rs, `select_worker`, lightseekorg/smg at
commit 73da68c, after v1.9.0; the same rule since v1.3.0):

1. Imbalanced (`is_imbalanced`) when any of
   - a KV trigger, where replicas publish KV utilisation: the hottest replica's above
     `overload_token_usage_threshold`, or hottest − coldest above
     `balance_token_usage_threshold` (both 1.0 by default: never fire);
   - the request-count spread: (max − min) > `balance_abs_threshold` **and**
     max > `balance_rel_threshold` × min, over the requests in flight as the router
     counts them (`Worker::load`).
   Then the least-loaded worker (key (load, processed, index), #1714), and the request is
   still inserted into the tree for it (`select_worker_min_load`). Branch "imbalanced".
2. Otherwise the request is matched against the approximate tree (replay.fleet.radix):
   match rate = matched ÷ input units (characters on SMG's HTTP path, tokens on gRPC);
   if it is **above** `cache_threshold` the worker the tree names (branch "cache_hit"),
   else the cache-miss rule (branch "cache_miss"), and the request is inserted for the
   chosen worker. Two miss rules: `min_load` (the least-loaded worker, as the code does
   since v1.3.0) and `smallest_tree` (the worker whose tree holds least, the rule the
   file's header comment and sgl-router's original Python router describe); default the
   code's.
3. Every `eviction_interval_secs` of the executor's clock each worker's part of the tree
   is cut to `max_tree_size` units (`evict_tenant_by_size`).

Defaults are those of `smg launch` 1.13.0 (smg/router_args.py, `RouterArgs`:
cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5,
balance/overload_token_usage_threshold 1.0, eviction_interval_secs 60,
max_tree_size 2**26). The entry points differ: the Rust binary `smg` (main.rs clap
defaults) has the same thresholds but eviction_interval 120, and the library's
`CacheAwareConfig::default()` (policies/mod.rs) has 0.5 / 32 / 1.1 / 30 s / 10000.

What the tree is built on: the request's text where the executor sends text (SMG's HTTP
path), else its token ids (the gRPC TokenTree), else its prefix identity (the simulator),
in chunks of `granularity` units (replay.fleet.radix says what that approximates). The
predicted overlap is what the tree holds of the prompt for the chosen worker, in tokens
(characters scaled by tokens per character on text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from replay.fleet.base import Decision, Param, ReplicaView, Router, RouterContext, RouteRequest
from replay.fleet.radix import ApproxTree, chunk_keys
from replay.fleet.simple import least_loaded

_ARGS = "smg 1.13.0 smg/router_args.py RouterArgs"
MISS_RULES = ("min_load", "smallest_tree")


class CacheAware(Router):
    name = "cache_aware"
    source = "smg model_gateway/src/policies/cache_aware.rs (select_worker, is_imbalanced)"
    params: ClassVar[Mapping[str, Param]] = {
        "cache_threshold": Param(0.3, f"{_ARGS}.cache_threshold"),
        "balance_abs_threshold": Param(64, f"{_ARGS}.balance_abs_threshold"),
        "balance_rel_threshold": Param(1.5, f"{_ARGS}.balance_rel_threshold"),
        "balance_token_usage_threshold": Param(1.0, f"{_ARGS}.balance_token_usage_threshold"),
        "overload_token_usage_threshold": Param(1.0, f"{_ARGS}.overload_token_usage_threshold"),
        "eviction_interval_secs": Param(60.0, f"{_ARGS}.eviction_interval_secs"),
        "max_tree_size": Param(2**26, f"{_ARGS}.max_tree_size"),
        "miss_rule": Param(
            "min_load",
            "cache_aware.rs select_worker_with_text/_with_tokens: min_load_idx on a miss",
            "min_load | smallest_tree",
        ),
        "granularity": Param(
            16,
            "model's chunk (units) for the tree; 16 = smg's block_size default "
            f"({_ARGS}.block_size)",
        ),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        if self.str_param("miss_rule") not in MISS_RULES:
            raise ValueError(
                f"router cache_aware: miss_rule must be one of {', '.join(MISS_RULES)}, "
                f"not {self.p['miss_rule']!r}"
            )
        g = self.int_param("granularity")
        if g < 1:
            raise ValueError(f"router cache_aware: granularity must be ≥ 1, not {g}")
        self.tree = ApproxTree(g)
        self._last_evict: float | None = None

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

    def imbalanced(self, replicas: Sequence[ReplicaView]) -> bool:
        kv = [r.kv_utilisation for r in replicas if r.kv_utilisation is not None]
        if kv:
            if max(kv) > self.float_param("overload_token_usage_threshold"):
                return True
            if max(kv) - min(kv) > self.float_param("balance_token_usage_threshold"):
                return True
        loads = [r.in_flight for r in replicas]
        lo, hi = min(loads), max(loads)
        return hi - lo > self.int_param("balance_abs_threshold") and hi > lo * self.float_param(
            "balance_rel_threshold"
        )

    def _maybe_evict(self, now: float | None) -> None:
        if now is None:
            return
        if self._last_evict is None:
            self._last_evict = now
        elif now - self._last_evict >= self.float_param("eviction_interval_secs"):
            self._last_evict = now
            self.tree.evict(self.int_param("max_tree_size"))

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        self._maybe_evict(req.now_s)
        keys, units, per = self._keys(req)
        loads = tuple(float(r.in_flight) for r in replicas)
        if self.imbalanced(replicas):
            pick, branch = least_loaded(replicas), "imbalanced"
        else:
            matched, tenant = self.tree.match(keys)
            rate = matched * self.tree.g / units if units else 0.0
            if rate > self.float_param("cache_threshold") and tenant is not None:
                pick, branch = tenant, "cache_hit"
            elif self.str_param("miss_rule") == "smallest_tree":
                pick = min(range(len(replicas)), key=lambda i: (self.tree.tenant_size(i), i))
                branch = "cache_miss"
            else:
                pick, branch = least_loaded(replicas), "cache_miss"
        held = self.tree.held_by(keys, pick)
        self.tree.insert(keys, pick)
        overlap = min(round(held * self.tree.g * per), req.prompt_tokens)
        return Decision(pick, branch, loads, overlap)
