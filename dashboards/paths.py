"""The runs folder the dashboard serves, and the one rule for paths inside it.

The folder is fixed when the app starts (`replay dashboard RUNS_DIR` passes it after `--`, and
in `REPLAY_RUNS_DIR`); every run directory a page opens must resolve inside it. A path typed
into a page that escapes it (`..`, an absolute path elsewhere, a symlink pointing out) is
refused with a message, never opened. The containment check itself is analysis'.
"""

from __future__ import annotations

import os
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
        path = resolve_inside(root, Path(text).expanduser())
        if (name := link_out(root, path)) is not None:
            raise PathRefused(_linked_out(text, name, root))
        return path
    except RunDirError as e:
        raise PathRefused(
            f"{text!r} is outside the runs folder {root}; only run directories inside it "
            "can be opened (restart `replay dashboard` with another folder to see others)"
        ) from e
    except (OSError, RuntimeError) as e:  # a symlink loop, a name too long
        raise PathRefused(f"{text!r}: cannot be resolved ({e})") from e


def _linked_out(text: str, name: str, root: Path) -> str:
    return (
        f"{text!r}: its {name} links outside the runs folder {root}; the dashboard reads "
        "nothing outside it (copy the file into the run directory instead of linking it)"
    )


def link_out(root: Path, run_dir: Path) -> str | None:
    """The name of the first entry of `run_dir` (its manifest.json, requests.parquet, …) that
    is a link leading outside `root`; None when none is. The loader reads these files by
    name, so a run whose manifest.json links to /etc would be read from there (issue 36)."""
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError:
        return None
    for entry in entries:
        if not entry.is_symlink():
            continue
        try:
            resolve_inside(root, Path(entry.path))
        except (RunDirError, OSError, RuntimeError):
            return entry.name
    return None


def scan_runs(root: Path) -> tuple[list[str], list[str]]:
    """The run directories under `root` the dashboard may open, as names relative to it, and
    the notes on those it skips (a file linked outside `root`)."""
    if not root.is_dir():
        return [], []
    skipped: list[Path] = []
    found = find_runs(root, skipped)
    notes = [_linked_out(relative_name(root, p), "manifest.json", root) for p in skipped]
    names: list[str] = []
    for p in found:
        name = relative_name(root, p)
        if (bad := link_out(root, p)) is not None:
            notes.append(_linked_out(name, bad, root))
        else:
            names.append(name)
    return names, notes


def list_runs(root: Path) -> list[str]:
    """Run directories under `root`, as names relative to it (empty when there are none);
    a run with a file linked outside `root` is left out (`scan_runs` says which)."""
    return scan_runs(root)[0]


def relative_name(root: Path, path: Path) -> str:
    """How a run directory is shown: its path relative to the runs folder."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return str(path)
    # "." when the folder is itself a run directory (`replay dashboard runs/one-run`).
    return rel.as_posix()
