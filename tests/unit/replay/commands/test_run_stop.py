"""`replay run` ends within seconds of a signal even when its event loop is swamped (issue
24: 20,000 sessions on one loop ignored SIGTERM for ~2 minutes, then said `completed`): the
first signal arms a hard stop that marks the manifest `interrupted` and exits 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from replay.commands.run_stop import mark_interrupted

ROOT = Path(__file__).resolve().parents[4]

BUSY = textwrap.dedent(
    """
    import signal, sys
    from pathlib import Path
    from replay.commands.run_stop import HardStop
    hard = HardStop(Path(sys.argv[1]), grace_s=0.5)
    signal.signal(signal.SIGTERM, lambda n, f: hard.arm("SIGTERM"))  # as run's handler
    print("busy", flush=True)
    x = 0
    while True:  # a loop that never gets to the clean stop
        x += 1
    """
)


def test_a_swamped_run_is_marked_interrupted_and_exits_at_once(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "running", "notes": []}))
    proc = subprocess.Popen([sys.executable, "-c", BUSY, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "busy\n"
    t = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=10)
    assert code == 130 and time.monotonic() - t < 2.5
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert man["status"] == "interrupted" and "end" in man
    assert "stopped by SIGTERM: the run did not wind down within 0.5 s" in man["notes"][-1]
    assert not list(tmp_path.glob("*.tmp"))
    assert "continue with: replay run --resume" in (proc.stderr.read() if proc.stderr else "")


def test_only_a_running_manifest_is_marked(tmp_path: Path) -> None:
    assert not mark_interrupted(tmp_path, "SIGINT", 3)  # none
    (tmp_path / "manifest.json").write_text(json.dumps({"status": "completed"}))
    assert not mark_interrupted(tmp_path, "SIGINT", 3)
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "completed"
