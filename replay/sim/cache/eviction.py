"""Eviction and admission: what leaves the cache under pressure, and what is not kept.

- `AllocationLRU`: every block and every checkpoint is its own allocation, least recently
  used first (ties: deepest first, like vLLM's free queue). With two pools (SGLang) each
  pool has its own LRU.
- `UnitLRU`: recovery units (a checkpoint plus the KV only it needs), oldest use first.
- `GreedyDualSize`: FlashState's Eq. 7 over recovery units — priority = L_u + cost/size with
  the watermark L raised to each evicted priority, admission that refuses a newcomer GDS
  would evict next; with `tiers`, the release code's leaf-last variant (inner states before
  every leaf, a leaf idle for `idle_s` counts as inner, L rises only when a leaf goes).
- `Marconi`: recovery units by normalised recency + α · normalised prefill saved per block.
- `NoEviction`: the unbounded cache.

The hooks they implement (`Eviction`) live with the store they act on
(`replay.sim.cache.store`).

Priorities are kept in lazy heaps: an entry is re-checked when it reaches the top and pushed
again if its object changed since, so a pop costs O(log n) and nothing scans the cache.
"""

from __future__ import annotations

import heapq
from typing import Any

from replay.sim.cache.nodes import Block, State
from replay.sim.cache.store import CacheStore, Eviction, Pool

__all__ = [
    "AllocationLRU",
    "Eviction",
    "GreedyDualSize",
    "Marconi",
    "NoEviction",
    "Pool",
    "UnitLRU",
]


class NoEviction(Eviction):
    """The unbounded cache never evicts."""


class AllocationLRU(Eviction):
    """Per-allocation LRU over blocks and checkpoints (one heap per pool)."""

    def __init__(self, cache: CacheStore):
        super().__init__(cache)
        self.heaps: dict[Pool, list[tuple[Any, ...]]] = {"any": [], "kv": [], "state": []}
        self._limit: dict[Pool, int] = dict.fromkeys(self.heaps, 1024)  # compaction trigger
        split = cache.state_slots is not None
        self._block_pool: Pool = "kv" if split else "any"
        self._state_pool: Pool = "state" if split else "any"
        self._free_orphans = bool(cache.policy.rules.get("free_orphan_kv", False))

    # Entries are (last_use, -depth, seq, ver, object): least recently used first, deepest
    # first on a tie; typed pushes and checks per kind (a compiled build reads a union's
    # fields through Python's generic attribute lookup).
    def _push_state(self, s: State) -> None:
        s.ver += 1
        self._file(self._state_pool, (s.last_use, -s.pos, next(self._seq), s.ver, s))

    def _push_block(self, b: Block) -> None:
        b.ver += 1
        self._file(self._block_pool, (b.last_use, -b.end, next(self._seq), b.ver, b))

    def _file(self, pool: Pool, entry: tuple[Any, ...]) -> None:
        heap = self.heaps[pool]
        heapq.heappush(heap, entry)
        if len(heap) > self._limit[pool]:
            # Entries superseded by a later push would be skipped when popped: drop them
            # (the pop order of the rest is unchanged, every entry being unique).
            heap[:] = [e for e in heap if e[3] == e[4].ver]
            heapq.heapify(heap)
            self._limit[pool] = max(2 * len(heap), 1024)

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        self._push_state(s)

    def on_states_added(self, states: list[State], now: float) -> None:
        for s in states:
            self._push_state(s)

    def after_release(self, path: list[Block], now: float) -> None:
        if self._free_orphans and path:  # rule free_orphan_kv
            last: Block | None = path[-1]
            while last is not None and not last.resident:  # a terminal block not kept
                last = last.parent
            self.cache.collect(last)
        for b in path:
            if b.resident and b.live == 0:
                self._push_block(b)

    def evict_one(self, pool: Pool, now: float) -> bool:
        heap, pop = self.heaps[pool], heapq.heappop
        while heap:
            entry = pop(heap)
            if self._evict_entry(entry[3], entry[4]):
                return True
        return False

    def _evict_entry(self, ver: int, obj: Block | State) -> bool:
        """Evict the object a popped heap entry names, if the entry is current (filed at the
        object's version `ver`) and the object is resident and unused; whether it went."""
        if isinstance(obj, Block):
            if obj.ver != ver or not obj.resident or obj.live:
                return False
            self.cache.drop_block(obj)
        else:
            if obj.ver != ver or not obj.resident or obj.live:
                return False
            self.cache.drop_state(obj)
        self.victim = obj
        return True


class UnitLRU(Eviction):
    """Whole recovery units, least recently used first."""

    unit_owned = True

    def __init__(self, cache: CacheStore):
        super().__init__(cache)
        self.heap: list[tuple[Any, ...]] = []
        self._limit = 1024  # heap length that triggers a compaction

    def key(self, s: State, now: float) -> tuple[float, ...]:
        return (s.last_use,)

    def push(self, s: State, now: float) -> None:
        s.ver += 1
        # Flat entries (key..., seq, ver, state): same order as (key, seq, ...), cheaper to
        # compare. Entries a later push made stale are dropped in bulk (`_compact`).
        heapq.heappush(self.heap, (*self.key(s, now), next(self._seq), s.ver, s))
        if len(self.heap) > self._limit:
            self._compact()

    def _compact(self) -> None:
        """Drop entries superseded by a later push of their state (they would be skipped
        when popped; the pop order of the rest is unchanged: every entry's key is unique)."""
        self.heap = [e for e in self.heap if e[-2] == e[-1].ver]
        heapq.heapify(self.heap)
        self._limit = max(2 * len(self.heap), 1024)

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        self.push(s, now)

    def on_states_added(self, states: list[State], now: float) -> None:
        for s in states:
            self.push(s, now)

    def _pop_valid(self, now: float) -> tuple[tuple[float, ...], State] | None:
        """The minimum evictable unit with an up-to-date key (left out of the heap)."""
        heap = self.heap
        refiled: set[int] | None = None
        while heap:
            entry = heapq.heappop(heap)
            s, ver = entry[-1], entry[-2]
            if s.ver != ver or not s.resident or s.live:
                continue
            key = entry[:-3]
            fresh = self.key(s, now)
            if fresh != key:  # changed since it was pushed: re-file it
                # Progress guard: at one `now` a key is fixed, so a state re-filed twice in
                # one pop (a NaN priority, a key that moves with every call) would spin.
                if refiled is None:
                    refiled = set()
                elif s.uid in refiled:
                    raise RuntimeError(
                        f"{self.cache.policy.name}: the state at position {s.pos} (uid "
                        f"{s.uid}) was re-filed twice at t={now!r} s with key {fresh!r}; its "
                        "priority is not stable, and eviction would not advance"
                    )
                refiled.add(s.uid)
                s.ver += 1
                heapq.heappush(heap, (*fresh, next(self._seq), s.ver, s))
                continue
            return key, s
        return None

    def evict_one(self, pool: Pool, now: float) -> bool:
        top = self._pop_valid(now)
        if top is None:
            return False
        key, s = top
        self.evicted(s, key, now)
        self.victim = s
        return True

    def evicted(self, s: State, key: tuple[float, ...], now: float) -> None:
        self.cache.drop_unit(s)


class GreedyDualSize(UnitLRU):
    """FlashState's GreedyDual-Size over recovery units (Eq. 7), optionally leaf-last."""

    def __init__(self, cache: CacheStore, tiers: bool = False, idle_s: float = 60.0):
        super().__init__(cache)
        self.tiers = tiers
        self.idle_s = idle_s
        self._anc: State | None = None
        self.timers: list[tuple[float, int, State]] = []

    def key(self, s: State, now: float) -> tuple[float, ...]:
        prio = s.stamp + s.density
        if not self.tiers:
            return (prio,)
        return (0.0 if self.is_inner(s, now) else 1.0, prio)

    def is_inner(self, s: State, now: float) -> bool:
        return s.inner or self.idle(s, now)  # an idle leaf is demoted

    def idle(self, s: State, now: float) -> bool:
        """Whether leaf `s` has idled into the inner tier. The one comparison every caller
        uses, and the same expression the demotion timer is filed under (`s.last_use +
        idle_s`): a timer popped as due always finds its state idle. (`now - last_use >=
        idle_s` disagrees with it for ~2% of float values, which once re-filed a state at
        the same due time forever.)"""
        return s.last_use + self.idle_s <= now

    def push(self, s: State, now: float) -> None:
        # Density and shape change only when checkpoints come or go around `s`, and those
        # events push `s` again; so they are computed here, not at every comparison.
        # The density: prefill seconds saved per block held, i.e. the restore cost from the
        # nearest resident ancestor checkpoint (kept in `_anc` for the caller) over the blocks
        # evicting it frees. That search, `exclusive_blocks`, `branches` and `key` are inlined
        # here: every checkpoint added, released or evicted pushes it and its fallback.
        c = self.cache
        blk = s.block
        pos = s.pos
        a: State | None = None
        for o in blk.rstates:  # `nearest_ancestor_state`
            if o.pos < pos and (a is None or o.pos > a.pos):
                a = o
        if a is None:
            parent = blk.parent
            for b in parent.up if parent is not None else ():
                rs = b.rstates
                if rs:
                    a = rs[0] if len(rs) == 1 else max(rs, key=_pos)
                    break
        self._anc = a
        excl = 0  # `len(exclusive_blocks(s))`
        for b in blk.up:
            if not b.resident or b.deps != 1 or b.live:
                break
            excl += 1
        cost = c.cost.seconds(a.pos if a is not None else 0, pos)
        s.density = density = cost / (c.C + excl)
        s.ver += 1
        if self.tiers:
            inner = False  # `branches(c, s) == 1`
            for o in blk.rstates:
                if o.pos > pos:
                    inner = True
                    break
            else:
                inner = _sub_branches(blk, 2) == 1
            s.inner = inner
            tier = 0.0 if inner or s.last_use + self.idle_s <= now else 1.0  # `idle`
            heapq.heappush(self.heap, (tier, s.stamp + density, next(self._seq), s.ver, s))
        else:
            heapq.heappush(self.heap, (s.stamp + density, next(self._seq), s.ver, s))
        if len(self.heap) > self._limit:
            self._compact()
        if self.tiers and not s.inner and not s.timer:  # only a leaf can idle into a demotion
            s.timer = True
            heapq.heappush(self.timers, (s.last_use + self.idle_s, next(self._seq), s))

    def refresh(self, states: list[State], now: float) -> None:
        for s in states:
            if s.resident and s.live == 0:
                self.push(s, now)
        if states:
            self._touch_ancestor(min(states, key=lambda x: x.pos), now)

    def _touch_ancestor(self, s: State, now: float) -> None:
        a = self.cache.nearest_ancestor_state(s)
        if a is not None and a.live == 0:
            self.push(a, now)

    def on_resume(self, s: State, now: float) -> None:
        s.stamp = self.cache.L

    def on_state_released(self, s: State, now: float, used: bool = True) -> None:
        if used:
            s.stamp = self.cache.L
        self.push(s, now)

    def on_states_added(self, states: list[State], now: float) -> None:
        for s in states:
            s.stamp = self.cache.L
            self.push(s, now)  # finds its fallback on the way: the ancestor to refresh
            a = self._anc
            if a is not None and a.live == 0:
                self.push(a, now)

    def _demote(self, now: float) -> None:
        timers = self.timers
        while timers and timers[0][0] <= now:
            due, _, s = heapq.heappop(timers)
            s.timer = False
            if not s.resident or s.live or s.inner:
                continue
            again = s.last_use + self.idle_s
            if again <= now:  # `idle`: the comparison the timer was filed under
                UnitLRU.push(self, s, now)  # re-filed in the inner tier
            else:  # used since the check was set: check again later
                if again <= due:  # progress guard: a re-filed timer must lie ahead of its last
                    raise RuntimeError(
                        f"{type(self).__name__}: demotion timer of the state at position "
                        f"{s.pos} (uid {s.uid}) re-filed at {again!r}, not after its due "
                        f"time {due!r} (now {now!r}); the event loop would not advance"
                    )
                s.timer = True
                heapq.heappush(timers, (again, next(self._seq), s))

    def evict_one(self, pool: Pool, now: float) -> bool:
        if self.tiers:
            self._demote(now)
        return super().evict_one(pool, now)

    def evicted(self, s: State, key: tuple[float, ...], now: float) -> None:
        a = self.cache.nearest_ancestor_state(s)
        if not self.tiers or key[0] == 1.0:
            self.cache.L = max(self.cache.L, key[-1])
        self.cache.drop_unit(s)
        if a is not None and a.resident and a.live == 0:
            self.push(a, now)

    def admit(self, s: State, now: float) -> bool:
        c = self.cache
        if c.free_blocks() >= c.C:
            return True
        if self.tiers:
            self._demote(now)
        top = self._pop_valid(now)
        if top is None:
            return True
        key, victim = top
        victim.ver += 1
        heapq.heappush(self.heap, (*key, next(self._seq), victim.ver, victim))
        return self.key(s, now) > key


class Marconi(GreedyDualSize):
    """Marconi's utility: normalised recency + α · normalised prefill saved per block.

    Shares GDS's bookkeeping (densities cached per unit and refreshed when checkpoints come
    or go around it); the utility itself needs min/max over the candidates, so eviction is a
    scan over the resident units rather than a heap pop."""

    def __init__(self, cache: CacheStore, alpha: float = 1.0):
        super().__init__(cache)
        self.alpha = alpha

    def admit(self, s: State, now: float) -> bool:
        return True

    def evict_one(self, pool: Pool, now: float) -> bool:
        # The least utility (ties: the oldest uid) over the unpinned resident units, in two
        # plain loops: the normalisers, then the utilities (a scan per eviction).
        cands: list[State] = []
        t0 = emax = 0.0
        for s in self.cache.live_resident.values():
            if s.live == 0:
                if not cands or s.last_use < t0:
                    t0 = s.last_use
                if not cands or s.density > emax:
                    emax = s.density
                cands.append(s)
        if not cands:
            return False
        span = max(now - t0, 1e-9)
        emax = max(emax, 1e-12)
        a = self.alpha
        victim = cands[0]
        best = (victim.last_use - t0) / span + a * victim.density / emax
        for s in cands:
            u = (s.last_use - t0) / span + a * s.density / emax
            if u < best or (u == best and s.uid < victim.uid):
                best, victim = u, s
        self.cache.drop_unit(victim)
        self.victim = victim
        return True


def _pos(s: State) -> int:
    return s.pos


def branches(cache: CacheStore, s: State) -> int:
    """How many nearest deeper checkpoints hang below `s` (0: a leaf, ≥2: a branch point)."""
    for o in s.block.rstates:
        if o.pos > s.pos:
            return 1
    return _sub_branches(s.block, 2)


def _sub_branches(b: Block, cap: int) -> int:
    n = 0
    for c in b.children:
        d = c.deps
        if d <= 0:
            continue
        if d == 1 or c.rstates:  # one checkpoint below: one branch, no need to look
            n += 1
        else:
            # Down a chain of only children, a loop instead of a call per block (the count
            # of a block with one child is that child's).
            while len(c.children) == 1:
                x = c.children[0]
                d = x.deps
                if d <= 0 or d == 1 or x.rstates:
                    break
                c = x
            if len(c.children) == 1:
                n += 1 if d > 0 else 0
            else:
                n += _sub_branches(c, cap - n)
        if n >= cap:
            return n
    return n
