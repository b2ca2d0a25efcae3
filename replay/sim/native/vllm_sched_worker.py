"""Worker: vLLM's own v1 `Scheduler` (with its `KVCacheManager`), stepped by the caller.

Runs inside an environment where vLLM is importable (the project's `.venv-vllm`), started by
`replay.sim.native.worker.Worker` (engine "vllm-scheduler", registered by
experiments/vllm_scheduler_oracle.py); like `vllm_worker.py` it imports only the standard library,
vLLM and the protocol loop beside it (`wire.py`), and speaks the same protocol: one JSON line per command, followed by `ntok`
little-endian int32 token ids when the header says so; one JSON line per answer
(`{"error": ...}` when the command failed).

Commands:
  hello                          → vLLM's version
  init {config}                  → builds VllmConfig, KVCacheConfig and the Scheduler
  add {rid, n} + ids             → a request: prompt ids[:n], its output ids[n:] (fixed
                                   length: `max_tokens`, `ignore_eos`)
  step {t}                       → one `schedule()` and one `update_from_output()` at time t
                                   (the caller's clock: only for the eviction ages reported)
  abort {rid}                    → `finish_requests(rid, FINISHED_ABORTED)`
  stats                          → pool occupancy and queue lengths

What is vLLM's own code and what stands in for the rest (docs/engine-model.md, "vLLM's own
scheduler as the oracle"):
- real: `vllm.v1.core.sched.scheduler.Scheduler` (`schedule`, `update_from_output`,
  preemption, freeing, its `RequestQueue`), the `KVCacheManager` it builds, with its hybrid
  coordinator, `BlockPool` and `MambaManager`; `Request`, `SamplingParams`; `VllmConfig`,
  `SchedulerConfig` and `CacheConfig` resolved by vLLM's own config code on this platform.
- stubbed: the model. `ModelConfig` reads a one-layer Llama `config.json` written to a
  temporary directory (the Scheduler reads only `max_model_len`, the runner type and the
  multimodal / M-RoPE / encoder-decoder flags from it); the `KVCacheConfig` is built by
  hand with the layout `vllm_worker.py` uses (one full-attention group and `state_blocks`
  Mamba groups in "align" mode over one pool of `num_blocks`), where a server derives it
  from the model's layers and the GPU memory; the `ModelRunnerOutput` is made here: a
  request whose computed tokens reach its length after `schedule()` samples its next
  output id (the model runner discards the token of a partial prefill chunk), nothing else.
  No forward pass runs: the caller times each step on its own clock.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

try:  # imported as part of the package (tests, type checks)
    from replay.sim.native.vllm_worker import kv_cache_config
    from replay.sim.native.wire import serve_engine
except ImportError:  # run as a script inside the engine's environment: sibling modules
    from vllm_worker import kv_cache_config  # type: ignore[import-not-found,no-redef,unused-ignore]
    from wire import serve_engine  # type: ignore[import-not-found,no-redef,unused-ignore]


class Engine:
    """One real Scheduler and the output ids of the requests it holds."""

    def __init__(self, cfg: dict[str, Any]):
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.structured_output import StructuredOutputManager

        B = int(cfg["block"])
        self.B = B
        num_blocks = int(cfg["num_blocks"])
        max_model_len = int(cfg["max_model_len"])
        self._model_dir = tempfile.TemporaryDirectory(prefix="vllm-sched-oracle-")
        with open(os.path.join(self._model_dir.name, "config.json"), "w") as f:
            json.dump(
                {
                    "architectures": ["LlamaForCausalLM"],
                    "model_type": "llama",
                    "hidden_size": 64,
                    "intermediate_size": 128,
                    "num_attention_heads": 1,
                    "num_key_value_heads": 1,
                    "num_hidden_layers": 1,
                    "vocab_size": int(cfg["vocab_size"]),
                    "max_position_embeddings": max_model_len,
                    "torch_dtype": "bfloat16",
                },
                f,
            )
        model = ModelConfig(
            model=self._model_dir.name,
            skip_tokenizer_init=True,
            max_model_len=max_model_len,
            dtype="bfloat16",
        )
        cache = CacheConfig(
            block_size=B,
            enable_prefix_caching=True,
            mamba_cache_mode="align",
        )
        cache.num_gpu_blocks = num_blocks
        sched_cfg = SchedulerConfig(
            max_num_batched_tokens=int(cfg["token_budget"]),
            max_num_seqs=int(cfg["max_num_seqs"]),
            max_model_len=max_model_len,
            long_prefill_token_threshold=int(cfg["long_prefill_threshold"]),
            enable_chunked_prefill=True,
            is_encoder_decoder=False,
            async_scheduling=False,
        )
        self.vllm_config = VllmConfig(
            model_config=model, cache_config=cache, scheduler_config=sched_cfg
        )
        kv_cfg = kv_cache_config(cfg, B)  # as vllm_worker.py builds it
        self.sched = Scheduler(
            self.vllm_config,
            kv_cfg,
            StructuredOutputManager(self.vllm_config),
            block_size=B,
            hash_block_size=B,
        )
        init_none_hash(sha256)
        self.hasher = get_request_block_hasher(B, sha256)
        self.outputs: dict[str, list[int]] = {}  # rid -> its fixed output ids
        self.seen: set[str] = set()  # requests scheduled at least once
        self.steps = 0
        self._watch_evictions()

    def _watch_evictions(self) -> None:
        """Observe (never change) the pool: when each cached block was freed (the step's
        time the caller sends) and, when one is evicted, its age in the free queue, per
        kind (group 0: attention KV; the others: Mamba state)."""
        from vllm.v1.core.kv_cache_utils import get_group_id

        pool = self.sched.kv_cache_manager.block_pool
        free, evict = pool.free_blocks, pool._maybe_evict_cached_block
        self.now = 0.0
        self.freed_at: dict[int, float] = {}
        self.evicted: dict[str, list[float]] = {"kv": [0, 0.0], "state": [0, 0.0]}

        def free_blocks(blocks: Any) -> None:
            blocks = list(blocks)
            for b in blocks:
                if b.ref_cnt == 1 and b.block_hash is not None:
                    self.freed_at[b.block_id] = self.now
            free(blocks)

        def maybe_evict(block: Any) -> bool:
            h = block.block_hash
            gone = bool(evict(block))
            if gone and h is not None:
                kind = "kv" if get_group_id(h) == 0 else "state"
                e = self.evicted[kind]
                e[0] += 1
                e[1] += self.now - self.freed_at.pop(block.block_id, self.now)
            return gone

        pool.free_blocks = free_blocks
        pool._maybe_evict_cached_block = maybe_evict

    def settings(self) -> dict[str, Any]:
        """What vLLM resolved (so the caller can print and check it)."""
        s, c = self.sched, self.vllm_config
        return {
            "block_size": c.cache_config.block_size,
            "num_gpu_blocks": c.cache_config.num_gpu_blocks,
            "mamba_cache_mode": c.cache_config.mamba_cache_mode,
            "max_num_batched_tokens": c.scheduler_config.max_num_batched_tokens,
            "long_prefill_token_threshold": c.scheduler_config.long_prefill_token_threshold,
            "max_num_seqs": c.scheduler_config.max_num_seqs,
            "scheduler_reserve_full_isl": s.scheduler_reserve_full_isl,
            "watermark": c.scheduler_config.watermark,
            "async_scheduling": c.scheduler_config.async_scheduling,
            "policy": str(c.scheduler_config.policy),
            "coordinator": type(s.kv_cache_manager.coordinator).__name__,
            "need_mamba_block_aligned_split": s.need_mamba_block_aligned_split,
            "max_model_len": s.max_model_len,
        }

    def add(self, rid: str, n: int, ids: list[int]) -> dict[str, Any]:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        if rid in self.sched.requests:
            raise ValueError(f"request id {rid} is in use")
        out = ids[n:]
        if n <= 0 or not out:
            raise ValueError(f"request {rid}: needs a prompt and at least one output id")
        if n + len(out) > self.sched.max_model_len:
            raise ValueError(
                f"request {rid}: {n} prompt + {len(out)} output tokens exceed max_model_len "
                f"{self.sched.max_model_len}"
            )
        params = SamplingParams(max_tokens=len(out), ignore_eos=True)
        req = Request(rid, ids[:n], params, None, block_hasher=self.hasher)
        self.outputs[rid] = out
        self.sched.add_request(req)
        return {}

    def step(self, now: float = 0.0) -> dict[str, Any]:
        from vllm.v1.outputs import ModelRunnerOutput

        s = self.sched
        lengths = {rid: r.num_tokens for rid, r in s.requests.items()}
        self.now = now
        self.evicted = {"kv": [0, 0.0], "state": [0, 0.0]}
        so = s.schedule()
        self.steps += 1
        ids = list(so.num_scheduled_tokens)
        sampled: list[list[int]] = []
        # [rid, a, b, prefill, hit, kv]: hit (-1: not its first scheduling) the tokens vLLM
        # computed on admission; kv its longest single-group hit where the attention KV ran
        # past the Mamba state (`shared_prefix_boundary`, `get_computed_blocks`), else the hit
        sched: list[list[Any]] = []
        for rid in ids:
            r = s.requests[rid]
            k = so.num_scheduled_tokens[rid]
            b = r.num_computed_tokens  # advanced by `schedule` (_update_after_schedule)
            a = b - k
            # A prefill as `_mamba_block_aligned_split` tells one: a position before
            # max(num_prompt_tokens, num_tokens - 1) (a resumed request replays its output).
            prefill = a < max(r.num_prompt_tokens, lengths[rid] - 1)
            first = rid not in self.seen
            self.seen.add(rid)
            kv = max(a, int(getattr(r, "shared_prefix_boundary", 0) or 0)) if first else -1
            sched.append([rid, a, b, prefill, a if first else -1, kv])
            if b >= r.num_tokens:  # caught up: the step samples its next token
                sampled.append([self.outputs[rid][len(r.output_token_ids)]])
            else:
                sampled.append([])  # a partial prefill chunk's token is discarded
        mro = ModelRunnerOutput(
            req_ids=ids,
            req_id_to_index={rid: i for i, rid in enumerate(ids)},
            sampled_token_ids=sampled,
        )
        emitted = [rid for rid, tok in zip(ids, sampled, strict=True) if tok]
        finished = self._update(so, mro)
        return {
            "scheduled": sched,
            "emitted": emitted,
            "finished": finished,
            "preempted": sorted(so.preempted_req_ids),
            # cached blocks evicted in this step: [count, summed seconds in the free queue]
            "evicted": self.evicted,
            **self._counts(),
        }

    def _update(self, so: Any, mro: Any) -> list[str]:
        """The step's model output handed to the scheduler; the requests it finished, which
        this worker then forgets."""
        finished: list[str] = []
        for eco in self.sched.update_from_output(so, mro).values():
            for o in eco.outputs:
                if o.finish_reason is not None:
                    finished.append(o.request_id)
        for rid in finished:
            self.outputs.pop(rid, None)
            self.seen.discard(rid)
        return finished

    def abort(self, rid: str) -> dict[str, Any]:
        from vllm.v1.request import RequestStatus

        self.sched.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
        self.outputs.pop(rid, None)
        self.seen.discard(rid)
        return self._counts()

    def _counts(self) -> dict[str, Any]:
        pool = self.sched.kv_cache_manager.block_pool
        free = int(pool.get_num_free_blocks())
        running, waiting = self.sched.get_request_counts()
        return {
            "free": free,
            # handed out to requests: the pool less its null block and its free queue
            "used": int(pool.num_gpu_blocks) - 1 - free,
            "running": running,
            "waiting": waiting,
        }

    def stats(self) -> dict[str, Any]:
        pool = self.sched.kv_cache_manager.block_pool
        cached = sum(1 for b in pool.blocks if b.block_hash is not None and b.ref_cnt == 0)
        return {**self._counts(), "cached_idle": cached, "steps": self.steps}


def hello() -> dict[str, Any]:
    import vllm

    return {"version": getattr(vllm, "__version__", "unknown"), "python": sys.executable}


def main() -> int:
    def init(config: dict[str, Any]) -> tuple[Engine, dict[str, Any]]:
        engine = Engine(config)
        return engine, {"settings": engine.settings(), **engine._counts()}

    return serve_engine(
        hello,
        init,
        {
            "add": lambda e, h, t: e.add(str(h["rid"]), int(h["n"]), t),
            "step": lambda e, h, t: e.step(float(h.get("t", 0.0))),
            "abort": lambda e, h, t: e.abort(str(h["rid"])),
            "stats": lambda e, h, t: e.stats(),
        },
    )


if __name__ == "__main__":
    sys.exit(main())
