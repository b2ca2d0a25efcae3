"""Every comma-list flag refuses an empty item, naming the flag (round five of the hard
edges, `replay.comma_list`): `--policies vllm,,sglang`, `--router a,,b` and `--engines vllm,`
dropped the empty item in silence while `--sessions 2,,4` was refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.client.orchestrate as orchestrate
import replay.commands.simulate as simulate
import replay.emulator.launch as launch
from replay.cli import app

LOADED = 7  # the command got past its flags (simulate to its trace, run to its engines)


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def _stop(*args: Any, **kwargs: Any) -> None:
    raise typer.Exit(LOADED)


@pytest.fixture
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate, "_load", _stop)


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(orchestrate, "RunPlan", _stop)
    monkeypatch.setattr(launch, "start_emulator_group", _stop)


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--policies", "vllm,,sglang"],
            "error: --policies 'vllm,,sglang': item 2 of 3 is empty; separate the items with "
            "single commas, e.g. --policies vllm,flashstate",
        ),
        (["--policies", "vllm,"], "error: --policies 'vllm,': item 2 of 2 is empty"),
        (["--policies", ",vllm"], "error: --policies ',vllm': item 1 of 2 is empty"),
        (
            ["--policies", "vllm", "--replicas", "2", "--router", "round_robin,,llmd"],
            "error: --router 'round_robin,,llmd': item 2 of 3 is empty",
        ),
        (
            ["--policies", "vllm", "--replicas", "2,,4", "--router", "round_robin"],
            "error: --replicas '2,,4': item 2 of 3 is empty",
        ),
        (["--policies", "vllm", "--sessions", "2,,4"], "error: --sessions '2,,4': item 2 of 3"),
    ],
)
def test_simulates_comma_lists_refuse_an_empty_item(
    tmp_path: Path, no_sweep: None, flags: list[str], line: str
) -> None:
    res = CliRunner().invoke(app, ["simulate", *flags, "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and said(res).startswith(line), said(res)


def test_a_comma_list_without_an_empty_item_still_sweeps(tmp_path: Path, no_sweep: None) -> None:
    args = [
        "simulate",
        "--policies",
        " vllm , sglang",
        "--sessions",
        "2, 4",
        "--out",
        str(tmp_path),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == LOADED, said(res)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["run", "--engines", "vllm,,sglang", "--no-panel"],
            "error: --engines 'vllm,,sglang': item 2 of 3 is empty; separate the items with "
            "single commas, e.g. --engines flashstate,vllm",
        ),
        (["run", "--engines", "vllm,", "--no-panel"], "error: --engines 'vllm,': item 2 of 2"),
        # A blank list is still the command's own refusal.
        (["run", "--engines", " , ", "--no-panel"], "error: --engines ' , ': names no engine"),
        (
            ["run", "--endpoint", "vllm=http://u:secretpw@a:1,,http://b:2", "--no-panel"],
            "error: --endpoint 'vllm=http://***@a:1,,http://b:2': a replica URL is empty; list "
            "the replicas with single commas",
        ),
        (
            ["report", "/nonexistent/run", "--out", "/nonexistent/o", "--format", "md,,html"],
            "error: --format 'md,,html': item 2 of 3 is empty",
        ),
    ],
)
def test_every_comma_list_flag_refuses_an_empty_item(
    no_run: None, args: list[str], line: str
) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and said(res).startswith(line), said(res)
    assert "secretpw" not in said(res)


def test_endpoint_refusals_mask_the_urls_credentials(no_run: None) -> None:
    """`--endpoint NAME=URL,...` is no URL itself, so its refusals showed a replica's password
    (`redact_url` masks a URL's only)."""
    flag = "vllm=http://u:secretpw@a:1,ftp://x"
    res = CliRunner().invoke(app, ["run", "--endpoint", flag, "--no-panel"])
    assert res.exit_code == 2, said(res)
    assert said(res).startswith("error: --endpoint 'vllm=http://***@a:1,ftp://x': replica URL")
