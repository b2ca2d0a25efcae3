"""Response shapes: each API's whole answer, stream chunks and stream end, the way the real
servers write them.

- vLLM `/v1/completions`: chunks `{"object": "text_completion", "choices": [{"index", "text",
  "finish_reason", "token_ids"?}]}`; `return_token_ids` adds `token_ids` (and `prompt_token_ids`
  to the first chunk); `stream_options.include_usage` ends the stream with a chunk whose
  `choices` is empty; `usage.prompt_tokens_details.cached_tokens` is present only when
  non-zero (vLLM omits it for zero).
- `/v1/chat/completions`: `chat.completion.chunk`s, the first delta carrying
  `role: assistant`, then `content` deltas; the whole answer is one `message`.
- SGLang `/generate`: every chunk carries the cumulative `output_ids` (SGLang's default, not
  incremental), the cumulative `text`, and `meta_info` with `cached_tokens`; an emulator with
  a cache tier adds `cached_tokens_details` (`sglang_details`).
- Anthropic `/v1/messages`: `message_start`, `content_block_start`, `content_block_delta`
  (`text_delta`) events, `content_block_stop`, `message_delta` (`stop_reason: max_tokens`,
  output tokens), `message_stop`. Usage: `input_tokens` the uncached prompt tokens,
  `cache_read_input_tokens` the cached ones (Anthropic's split; caching here is automatic, so
  `cache_creation_input_tokens` is 0).

The OpenAI-style streams end with `data: [DONE]`. A text request's text decodes from the
generated ids; a token-id request's text is `""` (a server without a tokenizer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import orjson

from replay.emulator.protocol import SSE_DONE, GenRequest, sse, sse_error
from replay.emulator.tokenizer import TextTokenizer
from replay.resume import Resume

_NUMPY = orjson.OPT_SERIALIZE_NUMPY


class Shaper(Protocol):
    """One request's response writer (see the module docstring)."""

    def chunk(
        self, index: int, new: np.ndarray, upto: np.ndarray, finished: bool, cached: int
    ) -> bytes:
        """A stream event for `new` ids of choice `index` (`upto`: all its ids so far)."""
        ...

    def tail(self, completion: int, cached: int) -> bytes:
        """What ends a stream after the last chunk."""
        ...

    def full(self, outs: list[np.ndarray], cached: int) -> bytes:
        """The whole answer of a non-streaming request."""
        ...

    def error(self, message: str, status: int) -> bytes:
        """An error event inside a stream."""
        ...


class _Base:
    def __init__(self, req: GenRequest, model: str, tok: TextTokenizer) -> None:
        self.req = req
        self.model = model
        self.tok = tok
        self.created = int(time.time())
        self._counts = [0] * len(req.prompts)

    def text(self, ids: np.ndarray) -> str:
        return self.tok.decode(ids) if self.req.text and len(ids) else ""

    def usage(self, completion: int, cached: int) -> dict[str, Any]:
        prompt = self.req.prompt_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return usage

    def _chunk_usage(self, index: int, upto: np.ndarray, cached: int) -> dict[str, Any] | None:
        if not self.req.continuous_usage:
            return None
        self._counts[index] = len(upto)
        return self.usage(sum(self._counts), cached)

    def error(self, message: str, status: int) -> bytes:
        return sse_error(message, status)


class CompletionShaper(_Base):
    """vLLM `/v1/completions`."""

    _first = True

    def _choice(self, index: int, ids: np.ndarray, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": index,
            "text": self.text(ids),
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }
        if self.req.return_token_ids:
            choice["token_ids"] = ids
            if self._first:
                choice["prompt_token_ids"] = self.req.prompts[index]
        return choice

    def _obj(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> bytes:
        return orjson.dumps(
            {
                "id": self.req.request_id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": choices,
                "usage": usage,
            },
            option=_NUMPY,
        )

    def chunk(
        self, index: int, new: np.ndarray, upto: np.ndarray, finished: bool, cached: int
    ) -> bytes:
        choice = self._choice(index, new, "length" if finished else None)
        self._first = False
        usage = self._chunk_usage(index, upto, cached)
        return b"data: " + self._obj([choice], usage) + b"\n\n"

    def tail(self, completion: int, cached: int) -> bytes:
        if not self.req.include_usage:
            return SSE_DONE
        return b"data: " + self._obj([], self.usage(completion, cached)) + b"\n\n" + SSE_DONE

    def full(self, outs: list[np.ndarray], cached: int) -> bytes:
        choices = []
        for i, ids in enumerate(outs):
            self._first = True
            choices.append(self._choice(i, ids, "length"))
        return self._obj(choices, self.usage(sum(len(o) for o in outs), cached))


class ChatShaper(_Base):
    """OpenAI `/v1/chat/completions` as vLLM writes it."""

    _first = True

    def _obj(self, obj: str, choices: list[dict[str, Any]], usage: Any) -> bytes:
        body: dict[str, Any] = {
            "id": self.req.request_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "usage": usage,
        }
        if self.req.return_token_ids and self._first:
            body["prompt_token_ids"] = self.req.prompt_ids
        return orjson.dumps(body, option=_NUMPY)

    def chunk(
        self, index: int, new: np.ndarray, upto: np.ndarray, finished: bool, cached: int
    ) -> bytes:
        out = b""
        if self._first:  # vLLM's first chunk: the role, empty content
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
            role |= {"logprobs": None, "finish_reason": None}
            out += b"data: " + self._obj("chat.completion.chunk", [role], None) + b"\n\n"
            self._first = False
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"content": self.text(new)},
            "logprobs": None,
            "finish_reason": "length" if finished else None,
        }
        if self.req.return_token_ids:
            choice["token_ids"] = new
        usage = self._chunk_usage(index, upto, cached)
        return out + b"data: " + self._obj("chat.completion.chunk", [choice], usage) + b"\n\n"

    def tail(self, completion: int, cached: int) -> bytes:
        if not self.req.include_usage:
            return SSE_DONE
        usage = self.usage(completion, cached)
        return b"data: " + self._obj("chat.completion.chunk", [], usage) + b"\n\n" + SSE_DONE

    def full(self, outs: list[np.ndarray], cached: int) -> bytes:
        ids = outs[0]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": self.text(ids), "tool_calls": []},
            "logprobs": None,
            "finish_reason": "length",
            "stop_reason": None,
        }
        if self.req.return_token_ids:
            choice["token_ids"] = ids
        return self._obj("chat.completion", [choice], self.usage(len(ids), cached))


class MessagesShaper(_Base):
    """Anthropic-style `/v1/messages`."""

    _started = False

    def _usage(self, completion: int, cached: int) -> dict[str, int]:
        return {
            "input_tokens": self.req.prompt_tokens - cached,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
            "output_tokens": completion,
        }

    @staticmethod
    def _event(kind: str, obj: dict[str, Any]) -> bytes:
        return f"event: {kind}\ndata: ".encode() + orjson.dumps(obj, option=_NUMPY) + b"\n\n"

    def _message(self, content: list[dict[str, Any]], stop: str | None, usage: Any) -> dict:
        return {
            "id": f"msg_{self.req.request_id}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    def chunk(
        self, index: int, new: np.ndarray, upto: np.ndarray, finished: bool, cached: int
    ) -> bytes:
        out = b""
        if not self._started:
            self._started = True
            start = self._message([], None, self._usage(0, cached))
            out += self._event("message_start", {"type": "message_start", "message": start})
            block = {"type": "text", "text": ""}
            out += self._event(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
        delta = {"type": "text_delta", "text": self.text(new)}
        return out + self._event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )

    def tail(self, completion: int, cached: int) -> bytes:
        return (
            self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
            + self._event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                    "usage": self._usage(completion, cached),
                },
            )
            + self._event("message_stop", {"type": "message_stop"})
        )

    def full(self, outs: list[np.ndarray], cached: int) -> bytes:
        ids = outs[0]
        content = [{"type": "text", "text": self.text(ids)}]
        msg = self._message(content, "max_tokens", self._usage(len(ids), cached))
        return orjson.dumps(msg, option=_NUMPY)

    def error(self, message: str, status: int) -> bytes:
        kind = "overloaded_error" if status == 503 else "api_error"
        return self._event("error", {"type": "error", "error": {"type": kind, "message": message}})


def sglang_details(cached: int, resume: Resume | None, store: bool) -> dict[str, int] | None:
    """SGLang's `meta_info.cached_tokens_details` for a request that reports `cached` tokens,
    split by the engine model's `resume` (None, or a claim the model did not serve: all on
    the device): `{"device", "host"}`, with `"storage"` where the engine has a store, or
    None where nothing was cached (SGLang 0.5.22, srt/managers/scheduler_components/
    output_streamer.py:86-117; the key is sent null then, tokenizer_manager.py:2567-2574)."""
    if not cached:
        return None
    served = resume is not None and resume.cached == cached
    host = (resume.cached_host or 0) if served and resume else 0
    storage = (resume.cached_external or 0) if served and resume else 0
    details = {"device": cached - host - storage, "host": host}
    if store:
        details["storage"] = storage
    return details


class GenerateShaper(_Base):
    """SGLang `/generate`. `details`, where set (an emulator with a cache tier), gives the
    request's `cached_tokens_details`, which every event's `meta_info` then carries."""

    def __init__(self, req: GenRequest, model: str, tok: TextTokenizer) -> None:
        super().__init__(req, model, tok)
        self.t0 = time.monotonic()
        self._text = ""
        self.details: Callable[[], dict[str, int] | None] | None = None

    def _obj(self, ids: np.ndarray, finished: bool, cached: int) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": self.req.request_id,
            "finish_reason": {"type": "length", "length": len(ids)} if finished else None,
            "prompt_tokens": len(self.req.prompt_ids),
            "completion_tokens": len(ids),
            "cached_tokens": cached,
            "e2e_latency": time.monotonic() - self.t0,
        }
        if self.details is not None:
            meta["cached_tokens_details"] = self.details()
        return {"text": self._text, "output_ids": ids, "meta_info": meta}

    def chunk(
        self, index: int, new: np.ndarray, upto: np.ndarray, finished: bool, cached: int
    ) -> bytes:
        self._text += self.text(new)
        return sse(self._obj(upto, finished, cached))

    def tail(self, completion: int, cached: int) -> bytes:
        return SSE_DONE

    def full(self, outs: list[np.ndarray], cached: int) -> bytes:
        self._text = self.text(outs[0])
        return orjson.dumps(self._obj(outs[0], True, cached), option=_NUMPY)
