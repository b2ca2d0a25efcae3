"""Live-output rewriting: token-id prompts built from trace hash ids and what engines generated.

Prompts are token-id arrays, never text, so nothing is lost to re-tokenisation:

- Each hash id maps to a fixed block of token ids: a pure function of (run salt, hash
  namespace, hash id, position in the block), so the same id always gives the same tokens in
  any order of requests, and the per-run salt keeps one run from hitting cache left by an
  earlier one. Ids avoid the bottom 256 and the top 1,024 of the vocabulary, where tokenizers
  keep their special tokens.
- Turn k+1's prompt is turn k's *actual* prompt, then the ids the engine *actually generated*
  (`ignore_eos`, `max_tokens = out`), then synthesised new blocks, cut to the trace's input
  length. Where the trace shows a context edit (the new request keeps fewer of the previous
  request's full blocks), the shared blocks are kept token for token and the rest synthesised.
- Every replay of a trajectory within a run is its own conversation: the namespace a context
  synthesises from is the assignment's identity (`Assignment.identity`: the trajectory's
  hash namespace, plus the reuse count when the run replays it again), so a second copy of a
  trajectory gets other tokens and cannot hit cache the first copy left.
- Within a hash namespace (a root session and its subagents, or "global") the tokens actually
  sent for each full block are remembered, so a block that reappears (a subagent's first
  prompt sharing its parent's blocks, a reverted edit) carries exactly the tokens the engine
  has seen, generated ids included.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from replay.splitmix import mix64
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


@dataclass
class _Namespace:
    key: int
    blocks: dict[int, np.ndarray] = field(default_factory=dict)  # hash id -> tokens sent
    refs: int = 0


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
        return sum(len(ns.blocks) for ns in self._namespaces.values())


class Context:
    """One trajectory's conversation on one engine: the last prompt and what came back."""

    def __init__(
        self, builder: PromptBuilder, trajectory: Trajectory, ns: _Namespace, identity: str = ""
    ):
        self.builder = builder
        self.trajectory = trajectory
        self.ns = ns
        self.identity = identity or trajectory.namespace
        self.prev_index: int | None = None
        self.prev_prompt = np.zeros(0, dtype=np.int32)
        self.prev_generated = np.zeros(0, dtype=np.int32)
        # Whether the last prompt built grows the previous turn (the trace keeps its whole
        # context): then it should start with the previous prompt + generated ids exactly.
        self.grows = False

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
        if remembered:
            for j, k in enumerate(range(k0, min(k1, len(blocks)))):
                got = remembered.get(int(blocks[k]))
                if got is not None:
                    out[j * bs : (j + 1) * bs] = got
        return out[a - k0 * bs : b - k0 * bs]

    def _fill_name(self, i: int) -> str:
        tr = self.trajectory
        if self.identity == tr.namespace:
            return f"{tr.id}#{i}"
        return f"{self.identity}|{tr.id}#{i}"

    def prompt(self, i: int) -> np.ndarray:
        """The token ids of request i (length = the trace's input tokens)."""
        tr = self.trajectory
        n = int(tr.input_tokens[i])
        bs = tr.block_size
        blocks = tr.blocks(i)
        self.grows = False
        if self.prev_index is None:
            kept = np.zeros(0, dtype=np.int32)
        else:
            pb = tr.blocks(self.prev_index)
            m = min(len(pb), len(blocks))
            diff = np.flatnonzero(pb[:m] != blocks[:m])
            shared = int(diff[0]) if len(diff) else m
            if shared >= len(self.prev_prompt) // bs:
                # Normal growth: everything the engine saw and produced, then new blocks.
                kept = np.concatenate([self.prev_prompt, self.prev_generated])
                self.grows = True
            else:
                # A context edit: keep the shared full blocks exactly, re-synthesise the rest.
                kept = self.prev_prompt[: shared * bs]
        kept = kept[:n]
        ids = np.concatenate([kept, self._synth(i, len(kept), n)]) if len(kept) < n else kept
        self._remember(blocks, ids, bs)
        return ids

    def extends_previous(self, prompt: np.ndarray) -> bool | None:
        """For the prompt just built: does it start with the previous turn's actual prompt
        and generated ids, exactly? None for a first turn or a trace-side context edit."""
        if not self.grows:
            return None
        n = len(self.prev_prompt) + len(self.prev_generated)
        if len(prompt) < n:
            return False
        head = prompt[:n]
        k = len(self.prev_prompt)
        return bool(
            np.array_equal(head[:k], self.prev_prompt)
            and np.array_equal(head[k:], self.prev_generated)
        )

    def _remember(self, blocks: np.ndarray, ids: np.ndarray, bs: int) -> None:
        remembered = self.ns.blocks
        nfull = min(len(blocks), len(ids) // bs)
        new = [k for k in range(nfull) if int(blocks[k]) not in remembered]
        if not new:
            return
        # One compact copy of only the new blocks: rows are views into it, so no prompt
        # array is kept alive by the namespace.
        rows = ids[: nfull * bs].reshape(nfull, bs)[new]
        for r, k in enumerate(new):
            remembered.setdefault(int(blocks[k]), rows[r])

    def completed(self, i: int, prompt: np.ndarray, generated: list[int] | np.ndarray) -> None:
        """Request i came back with `generated`: the next turn builds on it."""
        self.prev_index = i
        self.prev_prompt = prompt
        self.prev_generated = np.asarray(generated, dtype=np.int32)

    def release(self) -> None:
        self.builder.release(self)
