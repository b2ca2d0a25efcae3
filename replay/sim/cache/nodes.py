"""The two things the hybrid cache holds: KV blocks and recurrent checkpoints.

Plain slotted objects, one per engine block (thousands of tokens) or checkpoint, never one
per hash id: a full-size replay touches tens of thousands of them, not millions.
"""

from __future__ import annotations

from replay.sim.cache.keys import Prefix


class Block:
    """One KV block on a path of the prefix tree: positions [index·B, end) of the sequences
    whose prefix key at `end` is `key`. A terminal partial block has end < (index+1)·B."""

    __slots__ = (
        "children",
        "deps",
        "end",
        "index",
        "key",
        "kids",
        "last_use",
        "live",
        "parent",
        "resident",
        "rstates",
        "src",
        "states",
        "up",
        "ver",
    )

    def __init__(self, key: int, parent: Block | None, index: int, end: int, src: Prefix | None):
        self.key = key
        self.parent = parent
        # This block and its ancestors, nearest first, the root left out (a block's parent
        # never changes): the walks to the root loop over it.
        self.up: tuple[Block, ...] = (self, *parent.up) if parent is not None else ()
        self.index = index
        self.end = end
        self.src = src  # a sequence that holds this block's tokens (for exact common prefixes)
        self.children: list[Block] = []
        # children by the key of their first token: only those can share anything with a
        # sequence that passed through this block, so lookups never scan unrelated ones
        self.kids: dict[int, list[Block]] = {}
        self.states: list[State] = []  # checkpoints whose last KV position falls in this block
        self.rstates: list[State] = []  # the resident ones among them
        self.resident = False
        self.live = 0  # live requests pinning it
        self.deps = 0  # resident checkpoints whose path runs through it
        self.last_use = 0.0
        self.ver = 0

    def add_child(self, b: Block, src: Prefix) -> None:
        self.children.append(b)
        self.kids.setdefault(src.key_at(self.end + 1), []).append(b)

    def remove_child(self, b: Block) -> None:
        self.children.remove(b)
        for group in self.kids.values():
            if b in group:
                group.remove(b)
                return

    def release(self) -> None:
        """Drop its links to other blocks, checkpoints and sequences (a run's end,
        `CacheStore.release`)."""
        self.parent = None
        self.up = ()
        self.src = None
        self.children.clear()
        self.kids.clear()
        self.states.clear()
        self.rstates.clear()

    def related(self, q: Prefix) -> list[Block]:
        """Children that share at least their first token with `q`."""
        if q.length <= self.end:
            return []
        return self.kids.get(q.key_at(self.end + 1), [])

    def __repr__(self) -> str:
        flag = "R" if self.resident else "g"
        return f"Block({self.index}, end={self.end}, {flag}, live={self.live}, deps={self.deps})"


class State:
    """A recurrent checkpoint at exactly `pos`; usable with the KV of its block's path."""

    __slots__ = (
        "block",
        "density",
        "inner",
        "key",
        "last_use",
        "live",
        "pos",
        "resident",
        "stamp",
        "timer",
        "uid",
        "ver",
    )

    def __init__(self, uid: int, key: int, pos: int, block: Block):
        self.uid = uid
        self.key = key
        self.pos = pos
        self.block = block
        self.resident = False
        self.live = 0
        self.last_use = 0.0
        self.stamp = 0.0  # GreedyDual-Size: the watermark at its last use
        self.density = 0.0  # GreedyDual-Size: restore cost per block, as of its last push
        self.inner = False  # leaf-last: a deeper checkpoint hangs below it (not a branch)
        self.timer = False  # leaf-last: an idle-demotion check is pending for it
        self.ver = 0

    def __repr__(self) -> str:
        flag = "R" if self.resident else "g"
        return f"State(pos={self.pos}, {flag}, live={self.live})"
