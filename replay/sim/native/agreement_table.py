"""What the tier oracles' agreement scripts share (scripts/{tier,hicache,lmcache,mooncake,
native}_agreement.py): the workloads they run and how they print a Markdown table's row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from replay.sim.native.crosscheck import WORKLOADS
from replay.sim.native.host_oracle import B, Req, conversations

Gen = Callable[[np.random.Generator], Sequence[Req]]


def tier_workloads() -> dict[str, Gen]:
    """`conversations` (turns of several conversations interleaved), then the GPU tier's
    cross-check workloads at the oracles' block size."""
    out: dict[str, Gen] = {"conversations": conversations}
    for name, gen in WORKLOADS.items():
        out[name] = (lambda g: lambda rng: g(rng, B))(gen)
    return out


def print_row(cells: Sequence[object]) -> None:
    """One Markdown table row, flushed (a script's table appears as it is measured)."""
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def print_head(cells: Sequence[object]) -> None:
    """A Markdown table's header row and the rule under it."""
    print_row(cells)
    print("|" + "---|" * len(cells))


def print_firsts(firsts: Sequence[str], what: str, why: str) -> None:
    """Each case's first differing request (`what`: the figures each line gives), then the
    mechanism that explains them; nothing where every case agrees."""
    if firsts:
        print(f"\nFirst differing request per case ({what}):")
        print("\n".join(firsts))
        print(why)
