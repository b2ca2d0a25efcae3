"""Chat requests: OpenAI `/v1/chat/completions` (as vLLM takes it) and Anthropic-style
`/v1/messages`, turned into one prompt of token ids through the chat template.

Each message becomes `{"role", "content"}` text: string content as is; a list of parts
joined (`text` parts; Anthropic `tool_use` as its name and JSON input, `tool_result` as its
text, `thinking` as its text); an assistant message's `tool_calls` appended as JSON. A request's
`tools` (and Anthropic's `system`) become a leading `system` message, so the same tools give
the same prefix. The result goes through the tokenizer's chat template (ChatML unless the
tokenizer brings its own: `tokenizer.py`). Image, audio and other media parts are refused.

Output length: `max_completion_tokens`, else `max_tokens`, else (as vLLM) the rest of the
context. `/v1/messages` requires `max_tokens`, as Anthropic's API does.
"""

from __future__ import annotations

from typing import Any

import orjson

from replay.emulator.protocol import (
    BadRequest,
    GenRequest,
    boolean,
    check_context,
    check_ids,
    encode_text,
    model_field,
    openai_request,
    openai_stream,
    optional_positive_int,
)
from replay.emulator.tokenizer import TextTokenizer

_CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_MESSAGES_ROLES = ("user", "assistant")


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _part_text(part: Any, where: str) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise BadRequest(f"'{where}' must be an object with a 'type'", where)
    kind = part.get("type")
    if kind in ("text", "input_text"):
        text = part.get("text")
        if not isinstance(text, str):
            raise BadRequest(f"'{where}.text' must be a string", f"{where}.text")
        return text
    if kind == "thinking":
        return str(part.get("thinking") or "")
    if kind == "redacted_thinking":
        return ""
    if kind == "tool_use":
        return f"{part.get('name', '')}({_json(part.get('input') or {})})"
    if kind == "tool_result":
        return _content_text(part.get("content"), f"{where}.content")
    raise BadRequest(
        f"'{where}.type' is {kind!r}: this server takes text only "
        "(text, tool_use, tool_result, thinking parts)",
        f"{where}.type",
    )


def _content_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_part_text(p, f"{where}[{i}]") for i, p in enumerate(content))
    raise BadRequest(f"'{where}' must be a string or a list of content parts", where)


def _messages(value: Any, roles: tuple[str, ...]) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise BadRequest("'messages' must be a non-empty list of messages", "messages")
    out = []
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise BadRequest(f"'{where}' must be an object with 'role' and 'content'", where)
        role = m.get("role")
        if role not in roles:
            raise BadRequest(
                f"'{where}.role' must be one of {', '.join(roles)}, got {role!r}", f"{where}.role"
            )
        text = _content_text(m.get("content"), f"{where}.content")
        if m.get("tool_calls"):
            text += _json(m["tool_calls"])
        out.append({"role": str(role), "content": text})
    return out


def _tools(body: dict[str, Any]) -> str:
    tools = body.get("tools")
    if tools is None:
        return ""
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tool definitions", "tools")
    return "# Tools\n" + "\n".join(_json(t) for t in tools)


def _encode(messages: list[dict[str, str]], tok: TextTokenizer, vocab_size: int) -> Any:
    ids = encode_text(tok.apply_chat_template(messages), "messages", tok)
    return check_ids(ids, "messages", vocab_size)


def _max_tokens(body: dict[str, Any], prompt_len: int, context: int) -> int:
    # vLLM: `max_completion_tokens or max_tokens`, else max_model_len - prompt length.
    mct = optional_positive_int(body, "max_completion_tokens")
    mt = optional_positive_int(body, "max_tokens")
    chosen = mct or mt
    if chosen is None:
        if prompt_len >= context:
            check_context(prompt_len, 1, context, "messages")
        return context - prompt_len
    field = "max_completion_tokens" if mct else "max_tokens"
    check_context(prompt_len, chosen, context, f"messages, {field}")
    return chosen


def parse_chat(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str, tok: TextTokenizer
) -> GenRequest:
    """An OpenAI `/v1/chat/completions` body."""
    if "messages" not in body:
        raise BadRequest("'messages' is required (a list of {role, content})", "messages")
    messages = _messages(body["messages"], _CHAT_ROLES)
    tools = _tools(body)
    if tools:
        messages.insert(0, {"role": "system", "content": tools})
    ids = _encode(messages, tok, vocab_size)
    stream = openai_stream(body)
    max_tokens = _max_tokens(body, len(ids), context)
    return openai_request(body, [ids], max_tokens, stream, request_id, text=True)


def parse_messages(
    body: dict[str, Any], vocab_size: int, context: int, request_id: str, tok: TextTokenizer
) -> GenRequest:
    """An Anthropic-style `/v1/messages` body."""
    if "messages" not in body:
        raise BadRequest("'messages' is required (a list of {role, content})", "messages")
    if body.get("max_tokens") is None:
        raise BadRequest("'max_tokens' is required (a positive integer)", "max_tokens")
    messages = _messages(body["messages"], _MESSAGES_ROLES)
    system = _content_text(body.get("system"), "system")
    tools = _tools(body)
    head = "\n".join(s for s in (system, tools) if s)
    if head:
        messages.insert(0, {"role": "system", "content": head})
    ids = _encode(messages, tok, vocab_size)
    max_tokens = optional_positive_int(body, "max_tokens")
    assert max_tokens is not None
    check_context(len(ids), max_tokens, context, "messages, max_tokens")
    return GenRequest(
        [ids],
        max_tokens,
        boolean(body, "stream", "stream"),
        True,
        False,
        model_field(body),
        request_id,
        text=True,
    )
