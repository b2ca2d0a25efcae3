"""experiments/sglang_tight_residue.py (issue 34's tight held-out case): every bad flag is
named, a native run of another case is refused, and the fine-block profile keeps both of
SGLang's pools."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from replay.profiles import load_profile
from replay.sim.native.sglang_cache import pool_sizes
from tests.scripts import load_experiment


def _script() -> ModuleType:
    return load_experiment("sglang_tight_residue")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sessions", "0"], "--sessions 0: must be at least 1"),
        (["--blocks", "0"], "--blocks 0: must be at least 1"),
        (["--minutes", "-1"], "--minutes -1: must be positive"),
        (["--native-run", "no/such/run"], "--native-run no/such/run: no requests.parquet there"),
        (["--trace", "no/such.jsonl"], "--trace no/such.jsonl: no such file"),
    ],
)
def test_a_bad_flag_is_named(args: list[str], message: str, capsys) -> None:
    assert _script().main(args) == 2
    assert message in capsys.readouterr().err


def test_a_native_run_of_another_case_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "requests.parquet").write_bytes(b"")
    config = {"policy": "sglang-native", "sessions": 8, "capacity_blocks": 300}
    config |= {"duration_s": 1800.0, "timing": "engine", "seed": 0}
    (tmp_path / "manifest.json").write_text(json.dumps({"config": config}))
    assert _script().main(["--native-run", str(tmp_path), "--seed", "1"]) == 2
    assert "its seed is 0, this case's 1" in capsys.readouterr().err


def test_the_fine_blocks_keep_both_pools(tmp_path: Path) -> None:
    path, k = _script()._fine_profile("glm-5.3-flash", tmp_path)
    coarse, fine = load_profile("glm-5.3-flash"), load_profile(path)
    assert (k, fine.block_tokens) == (17, 256)
    assert fine.capacity_tokens == coarse.capacity_tokens
    sizes = [
        pool_sizes(blocks, p.block_tokens, p.checkpoint_blocks, 0.9, None)
        for blocks, p in ((300, coarse), (300 * k, fine))
    ]
    assert sizes[0] == sizes[1]
