"""A seeded generator of Weka-format agent sessions shaped like the real cc-traces corpus.

Calibrated on the published figures of `semianalysisai/cc-traces-weka-062126`
(`replay/data/reference-cc-traces-062126.yaml`: prompt and output quantiles, new prefill per
turn, turns per session, gaps between turns, waiting share, the subagent structure, the
ideal prefix hit, the totals), and on nothing else: the working set and the hit rates are
outputs, measured after (docs/corpus.md). `Knobs` holds every input; each says which figure
sets it. `experiments/calibrate_synth.py` prints the generated figures beside the published
ones; `tests/unit/replay/traces/test_synth_reference.py` checks each within the file's
tolerance. Where the figures leave a shape open the file's `choices:` say what is assumed;
`experiments/synth_shapes.py` shows each choice's effect.

The hash ids are real block structure: a continuation's ids are its predecessor's full
blocks, then fresh ids for the blocks covering the predecessor's last partial block, its
output and the new tool result; a context edit keeps a leading run of blocks, then fresh
ids; side calls (small model, own prompt) share nothing. Ids count up per session (local
scope); a general-purpose subagent starts with its parent's system blocks. `scale` divides
every token length (for small samples and tests) and is written into each session line as
`token_scale` (`replay.traces.scale`), so replays apply it; times are not scaled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from replay.traces.sources import open_output

CAP_TOKENS = 990_000  # contexts up to 990k (AgentX page, reference file's `agentx`)
MAIN_MODEL = "claude-opus-4-6"
SIDE_MODEL = "claude-haiku-4-5"
SUBAGENT_TYPES = ("general-purpose", "Explore", "Plan", "code-reviewer")
LogN = tuple[float, float]  # a lognormal as (median, sigma)


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What to generate; the calibration knobs live in `Knobs`."""

    n_trajectories: int = 393
    seed: int = 0
    scale: float = 1.0
    block_size: int = 64


@dataclass(frozen=True, slots=True)
class Knobs:
    """Distribution inputs, full-size tokens and seconds. Fitted (experiments/calibrate_synth.py,
    docs/corpus.md) to the reference figure named beside each; shapes as the reference
    file's `choices:` say."""

    top_turns: LogN = (57.0, 1.22)  # main_turns_p50 / p90 (side calls add the rest)
    system: tuple[float, float] = (14_000.0, 26_000.0)  # uniform; first prompt ≥ 10K
    first_message: LogN = (900.0, 1.0)
    # A resumed session starts with its earlier conversation: measured on kvct-dev (45% of
    # sessions start above 40K tokens; those starts median ≈ 120K, p78 ≈ 232K).
    p_resumed: float = 0.45
    resumed_context: LogN = (120_000.0, 0.86)
    output: LogN = (700.0, 1.25)  # main_output_p50 / p90 / mean
    output_cap: float = 16_000.0
    tool_result: LogN = (340.0, 1.2)  # new_prefill_p50 / mean, main_prompt quantiles
    # A rare turn brings a big result (Read returns up to 25,000 tokens a call, several
    # calls a turn: anthropics/claude-code issue #4002): new_prefill_p99.
    p_big_tool: float = 0.015
    big_tool_result: LogN = (55_000.0, 0.3)
    human_message: LogN = (150.0, 1.0)
    p_side: float = 0.10  # side calls per main turn: continuation_share
    side_prompt: LogN = (8_000.0, 0.8)
    side_output: LogN = (60.0, 0.8)
    compact_to: LogN = (30_000.0, 0.4)  # the summary a compaction leaves
    compact_at: tuple[float, float] = (700_000.0, CAP_TOKENS)  # per session, uniform
    p_edit: float = 0.044  # per continuation: context_edit_share
    p_big_edit: float = 0.02  # of edits, keep only U(0.05, 0.5): kvct-dev's shape
    # Gaps (seconds) after a turn that ended in tool_use (the tool's run, which Claude
    # Code's Bash tool ends at its timeout: 120 s by default, a call may ask up to 600 s;
    # its utils/timeouts.ts DEFAULT_TIMEOUT_MS / MAX_TIMEOUT_MS), and after end_turn (a
    # person). Fitted together to gap p50/p90/p99, over 300 s / 1,800 s and the mean.
    p_human: float = 0.075  # share of main turns ending in end_turn
    tool_gap: LogN = (4.9, 2.51)
    human_gap: LogN = (140.0, 2.93)
    human_gap_cap: float = 4 * 86_400.0  # a longer pause is another session
    tool_timeout: tuple[float, float] = (120.0, 600.0)  # default, the most a call may ask
    p_long_timeout: float = 0.3  # of tool runs, those asking for the longest timeout
    timeout_overhead: float = 20.0  # up to this many seconds past the timeout (uniform)
    sub_tool_gap: LogN = (4.0, 1.27)  # measured: kvct-dev's subagent gaps (p50 4.0, p90 20)
    # Request time: ttft grows with the prompt (kvct-dev medians by prompt band), then decode.
    ttft: tuple[float, float, float] = (1.5, 4e-6, 1.9e-11)  # s, s/token, s/token²
    ttft_sigma: float = 0.5
    decode_rate: LogN = (160.0, 0.3)  # tokens/s per session: waiting_share
    # Subagents: sessions_with_subagents_share, groups per session, peak at once, requests
    # per group (reference `choices: subagent_fan_out`).
    p_subagents: float = 0.445
    batches: LogN = (1.45, 1.7)  # batches per session (rounded, 1 to 15)
    batch_poisson: float = 1.5  # a batch holds 1 + Poisson(λ) groups, run at once
    sub_turns: LogN = (16.0, 0.94)
    sub_system: tuple[float, float] = (6_000.0, 14_000.0)
    sub_first_message: LogN = (8_000.0, 1.0)
    sub_output: LogN = (300.0, 1.25)  # median_output, mean_output
    sub_tool_result: LogN = (1_000.0, 1.2)  # subagent_prompt_p50 / p90
    p_nested: float = 0.0  # groups inside groups: none in the published corpus


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
        self.rate = self._raw(knobs.decode_rate, 5.0, 1_000.0)
        self.system_blocks = 1  # full blocks of the root's system prompt, set in `line`
        self.compact_at = float(rng.uniform(*knobs.compact_at)) / cfg.scale

    # -- lengths (drawn at full scale, then divided by `scale`) -------------------------
    def _raw(self, spec: LogN, lo: float = 1.0, hi: float = 1e9) -> float:
        return float(np.clip(spec[0] * np.exp(self.rng.normal(0.0, spec[1])), lo, hi))

    def _scaled(self, x: float) -> int:
        return max(1, round(x / self.cfg.scale))

    def _ln(self, spec: LogN, lo: float = 1.0, hi: float = 1e9) -> int:
        return self._scaled(self._raw(spec, lo, hi))

    def _uniform(self, spec: tuple[float, float]) -> int:
        return max(1, round(float(self.rng.uniform(*spec)) / self.cfg.scale))

    def _count(self, spec: LogN, lo: int, hi: int) -> int:
        return round(self._raw(spec, lo, hi))

    # -- blocks ------------------------------------------------------------------------
    def _fresh(self, n: int) -> bytes:
        start = self.next_id
        self.next_id += n
        return _ids_text(start, n)

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
        k = self.k
        full_in = conv.tokens * self.cfg.scale
        a, b, c = k.ttft
        ttft = (a + b * full_in + c * full_in * full_in) * float(
            np.exp(self.rng.normal(0.0, k.ttft_sigma))
        )
        api = ttft + out_raw / self.rate
        side = kind == "side"
        fields: dict[str, Any] = {
            "t": round(t, 3),
            "type": "n" if side else "s",
            "model": SIDE_MODEL if side else MAIN_MODEL,
            "in": conv.tokens,
            "out": self._scaled(out_raw),
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

    def _side(self, t: float) -> bytes:
        side = _Conv()
        self._grow(side, self._ln(self.k.side_prompt, 500, 60_000))
        line, _ = self._request(side, t, self._raw(self.k.side_output), "side", "end_turn", 0.0)
        return line

    def _next_tokens(self, conv: _Conv, new: int) -> int:
        """Compaction at the cap, or a context edit; returns the tokens to append."""
        k, rng = self.k, self.rng
        if conv.tokens + new > self.compact_at:
            self._cut(conv, max(1, self.system_blocks))  # the summary follows the system prompt
            return self._ln(k.compact_to)
        if rng.random() < k.p_edit and conv.full > 1:
            if rng.random() < k.p_big_edit:
                keep = max(1, int(conv.full * rng.uniform(0.05, 0.5)))
            else:  # the measured common case: the last block or two change
                keep = max(1, conv.full - int(rng.geometric(0.6)))
            dropped = conv.tokens - keep * self.bs
            self._cut(conv, keep)
            return new + int(dropped * rng.uniform(0.6, 1.0))
        return new

    def _conversation(
        self, conv: _Conv, turns: int, t: float, spawns: dict[int, int], sub: bool
    ) -> tuple[list[bytes], float]:
        """Run one conversation of `turns` requests from time t (spawns: turn → batch size);
        return its entries and end time."""
        k, rng = self.k, self.rng
        entries: list[bytes] = []
        think, kind = 0.0, "first"
        out_spec = k.sub_output if sub else k.output
        tool_spec = k.sub_tool_result if sub else k.tool_result
        for turn in range(turns):
            last = turn == turns - 1
            out_raw = self._raw(out_spec, 1, k.output_cap)
            human = not sub and not last and rng.random() < k.p_human
            stop = "end_turn" if last or human else "tool_use"
            line, api = self._request(conv, t, out_raw, kind, stop, think)
            entries.append(line)
            done = t + api
            if not sub and not last and rng.random() < k.p_side:
                entries.append(self._side(t + api * float(rng.uniform(0.1, 0.9))))
            resume = done
            for _ in range(spawns.get(turn, 0) if not last else 0):
                entry, end = self._subagent(conv, done + float(rng.uniform(0.05, 0.5)))
                entries.append(entry)
                resume = max(resume, end)
            if last:
                return entries, done
            gap = self._raw(k.human_gap, 0.0, k.human_gap_cap) if human else self._tool_gap(sub)
            think = resume - done + gap
            t = done + think
            kind = "human" if human else "tool"
            if human:
                tail = self._ln(k.human_message)
            elif not sub and rng.random() < k.p_big_tool:
                tail = self._ln(k.big_tool_result)
            else:
                tail = self._ln(tool_spec, 20, 200_000)
            self._grow(conv, self._next_tokens(conv, self._scaled(out_raw) + tail))
        return entries, t

    def _tool_gap(self, sub: bool) -> float:
        """A tool's run time, ended by the Bash tool's timeout."""
        k, rng = self.k, self.rng
        run = self._raw(k.sub_tool_gap if sub else k.tool_gap, 0.0, 1e7)
        limit = k.tool_timeout[1] if rng.random() < k.p_long_timeout else k.tool_timeout[0]
        return min(run, limit + k.timeout_overhead * float(rng.random()))

    def _subagent(self, parent: _Conv, t: float) -> tuple[bytes, float]:
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
        self._grow(conv, system + self._ln(k.sub_first_message))
        turns = self._count(k.sub_turns, 1, 500)
        nested = {}
        if k.p_nested > 0 and turns > 1 and rng.random() < k.p_nested:
            nested = {int(rng.integers(turns - 1)): 1}
        entries, end = self._conversation(conv, turns, t, nested, sub=True)
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

    def _spawn_plan(self, turns: int) -> dict[int, int]:
        """Which main turns spawn a batch of subagent groups, and how many groups each."""
        k, rng = self.k, self.rng
        if turns < 2 or rng.random() >= k.p_subagents:
            return {}
        n = min(self._count(k.batches, 1, 15), turns - 1)
        sizes = [1 + int(rng.poisson(k.batch_poisson)) for _ in range(n)]
        at = rng.choice(turns - 1, size=len(sizes), replace=False)
        return {int(a): s for a, s in zip(at, sizes, strict=True)}

    def line(self) -> bytes:
        k = self.k
        conv = _Conv()
        system = self._uniform(k.system)
        self._grow(conv, system)
        self.system_blocks = conv.full
        first = self._ln(k.first_message)
        if self.rng.random() < k.p_resumed:
            first += self._ln(k.resumed_context, 1.0, 0.9 * self.compact_at * self.cfg.scale)
        self._grow(conv, first)
        turns = self._count(k.top_turns, 3, 3_000)
        entries, _ = self._conversation(conv, turns, 0.0, self._spawn_plan(turns), sub=False)
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


class _IdText:
    """The text "1,2,3,…" of consecutive ids, built once and sliced (ids count up from 1)."""

    def __init__(self) -> None:
        self.size = 0
        self.text = b""
        self.ends = np.zeros(1, dtype=np.int64)  # ends[i]: where id i's digits end

    def grow(self, n: int) -> None:
        ids = np.arange(self.size + 1, n + 1)
        part = b",".join(b"%d" % i for i in ids.tolist())
        lens = np.char.str_len(ids.astype(str)).astype(np.int64) + 1
        base = len(self.text) + 1 if self.size else 0
        ends = base + np.cumsum(lens) - 1
        self.text = self.text + b"," + part if self.size else part
        self.ends = np.concatenate((self.ends, ends))
        self.size = n

    def slice(self, start: int, n: int) -> bytes:
        if start + n - 1 > self.size:
            self.grow(max(2 * self.size, start + n, 1 << 16))
        lo = int(self.ends[start - 1]) + 1 if start > 1 else 0
        return self.text[lo : int(self.ends[start + n - 1])]


_IDS = _IdText()


def _ids_text(start: int, n: int) -> bytes:
    return _IDS.slice(start, n)


def _comma_pos(text: bytes, k: int) -> int:
    """Byte offset where the first k ids of `text` end (k >= 1)."""
    commas = np.flatnonzero(np.frombuffer(text, np.uint8) == 0x2C)
    return int(commas[k - 1]) if k <= len(commas) else len(text)


def synth_lines(
    cfg: SynthConfig, knobs: Knobs | None = None, limit: int | None = None
) -> Iterator[bytes]:
    """One Weka JSON line per session; `limit` overrides `cfg.n_trajectories` (None: as cfg)."""
    from replay.traces.scale import check_scale

    check_scale(cfg.scale, "scale")
    if cfg.block_size < 1:
        raise ValueError("block_size must be >= 1")
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


# What `write_synth` writes per session, on average, in bytes: a session's hash ids (its
# prompts' blocks, written out as decimal ids) shrink with the scale, the rest (times,
# lengths, stop reasons) does not. Measured on this generator (seeds 0-2, 60 to 200
# sessions each, Dec 2026): .jsonl 4.11-4.13 MB a session at --scale 1, 2.06-2.54 MB at 2,
# 0.51-0.62 MB at 8, 0.23-0.27 MB at 16, 94-140 kB at 64, 38-71 kB at 256 and above;
# .jsonl.gz (level 6) 0.90-0.97 MB at 1 (an id run is longer than gzip's 32 kB window, so a
# repeated prefix does not compress), 0.10-0.31 MB at 2, 24-31 kB at 4, 11 kB at 16, 7-10 kB
# at 64, 4-8 kB at 256 and above. The fits below are at or above the typical figure.
RAW_BYTES_FULL_SIZE = 4.2e6  # ÷ scale
RAW_BYTES_FIXED = 60e3
GZ_BYTES_FULL_SIZE = 1.0e6  # ÷ scale²
GZ_BYTES_FIXED = 10e3


def estimated_bytes(n_trajectories: int, scale: float, gz: bool) -> float:
    """About how many bytes `write_synth` writes for `n_trajectories` sessions at `scale`
    (gzip-compressed when `gz`): the average measured above; a few sessions vary widely."""
    if gz:
        per = GZ_BYTES_FULL_SIZE / scale**2 + GZ_BYTES_FIXED
    else:
        per = RAW_BYTES_FULL_SIZE / scale + RAW_BYTES_FIXED
    return n_trajectories * per
