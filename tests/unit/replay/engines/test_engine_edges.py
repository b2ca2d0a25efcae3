"""`replay engines` refuses at the edge what used to fail later or never: a port out of range
(the one check, `replay.address`, shared with serve-sim), a URL that is no engine's,
a config named with its `.yaml`, and a REPLAY_CONFIG_DIR that holds no engine config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from replay.cli import app

ENGINES = Path(__file__).resolve().parents[4] / "configs" / "engines"


def _refused(*args: str) -> str:
    result = CliRunner().invoke(app, ["engines", *args])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "Traceback" not in said, (result.exit_code, result.output)
    assert result.stdout == "", result.stdout  # nothing rendered, launched or written
    return said


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # The missing interpreter keeps a passed check from starting an engine: it would fail
        # on the interpreter instead (vLLM itself used to die: `bind(): port must be 0-65535`).
        (
            ["launch", "vllm-cpu-tiny", "--port", "-5", "--no-preflight", "--python", "/no/py"],
            "error: --port -5: must be between 1 and 65535",
        ),
        (
            ["launch", "vllm-cpu-tiny", "--dry-run", "--port", "70000"],
            "error: --port 70000: must be between 1 and 65535",
        ),
        # 0 picks no free port here: launch reads it as "not given" (the config's port).
        (
            ["launch", "vllm-cpu-tiny", "--dry-run", "--port", "0"],
            "error: --port 0: must be between 1 and 65535",
        ),
        (
            ["show", "vllm-cpu-tiny", "--port", "99999999999999999999999"],
            "error: --port 99999999999999999999999: must be between 1 and 65535",
        ),
        (
            ["run-config", "vllm-cpu-tiny=http://x:99999"],
            "error: 'vllm-cpu-tiny=http://x:99999': port 99999: must be between 1 and 65535",
        ),
        (
            ["run-config", "vllm-cpu-tiny=http://x:-1"],
            "error: 'vllm-cpu-tiny=http://x:-1': port -1: must be between 1 and 65535",
        ),
    ],
)
def test_a_port_out_of_range_is_refused_naming_the_flag_or_argument(
    args: list[str], line: str
) -> None:
    assert _refused(*args) == line


def test_a_config_files_port_keeps_the_same_range(tmp_path: Path) -> None:
    data: dict[str, Any] = yaml.safe_load((ENGINES / "vllm-cpu-tiny.yaml").read_text())
    data["serve"]["port"] = 70000
    data["model"]["path"] = "some-model"
    path = tmp_path / "far-port.yaml"
    path.write_text(yaml.safe_dump(data))
    said = _refused("show", str(path))
    assert said == f"error: {path}: field 'serve.port': 70000: must be between 1 and 65535"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # It used to look for a file "ftp:/x".
        (
            ["preflight", "ftp://x"],
            "error: ftp://x: only http:// or https:// URLs reach an engine, "
            "e.g. http://127.0.0.1:8000",
        ),
        # It used to run every check against "http:" and print InvalidUrlClientError.
        (
            ["preflight", "http://"],
            "error: http://: the URL has no host; give the engine's host and port, "
            "e.g. http://127.0.0.1:8000",
        ),
        (  # the credentials masked
            ["preflight", "http://user:secret-pw@:8000"],
            "error: http://***@:8000: the URL has no host;",
        ),
        (
            ["run-config", "vllm-cpu-tiny=ftp://x"],
            "error: 'vllm-cpu-tiny=ftp://x': only http:// or https:// URLs reach an engine",
        ),
    ],
)
def test_a_url_that_is_no_engines_is_refused_as_such(args: list[str], line: str) -> None:
    said = _refused(*args)
    assert said.startswith(line), said
    assert "secret-pw" not in said


def test_a_config_named_with_its_yaml_suffix_gets_a_hint() -> None:
    said = _refused("show", "vllm-cpu-tiny.yaml")
    assert said.startswith("error: engine config vllm-cpu-tiny.yaml: file not found; ")
    assert "did you mean vllm-cpu-tiny?" in said
    assert "did you mean" not in _refused("show", "no-such-engine.yml")  # no config by that name


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_a_config_dir_without_engine_configs_is_named(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`REPLAY_CONFIG_DIR=/nonexistent replay engines list` printed an empty table, exit 0."""
    root = tmp_path / folder
    if folder == "empty":
        (root / "engines").mkdir(parents=True)
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(root))
    said = _refused("list")
    what = "does not exist" if folder == "missing" else "holds no engine config (NAME.yaml)"
    assert said.startswith(
        f"error: REPLAY_CONFIG_DIR is {root}, whose engines folder {root / 'engines'} {what}; "
    )
    assert "unset it for the bundled ones" in said
    assert _refused("show", "vllm-cpu-tiny").startswith("error: REPLAY_CONFIG_DIR is ")
