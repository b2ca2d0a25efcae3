"""The wire formats' requests: parse vLLM `/v1/completions` and SGLang `/generate` bodies
(chat and Anthropic messages: `chat.py`; response shapes: `shapes.py`).

A prompt is token ids (a list of ints, exact identity: the engine sees those ids) or text (a
string, or for `/v1/completions` a list of strings, one choice each), which the server's
tokenizer (`tokenizer.py`) turns into ids. vLLM's `return_token_ids` adds `token_ids` to each
choice; `stream_options.include_usage` ends the stream with a usage chunk. SGLang: `input_ids`
or `text`, `sampling_params.max_new_tokens`. A text prompt gets text back (decoded from the
generated ids); a token-id prompt gets `""`, as from a server started with
`--skip-tokenizer-init`.

A bad body raises `BadRequest`, whose message names the field and what to send instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from replay.emulator.tokenizer import TextTokenizer


class BadRequest(Exception):
    """A request the server refuses (4xx), naming the offending field."""

    def __init__(self, message: str, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status


@dataclass
class GenRequest:
    """A generation request, whichever protocol it came in. `prompts` holds one id array per
    choice (several only for a `/v1/completions` list of strings)."""

    prompts: list[np.ndarray]
    max_tokens: int
    stream: bool
    include_usage: bool
    return_token_ids: bool
    model: str | None
    request_id: str
    text: bool = False  # the prompt came as text: answers carry decoded text
    continuous_usage: bool = False  # vLLM's stream_options.continuous_usage_stats
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_ids(self) -> np.ndarray:
        return self.prompts[0]

    @property
    def prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)


def parse_json(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}", None) from e
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object", None)
    return body


def check_ids(arr: np.ndarray, field: str, vocab_size: int) -> np.ndarray:
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise BadRequest(
            f"'{field}' holds token id {bad}, outside the vocabulary [0, {vocab_size})", field
        )
    return arr.astype(np.int64, copy=False)


def _token_ids(value: Any, field: str, vocab_size: int) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise BadRequest(f"'{field}' must be a non-empty string or list of token ids", field)
    arr = np.asarray(value) if all(type(v) is int for v in value[:64]) else None
    if arr is None or arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise BadRequest(f"'{field}' must be a string or a list of integers (token ids)", field)
    return check_ids(arr, field, vocab_size)


def encode_text(text: str, field: str, tok: TextTokenizer) -> np.ndarray:
    ids = tok.encode(text)
    if not len(ids):
        raise BadRequest(f"'{field}' is empty: send at least one token of text", field)
    return ids


def _prompts(
    value: Any, field: str, vocab_size: int, tok: TextTokenizer
) -> tuple[list[np.ndarray], bool]:
    """A prompt field: text, a list of texts, token ids, or a batch of one id list."""
    if isinstance(value, str):
        return [encode_text(value, field, tok)], True
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [encode_text(v, f"{field}[{i}]", tok) for i, v in enumerate(value)], True
    if isinstance(value, list) and value and isinstance(value[0], list):
        if len(value) != 1:
            raise BadRequest(
                f"'{field}' holds {len(value)} token-id lists: send one prompt of ids per "
                "request (lists of several prompts are accepted as text)",
                field,
            )
        value = value[0]  # a batch of one prompt, as the OpenAI client allows
    return [_token_ids(value, field, vocab_size)], False


def positive_int(body: dict[str, Any], key: str, default: int, field: str) -> int:
    value = body.get(key, default)
    if value is None:
        value = default
    if type(value) is not int or value < 1:
        raise BadRequest(f"'{field}' must be a positive integer, got {value!r}", field)
    return value


def optional_positive_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise BadRequest(f"'{key}' must be a positive integer, got {value!r}", key)
    return value


def boolean(body: dict[str, Any], key: str, field: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{field}' must be true or false, got {value!r}", field)
    return value


def check_context(prompt_len: int, max_tokens: int, context: int, fields: str) -> None:
    if prompt_len + max_tokens > context:
        raise BadRequest(
            f"This model's maximum context length is {context} tokens. However, you requested "
            f"{prompt_len + max_tokens} tokens ({prompt_len} in the messages, {max_tokens} in "
            f"the completion). Please reduce the length of the messages or completion.",
            fields,
        )


def model_field(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest("'model' must be a string", "model")
    return model


def stream_settings(body: dict[str, Any]) -> tuple[bool, bool, bool]:
    """`stream`, `stream_options.include_usage` and `.continuous_usage_stats`, as vLLM checks
    them (stream options without streaming are refused)."""
    stream = boolean(body, "stream", "stream")
    opts = body.get("stream_options")
    if opts is None:
        return stream, False, False
    if not isinstance(opts, dict):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    if not stream:
        raise BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options")
    usage = boolean(opts, "include_usage", "stream_options.include_usage")
    cont = boolean(opts, "continuous_usage_stats", "stream_options.continuous_usage_stats")
    return stream, usage, cont


def one_choice(body: dict[str, Any]) -> None:
    n = body.get("n", 1)
    if n not in (1, None):
        raise BadRequest(f"'n' must be 1 on this server, got {n!r}", "n")


@dataclass(frozen=True)
class OpenAIStream:
    """How an OpenAI-style body (vLLM's `/v1/completions` and `/v1/chat/completions`) asks
    to be answered (`stream_settings`)."""

    stream: bool
    include_usage: bool
    continuous_usage: bool


def openai_stream(body: dict[str, Any]) -> OpenAIStream:
    """The settings an OpenAI-style body shares whatever its prompt, checked in vLLM's order:
    one choice (`n`), streaming and its usage chunks, and `ignore_eos` (accepted; the emulator
    never stops early)."""
    one_choice(body)
    stream = OpenAIStream(*stream_settings(body))
    boolean(body, "ignore_eos", "ignore_eos")
    return stream


def openai_request(
    body: dict[str, Any],
    prompts: list[np.ndarray],
    max_tokens: int,
    stream: OpenAIStream,
    request_id: str,
    text: bool,
) -> GenRequest:
    """The `GenRequest` of an OpenAI-style body: its prompts, length and `openai_stream`,
    with `return_token_ids` and the model it names."""
    return GenRequest(
        prompts,
        max_tokens,
        stream.stream,
        stream.include_usage,
        boolean(body, "return_token_ids", "return_token_ids"),
        model_field(body),
        request_id,
        text=text,
        continuous_usage=stream.continuous_usage,
    )


def parse_completion(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str, tok: TextTokenizer
) -> GenRequest:
    """A vLLM `/v1/completions` body."""
    if "prompt" not in body:
        raise BadRequest("'prompt' is required (text or a list of token ids)", "prompt")
    prompts, text = _prompts(body["prompt"], "prompt", vocab_size, tok)
    max_tokens = positive_int(body, "max_tokens", 16, "max_tokens")  # vLLM's default: 16
    stream = openai_stream(body)
    for p in prompts:
        check_context(len(p), max_tokens, context, "prompt, max_tokens")
    return openai_request(body, prompts, max_tokens, stream, request_id, text)


def parse_generate(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str, tok: TextTokenizer
) -> GenRequest:
    """An SGLang `/generate` body: `input_ids` or `text`."""
    if "input_ids" in body and "text" in body:
        raise BadRequest("send either 'text' or 'input_ids', not both", "text")
    if "input_ids" in body:
        ids, text = _token_ids(body["input_ids"], "input_ids", vocab_size), False
    elif "text" in body:
        if not isinstance(body["text"], str):
            raise BadRequest("'text' must be a string (one prompt per request)", "text")
        ids, text = encode_text(body["text"], "text", tok), True
    else:
        raise BadRequest(
            "'text' or 'input_ids' is required (a string, or a list of token ids)", "input_ids"
        )
    sp = body.get("sampling_params") or {}
    if not isinstance(sp, dict):
        raise BadRequest("'sampling_params' must be an object", "sampling_params")
    max_tokens = positive_int(sp, "max_new_tokens", 128, "sampling_params.max_new_tokens")
    boolean(sp, "ignore_eos", "sampling_params.ignore_eos")
    check_context(len(ids), max_tokens, context, "input_ids, sampling_params.max_new_tokens")
    rid = body.get("rid")
    return GenRequest(
        [ids],
        max_tokens,
        boolean(body, "stream", "stream"),
        False,
        True,
        None,
        rid if isinstance(rid, str) and rid else request_id,
        text=text,
    )


def openai_error(message: str, status: int, field: str | None) -> bytes:
    kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
    return orjson.dumps(
        {"error": {"message": message, "type": kind, "param": field, "code": status}}
    )


def anthropic_error(message: str, status: int, field: str | None) -> bytes:
    kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
    text = f"{field}: {message}" if field and not message.startswith(f"'{field}'") else message
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": text}})


def sglang_error(message: str, status: int, field: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "param": field, "code": status}})


def sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def sse_error(message: str, status: int) -> bytes:
    """An error event inside a stream (vLLM and SGLang both send `{"error": {...}}`)."""
    return sse({"error": {"message": message, "code": status}})
