"""`python -m replay`: Ctrl-C while the command modules load ends quietly (130), not with a
traceback from inside an import."""

from __future__ import annotations

import os
import signal
import sys


def _quit(signum: int, frame: object) -> None:
    sys.stderr.write("interrupted\n")
    os._exit(130)


signal.signal(signal.SIGINT, _quit)
from replay.cli import main  # noqa: E402

signal.signal(signal.SIGINT, signal.default_int_handler)
main()
