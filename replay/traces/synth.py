"""A seeded generator of Weka-format agent sessions, calibrated to the published corpus.

Targets (`semianalysisai/cc-traces-weka-062126`): 393 trajectories, 98,827 requests of which
≈42% inside subagents, mean prompt ≈219K tokens, median ≈142K, median output 444, mean
output ≈1.1K, ≈85% of later requests extend their predecessor, ≈4% context edits, prompts
capped near 990K; and the cache pressure the source's simulation measured on that corpus,
a working set of 0.93 of 2,531 blocks at 32 sessions and 1.34 at 48 (subagents left out).
`tests/unit/replay/traces/test_synth_calibration.py` checks them; the knobs below were tuned
against it (`scripts/calibrate_pressure.py` reruns the pressure experiment).

The pressure is set by the tool gaps: with the other figures fixed, the working set falls as
sessions advance more slowly through their trajectories (a replay starts mid-trajectory and
contexts grow turn by turn). Measured on the 393-trajectory corpus (two corpus seeds × three
workload seeds; README, "Synthesized corpus"), tool gaps of median 2 s (capped mean 12 s)
give 1.14 / 1.79, median 20 s give 1.03 / 1.53, median 60 s (capped mean ≈ 97 s) give
≈ 0.91–0.94 / 1.32–1.36.

The hash ids are real block structure, not noise: a continuation's ids are its predecessor's
full blocks, then fresh ids for the blocks covering the predecessor's last partial block, its
output and the new tool result; a context edit keeps a leading run of blocks, then fresh
ids; side requests (small calls with their own prompt) share nothing. Ids count up per
session (local scope); a general-purpose subagent starts with its parent's system blocks.
`scale` divides every token length (for small samples and tests) and is written into each
session line as `token_scale` (`replay.traces.scale`), so replays apply it; times are not
scaled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from replay.traces.sources import open_output

CAP_TOKENS = 990_000
MAIN_MODEL = "claude-opus-4-6"
SIDE_MODEL = "claude-haiku-4-5"
SUBAGENT_TYPES = ("general-purpose", "Explore", "Plan", "code-reviewer")


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What to generate; the calibration knobs live in `Knobs`."""

    n_trajectories: int = 393
    seed: int = 0
    scale: float = 1.0
    block_size: int = 64


@dataclass(frozen=True, slots=True)
class Knobs:
    """Distribution parameters (lognormals are given as median and sigma)."""

    top_turns: tuple[float, float] = (96.0, 0.78)
    sub_turns: tuple[float, float] = (11.0, 0.9)
    system: tuple[float, float] = (14_000.0, 26_000.0)  # uniform
    sub_system: tuple[float, float] = (6_000.0, 14_000.0)
    first_message: tuple[float, float] = (900.0, 1.0)
    output: tuple[float, float] = (470.0, 1.34)  # side calls pull the median to ≈444
    tool_result: tuple[float, float] = (1_180.0, 1.45)
    sub_tool_result: tuple[float, float] = (2_000.0, 1.3)
    side_prompt: tuple[float, float] = (9_000.0, 0.8)
    compact_to: tuple[float, float] = (30_000.0, 0.4)
    p_side: float = 0.058
    p_edit: float = 0.042
    p_spawn: float = 0.026
    p_nested: float = 0.012
    p_human: float = 0.04
    # Calibrated on the source's working set (see the module docstring): sessions advance
    # about one turn per two minutes (recorded request time + capped gap), not per 30 s.
    tool_gap: tuple[float, float] = (60.0, 1.3)
    human_gap: tuple[float, float] = (45.0, 1.6)
    # Sessions on a 200K-token window compact near `compact_200k` tokens; the rest run on a
    # 1M window and compact at CAP_TOKENS. An experiment (0 in the calibrated corpus): it
    # lowers the pressure too, but pulls the median prompt far below 142K.
    p_200k: float = 0.0
    compact_200k: float = 160_000.0


class _Conv:
    """One conversation's prompt as blocks: the text of its full block ids, and a partial id."""

    __slots__ = ("full", "partial", "text", "tokens")

    def __init__(self) -> None:
        self.text = b""  # "id,id,...,id" for the full blocks
        self.full = 0
        self.partial = b""  # the id of the last, partial block (empty if none)
        self.tokens = 0

    def ids_text(self) -> bytes:
        if not self.partial:
            return self.text
        return self.text + b"," + self.partial if self.text else self.partial

    def keep_blocks(self, k: int) -> None:
        """Cut back to the first k full blocks (a context edit or compaction)."""
        if k < self.full:
            self.text = self.text[: _comma_pos(self.text, k)] if k else b""
            self.full = k
        self.partial = b""


class _Session:
    """Generates one top-level session (and its subagents) as a Weka JSON line."""

    def __init__(
        self, cfg: SynthConfig, knobs: Knobs, rng: np.random.Generator, index: int
    ) -> None:
        self.cfg, self.k, self.rng = cfg, knobs, rng
        self.bs = cfg.block_size
        self.next_id = 1
        self.id = f"synth-{cfg.seed}-{index:05d}"
        self.tps = float(rng.uniform(40, 90))
        self.system_blocks = 1  # full blocks of the root's system prompt, set in `line`
        small = knobs.p_200k > 0 and rng.random() < knobs.p_200k
        self.cap = knobs.compact_200k if small else CAP_TOKENS

    # -- lengths (drawn at full scale, then divided by `scale`) -------------------------
    def _raw(self, spec: tuple[float, float], lo: float = 1.0, hi: float = 1e9) -> float:
        return float(np.clip(spec[0] * np.exp(self.rng.normal(0.0, spec[1])), lo, hi))

    def _scaled(self, x: float) -> int:
        return max(1, round(x / self.cfg.scale))

    def _ln(self, spec: tuple[float, float], lo: float = 1.0, hi: float = 1e9) -> int:
        return self._scaled(self._raw(spec, lo, hi))

    def _uniform(self, spec: tuple[float, float]) -> int:
        return max(1, round(float(self.rng.uniform(*spec)) / self.cfg.scale))

    # -- blocks ------------------------------------------------------------------------
    def _fresh(self, n: int) -> bytes:
        start = self.next_id
        self.next_id += n
        return b",".join(b"%d" % i for i in range(start, start + n))

    def _grow(self, conv: _Conv, new_tokens: int) -> None:
        """Append tokens: the old partial block and every block after it get fresh ids."""
        conv.tokens += new_tokens
        full = conv.tokens // self.bs
        if full > conv.full:
            add = self._fresh(full - conv.full)
            conv.text = conv.text + b"," + add if conv.text else add
            conv.full = full
        conv.partial = self._fresh(1) if conv.tokens % self.bs else b""

    def _cut(self, conv: _Conv, keep: int) -> None:
        conv.keep_blocks(keep)
        conv.tokens = keep * self.bs

    # -- requests ----------------------------------------------------------------------
    def _request(
        self, conv: _Conv, t: float, out_raw: float, kind: str, stop: str, think: float
    ) -> tuple[bytes, float]:
        """One request; times come from full-scale draws, so `scale` never changes them."""
        out = self._scaled(out_raw)
        ttft = 0.4 + float(np.exp(self.rng.normal(0.0, 0.5)))
        api = ttft + out_raw / self.tps
        side = kind == "side"
        fields: dict[str, Any] = {
            "t": round(t, 3),
            "type": "n" if side else "s",
            "model": SIDE_MODEL if side else MAIN_MODEL,
            "in": conv.tokens,
            "out": out,
            "input_types": ["text"] if kind in ("first", "human", "side") else ["tool_result"],
            "output_types": ["text"] if stop != "tool_use" else ["thinking", "text", "tool_use"],
            "stop": stop,
            "api_time": round(api, 3),
            "think_time": round(think, 3),
        }
        if not side:
            fields["ttft"] = round(ttft, 3)
        line = orjson.dumps(fields)[:-1] + b',"hash_ids":[' + conv.ids_text() + b"]}"
        return line, api

    def _conversation(
        self, conv: _Conv, turns: int, t: float, depth: int, tool: tuple[float, float]
    ) -> tuple[list[bytes], float]:
        """Run one conversation of `turns` main requests from time t; return entries, end time."""
        k, rng = self.k, self.rng
        entries: list[bytes] = []
        think, kind = 0.0, "first"
        for turn in range(turns):
            last = turn == turns - 1
            out_raw = self._raw(k.output, 1, 32_000)
            out = self._scaled(out_raw)
            human = not last and rng.random() < k.p_human
            stop = "end_turn" if last or human else "tool_use"
            line, api = self._request(conv, t, out_raw, kind, stop, think)
            entries.append(line)
            done = t + api
            if not last and rng.random() < k.p_side:
                side = _Conv()
                self._grow(side, self._ln(k.side_prompt, 500, 60_000))
                side_line, _ = self._request(
                    side,
                    t + api * float(rng.uniform(0.1, 0.9)),
                    self._raw((60.0, 0.8)),
                    "side",
                    "end_turn",
                    0.0,
                )
                entries.append(side_line)
            n_spawn = 0
            if not last and rng.random() < (k.p_spawn if depth == 0 else k.p_nested):
                n_spawn = int(rng.choice([1, 2, 3], p=[0.7, 0.2, 0.1]))
            resume = done
            for _ in range(n_spawn if depth < 2 else 0):
                entry, end = self._subagent(conv, done + float(rng.uniform(0.05, 0.5)), depth + 1)
                entries.append(entry)
                resume = max(resume, end)
            if last:
                return entries, done
            gap = k.human_gap if human else k.tool_gap
            think = resume - done + float(np.exp(np.log(gap[0]) + rng.normal(0, gap[1])))
            t = done + think
            kind = "human" if human else "tool"
            new = out + (self._ln((150.0, 1.0)) if human else self._ln(tool, 20, 60_000))
            if conv.tokens + new > self.cap / self.cfg.scale:
                self._cut(
                    conv, max(1, self.system_blocks)
                )  # compaction: summary after the system prompt
                new = self._ln(k.compact_to)
            elif rng.random() < k.p_edit and conv.full > 1:
                keep = max(1, int(conv.full * rng.uniform(0.3, 0.98)))
                dropped = conv.tokens - keep * self.bs
                self._cut(conv, keep)
                new += int(dropped * rng.uniform(0.6, 1.0))
            self._grow(conv, new)
        return entries, t

    def _subagent(self, parent: _Conv, t: float, depth: int) -> tuple[bytes, float]:
        k, rng = self.k, self.rng
        conv = _Conv()
        stype = SUBAGENT_TYPES[int(rng.integers(len(SUBAGENT_TYPES)))]
        system = self._uniform(k.sub_system)
        if stype == "general-purpose" and parent.full:
            # Starts from a copy of the parent's seen blocks: its system prompt blocks.
            shared = min(parent.full, self.system_blocks, system // self.bs)
            if shared:
                conv.text = parent.text[: _comma_pos(parent.text, shared)]
                conv.full, conv.tokens = shared, shared * self.bs
                system -= shared * self.bs
        self._grow(conv, system + self._ln(k.first_message))
        turns = max(
            1, round(np.clip(k.sub_turns[0] * np.exp(rng.normal(0, k.sub_turns[1])), 1, 300))
        )
        entries, end = self._conversation(conv, turns, t, depth, k.sub_tool_result)
        head = {
            "t": round(t, 3),
            "type": "subagent",
            "agent_id": f"a{int(rng.integers(1 << 40)):010x}",
            "subagent_type": stype,
            "status": "completed",
            "duration_ms": round((end - t) * 1000),
            "models": [MAIN_MODEL],
        }
        return orjson.dumps(head)[:-1] + b',"requests":[' + b",".join(entries) + b"]}", end

    def line(self) -> bytes:
        k, rng = self.k, self.rng
        conv = _Conv()
        system = self._uniform(k.system)
        self._grow(conv, system)
        self.system_blocks = conv.full
        self._grow(conv, self._ln(k.first_message))
        turns = round(np.clip(k.top_turns[0] * np.exp(rng.normal(0, k.top_turns[1])), 8, 1500))
        entries, _ = self._conversation(conv, turns, 0.0, 0, k.tool_result)
        head = {
            "id": self.id,
            "models": [MAIN_MODEL, SIDE_MODEL],
            "block_size": self.bs,
            "hash_id_scope": "local",
            "tool_tokens": round(system * 0.6),
            "system_tokens": round(system * 0.4),
        }
        if self.cfg.scale != 1:
            head["token_scale"] = self.cfg.scale  # replay.traces.scale reads it
        return orjson.dumps(head)[:-1] + b',"requests":[' + b",".join(entries) + b"]}"


def _comma_pos(text: bytes, k: int) -> int:
    """Byte offset where the first k ids of `text` end (k >= 1)."""
    commas = np.flatnonzero(np.frombuffer(text, np.uint8) == 0x2C)
    return int(commas[k - 1]) if k <= len(commas) else len(text)


def synth_lines(
    cfg: SynthConfig, knobs: Knobs | None = None, limit: int | None = None
) -> Iterator[bytes]:
    """One Weka JSON line per session; `limit` overrides `cfg.n_trajectories` (None: as cfg)."""
    if cfg.scale < 1 or cfg.block_size < 1:
        raise ValueError("scale must be >= 1 and block_size >= 1")
    rng = np.random.default_rng(cfg.seed)
    count = cfg.n_trajectories if limit is None else limit
    for i in range(count):
        yield _Session(cfg, knobs or Knobs(), rng, i).line()


def write_synth(
    path: Path, cfg: SynthConfig, *, min_bytes: int | None = None, knobs: Knobs | None = None
) -> int:
    """Write sessions to `path` (gzip if it ends with .gz); with `min_bytes`, keep generating
    until at least that many (uncompressed) bytes are written. Returns the sessions written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written = sessions = 0
    limit = 1 << 62 if min_bytes else None
    with open_output(path) as fh:
        for line in synth_lines(cfg, knobs, limit=limit):
            fh.write(line + b"\n")
            written += len(line) + 1
            sessions += 1
            if min_bytes and written >= min_bytes:
                break
    return sessions
