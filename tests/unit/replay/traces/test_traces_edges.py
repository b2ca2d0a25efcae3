"""Absurd input to `replay traces`: each is refused in one line naming the flag or the file's
line and field, or kept whole, never a traceback (the real command line, real files)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.traces import load_trace

runner = CliRunner()
YEAR_S = 525_600 * 60


def said(result: Any) -> str:
    return " ".join((result.output + result.stderr).split())


def req(t: float = 0.0, n_in: int = 100, ids: Any = (1, 2), **extra: Any) -> dict[str, Any]:
    return {"t": t, "type": "s", "in": n_in, "out": 5, "hash_ids": list(ids), **extra}


def session(requests: list[Any], **extra: Any) -> dict[str, Any]:
    return {"id": "s", "block_size": 64, "hash_id_scope": "local", "requests": requests, **extra}


MOON = {"timestamp": 0, "input_length": 200, "output_length": 10, "hash_ids": [1]}


# -- synth --seed -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ("-1", "--seed -1: must be 0 or more"),
        (
            str(2**63),
            f"--seed {2**63}: must be at most 9223372036854775807 (2^63 - 1, the largest seed "
            "`replay run` and `replay simulate` take)",
        ),
        ("9" * 4000, "must be at most 9223372036854775807"),
    ],
)
def test_synth_refuses_a_seed_outside_0_to_2_63_minus_1(
    tmp_path: Path, seed: str, message: str
) -> None:
    out = tmp_path / "x.jsonl"
    result = runner.invoke(
        app, ["traces", "synth", "--out", str(out), "--trajectories", "2", "--seed", seed]
    )
    assert result.exit_code == 2, result.output
    assert message in said(result) and "Traceback" not in said(result)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_synth_takes_the_largest_seed(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    result = runner.invoke(
        app, ["traces", "synth", "--out", str(out), "--trajectories", "1", "--seed", str(2**63 - 1)]
    )
    assert result.exit_code == 0, result.output
    assert load_trace(out, strict=True).trajectories[0].id == f"synth-{2**63 - 1}-00000"


# -- convert --out onto its own source ----------------------------------------------------------


def _convert(src: str, out: str, to: str = "mooncake") -> Any:
    return runner.invoke(app, ["traces", "convert", src, "--to", to, "--out", out])


def test_convert_refuses_an_out_that_is_its_source_however_spelled(
    tmp_path: Path, write_jsonl: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = write_jsonl([session([req()])], name="src.jsonl")
    before = src.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(src)
    os.link(src, tmp_path / "hard.jsonl")
    monkeypatch.chdir(tmp_path)
    for source, out in [
        ("src.jsonl", "src.jsonl"),
        ("src.jsonl", "./src.jsonl"),
        ("src.jsonl", str(src)),
        ("./src.jsonl", "../" + tmp_path.name + "/src.jsonl"),
        ("src.jsonl", "link.jsonl"),  # out is a symlink to the source
        ("link.jsonl", "src.jsonl"),  # the source is a symlink to out
        ("src.jsonl", "hard.jsonl"),  # a hard link: the same file under another name
    ]:
        for to in ("mooncake", "weka"):
            result = _convert(source, out, to)
            assert result.exit_code == 2, (source, out, result.output)
            text = said(result)
            named = f"--out {Path(out)}: is the source file {source}; choose another path"
            assert named in text, text
            assert "Traceback" not in text
    assert src.read_bytes() == before and (tmp_path / "link.jsonl").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.jsonl", "link.jsonl", "src.jsonl"]


def test_convert_refuses_an_out_inside_its_source_folder(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(session([req()])))
    before = sorted(folder.iterdir())
    for out in (folder / "a.json", folder / "new.jsonl"):
        result = _convert(str(folder), str(out), "weka")
        assert result.exit_code == 2, result.output
        assert f"--out {out}: is inside the source folder {folder}; choose another path" in said(
            result
        )
    assert sorted(folder.iterdir()) == before
    ok = _convert(str(folder), str(tmp_path / "elsewhere.jsonl"), "weka")
    assert ok.exit_code == 0, ok.output


# -- Mooncake arrival times through Weka --------------------------------------------------------


def test_mooncake_to_weka_keeps_arrival_times_and_back(
    tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    src = write_jsonl([MOON, {**MOON, "timestamp": 60000, "input_length": 400, "hash_ids": [2]}])
    weka, back, same = tmp_path / "w.jsonl", tmp_path / "m.jsonl", tmp_path / "m2.jsonl"
    result = _convert(str(src), str(weka), "weka")
    assert result.exit_code == 0, result.output
    assert "kept: each session's arrival time (its first timestamp) as its arrival_s" in said(
        result
    )
    lines = [json.loads(line) for line in weka.read_text().splitlines()]
    assert [(s["arrival_s"], s["requests"][0]["t"]) for s in lines] == [(0.0, 0.0), (60.0, 0.0)]
    assert _convert(str(weka), str(back)).exit_code == 0
    rows = [json.loads(line) for line in back.read_text().splitlines()]
    assert [r["timestamp"] for r in rows] == [0, 60000]
    assert _convert(str(src), str(same)).exit_code == 0  # Mooncake to Mooncake, too
    assert [json.loads(line)["timestamp"] for line in same.read_text().splitlines()] == [0, 60000]


def test_a_sessions_arrival_is_its_earliest_timestamp(write_jsonl: Callable[..., Path]) -> None:
    rows = [
        {**MOON, "session_id": "a", "timestamp": 5000},
        {**MOON, "session_id": "a", "timestamp": 4000},  # backwards: an issue, still kept
    ]
    (tr,) = load_trace(write_jsonl(rows)).trajectories
    assert tr.meta["arrival_s"] == 4.0 and tr.t.tolist() == [1.0, 0.0]


# -- an empty prompt ----------------------------------------------------------------------------


def test_an_empty_prompt_is_refused_naming_session_request_and_field(
    write_jsonl: Callable[..., Path],
) -> None:
    sub = {"t": 1, "type": "subagent", "agent_id": "a", "requests": [req(2, 0, [])]}
    cases = [
        (
            [session([req(0, 0, [])])],
            "1: field 'requests[0].in': session 's', request 0: an empty prompt (in = 0); a "
            "prompt needs at least one token (an engine refuses an empty one with HTTP 400); "
            "fix or remove the request",
        ),
        (
            [session([req()]), {**session([req(), sub]), "id": "t"}],
            "2: field 'requests[1].requests[0].in': session 't/a', request 0: an empty prompt",
        ),
        (
            [MOON, {**MOON, "input_length": 0, "hash_ids": []}],
            "2: field 'input_length': session 'line-2', request 0: an empty prompt "
            "(input_length = 0); a prompt needs at least one token",
        ),
    ]
    for rows, message in cases:
        path = write_jsonl(rows)
        for args in (["--json"], []):
            result = runner.invoke(app, ["traces", "stats", str(path), *args])
            assert result.exit_code == 2, result.output
            assert f"{path}:{message}" in said(result), said(result)


# -- times past a year of the trace's clock ------------------------------------------------------


# A `t` may be absolute (Unix-epoch seconds, as a Mooncake timestamp may be ms): it is held to
# 2^53 ms, and how far a session's times spread to a year; durations to a year.
ABSOLUTE = "is outside 0..9,007,199,254,740.992 s"
YEAR = "is outside 0..31,536,000"
SPAN = "past a year of the trace's clock (31,536,000 s"


@pytest.mark.parametrize(
    ("rows", "where", "bound"),
    [
        ([session([req(0), req(1.5e308), req(1.6e308)])], "1: field 'requests[1].t': 1.5e+308 s",
         ABSOLUTE),
        ([session([req(-5)])], "1: field 'requests[0].t': -5 s", ABSOLUTE),
        ([session([req(0), req(1, think_time=1.5e308)])], "1: field 'requests[1].think_time'",
         YEAR),
        ([session([req(0, api_time=1e300)])], "1: field 'requests[0].api_time'", YEAR),
        ([session([req(0, ttft=1e300)])], "1: field 'requests[0].ttft'", YEAR),
        (
            [session([req(0), {"t": 1e300, "type": "subagent", "agent_id": "a", "requests": []}])],
            "1: field 'requests[1].t'",
            ABSOLUTE,
        ),
        ([session([req(0), req(YEAR_S + 1), req(5)])],
         "1: field 'requests[1].t': the session spans 3.1536e+07 s", SPAN),
        ([MOON, {**MOON, "session_id": "x", "delay": 1e300}], "2: field 'delay'", YEAR),
    ],
)  # fmt: skip
def test_a_time_past_a_year_of_the_trace_clock_is_refused(
    write_jsonl: Callable[..., Path], rows: list[Any], where: str, bound: str
) -> None:
    path = write_jsonl(rows)
    result = runner.invoke(app, ["traces", "stats", "--json", str(path)])
    assert result.exit_code == 2, result.output
    text = said(result)
    assert f"{path}:{where}" in text, text
    assert bound in text
    assert "overflow" not in text and "Traceback" not in text


def test_epoch_second_times_load(write_jsonl: Callable[..., Path]) -> None:
    """A Weka session whose `t` are Unix-epoch seconds loads (the simulator replays large
    absolute times: tests/unit/replay/sim/test_sim_progress.py)."""
    path = write_jsonl([session([req(1.765e9), req(1.765e9 + 60.5)])], name="e.jsonl")
    (tr,) = load_trace(path, strict=True).trajectories
    assert tr.t.tolist() == [1.765e9, 1.765e9 + 60.5]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [session([req(0)], arrival_s=1e300)],
            "1: field 'arrival_s': 1e+300 s is outside 0..9,007,199,254,740.992 s (when the "
            "session arrived, seconds on the trace's clock; 2^53 ms, past which a float no "
            "longer holds whole milliseconds); fix the value",
        ),
        (
            [MOON, {**MOON, "timestamp": 1.5e308}],
            "2: field 'timestamp': 1.5e+308 ms is outside 0..9,007,199,254,740,992 ms",
        ),
        (
            [{**MOON, "session_id": "x"}, {**MOON, "session_id": "x", "timestamp": 4e10}],
            "2: field 'timestamp': session 'x': this row arrives 4e+07 s after its first, past a "
            "year of the trace's clock (31,536,000 s, the longest a replay may run); fix the "
            "timestamps",
        ),
    ],
)
def test_an_arrival_past_2_53_ms_or_a_session_past_a_year_is_refused(
    write_jsonl: Callable[..., Path], rows: list[Any], message: str
) -> None:
    path = write_jsonl(rows)
    result = runner.invoke(app, ["traces", "stats", "--json", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:{message}" in said(result), said(result)


def test_epoch_millisecond_timestamps_load_and_convert_back_exactly(
    tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    stamps = [1_765_000_000_123, 1_765_000_060_456]
    src = write_jsonl([{**MOON, "session_id": "x", "timestamp": ts} for ts in stamps])
    (tr,) = load_trace(src, strict=True).trajectories
    assert tr.t.tolist() == [0.0, 60.333]
    weka, back = tmp_path / "w.jsonl", tmp_path / "m.jsonl"
    assert _convert(str(src), str(weka), "weka").exit_code == 0
    assert _convert(str(weka), str(back)).exit_code == 0
    assert [json.loads(line)["timestamp"] for line in back.read_text().splitlines()] == stamps


def test_mooncake_delays_that_add_up_past_a_year_are_refused(
    write_jsonl: Callable[..., Path],
) -> None:
    half = YEAR_S * 1000 // 2 + 1
    rows = [{k: v for k, v in MOON.items() if k != "timestamp"} | {"session_id": "s", "delay": d}
            for d in (0, half, half)]  # fmt: skip
    path = write_jsonl(rows)
    result = runner.invoke(app, ["traces", "stats", str(path)])
    assert result.exit_code == 2, result.output
    assert (
        f"{path}:3: field 'delay': session 's': its delays add up to 3.1536e+07 s by this row, "
        "past a year of the trace's clock (31,536,000 s, the longest a replay may run); fix "
        "the delays" in said(result)
    )


def test_times_at_a_year_still_load(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(
        [session([req(0), req(YEAR_S, think_time=YEAR_S)], arrival_s=YEAR_S)], name="w.jsonl"
    )
    (tr,) = load_trace(path, strict=True).trajectories
    assert tr.t[-1] == YEAR_S and tr.meta["arrival_s"] == YEAR_S
    moon = write_jsonl([{**MOON, "timestamp": YEAR_S * 1000}], name="m.jsonl")
    assert load_trace(moon, strict=True).trajectories[0].meta["arrival_s"] == YEAR_S
