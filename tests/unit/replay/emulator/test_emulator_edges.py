"""serve-sim's start-up refusals, before anything listens: a fault seed numpy cannot take, a
port out of range (the one port check, `replay.address`), and a host that cannot be
bound, each naming its flag. In the process, bounded: a value the checks pass would serve
until the timeout."""

from __future__ import annotations

import subprocess
import sys

import pytest

from replay.emulator.config import CHILD_CONFIG, EmulatorConfigError, emulator_config

SERVE_SIM = [sys.executable, "-m", "replay", "serve-sim", "--engine", "vllm"]


def _refused(*flags: str) -> str:
    done = subprocess.run([*SERVE_SIM, *flags], capture_output=True, text=True, timeout=30)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "Traceback" not in said, said
    return said


@pytest.mark.parametrize(
    ("seed", "line"),
    [
        ("-1", "error: --fault-seed -1: must be 0 or more"),
        (
            str(2**63),
            "error: --fault-seed 9223372036854775808: must be at most 9223372036854775807",
        ),
    ],
)
def test_a_fault_seed_numpy_cannot_take_is_refused_at_start_up(seed: str, line: str) -> None:
    """It used to start, then answer every request 500 with numpy's `ValueError: expected
    non-negative integer` in the server's log."""
    flags = ["--port", "0", "--fault-seed", seed, "--error-rate", "0.5", "--time-scale", "60"]
    assert _refused(*flags).startswith(line)


def test_a_fault_seed_is_checked_however_the_config_arrives() -> None:
    with pytest.raises(EmulatorConfigError, match=r"^--fault-seed -3: must be 0 or more$"):
        emulator_config("vllm", port=0, faults={"seed": -3})
    bad = '{"engine": "vllm", "port": 0, "faults": {"seed": -1}}'
    cmd = [sys.executable, "-m", "replay.emulator", CHILD_CONFIG, bad]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.endswith("faults.seed: --fault-seed -1: must be 0 or more\n")


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--port", "70000"],
            "error: --port 70000: must be between 1 and 65535 (or 0 for a free one)",
        ),
        (
            ["--port", "0", "--host", "bogus.invalid"],
            "error: --host bogus.invalid: does not resolve to an address",
        ),
        (  # TEST-NET-1: an address no machine of ours has
            ["--port", "0", "--host", "192.0.2.1"],
            "error: --host 192.0.2.1: cannot be bound: no interface of this machine has",
        ),
    ],
)
def test_a_port_or_host_that_cannot_listen_names_its_flag(flags: list[str], line: str) -> None:
    """A bad host used to be blamed on the port (`--port 0: cannot listen on bogus.invalid`)."""
    said = _refused(*flags)
    assert said.startswith(line), said
    if "--host" in flags:
        assert "e.g. 127.0.0.1 (loopback) or 0.0.0.0" in said and "--port" not in said
