"""SGLang: the native `/generate` endpoint with `input_ids`.

Request: `input_ids`, `sampling_params` with `max_new_tokens` and `ignore_eos`, `stream`.
Each event carries `output_ids` and `meta_info` (`prompt_tokens`, `completion_tokens`,
`cached_tokens`, `finish_reason` as `{"type": ..., ...}` or null). By default SGLang streams
the *cumulative* `output_ids` (every event repeats all ids so far); with
`--incremental-streaming-output` it streams only the new ids. The parser tells the two apart
by `meta_info.completion_tokens` (the running count), falling back to a prefix check.
Cached tokens need `--enable-cache-report`.
"""

from __future__ import annotations

import numpy as np

from replay.engines.adapters.base import (
    Adapter,
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
        if completion is not None:
            r.output_tokens = engine_count(completion, "meta_info.completion_tokens")
        fr = meta.get("finish_reason")
        if fr:
            r.finish_reason = str(fr.get("type")) if isinstance(fr, dict) else str(fr)
            if isinstance(fr, dict) and fr.get("type") == "abort":
                r.error = f"engine aborted the request: {fr.get('message', '')}".strip()


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
