"""A replayed request's body is sent in parts (issue 36, point 7: a long prompt's JSON is never
held whole): the parts joined are the whole body's bytes, and a real HTTP server (the fake
engine of conftest.py, aiohttp) receives the same JSON over chunked transfer encoding."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from replay.engines.adapters import Body, make_adapter
from replay.engines.adapters.body import SLICE, json_body


@pytest.mark.parametrize("n", [0, 1, SLICE - 1, SLICE, SLICE + 1, 3 * SLICE + 7])
@pytest.mark.parametrize(("kind", "key"), [("vllm", "prompt"), ("sglang", "input_ids")])
def test_the_parts_joined_are_the_whole_body(kind: str, key: str, n: int) -> None:
    ids = np.random.default_rng(n).integers(0, 200_000, n).astype(np.int32)
    # A model name holding the split mark: escaped inside its string, so never split there.
    a = make_adapter(kind, "http://127.0.0.1:9", 'm"prompt":[]')
    body = a.request_body(ids, 7)
    parts = list(body.parts())
    assert len(parts) == 2 + -(-n // SLICE)  # head, a part per slice, tail
    assert max(len(p) for p in parts[1:-1] or [b""]) < 8 * SLICE  # no part holds the prompt
    whole = orjson.loads(b"".join(parts))
    assert whole[key] == ids.tolist() and bytes(body) == a.build_body(ids, 7)
    assert whole.get("model", 'm"prompt":[]') == 'm"prompt":[]'


def test_json_body_keeps_the_key_in_place() -> None:
    body = json_body({"a": 1, "ids": None, "z": "x"}, "ids", np.array([3, 4]))
    assert bytes(body) == b'{"a":1,"ids":[3,4],"z":"x"}'
    assert bytes(Body(b"whole")) == b"whole"  # a body with no ids is its head


async def test_a_streamed_body_reaches_a_real_server_whole(fake_engine: Any) -> None:
    ids = np.arange(400, 400 + 2 * SLICE + 5, dtype=np.int32)
    async with make_adapter("vllm", fake_engine.url, "fake-model") as a:
        r = await a.generate(a.request_body(ids, 3))
    assert r.status == "ok", r.error
    assert fake_engine.requests[-1]["prompt"] == ids.tolist()


async def test_a_server_that_wants_a_length_gets_the_body_whole(fake_engine: Any) -> None:
    """411 Length Required to a body in parts: the request goes again whole, and so does
    every later one (a server or proxy that refuses chunked request bodies)."""
    fake_engine.require_length = True
    ids = np.arange(400, 400 + SLICE + 5, dtype=np.int32)
    async with make_adapter("vllm", fake_engine.url, "fake-model") as a:
        first = await a.generate(a.request_body(ids, 3))
        assert first.status == "ok", first.error
        assert a.whole_bodies
        second = await a.generate(a.request_body(ids[:100], 3))
    assert second.status == "ok", second.error
    assert [len(r["prompt"]) for r in fake_engine.requests] == [SLICE + 5, 100]
