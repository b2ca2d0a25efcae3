"""Injected failures: errors, stalled streams, a hard crash, a slow start, and a lying cache
(a full hit reported while the whole prompt is computed: `--lie-cached-rate`).

Draws are deterministic per request number and seed, so a test that asks for a 5% error
rate gets the same requests failing every time. The crash is `os._exit`: no cleanup, open
connections reset, exactly what a client sees when an engine process dies; like a real
engine's, its last words are an exception line on stderr (the server log), which a run given
that log (`replay run --engine-log`) records.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from replay.emulator.config import FaultConfig

CRASH_EXIT_CODE = 70


def hard_exit() -> None:
    sys.stderr.write(
        f"RuntimeError: injected crash (--crash-after): the emulator exits with code "
        f"{CRASH_EXIT_CODE}\n"
    )
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


@dataclass(frozen=True)
class FaultDecision:
    error: bool = False
    stall_s: float = 0.0  # silence after the first token, wall seconds
    early_stop: bool = False  # stop at half the max tokens (ignore_eos not honoured)
    lie: bool = False  # report a full cache hit, compute the whole prompt


class FaultInjector:
    """Decides, per generation request, whether it fails, stalls or kills the server."""

    def __init__(
        self,
        cfg: FaultConfig,
        crash: Callable[[], None] = hard_exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.crash = crash
        self.clock = clock
        self.started = clock()
        self.requests = 0
        self.errors = 0
        self.stalls = 0
        # The lies told: (prompt tokens, cached tokens claimed) per lying prompt, so a test
        # can match them to the records of a run (the server appends, `/emulator/stats`).
        self.lies: list[tuple[int, int]] = []

    def ready(self) -> bool:
        """False during the slow start: the server answers 503 until then."""
        return self.clock() - self.started >= self.cfg.slow_start_s

    def on_request(self) -> FaultDecision:
        """Count a generation request and decide its fate (may not return: crash)."""
        self.requests += 1
        cfg = self.cfg
        if cfg.crash_after is not None and self.requests > cfg.crash_after:
            self.crash()
        if not (cfg.error_rate or cfg.stall_rate or cfg.early_stop_rate or cfg.lie_cached_rate):
            return FaultDecision()
        u = np.random.default_rng([cfg.seed, self.requests]).random(3)
        if u[0] < cfg.error_rate:
            self.errors += 1
            return FaultDecision(error=True)
        early = bool(u[2] < cfg.early_stop_rate)
        # Its own stream, so adding the lie leaves the other faults' draws as they were.
        lie = bool(
            cfg.lie_cached_rate
            and np.random.default_rng([cfg.seed, self.requests, 1]).random() < cfg.lie_cached_rate
        )
        if u[1] < cfg.stall_rate:
            self.stalls += 1
            return FaultDecision(stall_s=cfg.stall_s, early_stop=early, lie=lie)
        return FaultDecision(early_stop=early, lie=lie)
