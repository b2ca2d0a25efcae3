"""A child emulator (`python -m replay.emulator`, started by `launch.py`) gets its config whole,
as the parent built and checked it (`EmulatorConfig.child_args`), not re-parsed from flags."""

from __future__ import annotations

import pytest
import typer

from replay.emulator.cli import serve_child
from replay.emulator.config import CHILD_CONFIG, emulator_config, from_child_args


def test_the_child_reads_back_exactly_the_parents_config() -> None:
    cfg = emulator_config(
        "sglang", port=0, blocks=777, time_scale=30.0, token_scale=16.0, host_memory_gb=64.0,
        external_memory_gb=128.0, external_store="lmcache", replica=1,
        faults={"stall_rate": 0.5, "stall_s": float("inf"), "crash_after": 3},
    )  # fmt: skip
    assert from_child_args(cfg.child_args()) == cfg  # inf survives as JSON's Infinity
    assert cfg.child_args()[0] == CHILD_CONFIG and len(cfg.child_args()) == 2


def test_serve_sim_flags_are_not_a_child_config() -> None:
    assert from_child_args(["--engine", "vllm", "--port", "0"]) is None
    assert from_child_args([CHILD_CONFIG]) is None
    assert serve_child([]) is False


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "--config-json (a config that replay's launcher writes): the config: "),
        (
            '{"engine": "vllm", "port": 70000}',
            "port: --port 70000: must be between 1 and 65535 (or 0 for a free one)",
        ),
        ('{"engine": "vllm", "colour": 1}', "colour: Extra inputs are not permitted"),
    ],
)
def test_a_config_no_launcher_wrote_fails_in_one_line(
    text: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as e:
        serve_child([CHILD_CONFIG, text])
    assert e.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and err.count("\n") == 1


def test_the_child_process_exits_2_with_the_line_and_no_traceback() -> None:
    import subprocess
    import sys

    bad = '{"engine": "vllm", "blocks": 0}'
    cmd = [sys.executable, "-m", "replay.emulator", CHILD_CONFIG, bad]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "error: --config-json (a config that replay's launcher writes): blocks: "
        "Input should be greater than 0\n"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        # The tiers in the run spec's range: -5 and NaN GiB used to serve, 1e308 failed as
        # "--policy vllm: cannot convert float NaN to integer".
        (
            '{"engine": "vllm", "port": 0, "host_memory_gb": -5}',
            "host_memory_gb: Input should be greater",
        ),
        (
            '{"engine": "vllm", "port": 0, "host_memory_gb": NaN}',
            "host_memory_gb: Input should be a finite",
        ),
        (
            '{"engine": "vllm", "port": 0, "host_memory_gb": 1e308}',
            "host_memory_gb: Input should be less ",
        ),
        (
            '{"engine": "vllm", "port": 0, "host_memory_gb": 8, "host_bandwidth_gbs": Infinity}',
            "host_bandwidth_gbs: Input should be a finite number",
        ),
        (
            '{"engine": "vllm", "port": 0, "host_memory_gb": 8, "external_memory_gb": -1}',
            "external_memory_gb: Input should be greater than or equal to 0",
        ),
        (  # a store named alone used to be dropped in silence
            '{"engine": "vllm", "port": 0, "external_store": "lmcache"}',
            "the config: --external-store lmcache: needs --external-memory-gb",
        ),
    ],
)
def test_a_child_config_keeps_the_tiers_range(text: str, needle: str) -> None:
    """In the child's process, bounded: on a config the check passes it would serve."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "replay.emulator", CHILD_CONFIG, text]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: --config-json (a config that replay's launcher writes")
    assert needle in done.stderr


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--host-memory-gb", "-5"],
            "--host-memory-gb: Input should be greater than or equal to 0",
        ),
        (["--host-memory-gb", "nan"], "--host-memory-gb: Input should be a finite number"),
        (
            ["--host-memory-gb", "8", "--external-memory-gb", "4", "--external-bandwidth-gbs", "0"],
            "--external-bandwidth-gbs: Input should be greater than 0",
        ),
    ],
)
def test_the_emulators_own_flags_keep_the_tiers_range(flags: list[str], line: str) -> None:
    """`python -m replay.emulator --host-memory-gb -5` used to serve with -5 GiB."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "replay.emulator", "--engine", "vllm", "--port", "0", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stderr) == (2, f"error: {line}\n")


def test_a_child_config_naming_a_missing_profile_fails_in_one_line() -> None:
    """It used to end in a ProfileError traceback, exit 1."""
    import subprocess
    import sys

    bad = '{"engine": "vllm", "port": 0, "model": "no-such-profile"}'
    cmd = [sys.executable, "-m", "replay.emulator", CHILD_CONFIG, bad]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: --model: model profile 'no-such-profile' not found")
    assert done.stderr.count("\n") == 1
