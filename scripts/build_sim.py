"""Compile the cache model's hot modules with mypyc into `.mypyc/` (git-ignored).

The modules are those in `replay.sim.compiled.MODULES`, compiled from the same source the
interpreter runs; `replay.sim.cache` uses the build only while its stamp matches those sources
(see `replay/sim/compiled.py`), so an edit falls back to the interpreted modules until this
runs again. `scripts/setup.sh` runs it; a second run with nothing changed only checks.

    .venv/bin/python scripts/build_sim.py [--force]

Needs mypy (the dev tools: it brings mypyc), a C compiler and the Python headers. Exits 0 when
the build is up to date or was made, 2 with a message saying what is missing otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.sim import compiled  # noqa: E402


def fail(msg: str) -> int:
    print(f"build_sim: {msg}", file=sys.stderr)
    return 2


def build(force: bool) -> int:
    digest = compiled.source_digest()
    if not force and compiled.STAMP.is_file() and compiled.STAMP.read_text().strip() == digest:
        print(f"build_sim: {compiled.BUILD_DIR.name}/ is up to date ({compiled.MODE})")
        return 0
    if importlib.util.find_spec("mypyc") is None:
        return fail("mypyc is not installed (it comes with mypy: pip install -e '.[dev]')")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return fail("no C compiler (cc or gcc) on PATH; the simulator still runs, interpreted")
    with tempfile.TemporaryDirectory(prefix="replay-mypyc-") as tmp:
        work = Path(tmp)
        # A copy of the package, so the build's scratch files (mypyc's build/, mypy's cache,
        # setuptools reading pyproject.toml) never touch the checkout.
        shutil.copytree(
            ROOT / "replay",
            work / "replay",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "data"),
        )
        package = Path(*compiled.PACKAGE.split("."))
        paths = [compiled.source(m).relative_to(ROOT).as_posix() for m in compiled.MODULES]
        print(f"build_sim: compiling {', '.join(compiled.MODULES)} with mypyc (about a minute)")
        proc = subprocess.run(
            [sys.executable, "-m", "mypyc", *paths],
            cwd=work,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            return fail(f"mypyc failed (exit {proc.returncode}):\n{tail}")
        out = compiled.BUILD_DIR.with_name(compiled.BUILD_DIR.name + ".new")
        shutil.rmtree(out, ignore_errors=True)
        (out / package).mkdir(parents=True)
        libs = list(work.glob(f"*__mypyc{compiled.EXT_SUFFIX}"))
        if len(libs) != 1:
            return fail(f"expected one shared library from mypyc, found {len(libs)}")
        shutil.copy2(libs[0], out / libs[0].name)
        for m in compiled.MODULES:
            so = compiled.built(work / package, m)
            if not so.is_file():
                return fail(f"mypyc made no {so.name}")
            dest = compiled.built(out / package, m)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(so, dest)
        (out / "STAMP").write_text(digest + "\n")
    shutil.rmtree(compiled.BUILD_DIR, ignore_errors=True)
    out.rename(compiled.BUILD_DIR)
    print(f"build_sim: built {compiled.BUILD_DIR.name}/ ({len(compiled.MODULES)} modules)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even when up to date")
    return build(ap.parse_args().force)


if __name__ == "__main__":
    sys.exit(main())
