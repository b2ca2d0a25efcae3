"""A server the harness starts dies with it, even when the harness is SIGKILLed.

A real engine's server (`replay.engines.launch`) gets `pdeathsig_preexec()`. An emulator
(`replay.emulator.launch`) gets the harness's pid in `REPLAY_PARENT_PID` and calls
`die_with_parent()` first thing, which arms two mechanisms, either sufficient: on Linux the
kernel sends SIGTERM when the parent dies (`prctl(PR_SET_PDEATHSIG)`, through ctypes);
everywhere, a daemon thread checks twice a second that the parent pid is still its parent
(after the parent's death the child is re-parented) and terminates the process otherwise. A
server started by hand (no variable) is left alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

PARENT_ENV = "REPLAY_PARENT_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.5


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


def pdeathsig_preexec(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` for a child that cannot watch its parent itself (a real engine's
    server): the kernel sends it `sig` when the launcher dies. libc is loaded here, in the
    parent, so the forked child only makes the one system call. None off Linux."""
    prctl = _prctl()
    if prctl is None:
        return None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)

    return arm


def _set_pdeathsig(sig: int) -> bool:
    prctl = _prctl()
    return prctl is not None and int(prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0


def _end() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # a handler that ignored SIGTERM gets no second chance
    os._exit(1)


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            _end()
        time.sleep(POLL_S)


def bind_to_parent(parent: int, sig: int = signal.SIGKILL) -> bool:
    """For a forked worker (a pool's initializer): the kernel sends it `sig` when `parent`
    dies; it exits at once if `parent` died before the signal was armed. Only the kernel's
    signal, no watching thread: a worker in compiled code never lets one run. True when
    armed (Linux)."""
    armed = _set_pdeathsig(sig)
    if os.getppid() != parent:
        os._exit(1)
    return armed


def die_with_parent() -> bool:
    """Arm both mechanisms if the harness asked for it; True when armed."""
    value = os.environ.get(PARENT_ENV)
    if not value or not value.isdigit():
        return False
    parent = int(value)
    _set_pdeathsig(signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was armed
        _end()
    threading.Thread(target=_watch, args=(parent,), name="lifeline", daemon=True).start()
    return True


__all__ = ["PARENT_ENV", "bind_to_parent", "die_with_parent", "pdeathsig_preexec"]
