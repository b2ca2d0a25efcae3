"""A plain KV prefix cache (policy `kv-lru`): what a transformer without recurrent layers
gets from vLLM's prefix caching, as a reference point beside the hybrid policies.

Full blocks are keyed by the chained hash of the prefix they end; a request resumes at the
end of its longest run of resident blocks; blocks in use are pinned, the rest are evicted
least recently used first. KV truncates freely, so any resident block boundary is a resume
point: no checkpoints, no placement or dependency misses.
"""

from __future__ import annotations

from collections import OrderedDict

from replay.resume import Resume
from replay.sim.cache.capacity import Capacity
from replay.sim.cache.keys import Prefix


class KVLRUCache:
    """Per-block LRU prefix cache over `blocks` blocks of `block_tokens` tokens; `capacity`:
    where that count came from (`replay.sim.cache.capacity.resolve_capacity("kv-lru", ...)`)."""

    def __init__(self, block_tokens: int, blocks: int, capacity: Capacity | None = None) -> None:
        self._bt = block_tokens
        self.blocks = blocks
        self._capacity = capacity or Capacity(
            "kv-lru", blocks, blocks, blocks, "override", f"{blocks} blocks given"
        )
        self._free_lru: OrderedDict[int, None] = OrderedDict()  # evictable, oldest first
        self._refs: dict[int, int] = {}  # resident block key -> requests using it
        self._owned: dict[int, int] = {}  # request -> private blocks it holds
        self._pins: dict[int, list[int]] = {}  # request -> shared keys it pinned

    @property
    def block_tokens(self) -> int:
        return self._bt

    @property
    def capacity_blocks(self) -> int | None:
        return self.blocks

    @property
    def capacity(self) -> Capacity:
        return self._capacity

    def _resident_blocks(self, seq: Prefix, n: int) -> list[int]:
        keys = []
        for k in range(1, n // self._bt + 1):
            key = seq.key_at(k * self._bt)
            if key not in self._refs:
                break
            keys.append(key)
        return keys

    def used(self) -> int:
        return len(self._refs) + sum(self._owned.values())

    def usage(self) -> float:
        return self.used() / self.blocks

    def park(self, rid: int, prompt: Prefix, prompt_len: int, now: float, hint: int = 0) -> None:
        """A plain KV cache parks nothing: a waiting request is looked up when scheduled."""

    def unpark_all(self, now: float) -> bool:
        return False

    def admit(
        self,
        rid: int,
        prompt: Prefix,
        prompt_len: int,
        reserve_tokens: int,
        now: float,
        hint: int = 0,
    ) -> Resume | None:
        shared = self._resident_blocks(prompt, prompt_len)
        need = -(-reserve_tokens // self._bt) - len(shared)
        evictable = len(self._free_lru) - sum(1 for k in shared if k in self._free_lru)
        if self.used() - evictable + need > self.blocks:
            return None
        for key in shared:  # pin before evicting so the reused prefix survives
            self._free_lru.pop(key, None)
            self._refs[key] += 1
        while self.used() + need > self.blocks:
            key, _ = self._free_lru.popitem(last=False)
            del self._refs[key]
        self._owned[rid] = need
        self._pins[rid] = shared
        return Resume(len(shared) * self._bt)

    def prefill(self, rid: int, start: int, end: int, now: float) -> None:
        """KV is written as chunks complete; nothing to place."""

    def _release(self, rid: int) -> None:
        self._owned.pop(rid, None)
        for key in self._pins.pop(rid, []):
            self._refs[key] -= 1
            if self._refs[key] == 0:
                self._free_lru[key] = None

    def finish(self, rid: int, full: Prefix, total_len: int, now: float) -> None:
        owned = self._owned.get(rid, 0)
        self._release(rid)
        # The request's private blocks become cached blocks (no more than it held).
        seq = full
        for k in range(1, total_len // self._bt + 1):
            key = seq.key_at(k * self._bt)
            if key in self._refs:
                if key in self._free_lru:
                    self._free_lru.move_to_end(key)
                continue
            if owned <= 0 or self.used() >= self.blocks:
                break
            owned -= 1
            self._refs[key] = 0
            self._free_lru[key] = None

    def abort(self, rid: int, now: float) -> None:
        self._release(rid)
