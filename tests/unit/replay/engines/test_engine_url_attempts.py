"""A target spelled like a URL with a slash lost (`http:/x`) is checked as a URL, not looked
up as an engine config's file (round five of the hard edges, `replay.address.is_url`)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from replay.address import is_url
from replay.cli import app


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["preflight", "http:/x"],
            "error: http:/x: the URL has no host; give the engine's host and port, e.g. "
            "http://127.0.0.1:8000",
        ),
        (
            ["preflight", "htp:/127.0.0.1:8000"],
            "error: htp:/127.0.0.1:8000: only http:// or https:// URLs reach an engine",
        ),
        (
            ["run-config", "vllm-cpu-tiny=http:/x"],
            "error: 'vllm-cpu-tiny=http:/x': the URL has no host",
        ),
    ],
)
def test_a_url_with_a_slash_lost_is_refused_as_a_url(args: list[str], line: str) -> None:
    res = CliRunner().invoke(app, ["engines", *args])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and said.startswith(line), said
    assert "file not found" not in said and "Traceback" not in said


def test_config_names_paths_and_drive_letters_are_not_urls() -> None:
    assert is_url("http:/x") and is_url("https://h:1") and is_url("ftp://x")
    for text in ("vllm-cpu-tiny", "configs/engines/vllm-cpu-tiny.yaml", "C:/engines/a.yaml",
                 "hf:owner/name"):  # fmt: skip
        assert not is_url(text), text
