"""Paths a user gives on the command line, checked before anything starts.

`read_text_file(path, what)`: the text of a YAML/JSON file a user named (`--config`, an
engine YAML), or `PathProblem` saying it is missing, a folder, binary or unreadable.
`check_out_file(path, flag)` / `check_out_dir(path, flag)`: an output the command will write
can be written: not a folder where a file is wanted (or the reverse), its parent exists or
can be created and is writable. Both raise `PathProblem` whose message names the flag, the
path and what to do.
`written(path, flag)` / `make_out_dir(path, flag)`: the write itself, where those checks
cannot see (a full disk, a read-only mount, /proc): a file is written under a temporary name
beside its final one and renamed when whole (so a failure leaves nothing under the final
name), and an OSError becomes `PathProblem` naming the flag, the path and the reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
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


def _cannot(path: Path, flag: str, e: OSError) -> PathProblem:
    why = e.strerror or str(e)
    return PathProblem(
        f"{flag} {path}: cannot write it ({why}); free some space or choose another path"
    )


@contextlib.contextmanager
def written(path: Path, flag: str = "--out") -> Iterator[Path]:
    """Yield a temporary path beside `path` to write; renamed to `path` when the block ends
    well, removed when it does not. Raises `PathProblem` for an OSError of the write. A path
    that exists and is not a regular file (a device such as /dev/stdout, a pipe) is written
    in place: renaming onto it would replace the device."""
    path = Path(path)
    if path.exists() and not path.is_file():
        try:
            yield path
        except OSError as e:
            raise _cannot(path, flag, e) from None
        return
    tmp = path.with_name(f".{path.name}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        raise _cannot(path, flag, e) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def write_text_output(path: Path, text: str, flag: str = "--out") -> None:
    """`text` into `path` whole or not at all (`written`)."""
    with written(path, flag) as tmp:
        tmp.write_text(text, encoding="utf-8")


def make_out_dir(path: Path, flag: str = "--out") -> None:
    """Create the output folder now (PathProblem naming `flag` when it cannot be)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cannot(path, flag, e) from None


__all__ = [
    "PathProblem",
    "check_out_dir",
    "check_out_file",
    "make_out_dir",
    "read_text_file",
    "write_text_output",
    "written",
]
