"""`replay run --capacity-blocks N` (issue 33): the emulated engines' cache size, the same field
and flag as `replay simulate`'s (`EngineShape.capacity_blocks`), carried from the resolved spec
to each emulator's own `--blocks`; refused, naming the flag, where it cannot apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.emulator.config import from_child_args
from replay.runspec.live import RunFlags, finish, resolve_new
from tests.unit.replay.runspec.conftest import said


def test_the_flag_sizes_every_emulated_engine_whatever_the_trace() -> None:
    from replay.traces import load_trace, sample_path

    trace = load_trace(sample_path())
    res = resolve_new(RunFlags(engines="vllm,flashstate", capacity_blocks=900))
    assert [e.capacity_blocks for e in res.spec.engines] == [900, 900]
    # The embedded default's `blocks:` is the bundled sample's only; the flag is the user's.
    for sample in (True, False):
        spec = finish(res, trace, sample, None)
        assert [e.capacity_blocks for e in spec.engines] == [900, 900]
    plain = resolve_new(RunFlags(engines="vllm")).spec
    assert plain.engines[0].capacity_blocks is None  # configs/workloads/default.yaml: null


def test_the_flag_reaches_the_emulators_command_line(emulators_of: Any) -> None:
    seen = emulators_of(
        ["--engines", "vllm,sglang", "--capacity-blocks", "4000", "--replicas", "2"]
    )
    assert [(c.engine, c.blocks) for c in seen] == [("vllm", 4000)] * 2 + [("sglang", 4000)] * 2
    # Each child process gets its config whole (`EmulatorConfig.child_args`).
    assert from_child_args(seen[0].child_args()) == seen[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capacity-blocks", "0"], "--capacity-blocks 0: must be positive"),
        (
            ["--capacity-blocks", str(2**64)],
            f"--capacity-blocks {2**64}: must be at most 9223372036854775807",
        ),
        (
            ["--endpoint", "vllm=http://127.0.0.1:9", "--capacity-blocks", "100"],
            "--capacity-blocks 100: sizes the cache of emulated engines only",
        ),
        (
            ["--engines", "sglang", "--capacity-blocks", "1"],
            "--capacity-blocks 1: engine sglang: policy 'sglang': a cache of 1 blocks",
        ),
        (
            ["--resume", "somewhere", "--capacity-blocks", "5"],
            "with the workload it was started with; drop --capacity-blocks",
        ),
    ],
)
def test_a_capacity_that_cannot_apply_is_refused_naming_the_flag(
    tmp_path: Path, args: list[str], message: str
) -> None:
    res = CliRunner().invoke(app, ["run", *args, "--no-panel"], catch_exceptions=False)
    assert res.exit_code == 2, said(res)
    assert message in said(res)


def test_the_embedded_defaults_blocks_stay_the_bundled_samples_only() -> None:
    from types import SimpleNamespace

    from replay.runspec.live import _capacity

    settings = SimpleNamespace(blocks=1234)
    assert _capacity(None, settings, None) == 1234  # no --trace: the sample
    assert _capacity(None, settings, "elsewhere.jsonl") is None
    assert _capacity(77, settings, "elsewhere.jsonl") == 77  # the flag wins, on any trace
    assert _capacity(None, None, None) is None
