"""SGLang: the native `/generate` endpoint with `input_ids`.

Request: `input_ids`, `sampling_params` with `max_new_tokens` and `ignore_eos`, `stream`.
Each event carries `output_ids` and `meta_info` (`prompt_tokens`, `completion_tokens`,
`cached_tokens`, `finish_reason` as `{"type": ..., ...}` or null). By default SGLang streams
the *cumulative* `output_ids` (every event repeats all ids so far); with
`--incremental-streaming-output` it streams only the new ids. The parser tells the two apart
by `meta_info.completion_tokens` (the running count), falling back to a prefix check.
Cached tokens need `--enable-cache-report`.

Cached tokens by tier: SGLang 0.5.22 adds `meta_info.cached_tokens_details` to every event of
`/generate` unasked (no request field: `GenerateReqInput` has none; the OpenAI routes answer
it, as `sglext.cached_tokens_details`, only to `return_cached_tokens_details`,
entrypoints/openai/protocol.py:378, :905, :452-461, utils.py:295-307): `{"device", "host"}`, with `"storage"` where a storage backend is on, or null for
a request with no cached tokens (srt/managers/scheduler_components/output_streamer.py:86-117,
:510; srt/managers/tokenizer_manager.py:2567-2574), split once at the first prefill chunk
(srt/managers/schedule_batch.py:221-255, :2850-2869). Without HiCache it is `{"device": n,
"host": 0}`. The parser reads `host` and `storage` into the result's `cached_host` and
`cached_external` (a null details: 0 and 0), so a record has the tier columns exactly when the
engine sent the field.
"""

from __future__ import annotations

import numpy as np

from replay.engines.adapters.base import (
    Adapter,
    EngineValueError,
    StreamParser,
    StreamResult,
    engine_count,
    register,
)
from replay.engines.adapters.body import Body, json_body


class SglangParser(StreamParser):
    def __init__(self, result: StreamResult):
        super().__init__(result)
        self.mode: str | None = None  # "cumulative" | "incremental", fixed once known

    def _mode_for(self, ids: list[int], completion: int | None) -> str:
        acc = self.result.output_ids
        if completion is not None:
            if completion == len(acc) + len(ids) and (not acc or completion != len(ids)):
                return "incremental"
            if completion == len(ids):
                return "cumulative"
        if acc and len(ids) >= len(acc) and ids[: len(acc)] == acc:
            return "cumulative"
        return "incremental"

    def feed(self, payload: bytes, now_ns: int) -> None:
        ev = self.event(payload, "output_ids")
        if ev is None:
            return
        r = self.result
        meta = ev.get("meta_info") or {}
        completion = meta.get("completion_tokens")
        ids = ev.get("output_ids") or []
        if ids:
            # The first event cannot tell the modes apart (both carry the same ids); decide
            # on the first event where they differ and keep that decision.
            mode = self.mode or self._mode_for(ids, completion)
            if self.mode is None and r.output_ids:
                self.mode = mode
            before = len(r.output_ids)
            if mode == "cumulative":
                r.output_ids[before:] = ids[before:]
            else:
                r.output_ids.extend(ids)
            self._tokens(len(r.output_ids) - before, now_ns)
        if "prompt_tokens" in meta:
            r.prompt_tokens = engine_count(meta["prompt_tokens"], "meta_info.prompt_tokens")
        if "cached_tokens" in meta:
            r.cached_field_seen = True
            r.cached_tokens = engine_count(meta["cached_tokens"] or 0, "meta_info.cached_tokens")
        if "cached_tokens_details" in meta:
            self._details(meta["cached_tokens_details"])
        if completion is not None:
            r.output_tokens = engine_count(completion, "meta_info.completion_tokens")
        fr = meta.get("finish_reason")
        if fr:
            r.finish_reason = str(fr.get("type")) if isinstance(fr, dict) else str(fr)
            if isinstance(fr, dict) and fr.get("type") == "abort":
                r.error = f"engine aborted the request: {fr.get('message', '')}".strip()

    def _details(self, details: object) -> None:
        """`meta_info.cached_tokens_details`: host and storage tokens, each a count, together
        at most the event's `cached_tokens` (EngineValueError, by name, otherwise)."""
        r, name = self.result, "meta_info.cached_tokens_details"
        if details is None:
            r.cached_host, r.cached_external = 0, 0
            return
        if not isinstance(details, dict):
            raise EngineValueError(
                f"the engine sent {name} = {str(details)[:40]!r}: not an object; "
                "the request is recorded as an error"
            )
        host = engine_count(details.get("host", 0), f"{name}.host")
        storage = engine_count(details.get("storage", 0), f"{name}.storage")
        if "device" in details:
            engine_count(details["device"], f"{name}.device")
        if r.cached_tokens is None or host + storage > r.cached_tokens:
            raise EngineValueError(
                f"the engine sent {name} with host {host} + storage {storage} tokens, more "
                f"than its meta_info.cached_tokens ({r.cached_tokens}); "
                "the request is recorded as an error"
            )
        r.cached_host, r.cached_external = host, storage


@register("sglang")
class SglangAdapter(Adapter):
    kind = "sglang"
    path = "/generate"

    def build_body(self, prompt_ids: np.ndarray, max_tokens: int) -> bytes:
        return bytes(self.request_body(prompt_ids, max_tokens))

    def request_body(self, prompt_ids: np.ndarray, max_tokens: int) -> Body:
        """The ids written in slices as the request is sent (`Body`)."""
        body = {
            "input_ids": None,
            "sampling_params": {
                "max_new_tokens": int(max_tokens),
                "min_new_tokens": int(max_tokens),
                "ignore_eos": True,
                "temperature": 1.0,
            },
            "stream": True,
        }
        return json_body(body, "input_ids", prompt_ids)

    def parser(self, result: StreamResult) -> StreamParser:
        return SglangParser(result)
