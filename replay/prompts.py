"""Live-output rewriting: token-id prompts built from trace hash ids and what engines generated.

Prompts are token-id arrays, never text, so nothing is lost to re-tokenisation:

- Each hash id maps to a fixed block of token ids: a pure function of (run salt, hash
  namespace, hash id, position in the block), so the same id always gives the same tokens in
  any order of requests, and the per-run salt keeps one run from hitting cache left by an
  earlier one. Ids avoid the bottom 256 and the top 1,024 of the vocabulary, where tokenizers
  keep their special tokens.
- A turn's prompt continues the turn it descends from, the earlier request the simulator links
  it to (`replay.traces.lineage`: the one sharing the longest leading run of hash blocks, so
  the main turn after a side call continues the main turn before it): that turn's *actual*
  prompt, then the ids the engine *actually generated* (`ignore_eos`, `max_tokens = out`),
  then synthesised new blocks, cut to the trace's input length. Where the trace shows a
  context edit (the new request keeps fewer of that request's full blocks), the shared blocks
  are kept token for token and the rest synthesised.
- Every replay of a trajectory within a run is its own conversation: the namespace a context
  synthesises from is the assignment's identity (`Assignment.identity`: the trajectory's
  hash namespace, plus the reuse count when the run replays it again), so a second copy of a
  trajectory gets other tokens and cannot hit cache the first copy left.
- Within a hash namespace (a root session and its subagents, or "global") the tokens actually
  sent for each full block are remembered, so a block that reappears (a subagent's first
  prompt sharing its parent's blocks, a reverted edit) carries exactly the tokens the engine
  has seen, generated ids included.

Memory (issue 36 point 7): a conversation's turns share one int32 buffer. Each prompt is a
read-only view of it, the generated ids are appended after it, and the next turn writes only
past everything written so far, so what was handed out never changes (the ideal-prefix index
keeps views of it); a context edit, a prompt cut short of the ids written, or a side call
starts a new buffer (the main turn after a side call goes on writing where the main turn
before it stopped). A turn is kept until the last request continuing it is built. A
namespace remembers which block hashes it has sent (a sorted int64 array) and the tokens of
only those blocks that differ from what the token space synthesises for the hash (the ones
holding generated ids): the first content sent for a hash still wins.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

import numpy as np

from replay.splitmix import mix64
from replay.traces.lineage import Lineage
from replay.traces.model import Trajectory

LOW_RESERVED = 256  # special tokens live at the bottom of many vocabularies ...
HIGH_RESERVED = 1024  # ... and at the top of others (Qwen, GLM)
_FILL = np.uint64(0xF111_0000_0000_0000)  # hash-id space for positions the trace gives no block

_G = np.uint64(0x9E3779B97F4A7C15)


def stable_key(text: str) -> int:
    """A process-independent 63-bit key for a namespace or trajectory id."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


class PromptError(ValueError):
    """A token space that cannot work (vocabulary too small for the reserved ranges)."""


@dataclass(frozen=True, slots=True)
class TokenSpace:
    """Where synthesised ids come from: the vocabulary's usable range and the run salt.

    A counter-based hash rather than a stateful generator, because a block's content must
    depend only on what names it, never on the order blocks are first needed in."""

    vocab_size: int
    salt: int

    def __post_init__(self) -> None:
        if self.vocab_size < LOW_RESERVED + HIGH_RESERVED + 1024:
            raise PromptError(
                f"vocab_size {self.vocab_size} is too small: synthesised ids skip the bottom "
                f"{LOW_RESERVED} and top {HIGH_RESERVED} ids; set the engine's vocab_size"
            )

    @property
    def span(self) -> int:
        return self.vocab_size - LOW_RESERVED - HIGH_RESERVED

    def block_keys(self, ns_key: int, hashes: np.ndarray) -> np.ndarray:
        """One 64-bit key per (namespace, hash id) under this run's salt."""
        with np.errstate(over="ignore"):
            seed = np.array([self.salt & (2**64 - 1)], dtype=np.uint64)
            base = mix64(seed ^ np.uint64(ns_key) * _G)
            return mix64(hashes.astype(np.uint64) ^ base)

    def tokens(self, keys: np.ndarray, block_size: int) -> np.ndarray:
        """`block_size` token ids for each block key, flattened, as int32."""
        offs = np.arange(block_size, dtype=np.uint64) * _G
        with np.errstate(over="ignore"):
            x = mix64((keys[:, None] + offs[None, :]).ravel())
        return (x % np.uint64(self.span)).astype(np.int32) + np.int32(LOW_RESERVED)


def _in_sorted(x: np.ndarray, sorted_: np.ndarray) -> np.ndarray:
    if not len(sorted_):
        return np.zeros(len(x), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_, x), len(sorted_) - 1)
    return np.asarray(sorted_[pos] == x)


class _HashSet:
    """Block hashes a namespace has sent: 8 bytes each (a sorted array, plus a smaller
    sorted one for recent additions, merged when it grows past a quarter)."""

    __slots__ = ("_main", "_recent")

    def __init__(self) -> None:
        self._main = np.zeros(0, dtype=np.int64)
        self._recent = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._main) + len(self._recent)

    def contains(self, x: np.ndarray) -> np.ndarray:
        out = _in_sorted(x, self._main)
        if len(self._recent):
            out |= _in_sorted(x, self._recent)
        return out

    def add(self, new: np.ndarray) -> None:
        """Add hashes none of which is here yet."""
        self._recent = np.union1d(self._recent, new)
        if len(self._recent) > max(1024, len(self._main) // 4):
            self._main = np.union1d(self._main, self._recent)
            self._recent = np.zeros(0, dtype=np.int64)


@dataclass
class _Namespace:
    key: int
    seen: _HashSet = field(default_factory=_HashSet)  # every block hash sent
    # hash id -> tokens sent, for the blocks whose tokens are not what the token space
    # synthesises for that hash (the first content sent wins)
    blocks: dict[int, np.ndarray] = field(default_factory=dict)
    refs: int = 0
    # Big prompts are built in worker threads (replay.client.session), a parent's and its
    # subagents' at once: one prompt's blocks are noted at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)


class PromptBuilder:
    """Builds every prompt one engine receives. One per engine: engines generate different
    ids, so the same turn's prompt differs between engines past the first turn."""

    def __init__(self, space: TokenSpace):
        self.space = space
        self._namespaces: dict[str, _Namespace] = {}

    def context(self, trajectory: Trajectory, identity: str | None = None) -> Context:
        """A conversation replaying `trajectory`; `identity` (default: its hash namespace)
        names the token space, so two replays with different identities share no tokens."""
        name = identity or trajectory.namespace
        ns = self._namespaces.get(name)
        if ns is None:
            ns = self._namespaces[name] = _Namespace(stable_key(name))
        ns.refs += 1
        return Context(self, trajectory, ns, name)

    def release(self, ctx: Context) -> None:
        """A context is done; a local namespace nobody uses any more is forgotten."""
        ns = ctx.ns
        ns.refs -= 1
        if ns.refs <= 0 and ctx.trajectory.hash_scope == "local":
            self._namespaces.pop(ctx.identity, None)

    @property
    def remembered_blocks(self) -> int:
        return sum(len(ns.seen) for ns in self._namespaces.values())


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


_EMPTY = _frozen(np.zeros(0, dtype=np.int32))


class _Buffer:
    """Token ids of a conversation: [0, written) is written and never changes again (views
    of it are handed out); the rest is room to grow into."""

    __slots__ = ("ids", "written")

    def __init__(self, ids: np.ndarray, written: int):
        self.ids = ids
        self.written = written


class Context:
    """One trajectory's conversation on one engine: what each turn it may continue sent and
    got back."""

    def __init__(
        self, builder: PromptBuilder, trajectory: Trajectory, ns: _Namespace, identity: str = ""
    ):
        self.builder = builder
        self.trajectory = trajectory
        self.ns = ns
        self.identity = identity or trajectory.namespace
        self._lineage: Lineage | None = None
        self._start: int | None = None  # the first request built
        # Turns that came back and that a later one will continue (`Lineage.among`): their
        # buffer, prompt length and generated length, each until the last request linked to
        # it (`Lineage.last_links`, the turns replayed in order from `_start`) is built.
        self._turns: dict[int, tuple[_Buffer, int, int]] = {}
        self._last_links: np.ndarray | None = None
        # When the last prompt built grows the turn it descends from (the trace keeps that
        # turn's whole context): that turn's prompt and generated ids, which it should
        # start with exactly.
        self._base: tuple[np.ndarray, np.ndarray] | None = None
        self._last: np.ndarray | None = None  # the last prompt built ...
        self._last_buf: _Buffer | None = None  # ... a view of this buffer
        # `completed`'s prompt and ids, and the buffer holding them
        self._done: tuple[object, object, _Buffer, int] | None = None
        self._room: np.ndarray | None = None  # per turn: tokens the rest of the trace may need

    def _need_from(self, i: int) -> int:
        """Tokens a buffer started at request i may grow to: the longest prompt the trace
        sends from i on plus the longest output."""
        if self._room is None:
            tr = self.trajectory
            ins = np.maximum.accumulate(tr.input_tokens[::-1])[::-1]
            outs = np.maximum.accumulate(tr.output_tokens[::-1])[::-1]
            self._room = (ins + outs).astype(np.int64)
        return int(self._room[min(i, len(self._room) - 1)]) if len(self._room) else 0

    def _writable(self, src: _Buffer, at: int, upto: int, i: int) -> _Buffer:
        """A buffer starting with src's [0, at), able to take writes to [at, upto): `src`
        itself when `at` is where its writing stopped and it has room; else a new one
        holding a copy of src's [0, at)."""
        if at == src.written and upto <= len(src.ids):
            return src
        cap = max(upto, min(self._need_from(i), upto + upto // 4 + 4096))
        ids = np.empty(cap, dtype=np.int32)
        ids[:at] = src.ids[:at]
        return _Buffer(ids, at)

    def _synth(self, i: int, a: int, b: int) -> np.ndarray:
        """Tokens for positions [a, b) of request i, from its hash ids (remembered tokens
        where the namespace has sent that block before)."""
        if b <= a:
            return np.zeros(0, dtype=np.int32)
        tr = self.trajectory
        bs = tr.block_size
        blocks = tr.blocks(i)
        k0, k1 = a // bs, (b - 1) // bs + 1
        ks = np.arange(k0, k1, dtype=np.int64)
        hashes = np.where(
            ks < len(blocks),
            blocks[np.minimum(ks, max(len(blocks) - 1, 0))] if len(blocks) else 0,
            (np.uint64(stable_key(self._fill_name(i))) ^ _FILL).astype(np.int64) + ks,
        )
        out = self.builder.space.tokens(self.builder.space.block_keys(self.ns.key, hashes), bs)
        remembered = self.ns.blocks
        if remembered and k0 < len(blocks):
            named = blocks[k0:k1].astype(np.int64, copy=False).tolist()
            for j, h in enumerate(named):
                got = remembered.get(h)
                if got is not None:
                    out[j * bs : (j + 1) * bs] = got
        return out[a - k0 * bs : b - k0 * bs]

    def _fill_name(self, i: int) -> str:
        tr = self.trajectory
        if self.identity == tr.namespace:
            return f"{tr.id}#{i}"
        return f"{self.identity}|{tr.id}#{i}"

    def prompt(self, i: int) -> np.ndarray:
        """The token ids of request i (length = the trace's input tokens), read-only."""
        tr = self.trajectory
        n = int(tr.input_tokens[i])
        bs = tr.block_size
        blocks = tr.blocks(i)
        if self._start is None:
            self._start = i
        # The prompt starts with positions [0, kept) of the buffer of the turn it descends
        # from, then synthesised ones.
        buf, kept = self._source(i, bs)
        kept = min(kept, n)
        if kept < n:
            buf = self._writable(buf, kept, n, i)
            buf.ids[kept:n] = self._synth(i, kept, n)
            buf.written = n
        ids = _frozen(buf.ids[:n])
        self._remember(blocks, ids, bs, kept)
        self._last, self._last_buf = ids, buf
        return ids

    def _source(self, i: int, bs: int) -> tuple[_Buffer, int]:
        """The buffer request i starts from and how many of its tokens it keeps: those of
        the turn the simulator links it to (`Lineage.among`, over the turns that came back),
        not simply the turn before, which may be a side call."""
        self._base = None
        if not self._turns:
            return _Buffer(_EMPTY, 0), 0
        j, shared = self._lineage_of().among(i, self._turns)
        if j < 0:
            return _Buffer(_EMPTY, 0), 0
        buf, p, g = self._turns[j]
        if shared >= p // bs:
            # Normal growth: everything the engine saw and produced, then new blocks
            # (`completed` left the generated ids right after the prompt).
            self._base = (_frozen(buf.ids[:p]), _frozen(buf.ids[p : p + g]))
            return buf, p + g
        # A context edit: keep the shared full blocks exactly, re-synthesise the rest.
        return buf, shared * bs

    def _lineage_of(self) -> Lineage:
        if self._lineage is None:
            self._lineage = Lineage(self.trajectory)
        return self._lineage

    def extends_previous(self, prompt: np.ndarray) -> bool | None:
        """For the prompt just built: does it start with the actual prompt and generated ids
        of the turn it descends from, exactly? None for a first turn, a turn descending from
        none, or a trace-side context edit."""
        if self._base is None:
            return None
        head_p, head_g = self._base
        k, n = len(head_p), len(head_p) + len(head_g)
        if len(prompt) < n:
            return False
        head = prompt[:n]
        return bool(np.array_equal(head[:k], head_p) and np.array_equal(head[k:], head_g))

    def _remember(self, blocks: np.ndarray, ids: np.ndarray, bs: int, synth_from: int) -> None:
        """Note the full blocks of a prompt the namespace has not sent before; keep the
        tokens of those that are not what the token space synthesises for their hash (only
        blocks reaching into the prompt's first `synth_from` tokens can be: past them, an
        unsent block's tokens were synthesised for it)."""
        nfull = min(len(blocks), len(ids) // bs)
        if nfull == 0:
            return
        hs = blocks[:nfull].astype(np.int64, copy=False)
        with self.ns.lock:
            self._note(hs, ids, bs, synth_from)

    def _note(self, hs: np.ndarray, ids: np.ndarray, bs: int, synth_from: int) -> None:
        ns = self.ns
        new = np.flatnonzero(~ns.seen.contains(hs))
        if not len(new):
            return
        uniq, first = np.unique(hs[new], return_index=True)
        new = new[first]  # a hash named twice: its first position's tokens were sent first
        cand = new[new * bs < synth_from]
        if len(cand):
            space = self.builder.space
            synth = space.tokens(space.block_keys(ns.key, hs[cand]), bs).reshape(len(cand), bs)
            rows = ids[: len(hs) * bs].reshape(len(hs), bs)[cand]
            differ = np.flatnonzero((rows != synth).any(axis=1))
            if len(differ):
                rows = rows[differ]  # one compact copy of only these blocks
                for r, k in enumerate(cand[differ].tolist()):
                    ns.blocks[int(hs[k])] = rows[r]
        # Seen only once their tokens are stored: `_synth` (unlocked) reads `blocks`.
        ns.seen.add(uniq)

    def completed(self, i: int, prompt: np.ndarray, generated: list[int] | np.ndarray) -> None:
        """Request i came back with `generated`: later turns may build on it."""
        gen = np.asarray(generated, dtype=np.int32)
        p, g = len(prompt), len(gen)
        if prompt is self._last and self._last_buf is not None:
            buf = self._writable(self._last_buf, p, p + g, i)
        else:  # not the prompt this context built last: a buffer starting with a copy of it
            buf = self._writable(_Buffer(np.asarray(prompt, dtype=np.int32), -1), p, p + g, i)
        buf.ids[p : p + g] = gen
        buf.written = p + g
        if self._last_links is None:
            start = i if self._start is None else self._start
            self._last_links = self._lineage_of().last_links(start)
        last = self._last_links
        for j in [j for j in self._turns if last[j] <= i]:
            del self._turns[j]
        if last[i] > i:
            self._turns[i] = (buf, p, g)
        self._last = self._last_buf = None
        self._done = (prompt, generated, buf, p)

    def computed(self, prompt: np.ndarray, generated: list[int] | np.ndarray) -> np.ndarray:
        """`computed_sequence(prompt, generated)` (replay.client.ideal): for the turn just
        `completed` with these, a read-only view of the buffer rather than a copy."""
        g = len(generated)
        done = self._done
        if done is not None and done[0] is prompt and done[1] is generated:
            buf, p = done[2], done[3]
            return _frozen(buf.ids[: p + max(g - 1, 0)])
        gen = np.asarray(generated, dtype=np.int32)
        if g <= 1:
            return np.asarray(prompt, dtype=np.int32)
        return np.concatenate([np.asarray(prompt, dtype=np.int32), gen[:-1]])

    def release(self) -> None:
        self.builder.release(self)
