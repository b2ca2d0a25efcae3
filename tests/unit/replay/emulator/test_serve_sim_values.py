"""`replay serve-sim` refuses a start-up delay that never ends and a model id a client cannot
send back (round five of the hard edges): `--slow-start-s inf` answered 503 for ever and
`--served-model-name ''` served the profile's name in silence; each now names its flag."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import replay.emulator.cli as emulator_cli
from replay.cli import app

SERVED = 7  # the config was built and handed to the server


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """serve-sim stops where it would serve: the configs it would serve, in order."""
    seen: list[Any] = []

    def serve(cfg: Any, fail: Any, say: Any) -> None:
        seen.append(cfg)
        raise typer.Exit(SERVED)

    monkeypatch.setattr(emulator_cli, "_serve", serve)
    return seen


def _serve_sim(*flags: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["serve-sim", "--engine", "vllm", "--port", "0", *flags])
    return res.exit_code, " ".join((res.output + res.stderr).split())


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--slow-start-s", "inf"], "error: --slow-start-s: Input should be a finite number"),
        (["--slow-start-s", "nan"], "error: --slow-start-s: Input should be a finite number"),
        (["--slow-start-s", "-1"], "error: --slow-start-s: Input should be greater than or equal"),
        (["--served-model-name", ""], "error: --served-model-name '': must not be empty; give"),
        (["--served-model-name", "  "], "error: --served-model-name ' ': holds ' '; a model id"),
        (["--served-model-name", "a b"], "error: --served-model-name 'a b': holds ' '; a model"),
        (
            ["--served-model-name", "glm\nflash"],
            "error: --served-model-name 'glm\\nflash': holds '\\n'; a model id is one word",
        ),
    ],
)
def test_serve_sim_refuses_an_endless_start_or_a_model_id_no_client_can_send(
    flags: list[str], line: str
) -> None:
    code, said = _serve_sim(*flags)
    assert code == 2 and said.startswith(line), said
    assert "Traceback" not in said


def test_a_finite_start_and_a_plain_model_id_are_served(no_server: list[Any]) -> None:
    code, said = _serve_sim("--slow-start-s", "2.5", "--served-model-name", "org/glm-5.3-flash")
    assert code == SERVED, said
    (cfg,) = no_server
    assert (cfg.faults.slow_start_s, cfg.served_model_name) == (2.5, "org/glm-5.3-flash")
