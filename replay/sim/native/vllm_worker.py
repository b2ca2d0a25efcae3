"""Worker: vLLM's own KV cache manager, driven as vLLM's scheduler drives it.

Runs inside an environment where vLLM is importable (usually the project's `.venv-vllm`),
started by `replay.sim.native.worker.Worker`; it imports nothing from this project but the
protocol loop beside it (`wire.py`, standard library only), besides vLLM. It speaks a small protocol over its standard input and output:
each command is one JSON line, followed by `ntok` little-endian int32 token ids when the
header says so; each answer is one JSON line (`{"error": ...}` when the command failed).

Commands (see `Worker` for the calling side):
  hello                          → vLLM's version and which fork flags it knows
  init {config}                  → builds the manager (one attention group, C Mamba groups)
  lookup {rid} + prompt ids      → the hit a request would get now (changes nothing)
  start {rid}                    → admission and chunked prefill; {"ok": false} if it cannot
  decode {rid} + output ids      → decode one token a step
  free {rid}                     → the request ends: its blocks are freed (tail first)
  drop {rid}                     → free a request that will not run
  stats                          → pool occupancy

The call sequence mirrors `vllm/v1/core/sched/scheduler.py` (0.32): `new_step_starts()` at the
start of every step (`schedule`), `get_computed_blocks` for a waiting request and its
`shared_prefix_boundary` kept on the request, chunk sizes from the scheduler's own
`Scheduler._mamba_block_aligned_split`, `allocate_slots` with the hit for the first chunk,
copy-on-write copies taken and their retained blocks freed after each step
(`take_kv_cache_block_copies`, `_free_cow_retained_blocks`), and `free(request)` at the end.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.wire import CACHE_COMMANDS, serve_engine
except ImportError:  # run as a script inside the engine's environment: a sibling module
    from wire import CACHE_COMMANDS, serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]

FORK_FLAGS = (
    "mamba_frontier_checkpoint",
    "mamba_prefill_export",
    "prefix_cache_eviction",
    "prefill_cost_coefficients",
    "prefix_cache_leaf_last",
    "prefix_cache_leaf_idle_seconds",
)


def kv_cache_config(cfg: dict[str, Any], block: int) -> Any:
    """The hybrid `KVCacheConfig` a server would derive from the model's layers: one
    full-attention group and one Mamba group ("align") per block a state occupies, so a
    checkpoint costs `state_blocks` blocks of the one pool, as in the model's layout."""
    import torch
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        MambaSpec,
    )

    attn = FullAttentionSpec(block_size=block, num_kv_heads=1, head_size=64, dtype=torch.bfloat16)
    groups = [KVCacheGroupSpec(["attn.0"], attn)]
    for i in range(int(cfg["state_blocks"])):
        mamba = MambaSpec(
            block_size=block, shapes=((16,),), dtypes=(torch.float32,), mamba_cache_mode="align"
        )
        groups.append(KVCacheGroupSpec([f"mamba.{i}"], mamba))
    retention = cfg.get("retention", 0)
    return KVCacheConfig(
        num_blocks=int(cfg["num_blocks"]),
        kv_cache_tensors=[],
        kv_cache_groups=groups,
        # KVCacheConfig's own default is None (keep every state); a server resolves
        # CacheConfig.prefix_cache_retention_interval, default 0 (config/cache.py).
        prefix_cache_retention_interval=None if retention is None else int(retention),
    )


class Engine:
    """One KVCacheManager plus the scheduler attributes its chunk split reads."""

    def __init__(self, cfg: dict[str, Any]):
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler

        B = int(cfg["block"])
        H = int(cfg["hash_block"])
        self.B, self.H = B, H
        kv_cfg = kv_cache_config(cfg, B)
        self.max_model_len = int(cfg["max_model_len"])
        kwargs: dict[str, Any] = {
            "enable_mamba_shared_prefix_checkpoint": bool(cfg.get("shared_prefix_checkpoint"))
        }
        fork = dict(cfg.get("fork") or {})
        if fork:  # the FlashState fork: its flags reach the manager as keyword arguments
            import inspect

            known = set(inspect.signature(KVCacheManager.__init__).parameters)
            unknown = sorted(set(fork) - known)
            if unknown:
                raise ValueError(
                    f"this vLLM's KVCacheManager takes no {', '.join(unknown)}: the FlashState "
                    "fork's cache flags cannot be passed to it"
                )
            kwargs.update(fork)
        self.mgr = KVCacheManager(
            kv_cfg,
            max_model_len=self.max_model_len,
            scheduler_block_size=B,
            hash_block_size=H,
            enable_caching=True,
            **kwargs,
        )
        init_none_hash(sha256)
        self.hasher = get_request_block_hasher(H, sha256)
        self.budget = int(cfg["token_budget"])
        threshold = int(cfg["long_prefill_threshold"])
        self.threshold = threshold
        # What `Scheduler._mamba_block_aligned_split` reads from `self` (Scheduler.__init__).
        coord = self.mgr.coordinator
        partial = H < B and bool(getattr(coord, "enable_partial_hash_hits", False))
        self.sched = SimpleNamespace(
            cache_config=SimpleNamespace(block_size=B),
            scheduler_config=SimpleNamespace(long_prefill_token_threshold=threshold),
            max_num_scheduled_tokens=self.budget,
            hash_block_size=H,
            block_size=B,
            use_eagle_block_drop=False,
            mamba_partial_cache_hit=partial,
            mamba_shared_prefix_checkpoint=partial
            and bool(getattr(self.mgr, "mamba_shared_prefix_checkpoint", False)),
            mamba_prefill_checkpoint_alignment=None,
            mamba_has_prefill_checkpoint_blocks=False,
            need_mamba_block_aligned_split=True,
        )
        self.split = Scheduler._mamba_block_aligned_split
        self.block_decode = cfg.get("decode_steps", "token") == "block"
        self.requests: dict[str, Any] = {}  # looked up, not started
        self.running: dict[str, Any] = {}
        self.steps = 0

    # one scheduler step ------------------------------------------------------------------
    def _step_begin(self) -> None:
        self.mgr.new_step_starts()
        self.steps += 1

    def _step_end(self) -> None:
        _, retained = self.mgr.take_kv_cache_block_copies()
        if retained:
            self.mgr.block_pool.free_blocks(retained)

    # commands ------------------------------------------------------------------------------
    def lookup(self, rid: str, tokens: list[int]) -> dict[str, Any]:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        old = self.requests.pop(rid, None)
        if old is not None or rid in self.running:
            raise ValueError(f"request id {rid} is in use")
        req = Request(
            rid,
            tokens,
            SamplingParams(max_tokens=self.max_model_len),
            None,
            block_hasher=self.hasher,
        )
        self.requests[rid] = req
        _, hit, spb = self.mgr.get_computed_blocks(req)
        return {"hit": hit, "spb": spb}

    def start(self, rid: str, total: int | None = None) -> dict[str, Any]:
        """Admission (`schedule`'s waiting loop) and every prefill chunk, one step each
        (`total`, the sequence's length, is not needed: vLLM allocates as the request grows)."""
        req = self.requests.pop(rid)
        self._step_begin()
        blocks, hit, spb = self.mgr.get_computed_blocks(req)
        req.shared_prefix_boundary = spb
        n_new = req.num_tokens - hit
        if 0 < self.threshold < n_new:
            n_new = self.threshold
        n_new = min(n_new, self.budget)
        n_new = self.split(self.sched, req, n_new, hit, 0)
        if n_new <= 0:
            self._step_end()
            self.requests[rid] = req
            return {"ok": False, "hit": hit, "why": "no block-aligned chunk fits the budget"}
        got = self.mgr.allocate_slots(
            req, n_new, num_new_computed_tokens=hit, new_computed_blocks=blocks
        )
        if got is None:
            self._step_end()
            self.requests[rid] = req
            return {"ok": False, "hit": hit, "why": "no free blocks"}
        req.num_computed_tokens = hit + n_new
        self._step_end()
        chunks = [n_new]
        self.running[rid] = req
        while req.num_computed_tokens < req.num_tokens:
            self._step_begin()
            n_new = req.num_tokens - req.num_computed_tokens
            if 0 < self.threshold < n_new:
                n_new = self.threshold
            n_new = min(n_new, self.budget)
            n_new = self.split(self.sched, req, n_new)
            got = self.mgr.allocate_slots(req, n_new)
            if got is None:  # vLLM would preempt it: it gives up its blocks and waits
                self._step_end()
                self.mgr.free(req)
                del self.running[rid]
                return {"ok": False, "hit": hit, "why": "no free blocks mid-prefill"}
            req.num_computed_tokens += n_new
            self._step_end()
            chunks.append(n_new)
        return {"ok": True, "hit": hit, "spb": spb, "chunks": chunks, "free": self._free()}

    def decode(self, rid: str, out: list[int]) -> dict[str, Any]:
        """Decode: the token sampled at each step is appended, then the next step computes it;
        the last one is sampled but never computed (the request ends there)."""
        req = self.running[rid]
        if self.block_decode:
            return self._decode_by_block(req, out)
        complete = True
        for i, t in enumerate(out):
            req.append_output_token_ids(t)
            if i == len(out) - 1:
                break
            self._step_begin()
            got = self.mgr.allocate_slots(req, 1)
            if got is None:
                complete = False  # vLLM would preempt; the rest is not computed
                self._step_end()
                break
            req.num_computed_tokens += 1
            self._step_end()
        return {"complete": complete, "free": self._free()}

    def _decode_by_block(self, req: Any, out: list[int]) -> dict[str, Any]:
        """The same decode with the steps between two block boundaries merged into one:
        every step that allocates a block, fills one or ends on a boundary is still a step
        of its own (checked against token steps: tests/unit/replay/sim/test_sim_native_vllm.py).
        A 4,352-token block then costs one manager call instead of thousands."""
        if not out:
            return {"complete": True, "free": self._free()}
        B, i, last = self.B, 0, len(out) - 1
        while i < last:
            done = req.num_computed_tokens
            # a step that starts a block (or the decode) runs alone: the manager frees the
            # state blocks the running state has moved past at such a step
            k = 1 if i == 0 or done % B == 0 else (done // B + 1) * B - done
            k = min(k, last - i)
            for t in out[i : i + k]:
                req.append_output_token_ids(t)
            self._step_begin()
            if self.mgr.allocate_slots(req, k) is None:
                self._step_end()
                return {"complete": False, "free": self._free()}
            req.num_computed_tokens += k
            self._step_end()
            i += k
        req.append_output_token_ids(out[last])
        return {"complete": True, "free": self._free()}

    def free(self, rid: str) -> dict[str, Any]:
        self.mgr.free(self.running.pop(rid))
        return {"free": self._free()}

    def drop(self, rid: str) -> dict[str, Any]:
        req = self.running.pop(rid, None)
        if req is not None:
            self.mgr.free(req)
        self.requests.pop(rid, None)
        return {"free": self._free()}

    def _free(self) -> int:
        return int(self.mgr.block_pool.get_num_free_blocks())

    def stats(self) -> dict[str, Any]:
        pool = self.mgr.block_pool
        cached = sum(1 for b in pool.blocks if b.block_hash is not None and b.ref_cnt == 0)
        used = sum(1 for b in pool.blocks if b.ref_cnt > 0)
        return {
            "free": self._free(),
            "referenced": used,
            "cached_idle": cached,
            "steps": self.steps,
            "num_blocks": pool.num_gpu_blocks,
        }


def hello() -> dict[str, Any]:
    import vllm
    from vllm.config.cache import CacheConfig

    fields = set(getattr(CacheConfig, "model_fields", {}) or {})
    if not fields:
        import dataclasses

        fields = {f.name for f in dataclasses.fields(CacheConfig)}
    return {
        "version": getattr(vllm, "__version__", "unknown"),
        "fork_flags": [f for f in FORK_FLAGS if f in fields],
        "python": sys.executable,
    }


def main() -> int:
    def init(config: dict[str, Any]) -> tuple[Engine, dict[str, Any]]:
        engine = Engine(config)
        return engine, {"free": engine._free()}

    return serve_engine(hello, init, CACHE_COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
