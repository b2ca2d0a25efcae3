"""The simulator's online cache API over an engine's own cache code in a worker process.

`NativeCache` speaks `HybridCache`'s calls (`lookup / begin / reserve / prefill_done /
finish / abort`), so the simulator's executors (and the emulator) drive it unchanged; each
is one worker command (`replay.sim.native.worker`): `lookup` the hit a waiting request would
get, `start` its admission and prefill (False: it could not be admitted and waits), `decode`
its output (here at `reserve` when the prefix already holds the output ids, as `HybridCache`
holds a request's whole sequence from its start; at `finish` otherwise), `free` at its end,
`drop` when it will not run. The engines: `vllm_cache` (vLLM's KVCacheManager) and
`sglang_cache` (SGLang's radix cache).
"""

from __future__ import annotations

import itertools
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replay.profiles import ModelProfile
from replay.sim.cache.hybrid import HybridCache
from replay.sim.cache.keys import Prefix
from replay.sim.cache.requests import CacheError, Handle, ResumeInfo
from replay.sim.native.tokens import TokenSource
from replay.sim.native.worker import NativeError, Worker

if TYPE_CHECKING:
    from replay.sim.cache.policy_base import Policy


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


class NativeCache(HybridCache):
    """`HybridCache`'s online API backed by an engine's cache in a worker process. An engine's
    subclass names the `engine` and builds the worker's `init` config (`worker_config`)."""

    engine = "vllm"

    def __init__(
        self,
        profile: ModelProfile,
        policy: Policy,
        capacity_blocks: int | None = None,
        worker: Worker | None = None,
    ):
        super().__init__(profile, policy, capacity_blocks)
        if self.capacity is None:
            raise NativeError(f"{policy.name} needs a bounded cache (a capacity in blocks)")
        # A worker passed in belongs to the caller (tests share one); one started here is
        # stopped with this cache (`close`, or when it is collected).
        self.worker = worker or Worker.start(policy.opts.get("python"), engine=self.engine)
        self._finalizer = weakref.finalize(self, self.worker.close if worker is None else _noop)
        self.tokens = TokenSource(profile.vocab_size)
        self._ids = itertools.count(1)
        self._pending: dict[str, NativeInfo] = {}  # looked up, not begun
        self.steps = 0
        self.free = 0
        try:
            config = self.worker_config(profile, policy)
        except NativeError:
            self.close()
            raise
        self.config = config
        self._answer(self.worker.call("init", config=config))

    def worker_config(self, profile: ModelProfile, policy: Policy) -> dict[str, Any]:
        """The worker's `init` config for `profile` and the policy's options; a `NativeError`
        says what this engine (or the one found) cannot run."""
        raise NotImplementedError

    def _answer(self, ans: dict[str, Any]) -> None:
        """Occupancy from a worker's answer (`free`: free blocks or tokens, per engine)."""
        if "free" in ans:
            self.free = int(ans["free"])

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
        ans = self.worker.call("start", rid=h.rid, total=total_len)
        hit = int(ans["hit"])
        info = h.info
        if info is not None:  # the hit at admission is the one the request gets
            info.resume_pos = info.resident_pos = info.checkpoint_pos = info.kv_pos = hit
            info.ideal_pos = max(info.ideal_pos, hit)
        h.resume_pos = hit
        if not ans["ok"]:
            return False
        self._answer(ans)
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
        self._answer(self.worker.call("drop", rid=_native(h).rid))

    def finish(self, h: Handle, full: Prefix, total_len: int, now: float) -> None:
        h = _native(h)
        if not h.reserved:
            raise CacheError("finish() before a successful reserve()")
        if full.length < total_len:
            raise CacheError(f"finish(): the prefix covers {full.length} tokens, not {total_len}")
        self.clock = now
        if not h.decoded:
            self._decode(h, full, total_len)
        self._answer(self.worker.call("free", rid=h.rid))

    def _decode(self, h: NativeHandle, full: Prefix, total_len: int) -> None:
        out = self.tokens.ids(full, h.prompt_len, total_len)
        ans = self.worker.call("decode", out, rid=h.rid)
        self._answer(ans)
        self.steps += max(len(out) - 1, 0)
        h.decoded = True

    def stats(self) -> dict[str, Any]:
        return self.worker.call("stats")


def _noop() -> None:
    pass


def _native(h: Handle) -> NativeHandle:
    if not isinstance(h, NativeHandle):
        raise CacheError("this handle does not come from this cache's begin()")
    return h
