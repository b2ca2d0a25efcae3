"""Engine adapters, keyed by engine kind: `vllm` and `flashstate` (OpenAI `/v1/completions`
with token ids), `sglang` (`/generate` with `input_ids`), `openai` (a hosted OpenAI-compatible
endpoint through the `openai` package, text prompts)."""

from __future__ import annotations

from replay.engines.adapters import openai_generic, sglang, vllm
from replay.engines.adapters.base import (
    Adapter,
    Limits,
    StreamResult,
    adapter_class,
    adapter_kinds,
    make_adapter,
    make_session,
)
from replay.engines.adapters.body import Body

__all__ = [
    "Adapter",
    "Body",
    "Limits",
    "StreamResult",
    "adapter_class",
    "adapter_kinds",
    "make_adapter",
    "make_session",
    "openai_generic",
    "sglang",
    "vllm",
]
