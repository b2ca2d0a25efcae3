"""The emulator's text endpoints over real HTTP, with the `openai` package as the client: text
completions (one prompt and a list), chat (streaming and not, multi-turn cache hits over the
previous answer), Anthropic-style messages, SGLang `/generate` with text, a Hugging Face
tokenizer folder, and 400s naming the field."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from replay.emulator.config import EmulatorConfig
from replay.emulator.server import running_server

MODEL = "glm-5.3-flash"
BLOCK = 256
TEXT = "The quick brown fox jumps over the lazy dog while the cat naps in the sun. " * 30


def _cfg(engine: str = "vllm", **kw: object) -> EmulatorConfig:
    base: dict[str, object] = dict(
        engine=engine, port=0, time_scale=200.0, block_tokens=BLOCK, blocks=400
    )
    base.update(kw)
    return EmulatorConfig.model_validate(base)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running_server(_cfg()) as (u, _):
        yield u


def _client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key="none")


async def test_text_completion_streams_text_and_a_repeat_hits_the_cache(url: str) -> None:
    client = _client(url)
    runs = []
    for _ in range(2):
        text, usage = "", None
        stream = await client.completions.create(
            model=MODEL,
            prompt=TEXT,
            max_tokens=30,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].text
            if chunk.usage is not None:
                usage = chunk.usage
        assert usage is not None
        runs.append((text, usage))
    (t1, u1), (t2, u2) = runs
    assert t1 == t2 and len(t1.split()) == 30  # deterministic, one word per generated id
    assert u1.completion_tokens == 30 and u1.prompt_tokens == u2.prompt_tokens > 300
    assert u1.prompt_tokens_details is None  # nothing cached: vLLM omits the field
    assert u2.prompt_tokens_details is not None
    assert u2.prompt_tokens_details.cached_tokens == (u2.prompt_tokens - 1) // BLOCK * BLOCK


async def test_a_list_of_text_prompts_gets_one_choice_each(url: str) -> None:
    resp = await _client(url).completions.create(
        model=MODEL, prompt=["first prompt", "a second, longer prompt"], max_tokens=5
    )
    assert [c.index for c in resp.choices] == [0, 1]
    assert all(len(c.text.split()) == 5 for c in resp.choices)
    assert resp.usage is not None and resp.usage.completion_tokens == 10


async def test_token_id_prompts_keep_exact_ids_and_no_text(url: str) -> None:
    resp = await _client(url).completions.create(
        model=MODEL, prompt=[5, 6, 7], max_tokens=4, extra_body={"return_token_ids": True}
    )
    extra = resp.choices[0].model_extra or {}
    assert extra["prompt_token_ids"] == [5, 6, 7] and len(extra["token_ids"]) == 4
    assert resp.choices[0].text == ""


async def _chat_turn(
    client: openai.AsyncOpenAI, messages: list[dict[str, Any]], n: int
) -> tuple[str, Any]:
    content, usage, role, finish = "", None, None, None
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        max_completion_tokens=n,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    async for chunk in stream:
        if chunk.choices:
            d = chunk.choices[0].delta
            role = role or d.role
            content += d.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert role == "assistant" and finish == "length"
    return content, usage


async def test_multi_turn_chat_hits_the_cache_over_the_previous_answer() -> None:
    # Plain KV caching (kv-lru): the hybrid model's engines keep a state only at prompt
    # checkpoints, which would hide whether the answer's tokens kept their identity.
    async with running_server(_cfg(policy="kv-lru")) as (url, _):
        await _two_chat_turns(_client(url))


async def _two_chat_turns(client: openai.AsyncOpenAI) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": TEXT},
    ]
    answer, u1 = await _chat_turn(client, messages, 300)
    assert len(answer.split()) == 300 and u1.completion_tokens == 300
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Go on."}]
    _, u2 = await _chat_turn(client, messages, 20)
    # Turn 2's prompt is turn 1's prompt, its answer, and the new message: everything but the
    # last generated token (its KV never existed) is cached, in whole blocks.
    reused = u1.prompt_tokens + u1.completion_tokens - 1
    assert u2.prompt_tokens_details.cached_tokens == reused // BLOCK * BLOCK
    assert reused // BLOCK > u1.prompt_tokens // BLOCK  # the answer's KV was reused too


async def test_non_streaming_chat_with_max_tokens_and_token_ids(url: str) -> None:
    resp = await _client(url).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}],
        max_tokens=7,
        extra_body={"return_token_ids": True},
    )
    msg = resp.choices[0].message
    assert msg.role == "assistant" and len((msg.content or "").split()) == 7
    assert resp.usage is not None and resp.usage.completion_tokens == 7
    assert len((resp.choices[0].model_extra or {})["token_ids"]) == 7
    assert resp.object == "chat.completion"


async def _sse_events(resp: aiohttp.ClientResponse) -> list[tuple[str, dict[str, Any]]]:
    events, kind = [], ""
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[6:])))
    return events


async def test_anthropic_messages_stream_and_cache_read_tokens(url: str) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 12,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": TEXT}],
        "stream": True,
    }
    totals = []
    async with aiohttp.ClientSession() as s:
        for turn in range(2):
            async with s.post(url + "/v1/messages", json=body) as r:
                assert r.status == 200
                events = await _sse_events(r)
            kinds = [k for k, _ in events]
            assert kinds[:2] == ["message_start", "content_block_start"]
            assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
            text = "".join(e["delta"]["text"] for k, e in events if k == "content_block_delta")
            assert len(text.split()) == 12
            usage = events[-2][1]["usage"]
            assert usage["output_tokens"] == 12
            assert (usage["cache_read_input_tokens"] > 0) == (turn == 1)
            totals.append(usage["input_tokens"] + usage["cache_read_input_tokens"])
        async with s.post(url + "/v1/messages", json={**body, "stream": False}) as r:
            whole = await r.json()
    assert totals[0] == totals[1] > 300
    assert whole["type"] == "message" and whole["stop_reason"] == "max_tokens"
    assert len(whole["content"][0]["text"].split()) == 12


async def test_sglang_generate_takes_text_and_serves_openai_chat_too() -> None:
    async with running_server(_cfg("sglang")) as (u, _), aiohttp.ClientSession() as s:
        body = {"text": TEXT, "sampling_params": {"max_new_tokens": 6}}
        async with s.post(u + "/generate", json=body) as r:
            out = await r.json()
        assert len(out["text"].split()) == 6 and len(out["output_ids"]) == 6
        resp = await _client(u).chat.completions.create(
            model="anything", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert resp.usage is not None and resp.usage.completion_tokens == 3


async def test_a_hugging_face_tokenizer_folder_serves_chat(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    words = ["<|im_start|>", "<|im_end|>", "user", "assistant", "hello", "world"]
    words += [f"w{i}" for i in range(4000)]
    vocab = {w: i for i, w in enumerate(["[UNK]", *words])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    async with running_server(_cfg(tokenizer=str(tmp_path))) as (u, server):
        assert server.out_vocab == len(vocab)
        resp = await _client(u).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello world"}], max_tokens=5
        )
    # ChatML: <|im_start|> user hello world <|im_end|> <|im_start|> assistant
    assert resp.usage is not None and resp.usage.prompt_tokens == 7
    words_out = (resp.choices[0].message.content or "").split()
    assert len(words_out) == 5 and all(w in vocab for w in words_out)


BAD = [
    ("/v1/chat/completions", {}, "'messages' is required", "messages"),
    ("/v1/chat/completions", {"messages": []}, "non-empty list", "messages"),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "robot", "content": "x"}]},
        "'messages[0].role' must be one of",
        "messages[0].role",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        "'messages[0].content[0].type' is 'image_url'",
        "messages[0].content[0].type",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0},
        "'max_completion_tokens' must be a positive integer",
        "max_completion_tokens",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2_000_000},
        "maximum context length",
        "messages, max_tokens",
    ),
    (
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "x"}], "tools": "all"},
        "'tools' must be a list",
        "tools",
    ),
]


@pytest.mark.parametrize(("path", "body", "needle", "field"), BAD)
async def test_bad_chat_requests_get_openai_400s_naming_the_field(
    url: str, path: str, body: dict[str, Any], needle: str, field: str
) -> None:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as r:
        assert r.status == 400
        err = (await r.json())["error"]
    assert needle in err["message"] and err["param"] == field and err["code"] == 400


async def test_bad_messages_requests_get_anthropic_errors(url: str) -> None:
    body = {"messages": [{"role": "user", "content": "x"}]}
    async with aiohttp.ClientSession() as s, s.post(url + "/v1/messages", json=body) as r:
        assert r.status == 400
        err = await r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert "'max_tokens' is required" in err["error"]["message"]
