"""Loading real files: Weka (.jsonl, .gz, folder), Mooncake, `datasets`, nesting, scopes."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replay.traces import load_trace, sample_path
from replay.traces.hf import load_dataset_files


def req(t: float, n_in: int, ids: list[int], out: int = 10, **extra: Any) -> dict[str, Any]:
    return {"t": t, "type": "s", "in": n_in, "out": out, "hash_ids": ids, **extra}


def session(sid: str, requests: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "block_size": 64, "hash_id_scope": "local", "requests": requests, **extra}


NESTED = session(
    "s1",
    [
        req(0.0, 100, [1, 2], api_time=1.0, ttft=0.5, stop="tool_use"),
        req(2.0, 200, [1, 3, 4, 5], stop="tool_use"),
        {
            "t": 3.0,
            "type": "subagent",
            "agent_id": "a1",
            "subagent_type": "Explore",
            "status": "completed",
            "requests": [
                req(3.5, 70, [1, 6]),
                {"t": 4.0, "type": "subagent", "agent_id": "a2", "requests": [req(4.25, 10, [9])]},
                req(5.0, 130, [1, 6, 10]),
            ],
        },
        req(9.0, 300, [1, 3, 4, 5, 7], think_time=3.0),
    ],
    models=["m"],
)


def test_weka_jsonl_nested_subagents(write_jsonl: Callable[..., Path]) -> None:
    trace = load_trace(write_jsonl([NESTED]))
    assert trace.format == "weka" and trace.block_size == 64 and trace.issues == []
    (root,) = trace.trajectories
    assert [tr.id for tr in trace.walk()] == ["s1", "s1/a1", "s1/a1/a2"]
    # The parent's columns exclude the subagent entry.
    assert root.t.tolist() == [0.0, 2.0, 9.0]
    assert root.input_tokens.tolist() == [100, 200, 300]
    assert root.blocks(1).tolist() == [1, 3, 4, 5] and root.blocks(2).tolist() == [1, 3, 4, 5, 7]
    assert root.api_time[0] == 1.0 and np.isnan(root.api_time[1]) and root.think_time[2] == 3.0
    (a1,) = root.subagents
    assert (a1.parent_id, a1.agent_id, a1.subagent_type) == ("s1", "a1", "Explore")
    # Spawned at 3.0 s: two parent requests start at or before it.
    assert a1.spawn_t == 3.0 and a1.spawn_index == 2
    assert a1.t.tolist() == [0.5, 2.0]  # own clock: session clock minus the spawn time
    assert a1.blocks(1).tolist() == [1, 6, 10]
    assert a1.meta["status"] == "completed"
    (a2,) = a1.subagents
    assert a2.parent_id == "s1/a1" and a2.spawn_t == 1.0 and a2.spawn_index == 1
    assert a2.t.tolist() == [0.25]
    assert root.num_requests + a1.num_requests + a2.num_requests == trace.num_requests == 6


def test_subagent_times_already_relative(write_jsonl: Callable[..., Path]) -> None:
    """Nested times that start before the entry's t are read as relative to the subagent."""
    sub = {
        "t": 30.0,
        "type": "subagent",
        "agent_id": "x",
        "requests": [req(0.0, 64, [5]), req(4.0, 128, [5, 6])],
    }
    trace = load_trace(
        write_jsonl([session("s", [req(0.0, 64, [1]), sub, req(60.0, 128, [1, 2])])])
    )
    (child,) = trace.trajectories[0].subagents
    assert child.t.tolist() == [0.0, 4.0] and child.spawn_t == 30.0 and child.spawn_index == 1


def test_hash_scope_namespaces(write_jsonl: Callable[..., Path]) -> None:
    local = session(
        "L",
        [
            req(0, 64, [1]),
            {"t": 1, "type": "subagent", "agent_id": "a", "requests": [req(1, 64, [1])]},
        ],
    )
    glob = session("G", [req(0, 64, [1])], hash_id_scope="global")
    trace = load_trace(write_jsonl([local, glob]))
    by_id = {tr.id: tr for tr in trace.walk()}
    # Local scope: a subagent shares its root session's namespace (it sees the parent's blocks).
    assert by_id["L"].namespace == by_id["L/a"].namespace == "L"
    assert by_id["L"].hash_scope == "local"
    assert by_id["G"].namespace == "global" and by_id["G"].hash_scope == "global"


def test_gzip_matches_plain_and_sha256(write_jsonl: Callable[..., Path], tmp_path: Path) -> None:
    plain = write_jsonl([NESTED, session("s2", [req(0, 64, [1])])])
    gz = tmp_path / "trace.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = load_trace(plain), load_trace(gz)
    assert [t.id for t in a.walk()] == [t.id for t in b.walk()]
    for x, y in zip(a.walk(), b.walk(), strict=True):
        assert np.array_equal(x.hash_ids, y.hash_ids) and np.array_equal(x.t, y.t)
    # The digest is of the file as stored (what sha256sum prints).
    assert a.sha256 == hashlib.sha256(plain.read_bytes()).hexdigest()
    assert b.sha256 == hashlib.sha256(gz.read_bytes()).hexdigest()


def test_folder_of_json_files(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "b.json").write_text(json.dumps(NESTED, indent=2))  # pretty-printed: one session
    (folder / "a.json").write_text(json.dumps(session("s0", [req(0, 64, [7])])))
    (folder / "c.json").write_text(
        "\n".join(json.dumps(session(f"l{i}", [req(0, 64, [i])])) for i in range(2))
    )  # JSON lines in a .json file
    (folder / "README.md").write_text("not a trace")
    trace = load_trace(folder)
    assert [tr.id for tr in trace.trajectories] == ["s0", "s1", "l0", "l1"]
    assert trace.trajectories[1].subagents[0].subagents[0].id == "s1/a1/a2"


def test_mooncake_grouped_by_session(write_jsonl: Callable[..., Path]) -> None:
    rows = [
        {
            "timestamp": 1000,
            "input_length": 1000,
            "output_length": 5,
            "hash_ids": [1, 2],
            "session_id": "x",
        },
        {"timestamp": 1500, "input_length": 600, "output_length": 7, "hash_ids": [9, 10]},
        {
            "timestamp": 4000,
            "input_length": 1100,
            "output_length": 5,
            "hash_ids": [1, 2, 3],
            "session_id": "x",
            "delay": 2500,
        },
    ]
    trace = load_trace(write_jsonl(rows))
    assert trace.format == "mooncake" and trace.block_size == 512 and trace.issues == []
    x, single = trace.trajectories
    assert x.id == "x" and single.id == "line-2"
    assert x.t.tolist() == [0.0, 3.0] and x.input_tokens.tolist() == [1000, 1100]
    assert x.blocks(1).tolist() == [1, 2, 3] and x.think_time[1] == 2.5
    assert x.namespace == "global" and x.block_size == 512


def test_mooncake_delays_without_timestamps(write_jsonl: Callable[..., Path]) -> None:
    rows = [
        {"session_id": "s", "delay": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]},
        {
            "session_id": "s",
            "delay": 1500,
            "input_length": 1024,
            "output_length": 1,
            "hash_ids": [1, 2],
        },
    ]
    (tr,) = load_trace(write_jsonl(rows)).trajectories
    assert tr.t.tolist() == [0.0, 1.5] and tr.gap_before(1) == 1.5


def test_datasets_path_matches_ours(write_jsonl: Callable[..., Path]) -> None:
    """The hub path differs only in the `load_dataset` call; here `datasets` streams local JSON."""
    path = write_jsonl([NESTED, session("s2", [req(0, 64, [1]), req(1, 70, [1, 2])])])
    ours, theirs = load_trace(path), load_dataset_files([str(path)])
    assert theirs.format == "weka" and theirs.issues == []
    for x, y in zip(ours.walk(), theirs.walk(), strict=True):
        assert x.id == y.id and x.spawn_index == y.spawn_index
        assert np.array_equal(x.hash_ids, y.hash_ids) and np.array_equal(
            x.hash_offsets, y.hash_offsets
        )
        assert np.array_equal(x.t, y.t) and np.array_equal(x.input_tokens, y.input_tokens)


def test_datasets_path_mooncake(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([{"timestamp": 0, "input_length": 512, "output_length": 3, "hash_ids": [4]}])
    (tr,) = load_dataset_files([str(path)]).trajectories
    assert tr.blocks(0).tolist() == [4] and tr.block_size == 512


def test_hub_id_goes_through_datasets(tmp_path: Path) -> None:
    """`hf:owner/name` reaches `datasets.load_dataset`; offline, it fails with a clear error."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path))
    code = "from replay.traces import load_trace, TraceError\ntry:\n    load_trace('hf:nobody/no-such-trace')\nexcept TraceError as e:\n    print(e)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        "nobody/no-such-trace: field 'src': not a local file or folder, and `datasets` could "
        "not open it as a dataset: "
    ), out.stdout


def test_ids_fit_int32_else_int64(write_jsonl: Callable[..., Path]) -> None:
    big = 2**40
    trace = load_trace(
        write_jsonl([session("a", [req(0, 64, [5])]), session("b", [req(0, 128, [big, big + 1])])])
    )
    a, b = trace.trajectories
    assert a.hash_ids.dtype == np.int32
    assert b.hash_ids.dtype == np.int64 and b.blocks(0).tolist() == [big, big + 1]


def test_whitespace_and_key_order_do_not_matter(write_jsonl: Callable[..., Path]) -> None:
    line = (
        '{"requests": [ {"hash_ids" : [ 1 , 2 ], "in": 100, "out": 1, "t": 0},'
        ' {"t": 1, "in": 150, "out": 1, "hash_ids":[1, 2,3 ]} ],'
        ' "block_size": 64, "id": "w", "hash_id_scope": "local"}'
    )
    (tr,) = load_trace(write_jsonl([line])).trajectories
    assert tr.blocks(0).tolist() == [1, 2] and tr.blocks(1).tolist() == [1, 2, 3]


def test_bundled_sample() -> None:
    path = sample_path()
    assert path.name == "sample-weka.jsonl.gz" and path.stat().st_size < 3_000_000
    trace = load_trace(path, strict=True)
    # Enough trajectories that the embedded default's 48 sessions need none twice.
    assert 144 <= len(trace.trajectories) <= 300 and trace.issues == []
    assert all(tr.meta.get("token_scale") == 16 for tr in trace.trajectories)
    prompts = np.concatenate([tr.input_tokens for tr in trace.walk()])
    assert 10_000 <= prompts.mean() <= 20_000
    assert any(tr.subagents for tr in trace.trajectories)


@pytest.mark.parametrize("name", ["trace.jsonl", "trace.jsonl.gz"])
def test_synth_output_round_trips_through_loader(tmp_path: Path, name: str) -> None:
    from replay.traces.synth import SynthConfig, write_synth

    path = tmp_path / name
    write_synth(path, SynthConfig(n_trajectories=3, seed=1, scale=32))
    trace = load_trace(path, strict=True)
    assert len(trace.trajectories) == 3 and trace.num_requests > 0


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_lines_across_read_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, name: str
) -> None:
    """Lines longer than one read, blank lines and a missing final newline all come through
    with the right line numbers and the file's own sha256."""
    import replay.traces.sources as sources

    monkeypatch.setattr(sources, "CHUNK", chunk)
    lines = [
        json.dumps(session(f"s{i}", [req(0, 64 * (i + 1), list(range(1, i + 2)))]))
        for i in range(4)
    ]
    text = (lines[0] + "\n\n" + lines[1] + "\n   \n" + lines[2] + "\n" + lines[3]).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    trace = load_trace(path)
    assert [(tr.id, tr.source_line) for tr in trace.trajectories] == [
        ("s0", 1),
        ("s1", 3),
        ("s2", 5),
        ("s3", 6),
    ]
    assert trace.trajectories[3].blocks(0).tolist() == [1, 2, 3, 4]
    assert trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_unreachable_hub_fails_fast_with_the_reason(tmp_path: Path) -> None:
    """Without offline mode a hub id is looked up once (not retried for ~40 s by
    `datasets`); here the hub is a closed local port."""
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path))
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(var, None)
    code = (
        "import time\nfrom replay.traces import load_trace, TraceError\nt = time.monotonic()\n"
        "try:\n    load_trace('hf:nobody/no-such-trace')\nexcept TraceError as e:\n"
        "    print(round(time.monotonic() - t, 1), e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seconds, _, message = out.stdout.partition(" ")
    assert float(seconds) < 12, out.stdout
    assert message.startswith(
        "nobody/no-such-trace: field 'src': could not reach the Hugging Face hub"
    ), out.stdout
