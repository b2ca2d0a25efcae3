"""`replay.splitmix.mix64` is splitmix64's finaliser (shared by prompts and the emulator)."""

from __future__ import annotations

import numpy as np

from replay.splitmix import mix64


def test_mix64_gives_splitmix64s_published_outputs() -> None:
    # splitmix64 seeded 0 returns mix(k · 0x9E3779B97F4A7C15) for k = 1, 2, …; its first
    # outputs are the reference values of Vigna's splitmix64.c.
    golden = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        states = np.arange(1, 3, dtype=np.uint64) * golden
    assert [hex(int(v)) for v in mix64(states)] == ["0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4"]


def test_mix64_is_a_bijection_on_a_sample() -> None:
    x = np.arange(100_000, dtype=np.uint64)
    assert len(np.unique(mix64(x))) == len(x)
