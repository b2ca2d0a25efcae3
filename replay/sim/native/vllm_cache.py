"""`vllm-native`: the simulator's cache API over vLLM's own `KVCacheManager`.

The same online calls as `HybridCache` (`lookup / begin / reserve / prefill_done / finish /
abort`), so the simulator's executors (and the emulator) drive it unchanged; each turns into
what vLLM's scheduler does for one request (`replay/sim/native/vllm_worker.py`):

- `lookup`: `get_computed_blocks` on a request built from the prompt's token ids (pure);
- `reserve`: admission and every prefill chunk, one scheduler step each, chunk ends from
  `Scheduler._mamba_block_aligned_split`; False when vLLM could not allocate (the request
  waits, as in vLLM's queue); the hit reported is the one at admission. When the prefix
  already holds the output ids (the simulator's), the output is decoded here too, one token
  a step, so the request holds its whole sequence from its start as `HybridCache` reserves;
- `finish`: the output decoded (if not yet: the emulator learns it only now), then `free`
  (KV freed tail first);
- `abort`: `free`.

The hybrid cache config comes from the model profile: one full-attention group and
`checkpoint_blocks` Mamba groups ("align" mode) over one pool of `capacity + 1` blocks of
`block_tokens` (vLLM's pool loses one to its null block), the prefix-cache retention
interval a server resolves (0), `hash_block_size` = `--prefix-match-unit` or the block, the
long-prefill threshold = the profile's `chunk_tokens` and the token budget 16,384 (the
paper's serve command; both are options).

Requests are run one command at a time: a request's prefill steps run back to back at
`reserve`, its decode steps at `finish`. vLLM interleaves other requests' steps between
them; the manager's state between two requests' calls is the same either way except for the
order in which blocks are taken from and returned to the free queue within one step.
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replay.profiles import ModelProfile
from replay.sim.cache import HybridCache
from replay.sim.keys import Prefix
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import NativeError, Worker
from replay.sim.requests import CacheError, Handle, ResumeInfo

if TYPE_CHECKING:
    from replay.sim.policy_base import Policy


# No `slots=True` here: over a compiled base (`replay.sim.compiled`) it would declare the
# inherited fields again as slots that shadow the base's own, which compiled code reads.
@dataclass
class NativeInfo(ResumeInfo):
    rid: str = ""


@dataclass
class NativeHandle(Handle):
    rid: str = ""
    info: ResumeInfo | None = None
    started: bool = False
    decoded: bool = False


def engine_config(profile: ModelProfile, opts: dict[str, Any], capacity: int) -> dict[str, Any]:
    """The worker's `init` config from the profile and the policy's options."""
    B = profile.block_tokens
    unit = opts.get("prefix_match_unit")
    if opts.get("decode_steps", "block") not in ("block", "token"):
        raise NativeError(f"decode_steps is 'block' or 'token', not {opts['decode_steps']!r}")
    if unit is not None and (int(unit) <= 0 or B % int(unit)):
        raise NativeError(
            f"prefix_match_unit {unit} must divide the block size {B} (vLLM requires every "
            "group's block size to be a multiple of it)"
        )
    # The paper's serve command (configs/engines/vllm-glm53-b200.yaml):
    # --long-prefill-token-threshold 8704 (the profile's chunk_tokens) and
    # --max-num-batched-tokens 16384. vLLM's own defaults are 0 (no threshold) and 2048.
    lpt = opts.get("long_prefill_threshold")
    chunk = profile.chunk_tokens if lpt is None else int(lpt)
    budget = opts.get("token_budget")
    return {
        "block": B,
        "hash_block": int(unit) if unit else B,
        "num_blocks": capacity + 1,  # the pool's null block is never handed out
        "state_blocks": profile.checkpoint_blocks,
        "retention": opts.get("retention", 0),
        "max_model_len": profile.context_tokens,
        "long_prefill_threshold": chunk,
        "token_budget": 16384 if budget is None else int(budget),
        "shared_prefix_checkpoint": bool(opts.get("shared_prefix_checkpoint", False)),
        "decode_steps": str(opts.get("decode_steps", "block")),
    }


class NativeVllmCache(HybridCache):
    """`HybridCache`'s online API backed by vLLM's KV cache manager in a worker process."""

    def __init__(
        self,
        profile: ModelProfile,
        policy: Policy,
        capacity_blocks: int | None = None,
        worker: Worker | None = None,
    ):
        super().__init__(profile, policy, capacity_blocks)
        if self.capacity is None:
            raise NativeError("vllm-native needs a bounded cache (a capacity in blocks)")
        opts = policy.opts
        fork = [k for k in FORK_OPTIONS if opts.get(k) not in (None, False, "lru")]
        # A worker passed in belongs to the caller (tests share one); one started here is
        # stopped with this cache (`close`, or when it is collected).
        self.worker = worker or Worker.start(opts.get("python"))
        self._finalizer = weakref.finalize(self, self.worker.close if worker is None else _noop)
        missing = [k for k in fork if FORK_OPTIONS[k] not in self.worker.fork_flags]
        if missing:
            self.close()
            raise NativeError(
                f"option {', '.join(missing)} needs the FlashState fork of vLLM (a 0.33 fork: "
                f"`bash scripts/fetch_flashstate.sh`, GPU build); the vLLM found "
                f"({self.worker.found.python}, {self.worker.found.how}) is {self.worker.version}"
            )
        self.config = engine_config(profile, opts, self.capacity)
        self.config["fork"] = {FORK_OPTIONS[k]: opts[k] for k in fork}
        self.free = int(self.worker.call("init", config=self.config)["free"])
        self.tokens = TokenSource(profile.vocab_size)
        self._ids = itertools.count(1)
        self._pending: dict[str, NativeInfo] = {}  # looked up, not begun
        self.steps = 0

    # occupancy: what vLLM's pool has handed out (referenced blocks) ---------------------------
    @property
    def used_blocks(self) -> int:
        assert self.capacity is not None
        return self.capacity - self.free

    def close(self) -> None:
        self._finalizer()

    # the online API ------------------------------------------------------------------------
    def lookup(
        self, prefix: Prefix, prompt_len: int, now: float, ideal_hint: int = 0
    ) -> ResumeInfo:
        rid = f"r{next(self._ids)}"
        ans = self.worker.call("lookup", self.tokens.ids(prefix, 0, prompt_len), rid=rid)
        hit = int(ans["hit"])
        ideal = min(max(hit, ideal_hint), prompt_len)
        info = NativeInfo(prompt_len, ideal, hit, hit, hit, hit, rid=rid)
        self._pending[rid] = info
        if len(self._pending) > 4096:  # looked up and never begun: forget the oldest
            old = next(iter(self._pending))
            del self._pending[old]
            self.worker.call("drop", rid=old)
        return info

    def begin(self, prefix: Prefix, prompt_len: int, info: ResumeInfo, now: float) -> Handle:
        self.clock = now
        if not isinstance(info, NativeInfo) or self._pending.pop(info.rid, None) is None:
            raise CacheError("begin() needs a ResumeInfo from this cache's lookup(), used once")
        return NativeHandle(prefix, prompt_len, info.resume_pos, None, [], rid=info.rid, info=info)

    def reserve(self, h: Handle, total_len: int, now: float) -> bool:
        h = _native(h)
        if h.reserved:
            raise CacheError("reserve() called twice for one request")
        ans = self.worker.call("start", rid=h.rid)
        hit = int(ans["hit"])
        info = h.info
        if info is not None:  # the hit at admission is the one the request gets
            info.resume_pos = info.resident_pos = info.checkpoint_pos = info.kv_pos = hit
            info.ideal_pos = max(info.ideal_pos, hit)
        h.resume_pos = hit
        if not ans["ok"]:
            return False
        self.free = int(ans["free"])
        self.steps += len(ans.get("chunks", ()))
        h.reserved = h.started = True
        h.total_len = total_len
        if h.prefix.length >= total_len:  # the output is known (the simulator): decode now,
            self._decode(h, h.prefix, total_len)  # so its blocks are held from the start
        return True

    def prefill_done(self, h: Handle, now: float) -> None:
        if not h.reserved:
            raise CacheError("prefill_done() before a successful reserve()")
        h.prefilled = True

    def abort(self, h: Handle, now: float) -> None:
        self.free = int(self.worker.call("drop", rid=_native(h).rid)["free"])

    def finish(self, h: Handle, full: Prefix, total_len: int, now: float) -> None:
        h = _native(h)
        if not h.reserved:
            raise CacheError("finish() before a successful reserve()")
        if full.length < total_len:
            raise CacheError(f"finish(): the prefix covers {full.length} tokens, not {total_len}")
        self.clock = now
        if not h.decoded:
            self._decode(h, full, total_len)
        self.free = int(self.worker.call("free", rid=h.rid)["free"])

    def _decode(self, h: NativeHandle, full: Prefix, total_len: int) -> None:
        out = self.tokens.ids(full, h.prompt_len, total_len)
        ans = self.worker.call("decode", out, rid=h.rid)
        self.free = int(ans["free"])
        self.steps += max(len(out) - 1, 0)
        h.decoded = True

    def stats(self) -> dict[str, Any]:
        return self.worker.call("stats")


# The FlashState fork's flags as policy options (CacheConfig fields the fork adds).
FORK_OPTIONS: dict[str, str] = {
    "frontier_checkpoint": "mamba_frontier_checkpoint",
    "prefill_export": "mamba_prefill_export",
    "eviction": "prefix_cache_eviction",
    "leaf_last": "prefix_cache_leaf_last",
    "leaf_idle_s": "prefix_cache_leaf_idle_seconds",
}


def _noop() -> None:
    pass


def _native(h: Handle) -> NativeHandle:
    if not isinstance(h, NativeHandle):
        raise CacheError("this handle does not come from this cache's begin()")
    return h
