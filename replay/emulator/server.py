"""The emulator's HTTP server (aiohttp): one engine behind vLLM's or SGLang's protocol.

Generation routes, on every emulator (vLLM and SGLang both serve the OpenAI and Anthropic
ones): `/v1/completions`, `/v1/chat/completions`, `/v1/messages`, and on the SGLang one its
native `/generate`. Others: `/v1/models` (with `max_model_len`), `/health`, `/metrics` (the
real engine's metric names), `/version`, `/get_server_info`, the prefix-cache reset of its
protocol (vLLM's `POST /reset_prefix_cache`, SGLang's `POST /flush_cache`: a fresh cache
when idle, refused while requests run), and `/emulator/stats` (JSON:
settings, counters, model time; for tests and the twin check). Text becomes token ids here,
through the server's tokenizer (`tokenizer.py`), before the engine sees it; token-id prompts
go to the engine as they are. Each prompt is hashed into prefix keys, queued in the engine
model, and its output streams as the modelled steps complete (see `runner.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from replay.emulator.chat import parse_chat, parse_messages
from replay.emulator.config import EmulatorConfig
from replay.emulator.faults import FaultInjector, hard_exit
from replay.emulator.hashing import PrefixKeys, generated_ids
from replay.emulator.metrics import MetricsSnapshot, render_metrics
from replay.emulator.protocol import (
    BadRequest,
    GenRequest,
    anthropic_error,
    openai_error,
    parse_completion,
    parse_generate,
    parse_json,
    sglang_error,
)
from replay.emulator.runner import EngineRunner
from replay.emulator.shapes import (
    ChatShaper,
    CompletionShaper,
    GenerateShaper,
    MessagesShaper,
    Shaper,
    sglang_details,
)
from replay.emulator.tokenizer import load_tokenizer
from replay.profiles import ModelProfile
from replay.server_info import EngineModelInfo, ServerInfo
from replay.sim.engine.cache import EngineCache
from replay.sim.engine.core import EngineCore, Sequence

# The header naming the replica that answered (EmulatorConfig.replica; absent on a lone server).
REPLICA_HEADER = "x-replay-replica"

# Token-id prompts of a million tokens are ~7 MB of JSON.
MAX_BODY_BYTES = 64 * 1024 * 1024

# Bodies above this size are parsed (and their text tokenized) off the event loop, so a long
# text prompt does not hold up the streams of running requests.
_THREAD_PARSE_BYTES = 256 * 1024

CacheFactory = Callable[[EmulatorConfig, ModelProfile], EngineCache]

# Each generation API: its request parser, response shaper, error body and id prefix.
_APIS: dict[str, tuple[Callable[..., GenRequest], type, Callable[..., bytes], str]] = {
    "completions": (parse_completion, CompletionShaper, openai_error, "cmpl-"),
    "chat": (parse_chat, ChatShaper, openai_error, "chatcmpl-"),
    "messages": (parse_messages, MessagesShaper, anthropic_error, ""),
    "generate": (parse_generate, GenerateShaper, sglang_error, ""),
}


class _Sink:
    """Collects a sequence's ready token count; the handler awaits `event`."""

    __slots__ = ("error", "event", "finished", "ready", "status")

    def __init__(self, event: asyncio.Event | None = None) -> None:
        self.ready = 0
        self.finished = False
        self.error: str | None = None
        self.status = 503
        self.event = event or asyncio.Event()

    def push(self, count: int, finished: bool) -> None:
        self.ready += count
        self.finished = self.finished or finished
        self.event.set()

    def fail(self, message: str, status: int = 503) -> None:
        self.error, self.status = message, status
        self.event.set()


class EmulatorServer:
    """State of one emulator: the engine model, its clock, faults and counters."""

    def __init__(
        self,
        cfg: EmulatorConfig,
        cache_factory: CacheFactory,
        crash: Callable[[], None] = hard_exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.profile = cfg.resolved_profile()
        self.model_id = cfg.model_id(self.profile)
        self._cache_factory = cache_factory
        self.cache = cache_factory(cfg, self.profile)
        self.tokenizer = load_tokenizer(cfg.tokenizer, self.profile.vocab_size)
        # Generated ids stay inside the tokenizer's vocabulary, so they decode to text.
        self.out_vocab = min(self.profile.vocab_size, self.tokenizer.vocab_size)
        self.core = EngineCore(cfg.step_clock(self.profile), self.cache, cfg.admission)
        self.runner = EngineRunner(
            self.core, cfg.time_scale, clock, on_stuck=self._stuck, on_error=self._engine_error
        )
        self.faults = FaultInjector(cfg.faults, crash, clock)
        self._ids = itertools.count(1)
        self._sinks: dict[int, _Sink] = {}
        # Cached tokens a lying sequence reports (`--lie-cached-rate`), by sequence id.
        self._claims: dict[int, int] = {}
        self.resets = 0  # prefix-cache resets done (`/reset_prefix_cache`, `/flush_cache`)
        self._tiered = getattr(self.cache, "host", None) is not None

    # -- lifecycle ---------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        for path, api in (
            ("/v1/completions", "completions"),
            ("/v1/chat/completions", "chat"),
            ("/v1/messages", "messages"),
        ):
            app.router.add_post(path, self._handler(api))
        if self.cfg.protocol == "sglang":
            app.router.add_post("/generate", self._handler("generate"))
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/version", self._version)
        app.router.add_get("/emulator/stats", self._stats)
        # The engines' prefix-cache resets (vLLM's dev-mode route, SGLang's), for the run's
        # phase hygiene (`replay run --reset-cache`).
        if self.cfg.protocol == "sglang":
            app.router.add_post("/flush_cache", self._flush_cache)
        else:
            app.router.add_post("/reset_prefix_cache", self._reset_prefix_cache)
        # SGLang's server-info endpoint; served by every emulator so that a client's manifest
        # records what it ran against (the live client's preflight reads it).
        app.router.add_get("/get_server_info", self._server_info)
        if self.cfg.protocol == "sglang":
            app.router.add_get("/get_model_info", self._model_info)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        if self.cfg.replica is not None:
            app.on_response_prepare.append(self._tag_replica)
        return app

    async def _tag_replica(self, _req: web.Request, resp: web.StreamResponse) -> None:
        """Every answer of a replica names it (`REPLICA_HEADER`), so a client behind a router
        can tell which replica served it without trusting the router."""
        resp.headers[REPLICA_HEADER] = str(self.cfg.replica)

    async def _on_startup(self, _app: web.Application) -> None:
        self.runner.start()

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.runner.stop()

    # -- small endpoints ----------------------------------------------------------------

    def _error(
        self, message: str, status: int, field: str | None, api: str | None = None
    ) -> web.Response:
        if api is not None:
            make = _APIS[api][2]
        else:
            make = sglang_error if self.cfg.protocol == "sglang" else openai_error
        return web.Response(
            body=make(message, status, field), status=status, content_type="application/json"
        )

    async def _health(self, _req: web.Request) -> web.Response:
        if not self.faults.ready():
            return self._error("the engine is starting", 503, None)
        return web.Response(status=200)

    async def _version(self, _req: web.Request) -> web.Response:
        return _json({"version": f"emulator-{self.cfg.engine}"})

    def server_info(self) -> ServerInfo:
        """What `/get_server_info` answers (`replay.server_info`, the model the client
        parses): the settings, and the engine model with its cache's capacity under one
        name (`capacity_blocks`) beside where it came from (`replay.sim.cache.capacity`)."""
        cfg, p, cap = self.cfg, self.profile, self.cache.capacity
        return ServerInfo(
            version=f"emulator-{cfg.engine}",
            engine=cfg.engine,
            policy=cfg.policy_name,
            model_profile=cfg.model,
            served_model_name=self.model_id,
            time_scale=cfg.time_scale,
            token_scale=cfg.token_scale,
            block_tokens=p.block_tokens,
            chunk_tokens=p.chunk_tokens,
            max_running_requests=p.max_batch,
            context_length=p.context_tokens,
            tokenizer=self.tokenizer.name,
            replica=cfg.replica,
            engine_model=EngineModelInfo.model_validate(
                {
                    **self.core.clock.describe(),
                    "capacity_blocks": self.cache.capacity_blocks,
                    "requested_capacity_blocks": cap.requested,
                    "capacity_source": cap.source,
                    "capacity_reason": cap.reason,
                    "state_slots": cap.state_slots,
                    "kv_tokens": cap.kv_tokens,
                    "admission": self.core.admission,
                    "policy": cfg.policy_name,
                }
            ),
        )

    async def _server_info(self, _req: web.Request) -> web.Response:
        return _json(self.server_info().model_dump())

    async def _models(self, _req: web.Request) -> web.Response:
        owner = "sglang" if self.cfg.protocol == "sglang" else "vllm"
        card = {
            "id": self.model_id,
            "object": "model",
            "created": int(time.time()),
            "owned_by": owner,
            "root": self.model_id,
            "parent": None,
            "max_model_len": self.profile.context_tokens,
        }
        return _json({"object": "list", "data": [card]})

    async def _model_info(self, _req: web.Request) -> web.Response:
        return _json(
            {
                "model_path": self.model_id,
                "is_generation": True,
                "context_length": self.profile.context_tokens,
            }
        )

    def snapshot(self) -> MetricsSnapshot:
        c = self.core.counters
        return MetricsSnapshot(
            prompt_tokens=c.prompt_tokens,
            cached_tokens=c.cached_tokens,
            generation_tokens=c.generation_tokens,
            requests_finished=c.requests_finished,
            running=self.core.num_running,
            waiting=self.core.num_waiting,
            usage=self.cache.usage(),
            block_tokens=self.profile.block_tokens,
            blocks=self.cache.capacity_blocks or 0,
            # A cache with tiers (issue 34): the hits' shares by tier, as the engine has them.
            cached_host=c.cached_tokens_host if self._tiered else None,
            cached_external=c.cached_tokens_external,
        )

    async def _metrics(self, _req: web.Request) -> web.Response:
        flavour = "sglang" if self.cfg.protocol == "sglang" else "vllm"
        body = render_metrics(flavour, self.model_id, self.snapshot())
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    def reset_cache(self) -> bool:
        """A fresh, empty cache in place of the engine model's, when no request is running
        or waiting (as vLLM refuses while blocks are held); False when busy. The engine's
        counters (and so `/metrics`) carry on: they count requests, not the cache."""
        core = self.core
        if core.num_running or core.num_waiting or self._sinks:
            return False
        fresh = self._cache_factory(self.cfg, self.profile)
        if getattr(core, "_grower", None) is self.cache:
            core._grower = fresh  # type: ignore[assignment]  # step allocation grows the new one
        self.cache = core.cache = fresh
        self.resets += 1
        return True

    async def _reset_prefix_cache(self, _req: web.Request) -> web.Response:
        return _json({"success": self.reset_cache()})

    async def _flush_cache(self, _req: web.Request) -> web.Response:
        if self.reset_cache():
            return web.Response(text="Cache flushed.\n")
        return web.Response(
            status=400,
            text="Cache not flushed: there are running or waiting requests.\n",
        )

    async def _stats(self, _req: web.Request) -> web.Response:
        c = self.core.counters
        return _json(
            {
                "config": self.cfg.model_dump(),
                "policy": self.cfg.policy_name,
                "block_tokens": self.profile.block_tokens,
                "capacity_blocks": self.cache.capacity_blocks,
                "model_time_s": self.runner.model_now,
                "counters": dataclasses.asdict(c),
                "running": self.core.num_running,
                "waiting": self.core.num_waiting,
                "usage": self.cache.usage(),
                "resets": self.resets,
                "faults": {
                    "requests": self.faults.requests,
                    "errors": self.faults.errors,
                    "stalls": self.faults.stalls,
                    "lies": [list(x) for x in self.faults.lies],
                },
            }
        )

    # -- generation ---------------------------------------------------------------------

    def _stuck(self, seq: Sequence) -> None:
        sink = self._sinks.get(seq.rid)
        if sink is not None:
            sink.fail(
                f"the request needs {seq.prompt_len + seq.max_tokens} tokens of KV, more than "
                "the emulated cache can free; raise --blocks or shorten the request"
            )

    def _engine_error(self, message: str) -> None:
        for sink in self._sinks.values():
            if not sink.finished:
                sink.fail(message, 500)

    def _handler(self, api: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._generate(request, api)

        return handle

    async def _generate(self, request: web.Request, api: str) -> web.StreamResponse:
        if not self.faults.ready():
            return self._error("the engine is starting", 503, None, api)
        rid = next(self._ids)
        try:
            raw = await request.read()
            if len(raw) > _THREAD_PARSE_BYTES:
                req = await asyncio.to_thread(self._parse, api, raw, rid)
            else:
                req = self._parse(api, raw, rid)
        except BadRequest as e:
            return self._error(e.message, e.status, e.field, api)
        decision = self.faults.on_request()
        if decision.error:
            return self._error("injected fault: internal server error", 500, None, api)
        prompts = [PrefixKeys(ids, self.cfg.hash_tokens) for ids in req.prompts]
        cap = self.cache.capacity_blocks
        for prompt in prompts:
            need = len(prompt) + req.max_tokens
            if cap is not None and need > cap * self.profile.block_tokens:
                field = "max_tokens" if api != "generate" else "input_ids"
                return self._error(
                    f"prompt plus max tokens ({need}) exceed the emulated KV cache "
                    f"({cap} blocks of {self.profile.block_tokens} tokens); raise --blocks "
                    "or send a smaller max_tokens",
                    400,
                    field,
                    api,
                )
        event = asyncio.Event()
        seqs: list[Sequence] = []
        sinks: list[_Sink] = []
        for k, prompt in enumerate(prompts):
            sid = rid if k == 0 else next(self._ids)
            n_out = max(req.max_tokens // 2, 1) if decision.early_stop else req.max_tokens
            out = generated_ids(prompt, n_out, self.out_vocab)
            sink = _Sink(event)
            computed = self._lie(sid, prompt, req.prompts[k], decision.lie)
            seqs.append(Sequence(sid, computed, n_out, out, sink))
            sinks.append(sink)
            self._sinks[sid] = sink
        shaper: Shaper = _APIS[api][1](req, self.model_id, self.tokenizer)
        if self._tiered and isinstance(shaper, GenerateShaper):  # SGLang's split by tier
            shaper.details = lambda: self._details(seqs[0])
        try:
            for seq in seqs:
                self.runner.submit(seq)
            if req.stream:
                return await self._stream(
                    request, api, shaper, seqs, sinks, event, decision.stall_s
                )
            return await self._whole(api, shaper, seqs, sinks, event)
        finally:
            for seq in seqs:
                self._sinks.pop(seq.rid, None)
                self._claims.pop(seq.rid, None)
                if seq.done_t is None:
                    self.runner.cancel(seq)  # client gone or error: free its blocks

    def _parse(self, api: str, raw: bytes, rid: int) -> GenRequest:
        body = parse_json(raw)
        vocab, ctx = self.profile.vocab_size, self.profile.context_tokens
        parse, _, _, prefix = _APIS[api]
        req = parse(body, vocab, ctx, f"{prefix}{rid:032x}", self.tokenizer)
        if self.cfg.protocol != "sglang" and req.model is not None and req.model != self.model_id:
            raise BadRequest(f"The model `{req.model}` does not exist.", "model", 404)
        return req

    def _lie(self, sid: int, prompt: PrefixKeys, ids: Any, lie: bool) -> PrefixKeys:
        """The prompt the engine model computes. A lying request (`--lie-cached-rate`) sends
        it a copy whose first id differs, so no cached prefix matches and the whole prompt is
        prefilled on the model clock, while the answer claims a full hit: every block but
        the one holding the last token (what vLLM reports for a prompt it has seen)."""
        block = self.profile.block_tokens
        claim = (len(prompt) - 1) // block * block
        if not lie or claim <= 0:
            return prompt
        # A different first id per lie, so a prompt lied about twice is computed twice.
        salted = np.array(ids, dtype=np.uint32)
        salted[0] = (int(salted[0]) + 1 + len(self.faults.lies)) % self.profile.vocab_size
        self._claims[sid] = claim
        self.faults.lies.append((len(prompt), claim))
        return PrefixKeys(salted, self.cfg.hash_tokens)

    def _reported(self, seq: Sequence) -> int:
        """The cached tokens the answer states for `seq`: its claim if it lies, else the
        engine model's."""
        claim = self._claims.get(seq.rid)
        if claim is not None:
            return claim
        return seq.resume.cached if seq.resume is not None else 0

    def _details(self, seq: Sequence) -> dict[str, int] | None:
        """`seq`'s `cached_tokens_details` as SGLang answers them (`sglang_details`)."""
        store = getattr(getattr(self.cache, "host", None), "external", None) is not None
        return sglang_details(self._reported(seq), seq.resume, store)

    def _cached(self, seqs: list[Sequence]) -> int:
        return sum(self._reported(s) for s in seqs)

    @staticmethod
    def _failure(sinks: list[_Sink]) -> _Sink | None:
        return next((k for k in sinks if k.error is not None), None)

    async def _whole(
        self,
        api: str,
        shaper: Shaper,
        seqs: list[Sequence],
        sinks: list[_Sink],
        event: asyncio.Event,
    ) -> web.Response:
        while not all(k.finished for k in sinks) and self._failure(sinks) is None:
            await event.wait()
            event.clear()
        if (bad := self._failure(sinks)) is not None:
            return self._error(bad.error or "", bad.status, None, api)
        body = shaper.full([s.output_ids for s in seqs], self._cached(seqs))
        return web.Response(body=body, content_type="application/json")

    async def _stream(
        self,
        request: web.Request,
        api: str,
        shaper: Shaper,
        seqs: list[Sequence],
        sinks: list[_Sink],
        event: asyncio.Event,
        stall_s: float,
    ) -> web.StreamResponse:
        resp: web.StreamResponse | None = None
        sent = [0] * len(seqs)
        while True:
            await event.wait()
            event.clear()
            if (bad := self._failure(sinks)) is not None:
                if resp is None:
                    return self._error(bad.error or "", bad.status, None, api)
                # Mid-stream, as vLLM does: an error event, then the stream ends.
                await resp.write(shaper.error(bad.error or "", bad.status))
                await resp.write_eof()
                return resp
            for k, (seq, sink) in enumerate(zip(seqs, sinks, strict=True)):
                n, done = sink.ready, sink.finished
                if n <= sent[k]:
                    continue
                if resp is None:  # headers go out with the first token, as in vLLM
                    resp = await _start_sse(request)
                cached = self._reported(seq)
                out = seq.output_ids
                await resp.write(shaper.chunk(k, out[sent[k] : n], out[:n], done, cached))
                sent[k] = n
                if stall_s:
                    await asyncio.sleep(stall_s)  # injected: the stream goes silent
                    stall_s = 0.0
            if all(k.finished and sent[i] >= k.ready for i, k in enumerate(sinks)):
                break
        assert resp is not None
        await resp.write(shaper.tail(sum(sent), self._cached(seqs)))
        await resp.write_eof()
        return resp


async def _start_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    return resp


def _json(obj: Any) -> web.Response:
    return web.Response(
        body=orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), content_type="application/json"
    )


async def serve(
    cfg: EmulatorConfig,
    cache_factory: CacheFactory,
    on_ready: Callable[[str], Awaitable[None] | None] | None = None,
) -> None:
    """Run the server until cancelled; `on_ready(url)` once it listens."""
    async with running_server(cfg, cache_factory) as (url, _server):
        if on_ready is not None:
            res = on_ready(url)
            if asyncio.iscoroutine(res):
                await res
        await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def running_server(
    cfg: EmulatorConfig,
    cache_factory: CacheFactory | None = None,
    crash: Callable[[], None] = hard_exit,
) -> AsyncIterator[tuple[str, EmulatorServer]]:
    """An emulator inside the current event loop (for tests and embedding): yields its base
    URL and the server object. `cfg.port` 0 picks a free port."""
    if cache_factory is None:
        from replay.emulator.config import make_cache

        cache_factory = make_cache
    server = EmulatorServer(cfg, cache_factory, crash)
    runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True)
    await site.start()
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host  # an IPv6 address, as URLs write it
    try:
        yield f"http://{host}:{runner.addresses[0][1]}", server
    finally:
        await runner.cleanup()
