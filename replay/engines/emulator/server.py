"""The emulator's HTTP server (aiohttp): one engine behind vLLM's or SGLang's protocol.

Routes: `/v1/completions` (vLLM, FlashState) or `/generate` (SGLang), `/v1/models` (with
`max_model_len`), `/health`, `/metrics` (the real engine's metric names), `/version`, and
`/emulator/stats` (JSON: settings, counters, model time; for tests and the twin check).
Each generation request is hashed into prefix keys, queued in the engine model, and its
output streams as the modelled steps complete (see `runner.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from replay.engines.emulator.config import EmulatorConfig
from replay.engines.emulator.faults import FaultInjector, hard_exit
from replay.engines.emulator.hashing import PrefixKeys, generated_ids
from replay.engines.emulator.metrics import MetricsSnapshot, render_metrics
from replay.engines.emulator.protocol import (
    SSE_DONE,
    BadRequest,
    CompletionShaper,
    GenerateShaper,
    GenRequest,
    openai_error,
    parse_completion,
    parse_generate,
    parse_json,
    sglang_error,
    sse_error,
)
from replay.engines.emulator.runner import EngineRunner
from replay.profiles import ModelProfile
from replay.sim.engine import EngineCore, Sequence
from replay.sim.engine_cache import EngineCache

# Token-id prompts of a million tokens are ~7 MB of JSON.
MAX_BODY_BYTES = 64 * 1024 * 1024

CacheFactory = Callable[[EmulatorConfig, ModelProfile], EngineCache]


class _Sink:
    """Collects a sequence's ready token count; the handler awaits `event`."""

    __slots__ = ("error", "event", "finished", "ready", "status")

    def __init__(self) -> None:
        self.ready = 0
        self.finished = False
        self.error: str | None = None
        self.status = 503
        self.event = asyncio.Event()

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
        self.cache = cache_factory(cfg, self.profile)
        self.core = EngineCore(cfg.step_clock(self.profile), self.cache, cfg.admission)
        self.runner = EngineRunner(
            self.core, cfg.time_scale, clock, on_stuck=self._stuck, on_error=self._engine_error
        )
        self.faults = FaultInjector(cfg.faults, crash, clock)
        self._ids = itertools.count(1)
        self._sinks: dict[int, _Sink] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        gen_path = "/generate" if self.cfg.protocol == "sglang" else "/v1/completions"
        app.router.add_post(gen_path, self._generate)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/version", self._version)
        app.router.add_get("/emulator/stats", self._stats)
        # SGLang's server-info endpoint; served by every emulator so that a client's manifest
        # records what it ran against (the live client's preflight reads it).
        app.router.add_get("/get_server_info", self._server_info)
        if self.cfg.protocol == "sglang":
            app.router.add_get("/get_model_info", self._model_info)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, _app: web.Application) -> None:
        self.runner.start()

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.runner.stop()

    # -- small endpoints ----------------------------------------------------------------

    def _error(self, message: str, status: int, field: str | None) -> web.Response:
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

    async def _server_info(self, _req: web.Request) -> web.Response:
        cfg, p = self.cfg, self.profile
        return _json(
            {
                "version": f"emulator-{cfg.engine}",
                "emulator": True,
                "engine": cfg.engine,
                "policy": cfg.policy_name,
                "model_profile": cfg.model,
                "served_model_name": self.model_id,
                "time_scale": cfg.time_scale,
                "token_scale": cfg.token_scale,
                "block_tokens": p.block_tokens,
                "cache_blocks": self.cache.capacity_blocks or 0,
                "chunk_tokens": p.chunk_tokens,
                "max_running_requests": p.max_batch,
                "context_length": p.context_tokens,
                "engine_model": {
                    **self.core.clock.describe(),
                    "capacity_blocks": self.cache.capacity_blocks,
                    "admission": self.core.admission,
                    "policy": cfg.policy_name,
                },
            }
        )

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
        )

    async def _metrics(self, _req: web.Request) -> web.Response:
        flavour = "sglang" if self.cfg.protocol == "sglang" else "vllm"
        body = render_metrics(flavour, self.model_id, self.snapshot())
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def _stats(self, _req: web.Request) -> web.Response:
        c = self.core.counters
        return _json(
            {
                "config": self.cfg.model_dump(),
                "policy": self.cfg.policy_name,
                "block_tokens": self.profile.block_tokens,
                "blocks": self.cache.capacity_blocks,
                "model_time_s": self.runner.model_now,
                "counters": c.__dict__,
                "running": self.core.num_running,
                "waiting": self.core.num_waiting,
                "usage": self.cache.usage(),
                "faults": {
                    "requests": self.faults.requests,
                    "errors": self.faults.errors,
                    "stalls": self.faults.stalls,
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

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        if not self.faults.ready():
            return self._error("the engine is starting", 503, None)
        rid = next(self._ids)
        try:
            body = parse_json(await request.read())
            req = self._parse(body, rid)
        except BadRequest as e:
            return self._error(e.message, e.status, e.field)
        decision = self.faults.on_request()
        if decision.error:
            return self._error("injected fault: internal server error", 500, None)
        prompt = PrefixKeys(req.prompt_ids, self.cfg.hash_tokens)
        need = len(prompt) + req.max_tokens
        cap = self.cache.capacity_blocks
        if cap is not None and need > cap * self.profile.block_tokens:
            return self._error(
                f"prompt plus max tokens ({need}) exceed the emulated KV cache "
                f"({cap} blocks of {self.profile.block_tokens} tokens); raise --blocks",
                400,
                "prompt",
            )
        sink = _Sink()
        out = generated_ids(prompt, req.max_tokens, self.profile.vocab_size)
        seq = Sequence(rid, prompt, req.max_tokens, out, sink)
        self._sinks[rid] = sink
        try:
            self.runner.submit(seq)
            if req.stream:
                return await self._stream(request, req, seq, sink, decision.stall_s)
            return await self._whole(req, seq, sink)
        finally:
            self._sinks.pop(rid, None)
            if seq.done_t is None:
                self.runner.cancel(seq)  # client gone or error: free its blocks

    def _parse(self, body: dict[str, Any], rid: int) -> GenRequest:
        vocab, ctx = self.profile.vocab_size, self.profile.context_tokens
        if self.cfg.protocol == "sglang":
            return parse_generate(body, vocab, ctx, f"{rid:032x}")
        req = parse_completion(body, vocab, ctx, f"cmpl-{rid:032x}")
        if req.model is not None and req.model != self.model_id:
            raise BadRequest(f"The model `{req.model}` does not exist.", "model", 404)
        return req

    def _cached(self, seq: Sequence) -> int:
        return seq.resume.cached if seq.resume is not None else 0

    async def _whole(self, req: GenRequest, seq: Sequence, sink: _Sink) -> web.Response:
        while not sink.finished and sink.error is None:
            await sink.event.wait()
            sink.event.clear()
        if sink.error is not None:
            return self._error(sink.error, sink.status, None)
        ids = seq.output_ids
        if self.cfg.protocol == "sglang":
            body = GenerateShaper(req).full(ids, self._cached(seq))
        else:
            body = CompletionShaper(req, self.model_id).full(ids, self._cached(seq))
        return web.Response(body=body, content_type="application/json")

    async def _stream(
        self, request: web.Request, req: GenRequest, seq: Sequence, sink: _Sink, stall_s: float
    ) -> web.StreamResponse:
        sglang = self.cfg.protocol == "sglang"
        shaper_c = None if sglang else CompletionShaper(req, self.model_id)
        shaper_g = GenerateShaper(req) if sglang else None
        resp: web.StreamResponse | None = None
        sent = 0
        while True:
            await sink.event.wait()
            sink.event.clear()
            if sink.error is not None:
                if resp is None:
                    return self._error(sink.error, sink.status, None)
                # Mid-stream, as vLLM does: an error event, then the stream ends.
                await resp.write(sse_error(sink.error, sink.status))
                await resp.write_eof()
                return resp
            n, done = sink.ready, sink.finished
            if n > sent:
                if resp is None:  # headers go out with the first token, as in vLLM
                    resp = await _start_sse(request)
                if shaper_g is not None:
                    data = shaper_g.chunk(seq.output_ids[:n], done, self._cached(seq))
                else:
                    assert shaper_c is not None
                    data = shaper_c.chunk(seq.output_ids[sent:n], done)
                await resp.write(data)
                sent = n
                if stall_s:
                    await asyncio.sleep(stall_s)  # injected: the stream goes silent
                    stall_s = 0.0
            if done and sent >= n:
                break
        assert resp is not None
        if shaper_c is not None and req.include_usage:
            await resp.write(shaper_c.usage_chunk(sent, self._cached(seq)))
        await resp.write(SSE_DONE)
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
        from replay.engines.emulator.config import make_cache

        cache_factory = make_cache
    server = EmulatorServer(cfg, cache_factory, crash)
    runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port, reuse_address=True)
    await site.start()
    try:
        yield f"http://{cfg.host}:{runner.addresses[0][1]}", server
    finally:
        await runner.cleanup()
