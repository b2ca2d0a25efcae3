"""A generic OpenAI-compatible endpoint (hosted APIs), through the `openai` package.

Hosted endpoints take text, not token ids, and do not return generated ids, so rewriting
here is exact at the *text* level only:
- Each synthesised token id is rendered as a fixed pronounceable word (`render_ids`), so the
  same ids always give the same text and a shared id prefix is a shared text prefix.
- The text the endpoint generates is kept verbatim as an "atom" (a negative pseudo id in the
  prompt builder's context), so the next turn's prompt repeats it byte for byte.
What is not exact: the server's tokenizer decides how many tokens the text is (our word ids
are roughly one or two tokens each), so `prompt_tokens` follows the server's `usage`, and the
trace's block boundaries are not the server's. Cached tokens come from
`usage.prompt_tokens_details.cached_tokens` where the provider reports them.
The API key is read from the environment variable named by `api_key_env` and never written.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np
import openai

from replay.engines.adapters.base import (
    Adapter,
    EngineValueError,
    StreamParser,
    StreamResult,
    engine_count,
    register,
)
from replay.engines.adapters.body import Body

_CONS = "bdfgklmnprstvz"
_VOW = "aeiou"
_SYL = [c + v for c in _CONS for v in _VOW]  # 70 syllables


def _word(i: int) -> str:
    s = len(_SYL)
    return " " + _SYL[i % s] + _SYL[(i // s) % s] + (_SYL[(i // (s * s)) % s] if i >= s * s else "")


class _NoParser(StreamParser):
    def feed(self, payload: bytes, now_ns: int) -> None:  # the openai package parses
        raise NotImplementedError


@register("openai")
class OpenAIAdapter(Adapter):
    kind = "openai"
    path = "/v1/completions"
    exact_ids = False

    def __init__(
        self,
        url: str,
        model: str | None,
        *,
        api: str = "completions",
        api_key_env: str = "OPENAI_API_KEY",
        **kwargs: Any,
    ):
        super().__init__(url, model, **kwargs)
        if api not in ("completions", "chat"):
            raise ValueError(f"openai adapter: api must be 'completions' or 'chat' (got '{api}')")
        self.api = api
        base = self.url if self.url.rstrip("/").endswith("/v1") else self.url + "/v1"
        self.client = openai.AsyncOpenAI(
            base_url=base,
            api_key=os.environ.get(api_key_env) or "EMPTY",
            timeout=self.limits.request_timeout_s,
            max_retries=0,  # the session's retry policy decides, not the SDK
        )
        self.atoms: list[str] = []  # generated text; pseudo id -(k+1) is atoms[k]
        self._words: dict[int, str] = {}

    def render_ids(self, ids: np.ndarray) -> str:
        words = self._words
        out = []
        for i in np.asarray(ids).tolist():
            if i < 0:
                out.append(self.atoms[-i - 1])
            else:
                w = words.get(i)
                if w is None:
                    w = words[i] = _word(i)
                out.append(w)
        return "".join(out)

    def build_body(self, prompt_ids: np.ndarray, max_tokens: int) -> bytes:
        # The body travels as text through the SDK; the first line carries max_tokens.
        return f"{int(max_tokens)}\n".encode() + self.render_ids(prompt_ids).encode()

    def parser(self, result: StreamResult) -> StreamParser:
        return _NoParser(result)

    async def close(self) -> None:
        await self.client.close()
        await super().close()

    def _atom(self, text: str) -> int:
        self.atoms.append(text)
        return -len(self.atoms)

    async def generate(
        self, body: bytes | Body, result: StreamResult | None = None
    ) -> StreamResult:
        res = result if result is not None else StreamResult()
        head, _, text_b = bytes(body).partition(b"\n")
        max_tokens, prompt = int(head), text_b.decode()
        res.send_ns = time.perf_counter_ns()
        try:
            async with asyncio.timeout(self.limits.request_timeout_s):
                stream: Any
                if self.api == "chat":
                    stream = await self.client.chat.completions.create(
                        model=self.model or "",
                        messages=[{"role": "user", "content": prompt}],
                        max_tokens=max_tokens,
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                else:
                    stream = await self.client.completions.create(
                        model=self.model or "",
                        prompt=prompt,
                        max_tokens=max_tokens,
                        stream=True,
                        stream_options={"include_usage": True},
                    )
                async for chunk in stream:
                    self._absorb(chunk, res, time.perf_counter_ns())
            res.done_ns = time.perf_counter_ns()
            if res.output_tokens < len(res.output_ids):
                res.output_tokens = len(res.output_ids)
        except TimeoutError:
            res.fail("timeout", f"request exceeded {self.limits.request_timeout_s:g} s")
        except asyncio.CancelledError:
            res.fail("cancelled", "cancelled at the end of the run")
            raise
        except EngineValueError as e:
            res.fail("error", str(e))
        except openai.APIStatusError as e:
            res.fail("error", f"HTTP {e.status_code}: {e.message}", e.status_code)
        except openai.APIError as e:
            res.fail("error", f"{type(e).__name__}: {e}")
        return res

    def _absorb(self, chunk: Any, res: StreamResult, now: int) -> None:
        if chunk.choices:
            ch = chunk.choices[0]
            text = ch.delta.content if self.api == "chat" else ch.text
            if text:
                res.output_ids.append(self._atom(text))
                if res.first_token_ns is None:
                    res.first_token_ns = now
                res.chunk_ns.append(now)
            if ch.finish_reason:
                res.finish_reason = ch.finish_reason
        usage = getattr(chunk, "usage", None)
        if usage:
            if usage.prompt_tokens is not None:
                res.prompt_tokens = engine_count(usage.prompt_tokens, "usage.prompt_tokens")
            if usage.completion_tokens:
                res.output_tokens = engine_count(usage.completion_tokens, "usage.completion_tokens")
            details = getattr(usage, "prompt_tokens_details", None)
            res.cached_tokens = engine_count(
                getattr(details, "cached_tokens", 0) or 0,
                "usage.prompt_tokens_details.cached_tokens",
            )
