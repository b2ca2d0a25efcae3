"""A small but real engine for the client's tests: an aiohttp server on 127.0.0.1 that speaks
vLLM's `/v1/completions` (token ids, `return_token_ids`, usage with cached tokens) and SGLang's
`/generate` (cumulative `output_ids`), with block-granular prefix caching keyed on the token
ids it receives, `/metrics` with vLLM's names, and fault knobs (HTTP 500, connection reset,
stall, going down and coming back). Not a mock: the client talks HTTP to it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys
import threading
import types
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp import web

from replay.traces.model import Trace, Trajectory


@dataclass
class FakeEngine:
    block_size: int = 16
    max_model_len: int = 100_000
    token_delay_s: float = 0.0
    # Seconds between the response's headers and its first token (vLLM sends the headers as
    # soon as it accepts a request, then prefills).
    prefill_delay_s: float = 0.0
    # Consumed one per request: 500 | reset | stall (one token, then silence) | slowfirst.
    faults: list[str] = field(default_factory=list)
    report_cached: bool = True
    caching: bool = True
    return_ids: bool = True
    blocks: set[bytes] = field(default_factory=set)
    requests: list[dict] = field(default_factory=list)
    queries: int = 0
    hits: int = 0
    url: str = ""
    runner: web.AppRunner | None = None
    port: int = 0
    # 401 to any request without `Authorization: Bearer <auth_key>` (a hosted endpoint).
    auth_key: str | None = None
    # Generation requests after the first `echo_after` fail with a 500 whose body echoes the
    # request's headers, URL and decoded basic-auth credentials (a careless server): what a
    # client must not store verbatim. None: off.
    echo_after: int | None = None
    generations: int = 0
    # Served at /get_server_info when set (what an emulator announces: time_scale, ...).
    server_info: dict = field(default_factory=dict)
    # A hostile engine (issue 36): keys replacing the completions' `usage` ones, and headers
    # every completions response carries (a router's `x-replay-replica`).
    usage_override: dict = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    # 411 Length Required to a body sent in parts (chunked), as a server that wants lengths.
    require_length: bool = False

    def cached_for(self, ids: list[int]) -> int:
        if not self.caching:
            return 0
        a = np.asarray(ids, dtype=np.int32)
        n = 0
        # A full prompt hit still recomputes the last token (as vLLM does).
        while (n + self.block_size) <= len(a) - 1 and a[
            : n + self.block_size
        ].tobytes() in self.blocks:
            n += self.block_size
        return n

    def store(self, ids: list[int]) -> None:
        if not self.caching:
            return
        a = np.asarray(ids, dtype=np.int32)
        for k in range(self.block_size, len(a) + 1, self.block_size):
            self.blocks.add(a[:k].tobytes())

    @staticmethod
    def gen_ids(prompt: list[int], n: int) -> list[int]:
        base = (sum(prompt[-3:]) * 7919) % 20000
        return [300 + (base + 31 * k) % 20000 for k in range(n)]

    async def _fault(self, req: web.Request) -> web.StreamResponse | None:
        if not self.faults:
            return None
        f = self.faults.pop(0)
        if f == "500":
            return web.Response(status=500, text="injected failure")
        if f == "reset":
            assert req.transport is not None
            req.transport.abort()
            raise asyncio.CancelledError
        if f == "slowfirst":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(req)
            await asyncio.sleep(30)
            return resp
        if f == "stall":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(req)
            await resp.write(b'data: {"choices":[{"index":0,"text":"","token_ids":[301]}]}\n\n')
            await asyncio.sleep(30)
            return resp
        return None

    @web.middleware
    async def _gate(self, req: web.Request, handler: Any) -> web.StreamResponse:
        if self.auth_key is not None and req.headers.get("Authorization") != (
            f"Bearer {self.auth_key}"
        ):
            return web.json_response({"error": {"message": "invalid api key"}}, status=401)
        if self.require_length and req.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return web.Response(status=411, text="Length Required")
        if req.path in ("/v1/completions", "/generate"):
            self.generations += 1
        if self.echo_after is not None and self.generations > self.echo_after:
            await req.read()
            auth = req.headers.get("Authorization", "")
            creds, bare = "", ""
            if auth.startswith("Basic "):
                creds = base64.b64decode(auth[6:]).decode()
                bare = f"token {auth[6:]} url-safe {base64.urlsafe_b64encode(creds.encode())!r} "
                # Issue 36: hex, and base64 of the pair behind one and two other bytes.
                shifted = [base64.b64encode(p.encode() + creds.encode()).decode() for p in "xy"]
                bare += f"hex {creds.encode().hex()} shifted {shifted[0]} {shifted[1]} "
            elif auth.startswith("Bearer "):  # the key, bare and base64-encoded
                key = auth[7:]
                bare = f"key64 {base64.b64encode(key.encode()).decode().rstrip('=')} "
                # Issue 36: its hex (both cases), upper case, and its halves apart.
                half = len(key) // 2
                bare += (
                    f"hex {key.encode().hex()} HEX {key.encode().hex().upper()} up {key.upper()} "
                    f"split {key[:half]}\n{key[half:]} "
                )
            echoed = f"{bare}as {creds}: bad request to {req.url} with headers {dict(req.headers)}"
            return web.Response(status=500, text=echoed * 3)
        return await handler(req)

    async def get_server_info(self, req: web.Request) -> web.Response:
        if not self.server_info:
            return web.Response(status=404)
        return web.json_response(self.server_info)

    async def completions(self, req: web.Request) -> web.StreamResponse:
        body = orjson.loads(await req.read())
        self.requests.append(body)
        fault = await self._fault(req)
        if fault is not None:
            return fault
        prompt = body["prompt"]
        if isinstance(prompt, str):  # a text prompt (the openai adapter): one id per word
            prompt = [zlib.crc32(w.encode()) % 20000 + 300 for w in prompt.split()]
        n = body["max_tokens"]
        if len(prompt) + n > self.max_model_len:
            return web.json_response({"error": {"message": "too long"}}, status=400)
        cached = self.cached_for(prompt)
        self.queries += len(prompt)
        self.hits += cached
        out = self.gen_ids(prompt, n)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **self.headers})
        await resp.prepare(req)
        if self.prefill_delay_s:
            await asyncio.sleep(self.prefill_delay_s)
        for k, t in enumerate(out):
            ch: dict = {
                "index": 0,
                "text": f" g{t}",
                "finish_reason": "length" if k == n - 1 else None,
            }
            if self.return_ids:
                ch["token_ids"] = [t]
            if k == 0 and self.return_ids:
                ch["prompt_token_ids"] = prompt
            await resp.write(b"data: " + orjson.dumps({"choices": [ch], "usage": None}) + b"\n\n")
            if self.token_delay_s:
                await asyncio.sleep(self.token_delay_s)
        self.store(prompt + out[:-1])  # before the last chunk: the client may move on at once
        usage: dict = {"prompt_tokens": len(prompt), "completion_tokens": n}
        if self.report_cached and cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        usage.update(self.usage_override)
        await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def generate(self, req: web.Request) -> web.StreamResponse:
        body = orjson.loads(await req.read())
        self.requests.append(body)
        prompt = body["input_ids"]
        n = body["sampling_params"]["max_new_tokens"]
        cached = self.cached_for(prompt)
        self.queries += len(prompt)
        self.hits += cached
        out = self.gen_ids(prompt, n)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        self.store(prompt + out[:-1])
        for k in range(n):
            meta = {
                "prompt_tokens": len(prompt),
                "completion_tokens": k + 1,
                "finish_reason": {"type": "length", "length": n} if k == n - 1 else None,
            }
            if self.report_cached:
                meta["cached_tokens"] = cached
            ev = {"output_ids": out[: k + 1], "meta_info": meta}
            await resp.write(b"data: " + orjson.dumps(ev) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def health(self, req: web.Request) -> web.Response:
        return web.Response(text="")

    async def models(self, req: web.Request) -> web.Response:
        return web.json_response(
            {"data": [{"id": "fake-model", "max_model_len": self.max_model_len}]}
        )

    async def metrics(self, req: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:prefix_cache_queries counter\n"
            f'vllm:prefix_cache_queries_total{{model_name="fake-model"}} {self.queries}\n'
            "# TYPE vllm:prefix_cache_hits counter\n"
            f'vllm:prefix_cache_hits_total{{model_name="fake-model"}} {self.hits}\n'
            "# TYPE vllm:cache_config_info gauge\n"
            f'vllm:cache_config_info{{block_size="{self.block_size}",enable_prefix_caching="True"}} 1.0\n'
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="fake-model"} 0.0\n'
        )
        return web.Response(text=text)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._gate])
        app.router.add_get("/get_server_info", self.get_server_info)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/generate", self.generate)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def start(self, port: int = 0) -> str:
        self.runner = web.AppRunner(self.app(), handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{self.port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@pytest.fixture
async def fake_engine() -> AsyncIterator[FakeEngine]:
    eng = FakeEngine()
    await eng.start()
    try:
        yield eng
    finally:
        with contextlib.suppress(Exception):
            await eng.stop()


def make_trajectory(
    tid: str,
    inputs: list[int],
    outputs: list[int],
    blocks: list[list[int]],
    *,
    block_size: int = 16,
    gaps: list[float] | None = None,
    subagents: tuple[Trajectory, ...] = (),
    namespace: str | None = None,
    agent_id: str | None = None,
    parent_id: str | None = None,
    spawn_index: int = 0,
) -> Trajectory:
    n = len(inputs)
    gaps = gaps or [0.0] * n
    offs = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
    return Trajectory(
        id=tid,
        block_size=block_size,
        hash_scope="local",
        namespace=namespace or tid,
        t=np.cumsum(gaps).astype(float),
        input_tokens=np.asarray(inputs, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        api_time=np.zeros(n),
        think_time=np.asarray(gaps, dtype=float),
        ttft=np.full(n, np.nan),
        request_type=np.ones(n, dtype=np.int8),
        stop=np.zeros(n, dtype=np.int8),
        hash_offsets=offs,
        hash_ids=np.concatenate([np.asarray(b, dtype=np.int64) for b in blocks]),
        subagents=subagents,
        agent_id=agent_id,
        parent_id=parent_id,
        spawn_index=spawn_index,
    )


def growing_trajectory(
    tid: str, turns: int = 4, first: int = 100, step: int = 60, out: int = 8, block_size: int = 16
) -> Trajectory:
    """A conversation that only grows: each request's blocks extend the previous one's."""
    inputs = [first + k * step for k in range(turns)]
    ids = list(range(1, 10_000))
    blocks = []
    for k, n in enumerate(inputs):
        nb = -(-n // block_size)
        # A partial last block has its own id (its content changes as the context grows); a
        # full one is shared by the next request, as in real traces.
        b = ids[:nb] if n % block_size == 0 else [*ids[: nb - 1], 50000 + k]
        blocks.append(b)
    return make_trajectory(tid, inputs, [out] * turns, blocks, block_size=block_size)


def trace_of(*trajs: Trajectory) -> Trace:
    return Trace(list(trajs), source="test", format="weka", block_size=trajs[0].block_size)


def write_weka(
    path,
    sessions: int = 3,
    turns: int = 5,
    block: int = 64,
    first: int = 300,
    step: int = 150,
    out: int = 8,
    gap: float = 0.0,
) -> str:
    """A small Weka-format trace file (growing conversations) for CLI tests."""
    import json

    lines = []
    for s in range(sessions):
        reqs = []
        t = 0.0
        for k in range(turns):
            n = first + k * step
            nb = -(-n // block)
            hashes = [*list(range(s * 10000, s * 10000 + nb - 1)), s * 10000 + 5000 + k]
            reqs.append(
                {
                    "t": t,
                    "type": "s",
                    "model": "m",
                    "in": n,
                    "out": out,
                    "hash_ids": hashes,
                    "input_types": ["text"],
                    "output_types": ["text"],
                    "stop": "tool_use",
                    "api_time": 0.01,
                    "think_time": gap,
                    "ttft": 0.01,
                }
            )
            t += 0.01 + gap
        lines.append(
            json.dumps(
                {
                    "id": f"s{s}",
                    "models": ["m"],
                    "block_size": block,
                    "hash_id_scope": "local",
                    "tool_tokens": 0,
                    "system_tokens": 0,
                    "requests": reqs,
                }
            )
        )
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def engine_thread(helpers: Any) -> Iterator[Any]:
    """The fake engine on its own event loop in a thread (the CLI runs its own loop)."""
    eng = helpers.FakeEngine()
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(eng.start())
        ready.set()
        loop.run_forever()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    ready.wait(10)
    yield eng
    asyncio.run_coroutine_threadsafe(eng.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    t.join(10)
    loop.close()


class Helpers:
    """Test helpers, handed out by the `helpers` fixture (conftest modules are not importable
    under pytest's importlib import mode)."""

    FakeEngine = FakeEngine
    make_trajectory = staticmethod(make_trajectory)
    growing_trajectory = staticmethod(growing_trajectory)
    trace_of = staticmethod(trace_of)
    write_weka = staticmethod(write_weka)


@pytest.fixture
def helpers() -> type[Helpers]:
    return Helpers


@pytest.fixture(autouse=True)
def _plain_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawned client worker (`--workers`) re-runs the parent's `__main__` file first, as
    multiprocessing's spawn does. Under the whole suite that was a Streamlit AppTest's
    temporary script, left as `__main__` by the dashboard tests, and every worker died on
    it (NameError: __args) before it started. `replay run`'s own `__main__` is the package's;
    here the workers see a plain one."""
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
