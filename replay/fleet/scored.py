"""The scoring routers: llm-d's endpoint picker and NVIDIA Dynamo's KV router.

`llmd` — llm-d's inference scheduler (the endpoint picker of the Gateway API inference
extension, kubernetes-sigs/gateway-api-inference-extension, pkg/epp/scheduling/framework/
plugins at a172f54): every candidate gets Σ weight × score and the max-score picker takes
the highest (ties at random, picker/max_score_picker.go). Scorers and the weights of
llm-d's chart (queue 2, kv-cache utilisation 2, prefix-cache 3):
- queue (queuescorer/queue.go): (max − q) / (max − min) over the waiting queues, 1 when
  all are equal; q is the replica's own waiting queue where it publishes it, else the
  requests the router has in flight there;
- kv-cache utilisation (kvcacheutilizationscorer/kvcache_utilization.go): 1 − usage
  (0 usage where the replica publishes none);
- prefix (prefixcachescorer/plugin.go): the prompt cut into blocks (64 characters =
  vLLM's 16-token block × 4 characters per token, `getBlockSize` with AutoTune), at most
  `MaxPrefixBlocksToMatch` = 256 of them (so past 256 × 16 = 4,096 tokens every prompt
  looks alike), each block's chained hash looked up in an index of what was routed where
  (`PreRequest` adds every block of the request for the chosen pod; an LRU of
  `LRUCapacityPerServer` = 31,250 blocks per server); a pod's score is the blocks it holds
  of the prompt's leading run ÷ the prompt's blocks (`matchLongestPrefix`: the run stops
  at the first block no pod holds). Blocks here are 16 tokens of the prompt's prefix
  identity (the simulator has no text).

`dynamo` — Dynamo's KV router (ai-dynamo/dynamo lib/kv-router/src/scheduling/selector/
default.rs, `worker_logit`): cost = prefill_load_scale × max(raw_prefill_blocks −
overlap_score_credit × overlap_blocks, 0) + decode_blocks, where raw_prefill_blocks =
(the worker's active prefill tokens + the request's prompt tokens) ÷ block size and
decode_blocks the worker's active blocks with this request's; the lowest cost, ties at
random (`minimum_cost_index`), or at `router_temperature` > 0 a softmax over the costs
normalised by their range (`softmax_sample_index`). Defaults: prefill_load_scale 1,
overlap_score_credit 1, temperature 0 (docs/router: `--router-temperature` default 0.0;
the legacy overlap weight 1). Overlap: the KV blocks the replica reports resident (KV
events, Dynamo's default `--kv-events`; for a hybrid model only attention KV, which is all
Dynamo indexes), else its approximate indexer: blocks it routed there, forgotten after a
120 s TTL (docs: `--no-kv-events` ... "TTL-based expiration (default 120s)").
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import ClassVar

from replay.fleet.base import Decision, Param, ReplicaView, Router, RouterContext, RouteRequest

_GIE = "gateway-api-inference-extension pkg/epp/scheduling/framework/plugins"
_DYN = "dynamo lib/kv-router/src/scheduling/selector/default.rs"


def _argmax_random(scores: Sequence[float], rng: random.Random) -> int:
    best = max(scores)
    ties = [i for i, s in enumerate(scores) if s == best]
    return ties[0] if len(ties) == 1 else rng.choice(ties)


class LlmD(Router):
    name = "llmd"
    source = f"{_GIE} (queuescorer, kvcacheutilizationscorer, prefixcachescorer, maxscorepicker)"
    params: ClassVar[Mapping[str, Param]] = {
        "queue_weight": Param(2.0, "llm-d chart: queue-scorer weight 2"),
        "kv_weight": Param(2.0, "llm-d chart: kv-cache-utilization-scorer weight 2"),
        "prefix_weight": Param(3.0, "llm-d chart: prefix-cache-scorer weight 3"),
        "block_tokens": Param(16, "prefixcachescorer/plugin.go: 64-char blocks = 16 tokens × 4"),
        "max_blocks": Param(256, "prefixcachescorer/plugin.go DefaultMaxPrefixBlocks = 256"),
        "lru_blocks": Param(31250, "prefixcachescorer/plugin.go DefaultLRUCapacityPerServer"),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        self.index: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(ctx.replicas)]
        self.rng = random.Random(ctx.seed)

    def prefix_scores(self, keys: Sequence[int]) -> list[float]:
        held = [0] * len(self.index)
        for k in keys:
            owners = [i for i, idx in enumerate(self.index) if k in idx]
            if not owners:
                break
            for i in owners:
                held[i] += 1
        return [h / len(keys) if keys else 0.0 for h in held]

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        keys = req.block_keys(self.int_param("block_tokens"), self.int_param("max_blocks"))
        queue = [
            r.waiting_requests if r.waiting_requests is not None else r.in_flight for r in replicas
        ]
        lo, hi = min(queue), max(queue)
        q_score = [1.0 if hi == lo else (hi - q) / (hi - lo) for q in queue]
        kv_score = [1.0 - (r.kv_utilisation or 0.0) for r in replicas]
        p_score = self.prefix_scores(keys)
        wq, wk, wp = (self.float_param(k) for k in ("queue_weight", "kv_weight", "prefix_weight"))
        total = [
            wq * q + wk * k + wp * p for q, k, p in zip(q_score, kv_score, p_score, strict=True)
        ]
        pick = _argmax_random(total, self.rng)
        overlap = round(p_score[pick] * len(keys)) * self.int_param("block_tokens")
        self._add(keys, pick)
        branch = "prefix" if p_score[pick] > 0 else "load"
        return Decision(pick, branch, tuple(total), min(overlap, req.prompt_tokens))

    def _add(self, keys: Sequence[int], pick: int) -> None:
        idx, cap = self.index[pick], self.int_param("lru_blocks")
        for k in keys:
            idx[k] = None
            idx.move_to_end(k)
        while len(idx) > cap:
            idx.popitem(last=False)


class Dynamo(Router):
    name = "dynamo"
    source = f"{_DYN} (worker_logit, minimum_cost_index, softmax_sample_index)"
    params: ClassVar[Mapping[str, Param]] = {
        "prefill_load_scale": Param(1.0, f"{_DYN}: KvRouterConfig default 1.0"),
        "overlap_score_credit": Param(1.0, f"{_DYN}: KvRouterConfig default 1.0"),
        "router_temperature": Param(0.0, "dynamo docs/router: --router-temperature default 0.0"),
        "block_tokens": Param(16, "--kv-cache-block-size: the backend's (vLLM's default 16)"),
        "kv_events": Param(True, "dynamo docs/router: --kv-events is the default"),
        "ttl_s": Param(120.0, "dynamo docs/router: the approximate indexer's TTL, 120 s"),
    }

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        super().__init__(ctx, overrides)
        self.rng = random.Random(ctx.seed)
        # approximate indexer: per replica, block key -> when it was routed
        self.approx: list[dict[int, float]] = [{} for _ in range(ctx.replicas)]

    def _overlap_blocks(self, req: RouteRequest, r: ReplicaView, keys: Sequence[int]) -> int:
        bt = self.int_param("block_tokens")
        if bool(self.p["kv_events"]) and r.cached_prefix is not None:
            return r.cached_prefix(req) // bt
        seen, now, ttl = self.approx[r.index], req.now_s, self.float_param("ttl_s")
        n = 0
        for k in keys:
            t = seen.get(k)
            if t is None or (now is not None and now - t > ttl):
                break
            n += 1
        return n

    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        bt = self.int_param("block_tokens")
        keys = req.block_keys(bt)
        scale, credit = (
            self.float_param("prefill_load_scale"),
            self.float_param("overlap_score_credit"),
        )
        costs: list[float] = []
        overlaps: list[int] = []
        for r in replicas:
            ov = self._overlap_blocks(req, r, keys)
            raw = (r.queued_prefill_tokens + req.prompt_tokens) / bt
            decode = (r.active_tokens + req.prompt_tokens) / bt
            costs.append(scale * max(raw - credit * ov, 0.0) + decode)
            overlaps.append(ov)
        temp = self.float_param("router_temperature")
        if temp > 0:
            pick, branch = self._softmax(costs, temp), "softmax"
        else:
            best = min(costs)
            ties = [i for i, c in enumerate(costs) if c == best]
            pick, branch = (ties[0] if len(ties) == 1 else self.rng.choice(ties)), "min_cost"
        now = req.now_s if req.now_s is not None else 0.0
        seen = self.approx[pick]
        for k in keys:
            seen[k] = now
        if req.now_s is not None and len(seen) > 4 * len(keys) + 1024:
            ttl = self.float_param("ttl_s")
            for k in [k for k, t in seen.items() if now - t > ttl]:
                del seen[k]
        return Decision(pick, branch, tuple(costs), min(overlaps[pick] * bt, req.prompt_tokens))

    def _softmax(self, costs: Sequence[float], temp: float) -> int:
        lo, hi = min(costs), max(costs)
        if lo == hi:
            probs = [1.0 / len(costs)] * len(costs)
        else:
            scale = -1.0 / ((hi - lo) * temp)
            w = [math.exp((c - lo) * scale) for c in costs]
            total = sum(w)
            probs = [x / total for x in w]
        u, acc = self.rng.random(), 0.0
        for i, pr in enumerate(probs):
            acc += pr
            if u <= acc:
                return i
        return len(costs) - 1
