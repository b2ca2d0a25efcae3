"""`replay engines preflight|run-config` at their hard edges (issue 24): an unknown --kind is
named, URL credentials never reach the console or a written file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["engines", *args])


def test_preflight_unknown_kind_is_named_not_a_traceback() -> None:
    res = invoke("preflight", "http://127.0.0.1:9", "--kind", "tgi")
    assert res.exit_code == 2, res.output
    assert "--kind 'tgi': not an adapter kind (known:" in res.stderr
    assert isinstance(res.exception, SystemExit)  # typer's exit, not the adapter's ValueError


def test_preflight_masks_url_credentials_on_the_console() -> None:
    res = invoke("preflight", "http://u:SEKRIT@127.0.0.1:9")
    assert res.exit_code == 1
    assert "SEKRIT" not in res.output and "SEKRIT" not in res.stderr
    assert "http://***@127.0.0.1:9" in res.output


def test_run_config_writes_an_environment_reference_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay.client.config import ConfigError, load_config_file

    out = tmp_path / "rc.yaml"
    res = invoke("run-config", "vllm-glm53-b200=http://u:SEKRIT@n2:8002", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "SEKRIT" not in out.read_text() and "SEKRIT" not in res.output + res.stderr
    assert "${REPLAY_AUTH_VLLM}@n2:8002" in out.read_text()
    assert "export REPLAY_AUTH_VLLM='user:password'" in " ".join(res.stderr.split())
    printed = invoke("run-config", "vllm-glm53-b200=http://u:SEKRIT@n2:8002")
    assert "SEKRIT" not in printed.output + printed.stderr
    monkeypatch.delenv("REPLAY_AUTH_VLLM", raising=False)
    with pytest.raises(ConfigError, match=r"engines\[0\]\.url: .*REPLAY_AUTH_VLLM"):
        load_config_file(out)
    monkeypatch.setenv("REPLAY_AUTH_VLLM", "u:SEKRIT")
    assert load_config_file(out).engines[0].url == "http://u:SEKRIT@n2:8002"
