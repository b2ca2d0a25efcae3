"""Reading local trace files as records: (file name, 1-based line, raw bytes).

Files are read in large chunks and split into lines here rather than with `readline`, so the
sha256 of the file (recorded in run manifests) is computed in the same single pass.
`.gz` files are hashed as stored and decompressed on the fly.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from replay.traces.errors import fail
from replay.userpaths import written

# Large reads: most lines (one session each) are several MB, and a line split across reads
# costs an extra copy.
CHUNK = 16 << 20
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")


@dataclass(slots=True)
class Record:
    source: str
    line: int
    raw: bytes


@dataclass(slots=True)
class LocalSource:
    """A file or folder of trace files; iterate it for records, read `sha256` afterwards."""

    path: Path
    files: list[Path] = field(default_factory=list)
    sha256: str | None = None

    @classmethod
    def open(cls, path: Path) -> LocalSource:
        if path.is_dir():
            files = sorted(
                p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
            )
            if not files:
                fail(
                    str(path),
                    None,
                    "(folder)",
                    "no trace files here; expected .json, .jsonl or .jsonl.gz files",
                )
            return cls(path, files)
        return cls(path, [path])

    def records(self) -> Iterator[Record]:
        # One digest over the files in order: for a single file, its plain sha256.
        digest = hashlib.sha256()
        for f in self.files:
            if f.name.endswith((".json", ".json.gz")) and self.path.is_dir():
                yield from _json_file(f, digest)
            else:
                yield from _lines(f, digest)
        self.sha256 = digest.hexdigest()


class _Hashing(io.RawIOBase):
    """A raw reader that feeds every byte it reads to a digest (for gzip files: the sha256
    is of the file as stored, what `sha256sum` prints)."""

    def __init__(self, fh: IO[bytes], digest: Any) -> None:
        self._fh, self._digest = fh, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._fh.readinto(buffer)  # type: ignore[attr-defined]
        if n:
            self._digest.update(memoryview(buffer)[:n])
        return n or 0


def _lines(path: Path, digest: Any) -> Iterator[Record]:
    name = str(path)
    with path.open("rb", buffering=0) as raw:
        if not path.name.endswith(".gz"):
            yield from _split_file(name, raw, digest)
            return
        fh = cast(IO[bytes], gzip.GzipFile(fileobj=io.BufferedReader(_Hashing(raw, digest), CHUNK)))
        try:
            yield from _split(name, fh, None)
        except (OSError, EOFError, zlib.error) as exc:
            fail(name, None, "(file)", f"cannot read it as gzip: {exc}")


def _split_file(name: str, fh: Any, digest: Any) -> Iterator[Record]:
    """Split a plain file into lines with one allocation per line.

    Reads go into one reusable buffer (hashed there); a line that runs past the buffer is
    fetched whole with `os.pread` once its end is found, so a 100 MB session line costs
    100 MB, not twice that while pieces are joined."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    fd = fh.fileno()
    offset = 0  # file offset of buf[0]
    pending: int | None = None  # file offset where an unfinished line starts
    lineno = 0
    while n := fh.readinto(buf):
        digest.update(view[:n])
        start = 0
        while (end := buf.find(b"\n", start, n)) >= 0:
            lineno += 1
            if pending is not None:
                line = os.pread(fd, offset + end - pending, pending)
                pending = None
            else:
                line = bytes(view[start:end])
            if line and not line.isspace():
                yield Record(name, lineno, line)
            start = end + 1
        if start < n and pending is None:
            pending = offset + start
        offset += n
    if pending is not None:
        line = os.pread(fd, offset - pending, pending)
        if line and not line.isspace():
            yield Record(name, lineno + 1, line)


def _split(name: str, fh: IO[bytes], digest: Any) -> Iterator[Record]:
    """Split a stream (a decompressing one) into lines."""
    lineno = 0
    pieces: list[bytes] = []
    while chunk := fh.read(CHUNK):
        if digest is not None:
            digest.update(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            lineno += 1
            if pieces:
                pieces.append(chunk[start:end])
                line = b"".join(pieces)
                pieces = []
            else:
                line = chunk[start:end]
            if line and not line.isspace():
                yield Record(name, lineno, line)
            start = end + 1
        if start < len(chunk):
            pieces.append(chunk[start:] if start else chunk)
    line = b"".join(pieces)
    if line and not line.isspace():
        yield Record(name, lineno + 1, line)


def _json_file(path: Path, digest: Any) -> Iterator[Record]:
    """A `.json` file in a folder: one session, possibly pretty-printed over many lines, or
    JSON lines if its first line is a complete object on its own."""
    data = b"\n".join(rec.raw for rec in _lines(path, digest))
    first, _, rest = data.partition(b"\n")
    if rest.strip() and first.strip().startswith(b"{") and first.strip().endswith(b"}"):
        for i, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                yield Record(str(path), i, line)
    elif data.strip():
        yield Record(str(path), 1, data)


def overlap_with_source(src: Path, out: Path) -> str | None:
    """How writing `out` would change the local trace source `src`: "is the source file"
    (the same file however spelled: `./SRC`, a symlink either way, a hard link), "is inside
    the source folder" (a folder source reads every trace file directly in it), or None."""
    if not src.exists():
        return None  # a dataset id, or a missing path the load names
    target = out.resolve()
    if src.is_dir():
        return "is inside the source folder" if target.parent == src.resolve() else None
    if target == src.resolve():
        return "is the source file"
    with contextlib.suppress(OSError):
        if os.path.samefile(out, src):
            return "is the source file"
    return None


@contextlib.contextmanager
def open_output(path: Path, flag: str = "--out") -> Iterator[IO[bytes]]:
    """A trace file to write, gzip-compressed when its name ends with `.gz`: written under a
    temporary name and renamed when whole (`replay.userpaths.written`: a full disk or an
    unwritable place is a `PathProblem` naming `flag`, and leaves no partial file)."""
    with written(path, flag) as tmp:
        if path.name.endswith(".gz"):
            # mtime=0: the same trace always gives the same bytes (the sample is committed);
            # the name inside the gzip header is the final one, not the temporary one.
            with (
                tmp.open("wb") as raw,
                gzip.GzipFile(path.name, "wb", compresslevel=6, mtime=0, fileobj=raw) as fh,
            ):
                yield cast(IO[bytes], fh)
        else:
            with tmp.open("wb") as fh:
                yield fh
