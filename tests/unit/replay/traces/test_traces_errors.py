"""Every load error and inconsistency names file, line, field and what was expected."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replay.traces import TraceError, load_trace


def req(t: float = 0.0, n_in: int = 100, ids: Any = (1, 2), **extra: Any) -> dict[str, Any]:
    return {"t": t, "type": "s", "in": n_in, "out": 5, "hash_ids": list(ids), **extra}


def session(requests: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": "s", "block_size": 64, "hash_id_scope": "local", "requests": requests, **extra}


GOOD = session([req()])


def error_of(path: Path, **kw: Any) -> str:
    with pytest.raises(TraceError) as info:
        load_trace(path, **kw)
    return str(info.value)


@pytest.mark.parametrize(
    ("bad", "field", "expect"),
    [
        (
            {**GOOD, "requests": [{k: v for k, v in req().items() if k != "in"}]},
            "requests[0].in",
            "missing; expected a non-negative integer (prompt tokens)",
        ),
        (
            {**GOOD, "requests": [{k: v for k, v in req().items() if k != "out"}]},
            "requests[0].out",
            "missing; expected a non-negative integer (output tokens)",
        ),
        (
            {**GOOD, "requests": [{k: v for k, v in req().items() if k != "t"}]},
            "requests[0].t",
            "missing; expected a number",
        ),
        (
            {**GOOD, "requests": [{k: v for k, v in req().items() if k != "hash_ids"}]},
            "requests[0].hash_ids",
            "missing; expected a list of integer block ids",
        ),
        ({k: v for k, v in GOOD.items() if k != "id"}, "id", "missing; expected the session id"),
        (
            {k: v for k, v in GOOD.items() if k != "block_size"},
            "block_size",
            "missing; expected a non-negative integer (tokens per hash block",
        ),
        ({**GOOD, "block_size": 0}, "block_size", "expected a positive integer, got 0"),
        (
            {**GOOD, "requests": [req(n_in=-5)]},
            "requests[0].in",
            "negative length -5; expected a non-negative integer",
        ),
        ({**GOOD, "requests": [{**req(), "out": -1}]}, "requests[0].out", "negative length -1"),
        (
            {**GOOD, "requests": [{**req(), "in": "100"}]},
            "requests[0].in",
            "expected a non-negative integer (prompt tokens), got '100' (str)",
        ),
        ({**GOOD, "requests": [{**req(), "in": 10.5}]}, "requests[0].in", "got 10.5 (float)"),
        (
            {**GOOD, "requests": [{**req(), "t": "soon"}]},
            "requests[0].t",
            "expected a finite number",
        ),
        (
            {**GOOD, "requests": [{**req(), "api_time": "x"}]},
            "requests[0].api_time",
            "expected a number or null",
        ),
        (
            {**GOOD, "requests": [{**req(), "hash_ids": 7}]},
            "requests[0].hash_ids",
            "expected a list of integer block ids, got int",
        ),
        (
            {**GOOD, "requests": [{**req(), "hash_ids": [1, "x"]}]},
            "requests[0].hash_ids",
            "expected a list of integer block ids, found 'x' (str)",
        ),
        (
            {**GOOD, "requests": [{**req(), "hash_ids": [1, 2.5]}]},
            "requests[0].hash_ids",
            "found 2.5 (float)",
        ),
        (
            {**GOOD, "requests": [{**req(), "hash_ids": [1, [2]]}]},
            "requests[0].hash_ids",
            "found [2] (list)",
        ),
        (
            {**GOOD, "requests": "all"},
            "requests",
            "expected a list (the session's requests), got 'all' (str)",
        ),
        ({**GOOD, "requests": [5]}, "requests[0]", "expected a request object, got int"),
        (
            {**GOOD, "hash_id_scope": "team"},
            "hash_id_scope",
            "expected 'local' or 'global', got 'team'",
        ),
        ({**GOOD, "models": 3}, "models", "expected a list of model names"),
        (
            {**GOOD, "requests": [req(), {"t": 1, "type": "subagent", "requests": []}]},
            "requests[1].agent_id",
            "missing; expected the subagent's id",
        ),
        (
            {**GOOD, "requests": [req(), {"t": 1, "type": "subagent", "agent_id": "a"}]},
            "requests[1].requests",
            "missing; expected a list (the subagent's requests)",
        ),
        (
            {**GOOD, "requests": [req(), {"type": "subagent", "agent_id": "a", "requests": []}]},
            "requests[1].t",
            "missing; expected a number (when the subagent starts",
        ),
        (
            {
                **GOOD,
                "requests": [
                    req(),
                    {
                        "t": 1,
                        "type": "subagent",
                        "agent_id": "a",
                        "requests": [{**req(), "in": None}],
                    },
                ],
            },
            "requests[1].requests[0].in",
            "missing",
        ),
    ],
)
def test_fatal_field_errors(
    write_jsonl: Callable[..., Path], bad: dict[str, Any], field: str, expect: str
) -> None:
    path = write_jsonl([GOOD, bad])  # line 2 is the bad one
    message = error_of(path)
    assert message.startswith(f"{path}:2: field '{field}': "), message
    assert expect in message


def test_malformed_json_names_line_and_column(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD, '{"id": "x", "requests": [', GOOD])
    assert error_of(path).startswith(f"{path}:2: field '(line)': malformed JSON: ")
    assert "at column" in error_of(path)


def test_malformed_json_inside_hash_ids(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(
        [
            '{"id":"s","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"in":100,"out":1,"hash_ids":[1,,2]}]}'
        ]
    )
    assert error_of(path).startswith(
        f"{path}:1: field 'requests[0].hash_ids': expected a list of integer block ids, "
        "found text that is not JSON"
    )


def test_trailing_comma_in_hash_ids(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(
        [
            '{"id":"s","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"in":100,"out":1,"hash_ids":[1,2,]}]}'
        ]
    )
    assert (
        "requests[0].hash_ids': expected a list of integer block ids, found a stray comma"
        in error_of(path)
    )


@pytest.mark.parametrize(
    ("ids", "found"),
    [
        (["a]"], "'a]' (str)"),
        ([[1], [2]], "[1] (list)"),
        ([1, {"k": [2]}], "{'k': [2]} (dict)"),
        ([None], "None (NoneType)"),
    ],
)
def test_hash_ids_the_fast_path_cannot_cut(
    write_jsonl: Callable[..., Path], ids: list[Any], found: str
) -> None:
    path = write_jsonl([GOOD, session([req(), req(t=1, ids=ids)])])
    assert error_of(path) == (
        f"{path}:2: field 'requests[1].hash_ids': expected a list of integer block ids, found {found}"
    )


def test_hash_ids_with_objects(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([session([req(ids=[1, {"a": 1}])])])
    assert (
        "field 'requests[0].hash_ids': expected a list of integer block ids, found {'a': 1} (dict)"
        in error_of(path)
    )


def test_hash_id_out_of_range(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(
        [
            '{"id":"s","block_size":64,"hash_id_scope":"local","requests":[{"t":0,"in":100,"out":1,"hash_ids":[1,99999999999999999999]}]}'
        ]
    )
    assert error_of(path) == (
        f"{path}:1: field 'requests[0].hash_ids': expected a list of integer block ids, "
        "found an id that does not fit a signed 64-bit integer"
    )
    moon = write_jsonl(
        ['{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[-99999999999999999999]}'],
        name="m.jsonl",
    )
    assert error_of(moon) == (
        f"{moon}:1: field 'hash_ids': expected a list of integer block ids, "
        "found an id that does not fit a signed 64-bit integer"
    )


def test_unknown_format(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([{"prompt": "hi", "len": 3}])
    message = error_of(path)
    assert message.startswith(
        f"{path}:1: field '(format)': unknown trace format: expected a Weka session"
    )
    assert "found an object with keys: len, prompt" in message
    assert "--format weka|mooncake" in message
    assert "found list" in error_of(write_jsonl([[1, 2]], name="list.jsonl"))


def test_unknown_format_option(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD])
    assert (
        error_of(path, fmt="csv")
        == f"{path}: field '--format': unknown format 'csv'; expected one of weka, mooncake"
    )


def test_forced_format_mismatch(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD])
    assert error_of(path, fmt="mooncake").startswith(f"{path}:1: field 'input_length': missing")


def test_missing_source() -> None:
    message = error_of(Path("no/such/trace.jsonl"))
    assert message.startswith(
        "no/such/trace.jsonl: field 'src': no such file or folder; expected a .jsonl"
    )


def test_empty_file_and_folder(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    assert error_of(empty) == f"{empty}: field '(file)': no records found: the trace is empty"
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "notes.txt").write_text("x")
    assert error_of(folder).startswith(
        f"{folder}: field '(folder)': no trace files here; expected .json"
    )


def test_corrupt_gzip(tmp_path: Path) -> None:
    bad = tmp_path / "trace.jsonl.gz"
    bad.write_bytes(b"this is not gzip at all")
    assert error_of(bad).startswith(f"{bad}: field '(file)': cannot read it as gzip: ")
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress(b'{"id": "s"}\n' * 100)[:-12])
    assert error_of(truncated).startswith(f"{truncated}: field '(file)': cannot read it as gzip")


# -- inconsistencies: collected by default, raised with strict ------------------------------

INCONSISTENT = [
    (
        session([req(n_in=1000, ids=[1, 2, 3])]),
        "requests[0].hash_ids",
        "3 block ids for in=1000 tokens at block_size 64; expected 15 or 16 (one id per 64-token block, the last block may be partial)",
    ),
    (
        session([req(n_in=128, ids=[1])]),
        "requests[0].hash_ids",
        "1 block ids for in=128 tokens at block_size 64; expected 2 (one id per 64-token block, the last block may be partial)",
    ),
    (
        session([req(t=5.0), req(t=1.0)]),
        "requests[1].t",
        "t goes backwards (1.000 s after 5.000 s); requests should be in time order",
    ),
    (
        session([req(type="x")]),
        "requests[0].type",
        "unknown request type 'x'; expected 'n', 's' or 'subagent'",
    ),
    (session([req(think_time=-2)]), "requests[0].think_time", "negative time -2.0; expected >= 0"),
    (
        session([req(), {"t": 1, "type": "subagent", "agent_id": "a", "requests": []}]),
        "requests[1].requests",
        "subagent 'a' has no requests; skipped",
    ),
    (
        session([req(), *[{"t": 1, "type": "subagent", "agent_id": "a", "requests": [req()]}] * 2]),
        "requests[2].agent_id",
        "duplicate agent_id 'a' under 's'",
    ),
    (
        {k: v for k, v in session([req()]).items() if k != "hash_id_scope"},
        "hash_id_scope",
        "missing; assuming 'local' (ids unique per session)",
    ),
]


@pytest.mark.parametrize(("bad", "field", "expect"), INCONSISTENT)
def test_inconsistencies_are_collected(
    write_jsonl: Callable[..., Path], bad: dict[str, Any], field: str, expect: str
) -> None:
    path = write_jsonl([{**GOOD, "id": "first"}, bad])
    trace = load_trace(path)
    assert [str(i) for i in trace.issues] == [f"{path}:2: field '{field}': {expect}"]
    assert trace.issues[0].line == 2 and trace.issues[0].field == field


@pytest.mark.parametrize(("bad", "field", "expect"), INCONSISTENT)
def test_strict_raises_inconsistencies(
    write_jsonl: Callable[..., Path], bad: dict[str, Any], field: str, expect: str
) -> None:
    path = write_jsonl([{**GOOD, "id": "first"}, bad])
    assert error_of(path, strict=True) == f"{path}:2: field '{field}': {expect}"


def test_empty_session_is_reported_not_dropped(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD, {**GOOD, "id": "e", "requests": []}])
    trace = load_trace(path)
    assert len(trace.trajectories) == 1
    assert [str(i) for i in trace.issues] == [
        f"{path}:2: field 'requests': session 'e' has no requests; skipped"
    ]


def test_duplicate_session_ids_are_reported(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([GOOD, GOOD])
    trace = load_trace(path)
    assert len(trace.trajectories) == 2
    assert [str(i) for i in trace.issues] == [
        f"{path}:2: field 'id': duplicate session id 's'; both are kept"
    ]


def test_only_bad_sessions(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl([{**GOOD, "requests": []}])
    assert error_of(path).startswith(
        f"{path}: field '(file)': no usable trajectories (1 issues, first: "
    )


# -- Mooncake --------------------------------------------------------------------------------

MOON = {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}


@pytest.mark.parametrize(
    ("bad", "field", "expect"),
    [
        (
            {k: v for k, v in MOON.items() if k != "output_length"},
            "output_length",
            "missing; expected a non-negative integer (output tokens)",
        ),
        ({**MOON, "input_length": -3}, "input_length", "negative length -3"),
        (
            {k: v for k, v in MOON.items() if k != "timestamp"},
            "timestamp",
            "missing; expected the arrival time in ms (or a 'delay')",
        ),
        ({**MOON, "timestamp": -1}, "timestamp", "expected a non-negative number of ms"),
        (
            {**MOON, "hash_ids": None},
            "hash_ids",
            "missing; expected a list of integer block ids (512-token blocks)",
        ),
        ({**MOON, "hash_ids": "1,2"}, "hash_ids", "expected a list of integer block ids, got str"),
        ({**MOON, "session_id": [1]}, "session_id", "expected a string, got [1] (list)"),
        ("[1, 2]", "(line)", "expected a JSON object (one Mooncake request), got list"),
    ],
)
def test_mooncake_errors(
    write_jsonl: Callable[..., Path], bad: Any, field: str, expect: str
) -> None:
    path = write_jsonl([MOON, bad])
    message = error_of(path)
    assert message.startswith(f"{path}:2: field '{field}': "), message
    assert expect in message


def test_mooncake_inconsistencies(write_jsonl: Callable[..., Path]) -> None:
    rows = [
        {**MOON, "session_id": "a", "timestamp": 500},
        {**MOON, "hash_ids": [1, 2, 3], "session_id": "a", "timestamp": 100},
    ]
    path = write_jsonl(rows)
    assert [str(i) for i in load_trace(path).issues] == [
        f"{path}:2: field 'hash_ids': 3 block ids for input_length=1000 at 512-token blocks; expected 1 or 2",
        f"{path}:2: field 'timestamp': goes backwards within session 'a'",
    ]
    assert error_of(path, strict=True).startswith(f"{path}:2: field 'hash_ids': 3 block ids")
