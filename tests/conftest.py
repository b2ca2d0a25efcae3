"""Suite-wide checks.

Every run directory a test produces is validated against the run-directory models: after
each test that used `tmp_path`, each manifest.json and summary.json under it must validate
as `Manifest` / `RunSummary` under the *write* rule (unknown keys forbidden), so a producer
that writes outside the contract fails the test that made it. A test that writes a broken
or old-shaped file on purpose marks itself `@pytest.mark.rundir_unchecked`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.rundir_contract import written_problems


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rundir_unchecked: the test writes invalid run-directory files on purpose; skip the "
        "check that validates every manifest.json / summary.json under tmp_path",
    )


@pytest.fixture(autouse=True)
def _run_directories_follow_the_contract(request: pytest.FixtureRequest) -> Iterator[None]:
    wanted = "tmp_path" in request.fixturenames
    if not wanted or request.node.get_closest_marker("rundir_unchecked") is not None:
        yield
        return
    root: Path = request.getfixturevalue("tmp_path")  # the test's own; made for it anyway
    yield
    problems = written_problems(root) if root.exists() else []
    if problems:
        pytest.fail(
            "run directories written by this test break the run-directory models "
            "(replay/rundir_models.py):\n" + "\n".join(problems),
            pytrace=False,
        )


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, to fill: a real full disk (needs root and mount rights; skipped
    otherwise)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                         capture_output=True)  # fmt: skip
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {res.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
