"""A secret in a URL's query (`?key=…`, `api_key=`, `token=`) never reaches disk or the
console: `redact_url` masks it wherever a URL is shown or stored (the manifest, preflight),
and `engines run-config` writes it as an environment-variable reference, as it writes a
URL's `user:password@`, which the config loader expands."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.client.config import load_config_file
from replay.redact import query_with_env_ref, redact_url


def test_redact_url_masks_a_secret_named_query_value_and_keeps_the_rest() -> None:
    assert redact_url("http://u:pw12@h:1/v1?a=1&api_key=SEKRIT&token=T0K") == (
        "http://***@h:1/v1?a=1&api_key=***&token=***"
    )
    assert redact_url("http://h:1/v1?model=x") == "http://h:1/v1?model=x"
    assert redact_url("http:/x") == "http:/x"  # a URL with nothing to mask comes back as given


def test_query_with_env_ref_replaces_the_value_only() -> None:
    url, value = query_with_env_ref("http://h:1/v1?a=1&key=SEKRIT", "REPLAY_KEY_X")
    assert url == "http://h:1/v1?a=1&key=${REPLAY_KEY_X}" and value == "SEKRIT"
    assert query_with_env_ref("http://h:1/v1?a=1", "V") == ("http://h:1/v1?a=1", None)


def test_run_config_writes_no_query_secret_and_the_file_runs_with_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "rc.yaml"
    res = CliRunner().invoke(
        app,
        ["engines", "run-config", "vllm-cpu-tiny=http://h:1/v1?key=SEKRIT123", "--out", str(out)],
    )
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "SEKRIT123" not in text and "SEKRIT123" not in res.output
    assert "key=${REPLAY_KEY_VLLM}" in text
    assert "export REPLAY_KEY_VLLM=" in " ".join(res.output.split())
    monkeypatch.setenv("REPLAY_KEY_VLLM", "SEKRIT123")
    (spec,) = load_config_file(out).engines
    assert spec.url == "http://h:1/v1?key=SEKRIT123"
