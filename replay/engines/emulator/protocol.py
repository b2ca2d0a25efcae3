"""The wire formats: parse vLLM `/v1/completions` and SGLang `/generate` bodies, and shape
their responses and stream chunks the way the real servers do.

vLLM (with `--skip-tokenizer-init`): `prompt` is a list of token ids; `return_token_ids`
adds `token_ids` to each choice (and `prompt_token_ids` to the first chunk);
`stream_options.include_usage` ends the stream with a chunk whose `choices` is empty and
whose `usage.prompt_tokens_details.cached_tokens` is present only when non-zero (vLLM omits
it for zero). SGLang: `input_ids`, `sampling_params.max_new_tokens`; every chunk carries the
cumulative `output_ids` (SGLang's default, not incremental) and `meta_info` with
`cached_tokens`. Both end a stream with `data: [DONE]`.

A bad body raises `BadRequest`, whose message names the field and what to send instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson


class BadRequest(Exception):
    """A request the server refuses (4xx), naming the offending field."""

    def __init__(self, message: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


@dataclass
class GenRequest:
    """A generation request, whichever protocol it came in."""

    prompt_ids: np.ndarray
    max_tokens: int
    stream: bool
    include_usage: bool
    return_token_ids: bool
    model: str | None
    request_id: str


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}", None) from e
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object", None)
    return body


def _token_ids(value: Any, field: str, vocab_size: int) -> np.ndarray:
    if isinstance(value, str):
        raise BadRequest(
            f"'{field}' must be a list of token ids: this server has no tokenizer "
            "(like an engine started with --skip-tokenizer-init); send ids, not text",
            field,
        )
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # a batch of one prompt, as the OpenAI client allows
    if not isinstance(value, list) or not value:
        raise BadRequest(f"'{field}' must be a non-empty list of token ids", field)
    arr = np.asarray(value) if all(type(v) is int for v in value[:64]) else None
    if arr is None or arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise BadRequest(f"'{field}' must be a list of integers (token ids)", field)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise BadRequest(
            f"'{field}' holds token id {bad}, outside the vocabulary [0, {vocab_size})", field
        )
    return arr.astype(np.int64, copy=False)


def _positive_int(body: dict[str, Any], key: str, default: int, field: str) -> int:
    value = body.get(key, default)
    if value is None:
        value = default
    if type(value) is not int or value < 1:
        raise BadRequest(f"'{field}' must be a positive integer, got {value!r}", field)
    return value


def _bool(body: dict[str, Any], key: str, field: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{field}' must be true or false, got {value!r}", field)
    return value


def _check_context(prompt_len: int, max_tokens: int, context: int, fields: str) -> None:
    if prompt_len + max_tokens > context:
        raise BadRequest(
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in "
            f"the completion). Please reduce the length of the messages or completion.",
            fields,
        )


def parse_completion(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str
) -> GenRequest:
    """A vLLM `/v1/completions` body."""
    if "prompt" not in body:
        raise BadRequest("'prompt' is required (a list of token ids)", "prompt")
    ids = _token_ids(body["prompt"], "prompt", vocab_size)
    max_tokens = _positive_int(body, "max_tokens", 16, "max_tokens")
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(f"'n' must be 1 on this server, got {n!r}", "n")
    stream = _bool(body, "stream", "stream")
    opts = body.get("stream_options")
    include_usage = False
    if opts is not None:
        if not isinstance(opts, dict):
            raise BadRequest("'stream_options' must be an object", "stream_options")
        if not stream:
            raise BadRequest(
                "'stream_options' is only allowed when 'stream' is true", "stream_options"
            )
        include_usage = _bool(opts, "include_usage", "stream_options.include_usage")
    _bool(body, "ignore_eos", "ignore_eos")  # accepted; the emulator never stops early
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", "model")
    _check_context(len(ids), max_tokens, context, "prompt, max_tokens")
    return GenRequest(
        ids,
        max_tokens,
        stream,
        include_usage,
        _bool(body, "return_token_ids", "return_token_ids"),
        model,
        request_id,
    )


def parse_generate(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str
) -> GenRequest:
    """An SGLang `/generate` body."""
    if "input_ids" not in body:
        if "text" in body:
            raise BadRequest(
                "'text' is not supported: this server has no tokenizer; send 'input_ids'",
                "text",
            )
        raise BadRequest("'input_ids' is required (a list of token ids)", "input_ids")
    ids = _token_ids(body["input_ids"], "input_ids", vocab_size)
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("'sampling_params' must be an object", "sampling_params")
    max_tokens = _positive_int(sp, "max_new_tokens", 128, "sampling_params.max_new_tokens")
    _bool(sp, "ignore_eos", "sampling_params.ignore_eos")
    _check_context(len(ids), max_tokens, context, "input_ids, sampling_params.max_new_tokens")
    rid = body.get("rid")
    return GenRequest(
        ids,
        max_tokens,
        _bool(body, "stream", "stream"),
        False,
        True,
        None,
        rid if isinstance(rid, str) and rid else request_id,
    )


def openai_error(message: str, status: int, field: str | None) -> bytes:
    kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
    return orjson.dumps(
        {"error": {"message": message, "type": kind, "param": field, "code": status}}
    )


def sglang_error(message: str, status: int, field: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "param": field, "code": status}})


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def sse_error(message: str, status: int) -> bytes:
    """An error event inside a stream (vLLM and SGLang both send `{"error": {...}}`)."""
    return sse({"error": {"message": message, "code": status}})


class CompletionShaper:
    """vLLM `/v1/completions` responses for one request."""

    def __init__(self, req: GenRequest, model: str) -> None:
        self.req = req
        self.model = model
        self.created = int(time.time())
        self._first = True

    def _choice(self, ids: np.ndarray, finish: str | None) -> dict[str, Any]:
        choice: dict[str, Any] = {
            "index": 0,
            "text": "",
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }
        if self.req.return_token_ids:
            choice["token_ids"] = ids
            if self._first:
                choice["prompt_token_ids"] = self.req.prompt_ids
        self._first = False
        return choice

    def _usage(self, completion: int, cached: int) -> dict[str, Any]:
        prompt = len(self.req.prompt_ids)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return usage

    def chunk(self, ids: np.ndarray, finished: bool) -> bytes:
        return sse(
            {
                "id": self.req.request_id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [self._choice(ids, "length" if finished else None)],
                "usage": None,
            }
        )

    def usage_chunk(self, completion: int, cached: int) -> bytes:
        return sse(
            {
                "id": self.req.request_id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": self._usage(completion, cached),
            }
        )

    def full(self, ids: np.ndarray, cached: int) -> bytes:
        return orjson.dumps(
            {
                "id": self.req.request_id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [self._choice(ids, "length")],
                "usage": self._usage(len(ids), cached),
            },
            option=orjson.OPT_SERIALIZE_NUMPY,
        )


class GenerateShaper:
    """SGLang `/generate` responses for one request."""

    def __init__(self, req: GenRequest) -> None:
        self.req = req
        self.t0 = time.monotonic()

    def _obj(self, ids: np.ndarray, finished: bool, cached: int) -> dict[str, Any]:
        return {
            "text": "",
            "output_ids": ids,
            "meta_info": {
                "id": self.req.request_id,
                "finish_reason": {"type": "length", "length": len(ids)} if finished else None,
                "prompt_tokens": len(self.req.prompt_ids),
                "completion_tokens": len(ids),
                "cached_tokens": cached,
                "e2e_latency": time.monotonic() - self.t0,
            },
        }

    def chunk(self, cumulative_ids: np.ndarray, finished: bool, cached: int) -> bytes:
        return sse(self._obj(cumulative_ids, finished, cached))

    def full(self, ids: np.ndarray, cached: int) -> bytes:
        return orjson.dumps(self._obj(ids, True, cached), option=orjson.OPT_SERIALIZE_NUMPY)
