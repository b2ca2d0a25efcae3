"""vLLM and the FlashState fork: OpenAI `/v1/completions` with a token-id prompt.

Request: `prompt` is the list of token ids, `max_tokens` the trace's output length,
`ignore_eos` so the engine generates exactly that many, `return_token_ids` so every chunk
carries the generated ids (`choices[0].token_ids`; the first chunk also echoes
`prompt_token_ids`), and `stream_options.include_usage` so the last chunk carries `usage`
with `prompt_tokens_details.cached_tokens` (vLLM omits the details when nothing was cached,
and without `--enable-prompt-tokens-details` altogether: both read as 0 here; preflight tells
the two apart).

With `text_prompt=True` the prompt goes as the text of its ids' canonical words
(replay.token_words.ids_as_text), which the emulator's built-in tokenizer reads back into
exactly those ids: for a router in front that takes text prompts only (smg 1.13.0's HTTP
path), chosen by `--router external` (replay.client.fleet). Against a real engine behind such
a router the text is tokenized by the model's tokenizer, so lengths and prefixes are not the
trace's: the prompt echo (`prompt_token_ids`, `usage.prompt_tokens`) shows it.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
import orjson

from replay.engines.adapters.base import (
    Adapter,
    StreamParser,
    StreamResult,
    engine_count,
    register,
)
from replay.engines.adapters.body import Body, json_body
from replay.token_words import ids_as_text

# Generated ids of one chunk; the quote before `token_ids` keeps `prompt_token_ids` out.
_TOKEN_IDS = re.compile(rb'"token_ids"\s*:\s*\[([0-9,\s]*)\]')
# Events the fast path leaves to the full JSON parse (they are at most a few per request).
_RARE = re.compile(rb'"usage"\s*:\s*\{|"error"|"finish_reason"\s*:\s*"')


class VllmParser(StreamParser):
    def feed_block(self, block: bytes, now_ns: int) -> None:
        # The fast path: a read usually holds many one-token chunks; pull every chunk's ids
        # with one regex pass and one JSON parse instead of a parse per chunk (the client
        # must out-run the engine; a parse per chunk capped it near 600 requests/s).
        found = _TOKEN_IDS.findall(block)
        if not found:
            super().feed_block(block, now_ns)
            return
        r = self.result
        lists = [f for f in found if f.strip()]
        if lists:
            r.output_ids.extend(orjson.loads(b"[" + b",".join(lists) + b"]"))
            if r.first_token_ns is None:
                r.first_token_ns = now_ns
            r.chunk_ns.extend([now_ns] * len(lists))
        if b"[DONE]" in block:
            self.done = True
        if _RARE.search(block):
            for line in block.split(b"\n"):
                if line.startswith(b"data:") and _RARE.search(line):
                    self._event(line[5:].strip(), now_ns, tokens=False)

    def feed(self, payload: bytes, now_ns: int) -> None:
        self._event(payload, now_ns, tokens=True)

    def _event(self, payload: bytes, now_ns: int, *, tokens: bool) -> None:
        ev = self.event(payload, "choices")
        if ev is None:
            return
        r = self.result
        choices = ev.get("choices")
        if choices:
            ch = choices[0]
            ids = ch.get("token_ids")
            if tokens and ids:
                r.output_ids.extend(ids)
                self._tokens(len(ids), now_ns)
            elif tokens and ch.get("text"):
                # A server that ignores `return_token_ids` still streams text: count the chunk
                # as a token so TTFT is right; preflight rejects such a server for live runs.
                self._tokens(1, now_ns)
            if ch.get("finish_reason"):
                r.finish_reason = ch["finish_reason"]
        usage = ev.get("usage")
        if usage:
            if usage.get("prompt_tokens") is not None:
                r.prompt_tokens = engine_count(usage["prompt_tokens"], "usage.prompt_tokens")
            if usage.get("completion_tokens") is not None:
                r.output_tokens = engine_count(
                    usage["completion_tokens"], "usage.completion_tokens"
                )
            details = usage.get("prompt_tokens_details") or {}
            r.cached_field_seen = r.cached_field_seen or "cached_tokens" in details
            # Absent details mean nothing was cached (vLLM drops them when zero).
            r.cached_tokens = engine_count(
                details.get("cached_tokens") or 0, "usage.prompt_tokens_details.cached_tokens"
            )


@register("vllm", "flashstate")
class VllmAdapter(Adapter):
    kind = "vllm"
    path = "/v1/completions"
    takes_text_prompt: ClassVar[bool] = True

    def __init__(
        self, url: str, model: str | None, *, text_prompt: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(url, model, **kwargs)
        self.text_prompt = text_prompt

    def build_body(self, prompt_ids: np.ndarray, max_tokens: int) -> bytes:
        return bytes(self.request_body(prompt_ids, max_tokens))

    def request_body(self, prompt_ids: np.ndarray, max_tokens: int) -> Body:
        # orjson writes an int64 array straight from its buffer: ~1.5 ms for 200K ids, where
        # `json.dumps` of a list takes ~25-45 ms and would stall every other session. The ids
        # are written in slices as the request is sent (`Body`); a text prompt whole.
        text = ids_as_text(np.asarray(prompt_ids, dtype=np.int64)) if self.text_prompt else None
        body = {
            "model": self.model,
            "prompt": text,
            "max_tokens": int(max_tokens),
            "min_tokens": int(max_tokens),
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": False},
            "return_token_ids": True,
            "temperature": 1.0,
        }
        if text is not None:
            return Body(orjson.dumps(body))
        return json_body(body, "prompt", prompt_ids)

    def parser(self, result: StreamResult) -> StreamParser:
        return VllmParser(result)
