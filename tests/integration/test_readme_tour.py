"""The README's tour runs as written: every bash block of "A tour of the commands" (the
dashboard's, which serves until stopped, aside) runs in a fresh folder, one after another as a
reader would, and leaves what the tour says it leaves.

The blocks are taken from the README itself, so an example that stops working fails here. Two
substitutions only: the emulators' fixed ports (8012, 8013) become free ones, so the test
cannot collide with another server, and `replay` is this interpreter's (its folder first on
PATH). The bundled sample is linked into the folder under the path the examples name.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
SAMPLE = ROOT / "replay" / "data" / "sample-weka.jsonl.gz"

pytestmark = pytest.mark.slow


def tour_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## A tour of the commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.M | re.S)
    return [b for b in blocks if "replay dashboard" not in b]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_tour_has_the_examples_it_promises() -> None:
    blocks = "\n".join(tour_blocks())
    for command in (
        "replay run",
        "replay simulate",
        "replay serve-sim",
        "replay traces",
        "replay report",
        "replay price",
        "replay engines",
    ):
        assert command in blocks, f"the README's tour lost its `{command}` example"


def test_no_tour_line_serves_until_stopped() -> None:
    """A foreground `engines launch` (or `serve-sim`) never returns: the tour would hang."""
    for line in "\n".join(tour_blocks()).splitlines():
        command = line.split("#", 1)[0].strip()
        serves = "replay serve-sim" in command or (
            "replay engines launch" in command and "--dry-run" not in command
        )
        assert not serves or command.endswith("&"), (
            f"README tour line serves until stopped and would hang the tour: {line!r}; "
            "add --dry-run or run it in the background with `&` and `kill %1`"
        )


def test_every_tour_block_runs_as_written(tmp_path: Path) -> None:
    (tmp_path / "replay" / "data").mkdir(parents=True)
    (tmp_path / "replay" / "data" / SAMPLE.name).symlink_to(SAMPLE)
    script = "\n".join(tour_blocks())
    for port in ("8012", "8013"):
        assert port in script, f"the tour no longer uses port {port}: update this test"
        script = script.replace(port, str(free_port()))
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    # Each background emulator is stopped by the block's own `kill %1`; the trap stops one
    # that a failing line left behind.
    body = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script
    done = subprocess.run(
        ["bash", "-c", body],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, f"a README tour example failed (rc {done.returncode}):\n{tail}"
    runs = tmp_path / "runs"
    for made in (
        "tour-run/manifest.json",
        "tour-run/requests.parquet",
        "tour-sim/summary.csv",
        "tour-fleet/summary.csv",
        "tour-live/manifest.json",
        "tour-report/report.html",
        "tiny.jsonl.gz",
        "tiny-mooncake.jsonl",
    ):
        assert (runs / made).exists(), f"the tour should leave runs/{made}:\n{tail}"
    assert "$5.29" in done.stdout, "the demo's profit per GPU-hour is no longer $5.29"
    assert "preflight passed" in done.stdout
