"""`replay.traces.convert`: Weka ⇄ Mooncake, and what survives the trip."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from replay.traces import TraceError, load_trace
from replay.traces.convert import write_mooncake, write_weka
from replay.traces.synth import SynthConfig, write_synth


def req(t: float, n_in: int, ids: list[int], **extra: Any) -> dict[str, Any]:
    return {"t": t, "type": "s", "in": n_in, "out": 5, "hash_ids": ids, **extra}


def session(sid: str, requests: list[Any]) -> dict[str, Any]:
    return {"id": sid, "block_size": 64, "hash_id_scope": "local", "requests": requests}


@pytest.fixture
def synth_trace(tmp_path: Path) -> Path:
    path = tmp_path / "synth.jsonl.gz"
    write_synth(path, SynthConfig(n_trajectories=6, seed=4, scale=16))
    return path


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_weka_round_trip_is_exact(synth_trace: Path, tmp_path: Path) -> None:
    a = load_trace(synth_trace, strict=True)
    out = tmp_path / "again.jsonl"
    assert write_weka(a, out) == 6
    b = load_trace(out, strict=True)
    pairs = list(zip(a.walk(), b.walk(), strict=True))
    assert len(pairs) > 6
    for x, y in pairs:
        assert (x.id, x.parent_id, x.spawn_index, x.namespace) == (
            y.id,
            y.parent_id,
            y.spawn_index,
            y.namespace,
        )
        assert abs(x.spawn_t - y.spawn_t) < 2e-3
        assert np.array_equal(x.hash_ids, y.hash_ids) and np.array_equal(
            x.hash_offsets, y.hash_offsets
        )
        assert np.allclose(x.t, y.t, atol=2e-3) and np.array_equal(x.input_tokens, y.input_tokens)
        assert np.array_equal(x.stop, y.stop) and np.array_equal(x.request_type, y.request_type)
        assert np.allclose(x.api_time, y.api_time, equal_nan=True)


def test_weka_to_mooncake(synth_trace: Path, tmp_path: Path) -> None:
    weka = load_trace(synth_trace, strict=True)
    out = tmp_path / "moon.jsonl"
    n = write_mooncake(weka, out)
    assert n == weka.num_requests
    rows = rows_of(out)
    stamps = [r["timestamp"] for r in rows]
    assert stamps == sorted(stamps)
    moon = load_trace(out, strict=True)  # strict: every row has ceil(in/512) ids
    assert moon.format == "mooncake" and moon.block_size == 512
    by_id = {tr.id: tr for tr in weka.walk()}
    assert {tr.id for tr in moon.trajectories} == set(by_id)
    for m in moon.trajectories:
        w = by_id[m.id]
        assert np.array_equal(m.input_tokens, w.input_tokens) and np.array_equal(
            m.output_tokens, w.output_tokens
        )
        assert np.allclose(m.t, w.t - w.t[0], atol=2e-3)
        # Prefix relations survive at 512-token granularity, both ways.
        for i in range(1, m.num_requests):
            small_a, small_b = w.blocks(i - 1), w.blocks(i)
            n_small = min(len(small_a), len(small_b))
            diff = np.flatnonzero(small_a[:n_small] != small_b[:n_small])
            lcp_small = int(diff[0]) if diff.size else n_small
            big_a, big_b = m.blocks(i - 1), m.blocks(i)
            n_big = min(len(big_a), len(big_b))
            diff = np.flatnonzero(big_a[:n_big] != big_b[:n_big])
            lcp_big = int(diff[0]) if diff.size else n_big
            full_groups = lcp_small // 8
            assert lcp_big >= full_groups
            assert lcp_big <= -(-lcp_small // 8)  # never more than the small blocks allow


def test_subagent_rows_on_the_root_clock(tmp_path: Path, write_jsonl: Callable[..., Path]) -> None:
    sub = {"t": 10.0, "type": "subagent", "agent_id": "a", "requests": [req(12.0, 64, [1])]}
    path = write_jsonl(
        [session("s", [req(0.0, 64, [1]), sub, req(20.0, 100, [1, 2], think_time=4.0)])]
    )
    out = tmp_path / "m.jsonl"
    write_mooncake(load_trace(path), out)
    rows = rows_of(out)
    assert [(r["session_id"], r["timestamp"]) for r in rows] == [
        ("s", 0),
        ("s/a", 12000),
        ("s", 20000),
    ]
    assert rows[2]["delay"] == 4000 and "delay" not in rows[0]


def test_local_namespaces_never_share_512_ids(
    tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    ids = list(range(1, 17))
    path = write_jsonl([session("a", [req(0, 1024, ids)]), session("b", [req(0, 1024, ids)])])
    out = tmp_path / "m.jsonl"
    write_mooncake(load_trace(path), out)
    a, b = (r["hash_ids"] for r in rows_of(out))
    assert len(a) == len(b) == 2 and not set(a) & set(b)


def test_mooncake_weka_mooncake_keeps_rows(
    tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    rows = [
        {
            "timestamp": 0,
            "session_id": "x",
            "input_length": 1000,
            "output_length": 5,
            "hash_ids": [11, 12],
        },
        {
            "timestamp": 700,
            "session_id": "y",
            "input_length": 300,
            "output_length": 2,
            "hash_ids": [40],
        },
        {
            "timestamp": 5000,
            "session_id": "x",
            "input_length": 1600,
            "output_length": 9,
            "hash_ids": [11, 12, 13, 14],
        },
    ]
    src = write_jsonl(rows)
    weka_path, back = tmp_path / "w.jsonl", tmp_path / "m.jsonl"
    write_weka(load_trace(src), weka_path)
    weka = load_trace(weka_path, strict=True)
    assert weka.format == "weka" and weka.block_size == 512
    assert all(tr.hash_scope == "global" for tr in weka.walk())
    write_mooncake(weka, back)
    again = [{k: v for k, v in r.items() if k != "delay"} for r in rows_of(back)]
    # Each session's arrival survives as its arrival_s: y's row stays at 700 ms.
    assert again == rows  # stable sort by time


def test_reblock_needs_a_divisor_of_512(tmp_path: Path, write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([{**session("s", [req(0, 100, [1])]), "block_size": 100}])
    with pytest.raises(TraceError) as info:
        write_mooncake(load_trace(path), tmp_path / "m.jsonl")
    assert str(info.value) == (
        f"{path}:1: field 'block_size': cannot re-block 100-token blocks into 512-token "
        "blocks (512 must be a multiple of the block size)"
    )
