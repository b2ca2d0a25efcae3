"""The engine model's cache: one place for what an engine's prefix cache is to its scheduler.

`replay.sim.engine.core.EngineCore` (the scheduler both `replay simulate --timing engine` and
`replay serve-sim` run) never looks inside a cache; it admits a request (the cache finds where
it resumes and reserves room for it), optionally parks a waiting request's resume state,
reports prefill chunks and hands finished sequences back. `SimCache` implements that over the
simulator's online cache core (`replay.sim.cache.hybrid.HybridCache`) with a named policy, so every
engine's policy exists once; `replay.sim.cache.kv_lru.KVLRUCache` is a plain KV cache beside it.
`engine_cache` (here) is the one place that turns (policy, profile, token scale, block count) into a
cache, so an emulator and the simulator given the same settings build the same cache.

Positions are token counts from the start of the sequence; times are model seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from replay.profiles import ModelProfile
from replay.resume import Resume
from replay.sim.cache.capacity import Capacity, resolve_capacity
from replay.sim.cache.hybrid import Handle, HybridCache, ResumeInfo
from replay.sim.cache.keys import Prefix
from replay.sim.cache.kv_lru import KVLRUCache
from replay.sim.cache.tiers import (
    DEFAULT_BANDWIDTH_GBS,
    HostTier,
    TierError,
    attach_external,
    attach_host_tier,
    check_external,
)


class EngineCache(Protocol):
    """What the engine model needs from a cache policy."""

    @property
    def block_tokens(self) -> int:
        """Tokens per cache block (the engine's block size; chunk ends align to it)."""
        ...

    @property
    def capacity_blocks(self) -> int | None:
        """Blocks the cache holds (None: unbounded)."""
        ...

    @property
    def capacity(self) -> Capacity:
        """Where that block count (and any pools) came from (`replay.sim.cache.capacity`)."""
        ...

    def park(self, rid: int, prompt: Prefix, prompt_len: int, now: float, hint: int = 0) -> None:
        """Request `rid` arrived and waits: pin the state it will resume from (FlashState)."""
        ...

    def unpark_all(self, now: float) -> bool:
        """Release every parked state (they are looked up again when scheduled): the head of
        the queue needs their room and nothing else runs. Whether there was any."""
        ...

    def admit(
        self,
        rid: int,
        prompt: Prefix,
        prompt_len: int,
        reserve_tokens: int,
        now: float,
        hint: int = 0,
    ) -> Resume | None:
        """Schedule request `rid`: find where it resumes (its parked state, or a lookup now)
        and hold room for `reserve_tokens` tokens of KV (prompt plus output), evicting what
        the policy chooses. None (nothing changed but a parked state stays parked) when even
        eviction cannot make room: the request waits."""
        ...

    def prefill(self, rid: int, start: int, end: int, now: float) -> None:
        """Positions [start, end) of request `rid`'s prompt were computed in one step."""
        ...

    def finish(self, rid: int, full: Prefix, total_len: int, now: float) -> None:
        """Request `rid` ended; `full` identifies its prompt plus output, of which the first
        `total_len` tokens have KV. The policy keeps what it wants and frees the rest."""
        ...

    def abort(self, rid: int, now: float) -> None:
        """Request `rid` was cancelled before it finished (or never ran); release it."""
        ...

    def usage(self) -> float:
        """Fraction of the cache's blocks in use (0..1)."""
        ...


@runtime_checkable
class GrowingCache(Protocol):
    """A cache that can also allocate a request's blocks step by step (`allocation="step"`
    in `replay.sim.engine.rules`): `SimCache`."""

    @property
    def can_grow(self) -> bool: ...

    def admit_step(
        self,
        rid: int,
        prompt: Prefix,
        prompt_len: int,
        gate_tokens: int,
        committed_blocks: int,
        now: float,
        hint: int = 0,
    ) -> Resume | None: ...

    def grow(self, rid: int, tokens: int, now: float) -> int | None: ...

    def unadmit(self, rid: int, now: float) -> None: ...


@dataclass(frozen=True)
class CacheSettings:
    """What `HybridCache` (and `replay.sim.runner.SimConfig`) take for one policy."""

    policy: str
    profile: ModelProfile
    options: dict[str, object] = field(default_factory=dict)
    # The block count handed to the cache (None: the policy's own size, its pools included).
    capacity_blocks: int | None = None
    capacity: Capacity | None = None  # the resolution it came from (`replay.sim.cache.capacity`)
    # A host-memory tier (`replay.sim.cache.tiers`, issue 34): its GiB (0: none) and the
    # host-to-GPU bandwidth per GPU in GB/s (None: the tier's default).
    host_memory_gb: float = 0.0
    host_bandwidth_gbs: float | None = None
    host_kv_share: float | None = None  # SGLang's host KV pool share (None: its own rule)
    # An external store behind host memory (`replay.sim.cache.tiers`, rule 5): its GiB (0:
    # none), its bandwidth into host memory per GPU in GB/s (None: the host link's default)
    # and what it is (mooncake: KV and states; lmcache: KV only).
    external_memory_gb: float = 0.0
    external_bandwidth_gbs: float | None = None
    external_store: str = "mooncake"


# Policy options measured in tokens: they shrink with a scaled trace like the profile does.
_TOKEN_OPTIONS = ("grid", "chunk", "every")


def cache_settings(
    policy: str,
    profile: ModelProfile,
    token_scale: float = 1.0,
    capacity_blocks: int | None = None,
    options: dict[str, Any] | None = None,
) -> CacheSettings:
    """Settings for `policy` on `profile` (already scaled by `token_scale`), with the cache
    resized to `capacity_blocks` if given and `options` (unscaled) on top of the policy's own.

    Token-valued options (SGLang's 256-token grid and chunk, dense's spacing, a KV pool
    given in tokens) shrink by the token scale, so a scaled prompt gets as many checkpoints
    as its full-size original. The capacity is `replay.sim.cache.capacity.resolve_capacity`'s: a
    policy with pools of its own (SGLang's state slots beside its KV pool) gets them as
    options, sized from `capacity_blocks` (or the profile's memory) as SGLang sizes them; any other
    policy gets the resolved block count."""
    from replay.sim.cache.policies import Policy

    cls = Policy.registry.get(policy)
    opts: dict[str, object] = dict(options or {})
    if cls is not None and token_scale != 1.0:
        base = {**cls.options, **opts}
        for key in _TOKEN_OPTIONS:
            if key in cls.options:
                opts[key] = max(1, round(float(base[key]) / token_scale))
        kv = opts.get("kv_tokens")  # a KV pool given in full-size tokens
        if isinstance(kv, int | float) and not isinstance(kv, bool) and kv > 0:
            opts["kv_tokens"] = max(1, round(kv / token_scale))
    cap = resolve_capacity(policy, profile, capacity_blocks, opts)
    if cap.pooled:
        opts["state_slots"], opts["kv_tokens"] = cap.state_slots, cap.kv_tokens
        return CacheSettings(policy, profile, opts, None, cap)
    return CacheSettings(policy, profile, opts, cap.blocks, cap)


def engine_cache(
    policy: str,
    profile: ModelProfile,
    token_scale: float = 1.0,
    capacity_blocks: int | None = None,
    host_memory_gb: float = 0.0,
    host_bandwidth_gbs: float | None = None,
    external: dict[str, Any] | None = None,
) -> EngineCache:
    """The cache for `policy` (a `replay.sim` policy name or `kv-lru`) on `profile`, with a
    host-memory tier of `host_memory_gb` GiB (0: none) loaded at `host_bandwidth_gbs` GB/s
    per GPU (None: the tier's default), and an external store behind it where `external`
    gives one (`CacheSettings.external_*`: memory, bandwidth, store), as
    `replay.sim.runner.scaled_settings` gives them."""
    if policy == "kv-lru":
        if host_memory_gb or (external or {}).get("external_memory_gb"):
            raise TierError(
                f"--host-memory-gb {host_memory_gb:g}: policy 'kv-lru' (a plain KV cache) has "
                "no host tier; use an engine's own policy"
            )
        cap = resolve_capacity(policy, profile, capacity_blocks)
        assert cap.blocks is not None
        return KVLRUCache(profile.block_tokens, cap.blocks, cap)
    settings = cache_settings(policy, profile, token_scale, capacity_blocks)
    if host_memory_gb:
        settings = replace(
            settings, host_memory_gb=host_memory_gb, host_bandwidth_gbs=host_bandwidth_gbs
        )
    ext = {k: v for k, v in (external or {}).items() if v is not None}
    if ext.get("external_memory_gb"):
        settings = replace(settings, **ext)
    return SimCache(settings)


def _keep(prefix: Prefix, resume_pos: int, block: int) -> Prefix:
    """What the cache keeps of a sequence: token-id prefixes (the emulator's) are handed
    over `retained` from one block before the block holding the resume position (the cache
    builds a request's new blocks from there on), so memory grows with the tokens that were
    new to the cache; other prefixes as they are."""
    retained = getattr(prefix, "retained", None)
    if retained is None:
        return prefix
    keep_from = (max(resume_pos - 1, 0) // block - 1) * block
    out: Prefix = retained(keep_from, block)
    return out


class SimCache:
    """One `HybridCache` with the named policy, driven request by request."""

    def __init__(self, settings: CacheSettings) -> None:
        from replay.sim.cache.policies import make_policy

        policy = make_policy(settings.policy, settings.profile, **settings.options)
        self.cache = policy.make_cache(settings.profile, settings.capacity_blocks)
        self.policy = settings.policy
        self._capacity = settings.capacity or resolve_capacity(
            settings.policy, settings.profile, settings.capacity_blocks, settings.options
        )
        self.host: HostTier | None = None
        if settings.host_memory_gb > 0:
            bw = settings.host_bandwidth_gbs or DEFAULT_BANDWIDTH_GBS
            self.host = attach_host_tier(
                self.cache,
                settings.policy,
                settings.profile,
                settings.host_memory_gb,
                bw,
                settings.host_kv_share,
            )
            if settings.external_memory_gb > 0:
                attach_external(
                    self.host,
                    settings.profile,
                    settings.external_memory_gb,
                    settings.external_bandwidth_gbs or DEFAULT_BANDWIDTH_GBS,
                    settings.external_store,
                )
        elif settings.external_memory_gb > 0:  # a store needs host memory in front of it
            check_external(0.0, settings.external_memory_gb, settings.external_store)
        self._load: dict[int, float] = {}  # request -> seconds its host load takes
        self._parked: dict[int, tuple[Handle, ResumeInfo]] = {}
        self._handles: dict[int, Handle] = {}
        self._resume: dict[int, int] = {}  # request -> resume position (what it keeps)
        # allocation per step: tokens held, resumed path length, lookup, parked before
        self._tokens: dict[int, int] = {}
        self._base: dict[int, int] = {}
        self._infos: dict[int, ResumeInfo] = {}
        self._was_parked: dict[int, bool] = {}

    @property
    def block_tokens(self) -> int:
        return self.cache.B

    @property
    def capacity_blocks(self) -> int | None:
        return self.cache.capacity

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def _begin(
        self, prompt: Prefix, prompt_len: int, now: float, hint: int
    ) -> tuple[Handle, ResumeInfo]:
        info = self.cache.lookup(prompt, prompt_len, now, hint)
        B = self.cache.B
        # Blocks loaded from host memory are built into the GPU's tree again from the first
        # of them on (`materialize.prefill_done`), so the emulator's prompt keeps their tokens;
        # so are blocks of the loaded range the request does not pin (vLLM's connector loads
        # [r, p) into new blocks: a GPU copy there is not held, and may be gone by then).
        built = min((b.index * B + 1 for b in info.host_blocks), default=info.resume_pos)
        if info.tiered and info.resume_pos > len(info.chain) * B:
            held = set(info.chain)
            for b in info.path[: -(-info.resume_pos // B)]:
                if b not in held:
                    built = min(built, b.index * B + 1)
                    break
        h = self.cache.begin(_keep(prompt, min(info.resume_pos, built), B), prompt_len, info, now)
        return h, info

    def park(self, rid: int, prompt: Prefix, prompt_len: int, now: float, hint: int = 0) -> None:
        if rid not in self._parked:
            self._parked[rid] = self._begin(prompt, prompt_len, now, hint)

    def unpark_all(self, now: float) -> bool:
        parked, self._parked = self._parked, {}
        for h, _ in parked.values():
            self.cache.abort(h, now)
        return bool(parked)

    def admit(
        self,
        rid: int,
        prompt: Prefix,
        prompt_len: int,
        reserve_tokens: int,
        now: float,
        hint: int = 0,
    ) -> Resume | None:
        parked = self._parked.pop(rid, None)
        h, info = parked or self._begin(prompt, prompt_len, now, hint)
        if not self.cache.reserve(h, reserve_tokens, now):
            self._refuse(rid, parked, h, now)
            return None
        self._hold(rid, h, info)
        return info.resume()

    def _refuse(
        self, rid: int, parked: tuple[Handle, ResumeInfo] | None, h: Handle, now: float
    ) -> None:
        """Request `rid` cannot be admitted now: a parked state stays parked while it waits
        (`parked`: what it had), a lookup made for the attempt (`h`) is given back."""
        if parked is not None:
            self._parked[rid] = parked
        else:
            self.cache.abort(h, now)

    def _hold(self, rid: int, h: Handle, info: ResumeInfo) -> None:
        """Request `rid` was admitted as `h`, resuming where `info` says."""
        self._handles[rid] = h
        self._resume[rid] = info.resume_pos
        if (info.load_blocks or info.external_load_blocks) and self.host is not None:
            self._load[rid] = self.host.load_seconds(info)

    def load_seconds(self, rid: int) -> float:
        """Seconds the admitted request `rid` waits for its host-memory load (0: none);
        asked once, when it is scheduled."""
        return self._load.pop(rid, 0.0)

    # allocation per step (`replay.sim.engine.rules`, allocation="step") ----------------
    @property
    def can_grow(self) -> bool:
        """Whether this cache allocates a request's blocks step by step: the simulator's own
        cache does; a native engine's cache (it decodes at admission) does not."""
        return type(self.cache).reserve is HybridCache.reserve

    def held_blocks(self) -> int:
        """Blocks live and parked requests hold (the rest is free or evictable), in the pool
        KV lives in: their pinned path, their private blocks and (one pool) their state
        buffers and the checkpoints they resumed from. A block two live requests share is
        counted twice (a conservative gate; rare outside subagents)."""
        C = 0 if self.cache.state_slots is not None else self.cache.C
        n = 0
        for h in self._handles.values():
            n += len(h.pinned) + h.reserved_blocks + (h.tail is not None)
            n += C * (h.reserved_states + (h.state is not None) + (h.held_state is not None))
        for h, _ in self._parked.values():
            n += len(h.pinned) + C * (h.state is not None)
        return n

    def admit_step(
        self,
        rid: int,
        prompt: Prefix,
        prompt_len: int,
        gate_tokens: int,
        committed_blocks: int,
        now: float,
        hint: int = 0,
    ) -> Resume | None:
        """Schedule request `rid` for allocation per step: find where it resumes, check the
        engine's admission gate (its first `gate_tokens` tokens, less the resident path it
        resumes over, plus a state buffer, fit beside what live requests hold and the
        `committed_blocks` the engine promised them) and hold its state buffer only; `grow`
        takes its blocks chunk by chunk. None (nothing changed; a parked state stays
        parked) when the gate refuses."""
        parked = self._parked.pop(rid, None)
        held = self.held_blocks()  # without this request's parked pins (popped above)
        h, info = parked or self._begin(prompt, prompt_len, now, hint)
        cache = self.cache
        cap = cache._kv_capacity()
        ok = True
        if cap is not None:
            C = 0 if cache.state_slots is not None else cache.C
            need = max(-(-gate_tokens // cache.B) - len(h.pinned), 0) + C
            ok = need + committed_blocks <= cap - held
        if not ok or not cache.reserve(h, 0, now):  # the live state buffer only
            self._refuse(rid, parked, h, now)
            return None
        self._hold(rid, h, info)
        self._tokens[rid] = 0
        self._base[rid] = len(h.pinned)
        self._infos[rid] = info
        self._was_parked[rid] = parked is not None
        return info.resume()

    def grow(self, rid: int, tokens: int, now: float) -> int | None:
        """Hold KV for the first `tokens` positions of request `rid` (it computes up to
        there this step), evicting what the policy chooses. Returns the positions its
        blocks now cover (at least `tokens`), or None (nothing changed) when even eviction
        cannot make room. Blocks held: ceil(tokens / B), at least the resident path it
        resumed over (as `HybridCache.reserve` counts them)."""
        cache = self.cache
        B = cache.B
        base, have = self._base[rid], self._tokens[rid]
        blocks = max(-(-tokens // B), base)
        extra = blocks - max(-(-have // B), base)
        if extra > 0:
            if not cache.make_room(extra, 0, now):
                return None
            cache.private_blocks += extra
            self._handles[rid].reserved_blocks += extra
        if tokens > have:
            self._tokens[rid] = tokens
            self._handles[rid].total_len = tokens
        return blocks * B

    def unadmit(self, rid: int, now: float) -> None:
        """Undo `admit_step` before the request computed anything (its first chunk did not
        fit this step): its blocks and state buffer are given back, a parked state parked
        again."""
        h = self._handles.pop(rid)
        self._resume.pop(rid, None)
        info = self._infos[rid]
        was_parked = self._was_parked.get(rid, False)
        self._forget(rid)
        if was_parked:
            self.cache.release_reservation(h)
            h.reserved = False
            self._parked[rid] = (h, info)
        else:
            self.cache.abort(h, now)

    def _forget(self, rid: int) -> None:
        self._load.pop(rid, None)
        self._tokens.pop(rid, None)
        self._base.pop(rid, None)
        self._infos.pop(rid, None)
        self._was_parked.pop(rid, None)

    def prefill(self, rid: int, start: int, end: int, now: float) -> None:
        """Placement was decided at `begin` from the policy's chunk model; when the prompt
        is fully computed its blocks and prefill checkpoints join the cache."""
        h = self._handles.get(rid)
        if h is not None and end >= h.prompt_len:
            self.cache.prefill_done(h, now)

    def finish(self, rid: int, full: Prefix, total_len: int, now: float) -> None:
        self._forget(rid)
        h = self._handles.pop(rid)
        keep = _keep(full, self._resume.pop(rid, 0), self.cache.B)
        self.cache.finish(h, keep, total_len, now)

    def abort(self, rid: int, now: float) -> None:
        self._forget(rid)
        self._resume.pop(rid, None)
        for h in (self._handles.pop(rid, None), (self._parked.pop(rid, None) or (None,))[0]):
            if h is not None:
                self.cache.abort(h, now)

    def usage(self) -> float:
        cap = self.cache.capacity
        return min(1.0, self.cache.used_blocks / cap) if cap else 0.0
