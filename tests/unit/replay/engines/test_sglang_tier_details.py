"""SGLang's cached tokens by tier (issue 34 point 3): `meta_info.cached_tokens_details`
({device, host, storage}, SGLang 0.5.22 srt/managers/scheduler_components/output_streamer.py
:86-117) read into the result's host and external tokens, checked where they are read; an
answer without the field leaves them None, so the record keeps an untiered run's columns."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from replay.emulator.shapes import sglang_details
from replay.engines.adapters import StreamResult, make_adapter
from replay.engines.adapters.base import EngineValueError
from replay.engines.adapters.sglang import SglangParser
from replay.records import REQUEST_SCHEMA, RequestRecord, records_to_table
from replay.resume import Resume


def _event(meta: dict[str, Any]) -> bytes:
    body = {"output_ids": [1, 2], "meta_info": {"completion_tokens": 2, **meta}}
    return b"data: " + orjson.dumps(body) + b"\n\ndata: [DONE]\n\n"


def _parse(meta: dict[str, Any]) -> StreamResult:
    res = StreamResult()
    parser = SglangParser(res)
    parser.feed_block(_event(meta), 1)
    parser.finish()
    return res


def _record(res: StreamResult) -> RequestRecord:
    """The record as the client fills it (replay.client.session `_fill`)."""
    rec = RequestRecord("sglang", 0, "t", "main", 0, 0.0, cached_tokens=res.cached_tokens)
    rec.cached_tokens_host, rec.cached_tokens_external = res.cached_host, res.cached_external
    return rec


@pytest.mark.parametrize(
    ("details", "host", "external"),
    [({"device": 100, "host": 200, "storage": 50, "storage_backend": "MooncakeStore"}, 200, 50),
     ({"device": 300, "host": 50}, 50, 0),  # no storage backend: no `storage` key
     ({"device": 350, "host": 0}, 0, 0),  # SGLang without HiCache
     (None, 0, 0)],  # nothing cached: SGLang sends the key as null
)  # fmt: skip
def test_details_give_the_host_and_storage_tokens(
    details: dict[str, Any] | None, host: int, external: int
) -> None:
    res = _parse({"cached_tokens": 350 if details else 0, "cached_tokens_details": details})
    assert (res.cached_host, res.cached_external) == (host, external)
    table = records_to_table([_record(res).as_dict()])
    assert table.schema.names[-2:] == ["cached_tokens_host", "cached_tokens_external"]
    assert table.column("cached_tokens_host").to_pylist() == [host]


def test_an_answer_without_details_keeps_the_untiered_columns() -> None:
    res = _parse({"cached_tokens": 128})
    assert res.cached_tokens == 128 and res.cached_host is None and res.cached_external is None
    row = _record(res).as_dict()
    assert "cached_tokens_host" not in row
    assert records_to_table([row]).schema == REQUEST_SCHEMA


@pytest.mark.parametrize(
    ("details", "said"),
    [({"device": 0, "host": -3}, "meta_info.cached_tokens_details.host = -3: outside"),
     ({"host": "lots"}, "meta_info.cached_tokens_details.host = 'lots': not a whole number"),
     ({"host": 1, "storage": 1e23}, "meta_info.cached_tokens_details.storage = 1e+23"),
     ({"device": 2.5, "host": 0}, "meta_info.cached_tokens_details.device = '2.5'"),
     ({"device": 0, "host": 90, "storage": 20}, "host 90 + storage 20 tokens, more than its "
      "meta_info.cached_tokens (100)"),
     ([1, 2], "meta_info.cached_tokens_details = '[1, 2]': not an object")],
)  # fmt: skip
def test_a_hostile_detail_is_rejected_by_name(details: Any, said: str) -> None:
    with pytest.raises(EngineValueError) as e:
        _parse({"cached_tokens": 100, "cached_tokens_details": details})
    assert said in str(e.value) and "the request is recorded as an error" in str(e.value)


def test_details_without_cached_tokens_are_rejected() -> None:
    with pytest.raises(EngineValueError, match=r"more than its meta_info.cached_tokens \(None\)"):
        _parse({"cached_tokens_details": {"device": 0, "host": 5}})


async def test_a_hostile_detail_fails_that_request_not_the_client() -> None:
    """Through the adapter's stream loop, as a run sends it: the request is an error whose
    message names the field; the next request of the same adapter reads its details."""
    answers = [{"device": 0, "host": 10**9}, {"device": 30, "host": 70}]

    async def generate(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_event({"cached_tokens": 100, "cached_tokens_details": answers.pop(0)}))
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/generate", generate)
    async with TestServer(app) as server:
        adapter = make_adapter("sglang", str(server.make_url("")), None)
        try:
            bad = await adapter.generate(adapter.request_body(np.arange(100), 2))
            good = await adapter.generate(adapter.request_body(np.arange(100), 2))
        finally:
            await adapter.close()
    assert bad.status == "error" and bad.error is not None
    assert "meta_info.cached_tokens_details.host = 1e+09: outside" in bad.error
    assert good.status == "ok" and (good.cached_host, good.cached_external) == (70, 0)


def test_the_emulators_details_are_sglangs_shape() -> None:
    served = Resume(300, cached_host=120, cached_external=40)
    assert sglang_details(300, served, store=True) == {"device": 140, "host": 120, "storage": 40}
    assert sglang_details(300, Resume(300, cached_host=120, cached_external=0), store=False) == {
        "device": 180,
        "host": 120,
    }
    assert sglang_details(0, Resume(0, cached_host=0, cached_external=0), store=False) is None
    # A claimed hit the engine model did not serve (--lie-cached-rate): all on the device.
    assert sglang_details(256, Resume(0, cached_host=0), store=False) == {"device": 256, "host": 0}
