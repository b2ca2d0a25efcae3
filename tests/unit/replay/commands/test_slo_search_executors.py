"""`replay slo-search` through `replay run` (issue 35, point 3): the flags that do not fit the
executor (simulated --policies, emulated --engines, live --endpoint) are refused naming the
flag, before anything is written; a live engine that fails preflight stops the search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.commands import scale_guard

DEAD = "vllm=http://127.0.0.1:9"  # the discard port: nothing answers


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["slo-search", *args])


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "vllm", "--engines", "vllm"], "--policies: names simulated policies"),
        (["--policies", "vllm", "--endpoint", DEAD], "--policies: names simulated policies"),
        ([], "give --policies (simulated), --engines (emulated) or --endpoint (live engines)"),
        (["--policies", "vllm", "--time-scale", "10"], "--time-scale: paces emulated"),
        (["--engines", "vllm", "--model", "glm-5.3-flash"], "--model: sets the simulated"),
        (["--endpoint", DEAD, "--model", "glm-5.3-flash"], "--model: sets the simulated"),
        (["--engines", "vllm", "--workers", "2"], "--workers: runs simulated confirmations"),
        (
            ["--endpoint", DEAD, "--capacity-blocks", "100"],
            "--capacity-blocks 100: sizes the cache of emulated engines only",
        ),
        (["--engines", "tgi"], "--engines: 'tgi' is not an engine kind"),
        (["--engines", "openai"], "--engines openai: no emulator for that kind"),
        (["--engines", "vllm", "--time-scale", "0"], "--time-scale 0: must be positive"),
        (["--endpoint", "bad"], "--endpoint 'bad': expected NAME=URL"),
        (
            ["--engines", "vllm,sglang", "--endpoint", DEAD],
            "--engines sglang have no --endpoint",
        ),
        (["--engines", "vllm", "--confirm-seeds", "0"], "--confirm-seeds: must be at least 1"),
        (
            ["--engines", "vllm", "--seed", str(2**63 - 1), "--confirm-seeds", "2"],
            "--confirm-seeds 2: from --seed 9223372036854775807 the last seed would be",
        ),
    ],
)
def test_a_flag_that_does_not_fit_the_executor_is_named(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "o"
    res = invoke(*args, "--out", str(out))
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), said(res)
    assert message in said(res)
    assert "Traceback" not in said(res)
    assert not out.exists()  # refused before anything is written


def test_more_sessions_than_the_machine_holds_names_max_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live runs' prompts at --max-sessions are checked before the first probe
    (`scale_guard.check_live_memory`), naming --max-sessions, not replay run's --sessions."""
    # One emulator fits in 200 MiB, 4,096 sessions' prompts do not.
    monkeypatch.setattr(scale_guard, "available_bytes", lambda: 200 * 2**20)
    out = tmp_path / "o"
    res = invoke("--engines", "vllm", "--max-sessions", "4096", "--out", str(out))
    assert res.exit_code == 2, said(res)
    text = said(res)
    assert "--max-sessions 4,096: the run would need about" in text and "--sessions" not in text
    assert not out.exists()


def test_a_live_engine_that_fails_preflight_stops_the_search(tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = invoke("--endpoint", DEAD, "--start", "1", "--max-sessions", "1", "--out", str(out))
    assert res.exit_code == 2, said(res)
    assert "preflight failed for vllm" in said(res)
    assert not (out / "slo_search.json").exists()
    # The probe that never ran leaves no folder to mistake for a run (`report` would refuse it).
    assert not (out / "probes").exists()
