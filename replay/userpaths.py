"""Paths a user gives on the command line, checked before anything starts.

`read_text_file(path, what)`: the text of a YAML/JSON file a user named (`--config`, an
engine YAML), or `PathProblem` saying it is missing, a folder, binary or unreadable.
`check_out_file(path, flag)` / `check_out_dir(path, flag)`: an output the command will write
can be written: not a folder where a file is wanted (or the reverse), its parent exists or
can be created and is writable. Both raise `PathProblem` whose message names the flag, the
path and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path


class PathProblem(ValueError):
    """A user-given path that cannot be used; the message names the flag and the fix."""


def read_text_file(path: Path, what: str) -> str:
    path = Path(path)
    if path.is_dir():
        raise PathProblem(f"{what} {path}: is a folder; give the YAML file inside it")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PathProblem(f"{what} {path}: file not found") from None
    except OSError as e:
        raise PathProblem(f"{what} {path}: cannot read it ({e.strerror or e})") from None
    if b"\x00" in data[:8192]:
        raise PathProblem(f"{what} {path}: is a binary file, not YAML text; check the path")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PathProblem(
            f"{what} {path}: not UTF-8 text (byte {e.start}); save it as UTF-8 YAML"
        ) from None


def _writable_parent(path: Path, flag: str) -> None:
    parent = path.parent
    while not parent.exists():  # the command creates missing folders: check the nearest one
        parent = parent.parent
    if not parent.is_dir():
        raise PathProblem(f"{flag} {path}: {parent} is a file, not a folder; choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PathProblem(
            f"{flag} {path}: the folder {parent} is not writable; choose a path you can write"
        )


def check_out_file(path: Path, flag: str = "--out") -> None:
    path = Path(path)
    if path.is_dir():
        raise PathProblem(f"{flag} {path}: is a folder; give a file name (e.g. {path}/out.jsonl)")
    if path.exists() and not os.access(path, os.W_OK):
        raise PathProblem(f"{flag} {path}: the file is not writable; choose another path")
    _writable_parent(path, flag)


def check_out_dir(path: Path, flag: str = "--out") -> None:
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PathProblem(f"{flag} {path}: is a file, not a folder; choose a new folder name")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise PathProblem(f"{flag} {path}: the folder is not writable; choose another --out")
    _writable_parent(path, flag)


__all__ = ["PathProblem", "check_out_dir", "check_out_file", "read_text_file"]
