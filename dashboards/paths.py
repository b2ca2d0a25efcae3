"""The runs folder the dashboard serves, and the one rule for paths inside it.

The folder is fixed when the app starts (`replay dashboard RUNS_DIR` passes it after `--`, and
in `REPLAY_RUNS_DIR`); every run directory a page opens must resolve inside it. A path typed
into a page that escapes it (`..`, an absolute path elsewhere, a symlink pointing out) is
refused with a message, never opened. The containment check itself is analysis'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from analysis.runs import RunDirError, find_runs, resolve_inside

RUNS_DIR_ENV = "REPLAY_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"


class PathRefused(ValueError):
    """A path the dashboard will not open; the message says why and what to do."""


def runs_root_from(argv: Sequence[str], environ: Mapping[str, str]) -> Path:
    """The runs folder: the first script argument, else $REPLAY_RUNS_DIR, else `./runs`.

    Streamlit hands the script the arguments that follow `--` on its command line as
    `sys.argv[1:]`, which is how `replay dashboard RUNS_DIR` passes it.
    """
    args = [a for a in argv if a.strip()]
    raw = args[0] if args else environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR
    return Path(raw).expanduser().resolve()


def open_inside(root: Path, candidate: str | Path) -> Path:
    """`candidate` (relative to `root`, or absolute) resolved; PathRefused when outside `root`.

    Resolution follows symlinks, so a link inside the folder that points elsewhere is refused
    too: the folder is the boundary of what the dashboard may read.
    """
    text = str(candidate).strip()
    if not text:
        raise PathRefused("no run directory given; pick one from the list or type its name")
    if "\x00" in text:
        raise PathRefused("the path contains a NUL character; type a plain folder name")
    try:
        return resolve_inside(root, Path(text).expanduser())
    except RunDirError as e:
        raise PathRefused(
            f"{text!r} is outside the runs folder {root}; only run directories inside it "
            "can be opened (restart `replay dashboard` with another folder to see others)"
        ) from e
    except (OSError, RuntimeError) as e:  # a symlink loop, a name too long
        raise PathRefused(f"{text!r}: cannot be resolved ({e})") from e


def list_runs(root: Path) -> list[str]:
    """Run directories under `root`, as names relative to it (empty when there are none)."""
    if not root.is_dir():
        return []
    return [relative_name(root, p) for p in find_runs(root)]


def relative_name(root: Path, path: Path) -> str:
    """How a run directory is shown: its path relative to the runs folder."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return str(path)
    # "." when the folder is itself a run directory (`replay dashboard runs/one-run`).
    return rel.as_posix()
