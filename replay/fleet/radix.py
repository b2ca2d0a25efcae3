"""SMG's approximate radix tree, as the router keeps it: which worker it sent which prefix.

SMG (crates/kv_index/src/string_tree.rs for text, token_tree.rs for token ids) keeps one
multi-tenant radix tree per model: every routed request's text is inserted for the worker it
went to; a match walks the longest prefix anyone inserted and names the tenant of the node it
ends on, that node's `last_tenant`: the tenant that created the node (a new leaf is created
with the inserting tenant, a split copies it: string_tree.rs `insert_from`), kept while that
tenant is still attached, else any tenant still attached. Eviction (`evict_tenant_by_size`,
run every `eviction_interval_secs`) removes, per tenant over `max_tree_size` units, its
least-recently-touched leaves until it is under.

Here the tree is kept at a granularity of `g` units (tokens or characters): a node per full
g-chunk of a prefix, keyed by the prefix's identity at that chunk's end, its parent the
chunk before. So a match ends on a chunk boundary (up to g − 1 units shorter than SMG's,
whose match may end inside an edge), and the tenant is the one that created that chunk's
node: the same tenant SMG names unless another tenant extended the same edge inside that
last chunk. SMG's 1-in-8 timestamp touch on a match (string_tree.rs, `epoch & 0x7`) is
left out: it moves only the LRU order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


class _Node:
    __slots__ = ("access", "first", "kids", "parent")

    def __init__(self, parent: int | None, first: int):
        self.parent = parent
        self.first = first  # SMG's last_tenant: the creator
        self.access: dict[int, int] = {}  # tenant -> last touch (router tick)
        self.kids: dict[int, int] = {}  # tenant -> children attached to it


class ApproxTree:
    """The tree over prefix keys at chunk granularity `g`; tenants are replica indices."""

    def __init__(self, g: int):
        self.g = g
        self.nodes: dict[int, _Node] = {}
        self.size: dict[int, int] = {}  # tenant -> units held (nodes × g)
        self._tick = 0

    def match(self, keys: Sequence[int]) -> tuple[int, int | None]:
        """(chunks matched, the tenant SMG names) for a prompt's chunk keys."""
        m = 0
        node: _Node | None = None
        for k in keys:
            nxt = self.nodes.get(k)
            if nxt is None:
                break
            node, m = nxt, m + 1
        if node is None:
            return 0, None
        if node.first in node.access:
            return m, node.first
        return m, (min(node.access) if node.access else None)

    def held_by(self, keys: Sequence[int], tenant: int) -> int:
        """Chunks of the prompt's prefix attached to `tenant`."""
        m = 0
        for k in keys:
            node = self.nodes.get(k)
            if node is None or tenant not in node.access:
                break
            m += 1
        return m

    def insert(self, keys: Sequence[int], tenant: int) -> None:
        """Attach every chunk of the prefix to `tenant`; the last one gets the fresh tick
        (SMG: ancestors newly attached get epoch 0, the leaf the current epoch)."""
        self._tick += 1
        parent: int | None = None
        last = len(keys) - 1
        for i, k in enumerate(keys):
            node = self.nodes.get(k)
            if node is None:
                node = self.nodes[k] = _Node(parent, tenant)
            if tenant not in node.access:
                node.access[tenant] = 0
                self.size[tenant] = self.size.get(tenant, 0) + self.g
                if parent is not None:
                    p = self.nodes[parent]
                    p.kids[tenant] = p.kids.get(tenant, 0) + 1
            if i == last:
                node.access[tenant] = self._tick
            parent = k

    def tenant_size(self, tenant: int) -> int:
        return self.size.get(tenant, 0)

    def evict(self, max_size: int) -> None:
        """Per tenant over `max_size` units, drop its least-recently-touched leaves (and the
        parents that become leaves) until it is under: SMG's `evict_tenant_by_size`."""
        heap: list[tuple[int, int, int]] = []
        for key, node in self.nodes.items():
            for t, ts in node.access.items():
                if self.size.get(t, 0) > max_size and node.kids.get(t, 0) == 0:
                    heap.append((ts, t, key))
        heapq.heapify(heap)
        while heap:
            _, t, key = heapq.heappop(heap)
            if self.size.get(t, 0) <= max_size:
                continue
            nd = self.nodes.get(key)
            if nd is None or t not in nd.access or nd.kids.get(t, 0):
                continue
            del nd.access[t]
            nd.kids.pop(t, None)
            self.size[t] -= self.g
            pkey = nd.parent
            if not nd.access:
                del self.nodes[key]
            parent = self.nodes.get(pkey) if pkey is not None else None
            if pkey is not None and parent is not None and t in parent.access:
                parent.kids[t] -= 1
                if parent.kids[t] == 0:
                    del parent.kids[t]
                    heapq.heappush(heap, (parent.access[t], t, pkey))


def chunk_keys(seq: Sequence[int] | str, g: int) -> list[int]:
    """Chained identities of a token or character sequence at every full g-chunk
    (equal keys ⇔ equal prefixes, up to hash collisions)."""
    out: list[int] = []
    prev = hash(("smg-tree", g))
    for i in range(0, len(seq) - len(seq) % g, g):
        chunk = seq[i : i + g]
        prev = hash((prev, chunk if isinstance(chunk, str) else tuple(chunk)))
        out.append(prev)
    return out
