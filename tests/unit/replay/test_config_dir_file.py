"""A REPLAY_CONFIG_DIR that names a file is refused naming the variable (round five of the
hard edges, `replay.config_paths.config_dir_problem`): it used to be blamed on the first flag
that read a config (`--model: model profile 'glm-5.3-flash' not found`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--policies", "vllm", "--sessions", "2", "--out", "OUT"],
        ["run", "--no-panel", "--out", "OUT"],
        ["engines", "list"],
        ["serve-sim", "--engine", "vllm", "--port", "0"],
    ],
)
def test_a_config_dir_that_is_a_file_is_named(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "configs.yaml"
    file.write_text("engines: []\n")
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(file))
    res = CliRunner().invoke(app, [str(tmp_path / "o") if a == "OUT" else a for a in args])
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2, (res.exit_code, said)
    assert said.startswith(
        f"error: REPLAY_CONFIG_DIR is {file}, which is not a folder; it must be a folder like "
        "the project's configs/"
    ), said
    assert "unset it for the bundled configs" in said and "--model" not in said
    from replay.config_paths import ConfigDirError, config_dir

    with pytest.raises(ConfigDirError, match="REPLAY_CONFIG_DIR is"):
        config_dir()  # a library caller is told the same


@pytest.mark.parametrize("made", [False, True])
def test_a_config_dir_without_model_profiles_is_named_beside_the_profile(
    made: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A REPLAY_CONFIG_DIR that does not exist, or holds no models/, was blamed on `--model`
    alone (which `replay run` lacks): the refusal now names the variable and its folder."""
    root = tmp_path / "cfg"
    if made:
        root.mkdir()
    monkeypatch.setenv("REPLAY_CONFIG_DIR", str(root))
    res = CliRunner().invoke(
        app, ["simulate", "--policies", "vllm", "--sessions", "2", "--out", str(tmp_path / "o")]
    )
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2, (res.exit_code, said)
    assert (
        f"REPLAY_CONFIG_DIR is {root}, whose models folder {root / 'models'} does not exist: "
        "point it at a folder like the project's configs/, or unset it" in said
    ), said
