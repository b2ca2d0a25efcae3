"""What every engine adapter shares: the result of one streamed request, the limits it runs
under, the SSE read loop, and the registry of adapters keyed by engine kind.

An adapter owns one long-lived `aiohttp.ClientSession` (one connection pool per engine), turns
a token-id prompt into the engine's request body, and parses the engine's stream into a
`StreamResult`. Failures never raise: they come back as a result with a status and an error,
so one bad request cannot stop a run. Timestamps are integer `time.perf_counter_ns()`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp
import numpy as np
import orjson
from aiohttp.client_proto import ResponseHandler

from replay.engines.adapters.body import Body

# Big enough for the stream of a million-token prompt (vLLM echoes `prompt_token_ids` in its
# first chunk: ~7 bytes per id) without the reader pausing the socket mid-event.
READ_BUFSIZE = 1 << 23


# The most tokens a count an engine reports may hold: 16 x the longest context of any
# model profile, the bound the run puts on a trace's prompts (docs/hard-edges.md).
MAX_ENGINE_COUNT = 1 << 24


class EngineValueError(ValueError):
    """A number an engine sent is not what the field can hold; the message names it."""


def engine_count(value: Any, name: str) -> int:
    """A token count from an engine's answer (`name`: where it was, e.g.
    `usage.prompt_tokens_details.cached_tokens`): a whole number 0..MAX_ENGINE_COUNT, else
    EngineValueError. The one check of every count an engine reports, where it is read, so
    a hostile value fails its request by name instead of the run (or the run directory's
    int64 columns) later (issue 36)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EngineValueError(
            f"the engine sent {name} = {str(value)[:40]!r}: not a whole number; "
            "the request is recorded as an error"
        )
    if not 0 <= value <= MAX_ENGINE_COUNT:
        raise EngineValueError(
            f"the engine sent {name} = {value:.4g}: outside 0..{MAX_ENGINE_COUNT:,} tokens; "
            "the request is recorded as an error"
        )
    return value


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a request may take before it counts as failed."""

    request_timeout_s: float = 3600.0  # the whole request, queueing and prefill included
    first_token_timeout_s: float = 1800.0  # from send to the first generated token
    stall_timeout_s: float = 120.0  # between two chunks once tokens flow
    connect_timeout_s: float = 10.0


@dataclass(slots=True)
class StreamResult:
    """One request as the client saw it. Partial results survive cancellation: the caller
    keeps a reference and reads whatever arrived."""

    send_ns: int = 0
    first_token_ns: int | None = None
    done_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)  # arrival of every chunk with tokens
    output_ids: list[int] = field(default_factory=list)
    output_tokens: int = 0  # reported by the engine where it says, else len(output_ids)
    prompt_tokens: int | None = None  # as the engine reported
    cached_tokens: int | None = None  # as the engine reported
    cached_field_seen: bool = False  # the engine sent a cached-token field at all
    # Of `cached_tokens`, those host memory and an external store served, where the engine
    # splits them per request (SGLang's `meta_info.cached_tokens_details`); None otherwise.
    cached_host: int | None = None
    cached_external: int | None = None
    finish_reason: str | None = None
    status: str = "ok"  # ok | error | timeout | cancelled
    error: str | None = None
    http_status: int | None = None
    # The response headers the adapter was asked to keep (`Adapter.keep_headers`): the
    # replica a router in front names (issue 26), by lower-case name.
    headers: dict[str, str] | None = None

    def fail(self, status: str, error: str, http_status: int | None = None) -> None:
        self.status, self.error, self.http_status = status, error, http_status
        if self.done_ns is None:
            self.done_ns = time.perf_counter_ns()


class StreamParser(ABC):
    """Turns the `data:` payloads of one response into a `StreamResult`."""

    def __init__(self, result: StreamResult):
        self.result = result
        self.done = False

    @abstractmethod
    def feed(self, payload: bytes, now_ns: int) -> None:
        """Consume one event payload (the bytes after `data:`), stamped `now_ns`."""

    def feed_block(self, block: bytes, now_ns: int) -> None:
        """Consume complete lines (`block` ends at a line end) that arrived together.
        Parsers may override this with a faster path for their common events."""
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self.done = True
                elif payload:
                    self.feed(payload, now_ns)

    def event(self, payload: bytes, content: str) -> dict[str, Any] | None:
        """The payload as an event to read, or None: nothing to read (not an object), or a
        failure recorded in the result's `error` (unparseable JSON; an engine's error event,
        one with `error` and without the `content` field a normal event carries)."""
        try:
            ev = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.result.error = f"unparseable stream event: {payload[:120]!r}"
            return None
        if not isinstance(ev, dict):
            return None
        if "error" in ev and not ev.get(content):
            err = ev["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            self.result.error = f"engine error in stream: {msg}"
            return None
        return ev

    def finish(self) -> None:
        """The stream ended; fill what the engine did not say."""
        r = self.result
        if r.output_tokens < len(r.output_ids):
            r.output_tokens = len(r.output_ids)

    def _tokens(self, n: int, now_ns: int) -> None:
        r = self.result
        if n <= 0:
            return
        if r.first_token_ns is None:
            r.first_token_ns = now_ns
        r.chunk_ns.append(now_ns)


def feed_data(parser: StreamParser, buf: bytes, data: bytes, now_ns: int) -> bytes:
    """Feed the complete lines of `buf + data` to `parser`; return the unfinished rest (an
    event split across TCP reads waits for its end)."""
    if buf:
        data = buf + data
    cut = data.rfind(b"\n") + 1
    if cut:
        parser.feed_block(data if cut == len(data) else data[:cut], now_ns)
    return data[cut:]


class Adapter(ABC):
    """One engine endpoint. Subclasses set `kind`, `path` and implement `build_body` and
    `parser`; `generate` runs the shared stream loop."""

    kind: ClassVar[str]
    path: ClassVar[str]
    # Whether the engine returns the generated token ids (needed for exact live rewriting).
    exact_ids: ClassVar[bool] = True
    # Whether the adapter can send a token-id prompt as text (its `text_prompt` option) for a
    # router in front that takes text only (replay.client.fleet, `--router external`).
    takes_text_prompt: ClassVar[bool] = False

    def __init__(
        self,
        url: str,
        model: str | None,
        *,
        limits: Limits | None = None,
        headers: dict[str, str] | None = None,
        session: aiohttp.ClientSession | None = None,
    ):
        self.url = url.rstrip("/")
        self.model = model
        self.limits = limits or Limits()
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        # Set when the server answered a body sent in parts with 411 Length Required: every
        # later body goes whole, with its length.
        self.whole_bodies = False
        self._session = session
        self._own_session = session is None
        self.keep_headers: tuple[str, ...] = ()  # response headers kept in StreamResult.headers

    # lifecycle -------------------------------------------------------------------------
    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = make_session(self.limits)
            self._own_session = True
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()

    async def __aenter__(self) -> Adapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # the request -----------------------------------------------------------------------
    @abstractmethod
    def build_body(self, prompt_ids: np.ndarray, max_tokens: int) -> bytes:
        """The request body for a token-id prompt generating exactly `max_tokens` tokens."""

    def request_body(self, prompt_ids: np.ndarray, max_tokens: int) -> Body:
        """`build_body`'s body as a `Body`, which an adapter that can sends in parts (the
        replay's requests: a long prompt's JSON is never held whole)."""
        return Body(self.build_body(prompt_ids, max_tokens))

    @abstractmethod
    def parser(self, result: StreamResult) -> StreamParser: ...

    def endpoint(self) -> str:
        return self.url + self.path

    async def generate(
        self, body: bytes | Body, result: StreamResult | None = None
    ) -> StreamResult:
        """Send `body` and stream the answer into `result` (a fresh one if not given).
        Never raises for engine or network faults; re-raises cancellation after recording
        what arrived."""
        res = result if result is not None else StreamResult()
        lim = self.limits
        loop = asyncio.get_running_loop()
        res.send_ns = time.perf_counter_ns()
        t0 = loop.time()
        deadline = t0 + lim.request_timeout_s
        parser = self.parser(res)
        phase = "waiting for the first token"
        try:
            async with asyncio.timeout_at(min(deadline, t0 + lim.first_token_timeout_s)) as cm:
                if self.whole_bodies and not isinstance(body, bytes):
                    body = bytes(body)
                data = body if isinstance(body, bytes) else body.stream()
                async with self.session.post(
                    self.endpoint(), data=data, headers=self.headers
                ) as resp:
                    if self.keep_headers:
                        res.headers = {
                            h: v for h in self.keep_headers if (v := resp.headers.get(h))
                        }
                    if resp.status == 411 and not isinstance(body, bytes):
                        # A server (or a proxy before it) that wants the body's length.
                        self.whole_bodies = True
                        return await self.generate(bytes(body), res)
                    if resp.status != 200:
                        text = (await resp.read())[:300].decode("utf-8", "replace")
                        res.fail("error", f"HTTP {resp.status}: {text.strip()}", resp.status)
                        return res
                    res.http_status = 200
                    buf = b""
                    arrivals = getattr(getattr(resp, "_protocol", None), "arrivals", None)
                    # The reads so far carried the response's headers, which a streaming
                    # server (vLLM) sends as soon as it accepts the request, long before the
                    # first token: only a later read can be the first chunk's arrival.
                    last = max(res.send_ns, arrivals[-1]) if arrivals else res.send_ns
                    async for data in resp.content.iter_any():
                        now = time.perf_counter_ns()
                        if arrivals:
                            # When the bytes reached the socket, not when this task ran:
                            # the earliest arrival after the last one used.
                            for stamp in arrivals:
                                if stamp > last:
                                    now, last = stamp, arrivals[-1]
                                    break
                        n_before = len(res.chunk_ns)
                        buf = feed_data(parser, buf, data, now)
                        if len(res.chunk_ns) != n_before:
                            phase = "between chunks"
                            cm.reschedule(min(deadline, loop.time() + lim.stall_timeout_s))
                    if buf.strip():
                        parser.feed_block(buf + b"\n", time.perf_counter_ns())
            parser.finish()
            res.done_ns = time.perf_counter_ns()
            if parser.result.status == "ok" and parser.result.error:
                res.status = "error"
        except TimeoutError as e:
            parser.finish()
            total = loop.time() - t0
            if isinstance(e, aiohttp.ServerTimeoutError):  # aiohttp's own: connect or read
                what = "connect" if isinstance(e, aiohttp.ConnectionTimeoutError) else "read"
                res.fail("timeout", f"{what} timed out after {total:.1f} s ({e})".rstrip(" ()"))
            elif total >= lim.request_timeout_s - 1e-3:
                res.fail("timeout", f"request exceeded {lim.request_timeout_s:g} s")
            elif phase == "between chunks":
                res.fail("timeout", f"stalled: no token for {lim.stall_timeout_s:g} s")
            else:
                res.fail("timeout", f"no first token within {lim.first_token_timeout_s:g} s")
        except asyncio.CancelledError:
            parser.finish()
            res.fail("cancelled", "cancelled at the end of the run")
            raise
        except EngineValueError as e:
            parser.finish()
            res.fail("error", str(e))
        except (aiohttp.ClientError, OSError, ValueError) as e:
            parser.finish()
            res.fail("error", f"{type(e).__name__}: {e}".strip().rstrip(":"))
        return res


class StampedHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping every socket read as it happens.

    The event loop runs all ready sockets' `data_received` callbacks before it resumes any
    task, so these stamps are the bytes' arrival; the time a session's task gets to parse
    them can be later by the parsing of other responses that arrived together. TTFT and chunk
    times use the stamps (see `Adapter.generate`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: deque[int] = deque(maxlen=16)

    def data_received(self, data: bytes) -> None:
        self.arrivals.append(time.perf_counter_ns())
        super().data_received(data)


def make_session(limits: Limits, connections: int = 0) -> aiohttp.ClientSession:
    """The long-lived session of one engine: unlimited connections by default (concurrency is
    bounded by the number of replay sessions), no total timeout (the adapter enforces its
    own), a read buffer sized for huge streams, and arrival-stamping connections."""
    connector = aiohttp.TCPConnector(limit=connections, ttl_dns_cache=300, keepalive_timeout=60)
    if hasattr(connector, "_factory"):  # aiohttp ≥ 3.8; without it, task-time stamps are used
        connector._factory = functools.partial(StampedHandler, loop=connector._loop)  # type: ignore[assignment]
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, connect=limits.connect_timeout_s),
        read_bufsize=READ_BUFSIZE,
        auto_decompress=False,
    )


# registry ------------------------------------------------------------------------------
_REGISTRY: dict[str, type[Adapter]] = {}


def register(*kinds: str) -> Callable[[type[Adapter]], type[Adapter]]:
    """Class decorator: make an adapter available under one or more engine kinds."""

    def deco(cls: type[Adapter]) -> type[Adapter]:
        for k in kinds:
            _REGISTRY[k] = cls
        return cls

    return deco


def adapter_class(kind: str) -> type[Adapter]:
    try:
        return _REGISTRY[kind]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown engine kind '{kind}' (known: {known})") from None


def adapter_kinds() -> list[str]:
    return sorted(_REGISTRY)


def make_adapter(kind: str, url: str, model: str | None, **kwargs: Any) -> Adapter:
    return adapter_class(kind)(url, model, **kwargs)
