"""A trace's token scale: written by the synthesizer, kept by the loader, resolved against
flags and config (the trace is the source of truth), and an undeclared scaled-looking trace
refused with what to pass."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from replay.traces import load_trace
from replay.traces.errors import TraceError
from replay.traces.scale import (
    TraceScaleError,
    declared_scale,
    looks_scaled,
    resolve_token_scale,
)
from replay.traces.synth import SynthConfig, synth_lines, write_synth


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(ln + b"\n" for ln in lines))
    return path


def test_synth_declares_its_scale_and_the_loader_keeps_it(tmp_path: Path) -> None:
    scaled, full = tmp_path / "s.jsonl", tmp_path / "f.jsonl"
    write_synth(scaled, SynthConfig(n_trajectories=2, seed=1, scale=16))
    write_synth(full, SynthConfig(n_trajectories=2, seed=1, block_size=1024))
    a, b = load_trace(scaled, strict=True), load_trace(full, strict=True)
    assert declared_scale(a) == 16 and resolve_token_scale(a, None) == 16
    assert resolve_token_scale(a, 16) == 16
    assert declared_scale(b) is None and not looks_scaled(b)
    assert resolve_token_scale(b, None) == 1.0 and resolve_token_scale(b, 4) == 4


def test_a_contradicting_flag_is_an_error_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_synth(path, SynthConfig(n_trajectories=2, seed=1, scale=16))
    with pytest.raises(TraceScaleError, match=r"--token-scale 8 contradicts trace .*16"):
        resolve_token_scale(load_trace(path), 8)


def test_an_undeclared_scaled_looking_trace_says_what_to_pass(tmp_path: Path) -> None:
    lines = [
        ln.replace(b',"token_scale":16', b"")
        for ln in synth_lines(SynthConfig(n_trajectories=3, seed=1, scale=16))
    ]
    trace = load_trace(_write(tmp_path / "old.jsonl", lines))
    assert declared_scale(trace) is None and looks_scaled(trace)
    with pytest.raises(TraceScaleError, match=r"pass --token-scale N .* or --token-scale 1"):
        resolve_token_scale(trace, None)
    assert resolve_token_scale(trace, 16) == 16
    with pytest.raises(TraceScaleError, match="must be a finite number of at least 1"):
        resolve_token_scale(trace, 0.5)


def test_sessions_with_different_scales_are_refused(tmp_path: Path) -> None:
    a = next(synth_lines(SynthConfig(n_trajectories=1, seed=1, scale=16)))
    b = next(synth_lines(SynthConfig(n_trajectories=1, seed=2, scale=8)))
    trace = load_trace(_write(tmp_path / "mixed.jsonl", [a, b]))
    with pytest.raises(TraceScaleError, match=r"different token scales \(8, 16\)"):
        declared_scale(trace)


def test_a_bad_scale_field_names_the_line_and_field(tmp_path: Path) -> None:
    line = next(synth_lines(SynthConfig(n_trajectories=1, seed=1, scale=16)))
    obj = orjson.loads(line)
    obj["token_scale"] = 0.5
    path = _write(tmp_path / "bad.jsonl", [orjson.dumps(obj)])
    with pytest.raises(
        TraceError, match=r"bad\.jsonl:1: field 'token_scale': expected a number ≥ 1"
    ):
        load_trace(path)
    obj["token_scale"] = "big"
    _write(path, [orjson.dumps(obj)])
    with pytest.raises(TraceError, match=r"field 'token_scale'"):
        load_trace(path)
