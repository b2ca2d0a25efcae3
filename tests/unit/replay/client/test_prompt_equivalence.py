"""Seeded scenarios for the prompt builder and the ideal-prefix index whose every answer is
pinned by `prompt_equivalence.json` (recorded from the copying implementation before the
shared-buffer one, issue 36 point 7; recorded again when the builder began continuing the
turn the simulator's lineage names instead of the turn completed last: with that choice
forced back, the new builder gave every old line, and 59 of 659 lines moved with it): each
prompt's token ids (a digest), `extends_previous`,
the namespace's remembered block count, and `longest_prefix` for the prompt, for variants of
it and for a retry after a partial answer.

The conversations mix growth over generated ids, outputs longer than the trace leaves room
for (the next prompt cut short of them), context edits, reverted edits (a block coming back),
a hash repeated inside one prompt, prompts with fewer hash ids than blocks, subagents sharing
their parent's namespace (concurrent contexts), replays under another identity, a global
namespace shared by trajectories, a prompt built twice for one turn, empty and one-token
outputs, and a namespace forgotten and rebuilt.

`python tests/unit/replay/client/test_prompt_equivalence.py --record` rewrites the JSON."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

FIXTURE = Path(__file__).with_name("prompt_equivalence.json")


def _traj(tid: str, inputs: list[int], outputs: list[int], blocks: list[list[int]], **kw: Any):
    from replay.traces.model import Trajectory

    bs = kw.pop("block_size", 16)
    scope = kw.pop("hash_scope", "local")
    n = len(inputs)
    offs = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
    dtype = kw.pop("dtype", np.int64)
    return Trajectory(
        id=tid,
        block_size=bs,
        hash_scope=scope,
        namespace=kw.pop("namespace", tid),
        t=np.zeros(n),
        input_tokens=np.asarray(inputs, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        api_time=np.zeros(n),
        think_time=np.zeros(n),
        ttft=np.full(n, np.nan),
        request_type=np.ones(n, dtype=np.int8),
        stop=np.zeros(n, dtype=np.int8),
        hash_offsets=offs,
        hash_ids=np.concatenate([np.asarray(b, dtype=dtype) for b in blocks]),
        **kw,
    )


def random_conversation(rng: np.random.Generator, tid: str, turns: int, bs: int, **kw: Any):
    """Turns that grow, get cut, get edited, revert, repeat a hash or name too few blocks."""
    inputs: list[int] = []
    outputs: list[int] = []
    blocks: list[list[int]] = []
    fresh = int(rng.integers(1, 1000)) * 1000
    n = int(rng.integers(bs // 2, 12 * bs))
    cur = list(range(fresh, fresh + -(-n // bs)))
    fresh += 500
    for k in range(turns):
        out = int(rng.choice([0, 1, 3, bs - 1, bs + 5, 40]))
        if k:
            op = rng.choice(["grow", "grow", "grow", "cut", "edit", "revert", "dup", "few"])
            prev_n = inputs[-1]
            if op == "grow":
                n = prev_n + outputs[-1] + int(rng.integers(0, 3 * bs))
            elif op == "cut":
                n = prev_n + int(rng.integers(0, max(outputs[-1], 1)))
            elif op == "edit":
                n = int(rng.integers(bs, prev_n + 2 * bs))
            elif op == "revert" and len(blocks) > 1:
                j = int(rng.integers(0, len(blocks) - 1))
                cur, n = list(blocks[j]), inputs[j]
            else:
                n = prev_n + outputs[-1] + int(rng.integers(0, 2 * bs))
            nb = -(-n // bs)
            if op == "edit":
                keep = int(rng.integers(0, min(len(cur), nb) + 1))
                cur = cur[:keep] + list(range(fresh, fresh + nb - keep))
                fresh += nb
            elif op != "revert":
                full = (prev_n // bs) if op != "cut" else min(prev_n // bs, nb)
                cur = cur[:full] + list(range(fresh, fresh + max(nb - full, 0)))
                fresh += nb
                cur = cur[:nb]
            if op == "dup" and len(cur) > 2:
                cur[-1] = cur[int(rng.integers(0, len(cur) - 1))]
            if op == "few" and len(cur) > 1:
                cur = cur[: len(cur) - int(rng.integers(1, len(cur)))]
        inputs.append(max(n, 1))
        outputs.append(out)
        blocks.append(list(cur))
    return _traj(tid, inputs, outputs, blocks, block_size=bs, **kw)


class _Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        # Every prompt handed out, with a copy: contexts share buffers between turns and
        # the index keeps views of them, so none may change afterwards.
        self.handed: list[tuple[np.ndarray, np.ndarray]] = []

    def prompt(self, tag: str, ctx: Any, builder: Any, i: int, p: np.ndarray, ix: Any) -> None:
        assert not p.flags.writeable
        self.handed.append((p, p.copy()))
        digest = hashlib.sha1(np.asarray(p, dtype=np.int32).tobytes()).hexdigest()[:16]
        ext = ctx.extends_previous(p)
        lps = [ix.longest_prefix(p)]
        if len(p) > 2:
            q = np.array(p, dtype=np.int32)
            q[len(q) // 2] ^= 1
            lps += [ix.longest_prefix(q), ix.longest_prefix(p[: len(p) * 2 // 3])]
            lps.append(ix.longest_prefix(np.concatenate([p, [5, 6, 7]])))
        self.lines.append(
            f"{tag} t{i} n={len(p)} {digest} ext={ext} rb={builder.remembered_blocks} lp={lps}"
        )


def _gen(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 32000, size=n).astype(np.int32)


def scenarios() -> list[str]:
    from replay.client.ideal import PrefixIndex, computed_sequence
    from replay.prompts import PromptBuilder, TokenSpace

    rec = _Recorder()
    rng = np.random.default_rng(20261205)
    for case in range(14):
        bs = [16, 64, 8][case % 3]
        chunk = [8, 16, 256, 5][case % 4]
        builder = PromptBuilder(TokenSpace(32000 + case, 1000 + case))
        ix = PrefixIndex(chunk_tokens=chunk)
        scope = "global" if case % 5 == 4 else "local"
        dtype = np.int32 if case % 2 else np.int64
        convs = [
            random_conversation(rng, f"c{case}.{k}", 9, bs, hash_scope=scope, dtype=dtype)
            for k in range(3)
        ]
        if scope == "global":
            convs = [dataclasses.replace(c, namespace="global") for c in convs]
        # A subagent in the first conversation's namespace naming its blocks (with ids the
        # parent's generated tokens may have filled) and some of its own.
        par = convs[0]
        pb = [int(x) for x in par.blocks(int(par.num_requests) - 1)]
        sub = _traj(
            f"{par.id}/s",
            [len(pb) * bs + 5, len(pb) * bs + 5 + 2 * bs],
            [4, 4],
            [[*pb, 7_777_000], [*pb, 7_777_001, 7_777_002, 7_777_003]],
            block_size=bs,
            namespace=par.namespace,
            hash_scope=scope,
            agent_id="s",
        )
        ctxs = [builder.context(c) for c in convs]
        ctxs.append(builder.context(convs[1], f"{convs[1].namespace}#replay1"))
        trs = [*convs, convs[1]]
        tags = [c.id for c in convs] + [f"{convs[1].id}#r1"]
        steps = [0] * len(ctxs)
        # Interleave the contexts' turns in a seeded order.
        order = [k for k in range(len(ctxs)) for _ in range(int(trs[k].num_requests))]
        rng.shuffle(order)
        sub_at = len(order) // 2
        for step, k in enumerate(order):
            if step == sub_at:
                sctx = builder.context(sub)
                for j in range(2):
                    p = sctx.prompt(j)
                    rec.prompt(f"{sub.id}", sctx, builder, j, p, ix)
                    g = _gen(rng, 4)
                    ix.insert(computed_sequence(p, g))
                    sctx.completed(j, p, g)
                sctx.release()
            ctx, tr, i = ctxs[k], trs[k], steps[k]
            steps[k] += 1
            p = ctx.prompt(i)
            if rng.random() < 0.15:  # built twice for one turn (a retry re-preparing)
                p = ctx.prompt(i)
            rec.prompt(tags[k], ctx, builder, i, p, ix)
            out = int(tr.output_tokens[i])
            if rng.random() < 0.2 and out > 1:  # an error after a partial answer
                ix.insert(ctx.computed(p, _gen(rng, out // 2)))  # not completed: a copy
                rec.lines.append(f"{tags[k]} t{i} retry lp={ix.longest_prefix(p)}")
            as_list = rng.random() >= 0.9
            arr = _gen(rng, out)
            ids: np.ndarray | list[Any] = list(arr) if as_list else arr
            ctx.completed(i, p, ids)
            seq = ctx.computed(p, ids)  # as the session does: a view of the buffer
            assert np.array_equal(seq, computed_sequence(p, ids))
            ix.insert(seq)
        for ctx in ctxs:
            ctx.release()
        rec.lines.append(f"case {case} released rb={builder.remembered_blocks}")
        # A local namespace forgotten and built again gives the same first prompt.
        again = builder.context(convs[0])
        p = again.prompt(0)
        rec.prompt(f"{convs[0].id}@again", again, builder, 0, p, ix)
        again.release()
    # Longer conversations over 256-token chunks: a ceiling-like growing trace (a partial
    # last block of its own each turn), a cut and an edit, three replays of each.
    builder = PromptBuilder(TokenSpace(151_000, 12345))
    ix = PrefixIndex()
    for k in range(3):
        bs, turns, first, step = 64, 6, 3000 + 517 * k, 211
        inputs = [first + i * step for i in range(turns)]
        inputs[3] = inputs[2] + 20  # shorter than the previous prompt plus its output
        blocks = []
        for i, n in enumerate(inputs):
            nb = -(-n // bs)
            blocks.append([*range(nb - 1), 10_000_000 + i])
        blocks[5] = [*blocks[5][:20], *range(90_000, 90_000 + len(blocks[5]) - 20)]
        tr = _traj(f"long{k}", inputs, [200] * turns, blocks, block_size=bs)
        for ident in (None, f"long{k}#1", f"long{k}#2"):
            ctx = builder.context(tr, ident)
            for i in range(1, turns):
                p = ctx.prompt(i)
                rec.prompt(f"{tr.id}/{ident}", ctx, builder, i, p, ix)
                g = _gen(rng, 200)
                ix.insert(computed_sequence(p, g))
                ctx.completed(i, p, g)
            ctx.release()
    for p, copy in rec.handed:
        assert np.array_equal(p, copy), "a prompt handed out changed afterwards"
    return rec.lines


def test_prompts_and_ideal_prefixes_are_as_recorded() -> None:
    want = json.loads(FIXTURE.read_text())
    got = scenarios()
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a == b


def main() -> None:
    lines = scenarios()
    if "--record" in sys.argv:
        FIXTURE.write_text(json.dumps(lines, indent=0) + "\n")
        print(f"recorded {len(lines)} lines in {FIXTURE}")
    else:
        want = json.loads(FIXTURE.read_text())
        bad = [(a, b) for a, b in zip(lines, want, strict=False) if a != b]
        print(f"{len(lines)} lines, {len(bad)} differ; lengths {len(lines)} vs {len(want)}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
    main()
