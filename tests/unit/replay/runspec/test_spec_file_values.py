"""A config file's values are checked as written (round five of the hard edges): a YAML
true/false is no number (`seed: true` ran seed 1), and a file must be valid on its own, even
where a flag overrides its value (`sessions: -3` under `--sessions 2` passed in silence)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.client.orchestrate as orchestrate
import replay.emulator.launch as launch
from replay.cli import app
from replay.config_paths import shipped_config_subdir

CAPTURED = 7  # the run got past its spec: what the old code did with these files


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replay run` stops where it would start its emulators or plan its run."""

    def stop(*args: Any, **kwargs: Any) -> None:
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(orchestrate, "RunPlan", stop)
    monkeypatch.setattr(launch, "start_emulator_group", stop)


def _run(tmp_path: Path, body: str, *flags: str) -> tuple[Path, Any]:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"engines: [{{name: vllm, url: 'http://127.0.0.1:9'}}]\n{body}\n")
    res = CliRunner().invoke(
        app, ["run", "--config", str(cfg), *flags, "--out", str(tmp_path / "r"), "--no-panel"]
    )
    return cfg, res


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("seed: true", "field 'seed' true: must be a whole number, not a yes/no value"),
        ("sessions: yes", "field 'sessions' true: must be a whole number, not a yes/no value"),
        ("duration_min: on", "field 'duration_min' true: must be a number, not a yes/no value"),
        ("gap_cap_s: false", "field 'gap_cap_s' false: must be a number, not a yes/no value"),
    ],
)
def test_a_yes_no_value_is_refused_for_a_number_of_a_run_config(
    tmp_path: Path, no_run: None, body: str, message: str
) -> None:
    cfg, res = _run(tmp_path, body)
    assert res.exit_code == 2, said(res)
    assert f"error: --config {cfg}: {message}" in said(res)
    assert "Traceback" not in said(res)


def test_a_yes_no_value_is_refused_for_an_engines_count(tmp_path: Path, no_run: None) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("engines: [{name: vllm, url: 'http://127.0.0.1:9', gpus: true}]\n")
    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--no-panel"])
    assert res.exit_code == 2, said(res)
    assert (
        f"--config {cfg}: field 'engines.0.gpus': must be a whole number, not a yes/no value"
    ) in said(res)


def test_a_yes_no_value_is_refused_in_the_workload_config(
    tmp_path: Path, no_run: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded default's own file (configs/workloads/default.yaml, here under a
    REPLAY_CONFIG_DIR) is named with its field."""
    root = tmp_path / "configs"
    shutil.copytree(shipped_config_subdir("workloads"), root / "workloads")
    shutil.copytree(shipped_config_subdir("models"), root / "models")
    default = root / "workloads" / "default.yaml"
    default.write_text(default.read_text() + "\nseed: true\n")
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(root))
    res = CliRunner().invoke(app, ["run", "--out", str(tmp_path / "r"), "--no-panel"])
    assert res.exit_code == 2, said(res)
    assert f"{default}: field 'seed': must be a whole number, not a yes/no value" in said(res)


@pytest.mark.parametrize(
    ("body", "flags", "message"),
    [
        ("sessions: -3", ["--sessions", "2"], "field 'sessions' -3: must be at least 1"),
        ("seed: -1", ["--seed", "3"], "field 'seed' -1: must be 0 or more"),
        ("seed: true", ["--seed", "3"], "field 'seed' true: must be a whole number"),
        ("warmup_s: .nan", ["--warmup-s", "5"], "field 'warmup_s' nan: must be a finite number"),
        ("window: 9-1", ["--window", "1-9"], "field 'window' 9-1: need 0 ≤ A < B (minutes)"),
    ],
)
def test_a_files_value_is_checked_where_a_flag_overrides_it(
    tmp_path: Path, no_run: None, body: str, flags: list[str], message: str
) -> None:
    """The file must be valid on its own: it runs as written once the flag is dropped."""
    cfg, res = _run(tmp_path, body, *flags)
    assert res.exit_code == 2, said(res)
    assert f"error: --config {cfg}: {message}" in said(res)


def test_a_valid_file_under_flags_still_runs_with_the_flags_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def capture(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise typer.Exit(CAPTURED)

    monkeypatch.setattr(orchestrate, "RunPlan", capture)
    _, res = _run(tmp_path, "sessions: 5\nseed: 4\nwindow: 1-2", "--sessions", "2", "--seed", "3")
    assert res.exit_code == CAPTURED, said(res)
    assert (seen["workload"].sessions, seen["workload"].seed) == (2, 3)
