"""experiments/sglang_native_pressure.py (issue 22's SGLang check): every bad flag is named, and
a tiny run prints SGLang's own row and one row per variant (skipped without SGLang)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from replay.sim.native.worker import NativeError, Worker
from replay.traces import sample_path
from tests.required import SGLANG, missing
from tests.scripts import load_experiment

ROOT = Path(__file__).resolve().parents[4]


def _script() -> ModuleType:
    return load_experiment("sglang_native_pressure")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "no/such.jsonl"], "--trace no/such.jsonl: no such file"),
        (["--sessions", "0"], "--sessions 0: must be at least 1"),
        (["--minutes", "-1"], "--minutes -1.0: must be positive"),
    ],
)
def test_a_bad_flag_is_named(args: list[str], message: str, capsys) -> None:
    assert _script().main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.vllm
def test_a_tiny_run_prints_sglangs_row_and_each_variant(capsys) -> None:
    try:
        Worker.start(engine="sglang").close()
    except NativeError as e:
        missing(str(e), SGLANG)
    mod = _script()
    args = ["--trace", str(sample_path()), "--sessions", "2", "--minutes", "3"]
    assert mod.main(args) == 0
    out = capsys.readouterr().out
    assert "| sglang-native (SGLang's own cache) |" in out
    for label in mod.VARIANTS:
        assert f"| {label} |" in out
