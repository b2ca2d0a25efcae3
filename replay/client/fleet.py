"""An engine of N replicas as the live client drives it (issue 26).

Who routes is explicit:

- **the client** (`--endpoint vllm=URL1,URL2,…`, a router from replay.fleet: the one
  implementation the emulator fleet and the simulator use too): every request is routed by
  the router over its own load book (in-flight requests, prefill tokens released at the
  first token, active tokens released at the end), sent to the chosen replica's adapter,
  and its record names the replica, the router, the decision's branch, its scores and the
  overlap the router predicted (beside the engine's reported `cached_tokens`).
- **a real router in front** (`--endpoint vllm=ROUTER_URL --router external`): the client
  sends everything to the router and reads the serving replica from the response: the
  emulator's own `x-replay-replica` header (an index) where the router passes it on,
  else SMG's `x-smg-routed-worker-id` (the worker's URL), numbered in the order the URLs
  first appear (`ClientFleet.worker_urls` keeps that order for the manifest).
  A router that takes text prompts only (smg 1.13.0's HTTP path refuses token ids) gets the
  prompt as the text of its ids' canonical words, which the emulator's built-in tokenizer
  reads back into exactly the ids built (replay.token_words; `external_adapter_options`
  turns it on for adapters that can, vLLM's and FlashState's, under `--router external`
  only); SGLang's adapter keeps sending `input_ids`.

Session pinning is the router's: `session_hash` pins a conversation's turns to one replica,
`cache_aware` follows its tree. The routing key is the conversation: the session slot, its
trajectory's identity (a reuse is its own conversation) and the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

import replay
from replay.engines.adapters import Adapter, Body, StreamResult
from replay.fleet import (
    DEFAULT_ROUTER,
    EXTERNAL,
    Fleet,
    RouterContext,
    RouteRequest,
    Ticket,
    make_router,
)
from replay.fleet.base import MAX_REPLICAS
from replay.records import RequestRecord

# replay.emulator.server.REPLICA_HEADER and replay.engines.smg.ROUTED_HEADER (tests check
# they agree; the client does not import the emulator).
REPLICA_HEADER = "x-replay-replica"
SMG_WORKER_HEADER = "x-smg-routed-worker-id"


class FleetError(ValueError):
    """A bad fleet: unknown router, a parameter it does not take, no replica."""


@dataclass(frozen=True)
class FleetSpec:
    """One engine's replicas and who routes them."""

    urls: tuple[str, ...]  # replica URLs; with router "external": the router's URL only
    router: str = DEFAULT_ROUTER  # a replay.fleet router, or "external"
    params: Mapping[str, object] = field(default_factory=dict)
    router_version: str | None = None  # external: the router's version, as the user says

    def check(self, engine: str) -> None:
        """The URLs fit the router; the router's name and parameters are `make_router`'s to
        check, when `ClientFleet` builds it."""
        if not self.urls:
            raise FleetError(f"engine {engine}: a fleet needs at least one URL")
        if self.router == EXTERNAL and len(self.urls) != 1:
            raise FleetError(
                f"--router external: engine {engine} names {len(self.urls)} URLs; give "
                "the router's one URL (it knows its workers), or drop --router external "
                "to let the client route"
            )


class _Watched(StreamResult):
    """A StreamResult that calls back when its first token arrives (the router releases the
    request's prefill tokens then, as SMG and Dynamo count them)."""

    __slots__ = ("_on_first",)

    def __init__(self, on_first: Callable[[], None]):
        self._on_first: Callable[[], None] | None = None
        super().__init__()
        self._on_first = on_first

    @property
    def first_token_ns(self) -> int | None:
        value: int | None = _FIRST.__get__(self)
        return value

    @first_token_ns.setter
    def first_token_ns(self, value: int | None) -> None:
        _FIRST.__set__(self, value)
        cb = getattr(self, "_on_first", None)
        if value is not None and cb is not None:
            self._on_first = None
            cb()


_FIRST: Any = StreamResult.__dict__["first_token_ns"]  # the slot's descriptor


def conversation_key(slot: int, identity: str, agent: str) -> str:
    return f"{slot}/{identity}/{agent}"


class ClientFleet:
    """One engine's replicas, their adapters and the router (see the module docstring)."""

    def __init__(self, engine: str, spec: FleetSpec, adapters: Sequence[Adapter], seed: int = 0):
        spec.check(engine)
        self.engine = engine
        self.spec = spec
        self.adapters = list(adapters)
        self.external = spec.router == EXTERNAL
        self.fleet: Fleet | None = None
        if self.external:
            for a in self.adapters:
                a.keep_headers = (REPLICA_HEADER, SMG_WORKER_HEADER)
        else:
            try:  # an unknown name too (make_router's UnknownRouter)
                router = make_router(spec.router, RouterContext(len(spec.urls), seed), spec.params)
            except ValueError as e:
                raise FleetError(f"--router {spec.router}: {e}") from None
            self.fleet = Fleet(router)
        self.worker_urls: list[str] = []  # external: replicas in order of first appearance

    @property
    def adapter(self) -> Adapter:
        """The adapter that builds request bodies (replicas serve one model: one body)."""
        return self.adapters[0]

    def describe(self) -> dict[str, Any]:
        """For the manifest: the replicas, the router, its version and parameters."""
        if self.fleet is None:
            return {
                "router": EXTERNAL,
                "router_version": self.spec.router_version,
                "url": self.spec.urls[0],
                "replica_urls": list(self.worker_urls),
                "replica_from": f"{REPLICA_HEADER}, else {SMG_WORKER_HEADER}",
            }
        r = self.fleet.router
        return {
            "router": r.name,
            "router_version": f"replay {replay.__version__}",
            "router_source": r.source,
            "params": dict(r.p),
            "replicas": len(self.adapters),
            "replica_urls": [a.url for a in self.adapters],
        }

    def request(self, rec: RequestRecord, prompt: np.ndarray, key: str) -> RouteRequest:
        return RouteRequest(
            engine=self.engine,
            session=key,
            prompt_tokens=len(prompt),
            turn=rec.turn,
            tokens=cast(Sequence[int], prompt),  # numpy ids: sliced and hashed as ints
            expected_output_tokens=rec.expected_output_tokens,
            now_s=rec.scheduled_s,
        )

    async def generate(
        self, rec: RequestRecord, req: RouteRequest, body: Body, res: StreamResult
    ) -> None:
        """Route (or let the router in front route), send, and fill the record's fleet
        columns. `res` is the caller's result; the stream is read into it."""
        if self.fleet is None:
            rec.router = EXTERNAL
            try:
                await self.adapters[0].generate(body, res)
            finally:
                try:
                    rec.replica = self._replica_from(res.headers or {})
                except ValueError as e:  # a hostile header fails its request, not the run
                    rec.replica = None
                    if res.status == "ok":
                        res.status, res.error = "error", str(e)
            return
        ticket = self.fleet.route(req)
        self._fill(rec, ticket)
        fleet = self.fleet
        watched = _Watched(lambda: fleet.first_token(ticket))
        try:
            await self.adapters[ticket.replica].generate(body, watched)
        finally:
            _copy(watched, res)
            fleet.finish(ticket, ok=res.status == "ok")

    def _fill(self, rec: RequestRecord, t: Ticket) -> None:
        d = t.decision
        rec.replica = d.replica
        rec.router = self.spec.router
        rec.route_branch = d.branch
        rec.route_scores = json.dumps([round(float(s), 6) for s in d.scores]) if d.scores else None
        rec.route_overlap = d.predicted_overlap

    def _replica_from(self, headers: Mapping[str, str]) -> int | None:
        value = headers.get(REPLICA_HEADER)
        if value is not None:
            return replica_id(value)
        url = headers.get(SMG_WORKER_HEADER)
        if not url:
            return None
        url = url.rstrip("/")
        if url not in self.worker_urls:
            if len(self.worker_urls) >= MAX_REPLICAS:
                raise ValueError(
                    f"the router sent {SMG_WORKER_HEADER}: {url[:60]!r}, a worker past the "
                    f"first {MAX_REPLICAS} it named; the request is recorded as an error"
                )
            self.worker_urls.append(url)
        return self.worker_urls.index(url)


def replica_id(value: str) -> int:
    """The replica a router in front names in `x-replay-replica`: ASCII digits, below
    MAX_REPLICAS; else ValueError naming the header (issue 36: a 20-digit id overflowed the
    run directory's int64 column, a Unicode digit failed the run)."""
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 6 or int(text) >= MAX_REPLICAS:
        raise ValueError(
            f"the router sent {REPLICA_HEADER}: {value[:40]!r}: not a replica index "
            f"0..{MAX_REPLICAS - 1}; the request is recorded as an error (check the router "
            "in front of the engine)"
        )
    return int(text)


def _copy(src: StreamResult, dst: StreamResult) -> None:
    for name in StreamResult.__slots__:
        setattr(dst, name, getattr(src, name))


def build_client_fleet(
    engine: str,
    kind: str,
    spec: FleetSpec,
    model: str | None,
    *,
    limits: Any,
    adapter_options: Mapping[str, Any],
    seed: int = 0,
) -> ClientFleet:
    """The engine's fleet: one adapter (its own connection pool) per replica URL."""
    from replay.engines.adapters import make_adapter

    options = external_adapter_options(kind, spec, adapter_options)
    adapters = [make_adapter(kind, u, model, limits=limits, **options) for u in spec.urls]
    return ClientFleet(engine, spec, adapters, seed)


def external_adapter_options(
    kind: str, spec: FleetSpec | None, adapter_options: Mapping[str, Any]
) -> dict[str, Any]:
    """The adapter options for an engine's fleet: with a router in front (`--router
    external`), text prompts where the adapter can send them (see the module docstring)."""
    from replay.engines.adapters import adapter_class

    options = dict(adapter_options)
    if spec is not None and spec.router == EXTERNAL and adapter_class(kind).takes_text_prompt:
        options.setdefault("text_prompt", True)
    return options


def replica_names(engine: str, spec: FleetSpec | None, url: str) -> dict[str, str]:
    """What the metrics scraper and the health watch poll for one engine: each replica as
    `engine.N` (a router in front, or a lone server: the engine's one URL)."""
    if spec is None or spec.router == EXTERNAL or len(spec.urls) < 2:
        return {engine: url}
    return {f"{engine}.{i}": u for i, u in enumerate(spec.urls)}


__all__ = [
    "EXTERNAL",
    "REPLICA_HEADER",
    "SMG_WORKER_HEADER",
    "ClientFleet",
    "FleetError",
    "FleetSpec",
    "build_client_fleet",
    "conversation_key",
    "external_adapter_options",
    "replica_names",
]
