"""experiments/table4_host.py (issue 34, point 6): every bad flag is named, and a tiny run
prints the table's row with each system's figures and the host's share of the hits."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_experiment


def _script() -> ModuleType:
    return load_experiment("table4_host")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sessions", "4,x"], "--sessions '4,x': expected A-B or a comma list"),
        (["--sessions", "0"], "--sessions '0': expected A-B"),
        (["--variant", "novariant"], "--variant 'novariant': expected NAME:POLICY:ITEMS"),
        (["--variant", "x:nope:"], "unknown policy 'nope'"),
        (["--variant", "x:vllm:gate=all"], "gate must be one of prompt, prompt+output"),
        (["--variant", "x:vllm:bw=fast"], "bw must be a positive number of GB"),
        (["--variant", "x:vllm:host=0"], "host must be a positive number of GB"),
        (["--variant", "x:vllm:ext=-2"], "ext must be a positive number of GB"),
        (["--variant", "x:vllm:colour=blue"], "policy 'vllm' has no option colour"),
        (["--variant", "x:vllm:admission"], "'admission' is not KEY=VALUE"),
        (["--variant", "x:flashstate:host_states=some"], "host_states must be all or leaves"),
    ],
)
def test_a_bad_flag_is_named(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _script().main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("table4_host: ") and message in err


@pytest.mark.slow
def test_a_tiny_run_prints_a_row_per_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.json"
    argv = ["--sessions", "2", "--variant", "small:vllm:host=64,ext=64", "--json", str(out)]
    argv += ["--variant", "leaves:flashstate:host_states=leaves"]
    assert _script().main(argv) == 0
    rows = json.loads(out.read_text())
    assert [r["policy"] for r in rows] == ["flashstate", "vllm", "sglang", "vllm", "flashstate"]
    assert rows[3]["variant"] == "small" and "external_hit" in rows[3]
    from replay.sim.cache.tiers import HostTier

    undone = HostTier.evicted_state  # the what-if is undone: the tier's own method again
    assert (undone.__module__, undone.__qualname__) == (
        HostTier.__module__,
        "HostTier.evicted_state",
    )
    assert "external_hit" in rows[0] and rows[0]["external_hit"] == 0.0
    for r in rows:
        assert r["sessions"] == 2 and r["out_min"] > 0 and 0 <= r["host_hit"] <= r["hit"] <= 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| 2 |"))
    assert line.count(" / ") >= 4 * 3  # five systems in each of three columns
