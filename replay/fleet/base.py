"""What a router sees and decides: one interface for the client, the emulator fleet and the
simulator (issue 26).

A router is handed a `RouteRequest` (what the executor knows of the request: engine, the
session it belongs to, its prompt's prefix identity, token ids or text where the executor
has them, its turn) and one `ReplicaView` per replica (what the router itself counts of
the requests it sent there, plus what a replica publishes: KV utilisation and, for
`state_aware`, where it could resume this request). It answers a `Decision`: the replica,
the branch of its rule that chose it, its score per replica and the overlap it predicted
(tokens it expects the replica to have cached). The hooks `on_first_token` / `on_finish`
tell it how its requests progress; `LoadBook` (replay.fleet.book) does the counting.

This package imports nothing of the executors (replay.client, replay.engines,
replay.emulator, replay.sim) nor the analysis layer: each of them builds these views from
what it has. A prefix identity is anything with `length` and `key_at(p)`: the simulator's
`LineagePrefix` and the emulator's `TokenPrefix` (replay.sim.cache.keys) both are.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

# The most replicas one engine's fleet may have, for every executor: `--replicas` is bounded
# by it (replay.runspec.fields; `--replicas 100000` used to start emulators until memory ran
# out), the client caps the URLs a router names with it and reads a larger replica id in a
# response header as a broken header (replay.client.fleet; issue 36).
MAX_REPLICAS = 1024


class PrefixView(Protocol):
    """A prompt's prefix identity: equal `key_at(p)` ⇔ equal first p tokens."""

    @property
    def length(self) -> int: ...

    def key_at(self, p: int) -> int: ...


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """One request as a router sees it."""

    engine: str
    session: str  # the routing key: the conversation's id (a session hash routes on it)
    prompt_tokens: int
    turn: int = 0
    prefix: PrefixView | None = None  # prefix identity of the prompt (None: unknown)
    tokens: Sequence[int] | None = None  # token ids, where the executor has them
    text: str | None = None  # the prompt text, where the executor sends text (SMG's HTTP path)
    expected_output_tokens: int = 0
    now_s: float | None = None  # the executor's clock at routing (periodic router tasks)

    def block_keys(self, block: int, limit: int | None = None) -> list[int]:
        """The prompt's prefix key at every full block of `block` tokens (at most `limit`
        blocks): what a block-hash index (llm-d, Dynamo, vLLM's prefix cache) compares."""
        if self.prefix is None or block <= 0:
            return []
        n = min(self.prompt_tokens, self.prefix.length) // block
        if limit is not None:
            n = min(n, limit)
        keys_every = getattr(self.prefix, "keys_every", None)
        if keys_every is not None:  # LineagePrefix: one merge pass
            return list(keys_every(block, n * block))
        return [self.prefix.key_at((i + 1) * block) for i in range(n)]


# The replica's own answer to "where could you resume this request": the longest prefix
# (tokens) of it for which it holds a state checkpoint with that prefix's KV resident.
Resumable = Callable[[RouteRequest], int]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica at the moment of routing."""

    index: int
    in_flight: int = 0  # requests the router sent here that have not finished
    queued_prefill_tokens: int = 0  # their prompt tokens not yet computed (router's count)
    active_tokens: int = 0  # prompt + expected output tokens of its in-flight requests
    kv_utilisation: float | None = None  # 0..1 as the replica publishes it; None: unknown
    resumable: Resumable | None = None  # None: the replica publishes no resume lookup
    # The longest prefix of the request whose KV blocks are resident there: what KV events
    # tell a router (Dynamo's indexer); None: the replica publishes no KV events.
    cached_prefix: Resumable | None = None
    waiting_requests: int | None = None  # the replica's own waiting queue (its metrics)
    processed: int = 0  # requests the router has sent here in all (SMG's tie-break)


@dataclass(frozen=True, slots=True)
class Decision:
    """A router's choice and why."""

    replica: int
    branch: str  # which rule chose it, e.g. "cache_hit", "imbalanced", "hash"
    scores: tuple[float, ...] = ()  # per replica, in the policy's own units ("" if none)
    predicted_overlap: int = 0  # tokens the router expects the replica to have cached


@dataclass(frozen=True, slots=True)
class RouterContext:
    """What a router is built with besides its parameters."""

    replicas: int
    seed: int = 0
    # Prefill seconds of positions [a, b) given [0, a) cached, on the engine's step clock
    # (replay.sim.engine.clock.StepClock.prefill_seconds); state_aware prices in it.
    prefill_seconds: Callable[[int, int], float] | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """One router parameter: its default and where that default comes from."""

    default: float | int | str | bool
    source: str
    help: str = ""


def _coerce(router: str, key: str, default: object, value: object) -> object:
    """`value` as the type of the parameter's default, or a message naming both."""
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(value)
                return value.lower() in ("true", "1")
            return bool(value)
        if isinstance(default, int):
            return int(str(value))
        if isinstance(default, float):
            return float(str(value))
        return str(value)
    except ValueError:
        kind = type(default).__name__
        raise ValueError(
            f"router {router}: parameter {key} wants a {kind}, not {value!r}"
        ) from None


class Router(ABC):
    """A routing policy. Subclasses set `name`, `params` (defaults, cited) and `route`."""

    name: ClassVar[str]
    params: ClassVar[Mapping[str, Param]] = {}
    source: ClassVar[str] = ""  # the upstream code the policy follows

    def __init__(self, ctx: RouterContext, overrides: Mapping[str, object] | None = None):
        self.ctx = ctx
        self.p: dict[str, object] = {k: v.default for k, v in self.params.items()}
        for key, value in (overrides or {}).items():
            if key not in self.params:
                known = ", ".join(sorted(self.params)) or "none"
                raise ValueError(f"router {self.name}: unknown parameter {key!r} (known: {known})")
            self.p[key] = _coerce(self.name, key, self.params[key].default, value)

    @abstractmethod
    def route(self, req: RouteRequest, replicas: Sequence[ReplicaView]) -> Decision:
        """Choose a replica for `req`. `replicas[i].index == i`."""

    def on_first_token(self, req: RouteRequest, replica: int) -> None:
        """The request's prefill is done on `replica`."""
        return None

    def on_finish(self, req: RouteRequest, replica: int, ok: bool) -> None:
        """The request left `replica` (finished, failed or cancelled)."""
        return None

    def int_param(self, key: str) -> int:
        v = self.p[key]
        assert isinstance(v, (int, float)), key
        return int(v)

    def float_param(self, key: str) -> float:
        v = self.p[key]
        assert isinstance(v, (int, float)), key
        return float(v)

    def str_param(self, key: str) -> str:
        return str(self.p[key])

    def describe(self) -> dict[str, object]:
        """Name and resolved parameters, for the run's manifest and records."""
        return {"router": self.name, **self.p}
