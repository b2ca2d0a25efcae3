"""The real router in the loop: smg (SGLang's router, pinned) in front of K emulator replicas,
a trace replayed through it, and our `cache_aware` model (replay.fleet.cache_aware) run on the
same request stream with the same in-flight loads, compared request by request (issue 26).

    .venv/bin/python scripts/router_agreement.py                      # the bundled sample
    .venv/bin/python scripts/router_agreement.py --trace ../shared/traces/kvct-dev.jsonl.gz \\
        --sessions 24 --turns 12 --replicas 4 --wave 12
    .venv/bin/python scripts/router_agreement.py --smg-arg=--worker-warmup-secs=0   # a toggle

How the stream is made exact:
- Prompts are the trace's (PromptBuilder: hash blocks to token ids, each turn growing the last
  prompt plus what the engine generated), lengths divided by --token-scale. smg's HTTP path
  takes a text `prompt` only, so each prompt goes as the text the emulator's built-in
  tokenizer reads back into exactly those ids (checked for every request: `round trip`).
- Requests go in waves: the next turn of each of --wave active sessions, one after another;
  each is sent only once the previous one has reached its replica (the replicas'
  /emulator/stats request counts), so smg decides them in the order sent. A wave's requests
  drain and settle before the next wave. So the in-flight load smg saw for the k-th request
  of a wave is what the wave's first k-1 put on each replica, less those the client saw end
  before it sent the k-th (the client sees an end after smg does); `racy` counts
  the requests during whose routing one ended (their load is uncertain). The model is handed
  exactly that: its load book and tree follow smg's choices (teacher forcing), so one
  disagreement does not cascade.
- smg's load poll (every 10 s: the replicas' /metrics) feeds its expected-wait miss rule. Its
  debug log orders the polls among the decisions; the snapshot each poll took is read back
  from smg's /get_loads after every wave and handed to the model at that point.
- smg's own decision line per request (branch, matched and input characters) is kept beside
  the model's, so a disagreement names both sides' branches.

Prints `agreement 0.97`-style figures: exact, and within ties (smg breaks exact ties at
random: cache_aware.rs argmax_with_random_ties, least_load.rs's reservoir), overall and per
branch; --json writes every request's row. smg comes from $REPLAY_SMG, the project's
.venv-smg (scripts/setup_peers.sh) or the PATH; its processes are checked gone at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import pickle
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from replay.emulator.launch import start_fleet  # noqa: E402
from replay.emulator.server import REPLICA_HEADER  # noqa: E402
from replay.emulator.tokenizer import BuiltinTokenizer  # noqa: E402
from replay.engines.smg import ROUTED_HEADER, SmgError, SmgMissing, start_smg  # noqa: E402
from replay.fleet import LoadBook, RouterContext, RouteRequest  # noqa: E402
from replay.fleet.cache_aware import CacheAware  # noqa: E402
from replay.profiles import DEFAULT_MODEL, load_profile  # noqa: E402
from replay.prompts import PromptBuilder, TokenSpace  # noqa: E402
from replay.traces import TraceError, Trajectory, load_trace, sample_path  # noqa: E402

ENGINE = "vllm"
# smg 1.13.0's decision-line branches, as the model names them.
SMG_BRANCHES = {
    "tree_match": "cache_hit", "spill": "spill", "expected_wait_fallback": "cache_miss",
    "kv_pressure_expected_wait": "imbalanced",
}  # fmt: skip
POLL_MESSAGE = "Fetched loads from"


@dataclasses.dataclass
class Row:
    """One request as sent through smg, and what each side chose for it."""

    seq: int
    wave: int
    session: str
    turn: int
    tokens: int
    chars: int
    round_trip: bool
    smg: int = -1  # replica smg routed to (its x-smg-routed-worker-id)
    served: int = -1  # replica that answered (the emulator's x-replay-replica)
    racy: bool = False  # a request ended while it was being routed: its load is uncertain
    sent_t: float = 0.0  # client clock (monotonic s): sent, routed (reached a replica), done
    routed_t: float = 0.0
    done_t: float = 0.0
    smg_branch: str = ""
    smg_matched: int = 0  # characters smg matched in its tree
    model: int = -1
    model_branch: str = ""
    tied: list[int] = dataclasses.field(default_factory=list)  # model's equal-best replicas
    scores: list[float] = dataclasses.field(default_factory=list)  # model's, per replica
    poll: int = 0  # smg load polls logged before its decision
    smg_line: dict[str, Any] = dataclasses.field(default_factory=dict)  # its decision line
    error: str = ""


def scaled(tr: Trajectory, scale: float) -> Trajectory:
    """The trajectory with token lengths and block size divided by `scale` (hash ids kept)."""
    if scale == 1:
        return tr
    bs = max(round(tr.block_size / scale), 1)
    lengths = np.maximum(np.ceil(tr.input_tokens / scale).astype(np.int64), 1)
    return dataclasses.replace(tr, block_size=bs, input_tokens=lengths, subagents=())


async def _arrived(http: aiohttp.ClientSession, urls: list[str]) -> int:
    total = 0
    for url in urls:
        async with http.get(url + "/emulator/stats") as resp:
            total += int((await resp.json())["faults"]["requests"])
    return total


async def _send(
    http: aiohttp.ClientSession, router: str, model_id: str, text: str, out: int
) -> tuple[dict[str, str], str, str, float]:
    body = {
        "model": model_id, "prompt": text, "max_tokens": out, "stream": True,
        "ignore_eos": True,
    }  # fmt: skip
    async with http.post(router + "/v1/completions", json=body) as resp:
        headers = {k.lower(): v for k, v in resp.headers.items()}
        if resp.status != 200:
            return headers, "", f"HTTP {resp.status}: {(await resp.text())[:300]}", 0.0
        parts = []
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]":
                chunk = json.loads(line[5:])
                parts += [c.get("text", "") for c in chunk.get("choices", [])]
        return headers, "".join(parts), "", time.monotonic()


def _log_events(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _polls(log: str) -> int:
    return sum(1 for e in _log_events(log) if POLL_MESSAGE in str(e.get("message", "")))


async def replay(args: argparse.Namespace, sessions: list[Trajectory]) -> dict[str, Any]:
    """Drive the sessions through smg in waves: the rows, smg's log, the load snapshots."""
    profile = load_profile(DEFAULT_MODEL)
    tok = BuiltinTokenizer(profile.vocab_size)
    builder = PromptBuilder(TokenSpace(profile.vocab_size, salt=args.seed))
    rows: list[Row] = []
    texts: list[str] = []
    # A prefix every session's prompts start with (an agent's system prompt), if asked for.
    shared = args.shared_prefix
    common = TokenSpace(profile.vocab_size, salt=args.seed + 1).tokens(
        np.arange(1, dtype=np.uint64), max(shared, 1)
    )[:shared]
    head = tok.decode(common)
    snapshots: dict[int, dict[str, Any]] = {}  # polls seen → smg's /get_loads then
    flags = ["--log-level", "debug", "--log-json", *args.smg_arg]
    with start_fleet([ENGINE], args.replicas, time_scale=args.time_scale) as group:
        urls = group.fleet[ENGINE]
        index_of = {u: i for i, u in enumerate(urls)}
        with start_smg(urls, "cache_aware", flags) as smg:
            pids = sorted(smg.processes())
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
                async with http.get(urls[0] + "/v1/models") as resp:
                    model_id = (await resp.json())["data"][0]["id"]
                # Start once one poll has answered for every replica (the first, at start-up,
                # may cover only those registered by then).
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    polls = [
                        e for e in _log_events(smg.log_path.read_text(errors="replace"))
                        if POLL_MESSAGE in str(e.get("message", ""))
                    ]  # fmt: skip
                    if any(f"{len(urls)}/{len(urls)} polled" in p["message"] for p in polls):
                        break
                    await asyncio.sleep(0.2)
                queue = list(sessions)
                active: list[list[Any]] = []  # [trajectory, context, next turn]
                wave = 0
                while queue or active:
                    while queue and len(active) < args.wave:
                        tr = queue.pop(0)
                        active.append([tr, builder.context(tr), 0])
                    sent: list[tuple[Row, Any, np.ndarray, asyncio.Task[Any]]] = []
                    base = await _arrived(http, urls)
                    for tr, ctx, i in active:
                        ids = ctx.prompt(i)
                        text = head + tok.decode(ids)
                        same = bool(np.array_equal(tok.encode(text)[shared:], ids))
                        row = Row(len(rows), wave, tr.id, i, len(ids) + shared, len(text), same)
                        rows.append(row)
                        texts.append(text)
                        out = int(min(max(tr.output_tokens[i], 1), args.max_tokens))
                        row.sent_t = time.monotonic()
                        task = asyncio.create_task(_send(http, smg.url, model_id, text, out))
                        sent.append((row, ctx, ids, task))
                        while not task.done() and await _arrived(http, urls) < base + len(sent):
                            await asyncio.sleep(0.002)
                        row.routed_t = time.monotonic()
                    for row, ctx, ids, task in sent:
                        headers, gen, err, row.done_t = await task
                        row.error = err
                        row.smg = index_of.get(headers.get(ROUTED_HEADER, ""), -1)
                        row.served = int(headers.get(REPLICA_HEADER, -1))
                        ctx.completed(row.turn, ids, tok.encode(gen))
                    async with http.get(smg.url + "/get_loads") as resp:
                        loads = await resp.json()
                    snapshots[_polls(smg.log_path.read_text(errors="replace"))] = loads
                    for a in active:
                        a[2] += 1
                    active = [a for a in active if a[2] < min(a[0].num_requests, args.turns)]
                    wave += 1
                    await asyncio.sleep(args.settle_s)
            log = smg.log_path.read_text(errors="replace")
            version = smg.version
    return {"rows": rows, "log": log, "snapshots": snapshots, "urls": urls, "pids": pids,
            "version": version, "texts": texts}  # fmt: skip


def _snapshot_for(poll: int, snapshots: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The /get_loads read after the wave in which poll number `poll` happened."""
    later = [n for n in snapshots if n >= poll]
    return snapshots[min(later)] if later else None


def queued_work(load: dict[str, Any], pbar: int) -> float:
    """A load record's work ahead of a new request, in tokens: the waiting queue (its uncached
    tokens, else its requests at the mean prefill, least_load.rs `queued_tokens`) plus the
    running requests at the mean prefill (1.13.0's running_estimated_tokens: measured, the
    model then follows smg's alternation after a poll that saw requests running)."""
    waiting = float(load.get("num_waiting_uncached_tokens") or 0) or (
        float(load.get("num_waiting_reqs") or 0) * pbar
    )
    return waiting + float(load.get("num_running_reqs") or 0) * pbar


def model_pass(run: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """Run our cache_aware on smg's stream, in smg's log order; fill each row's model side.
    Returns the problems found (rows without a decision line, and so on)."""
    rows: list[Row] = run["rows"]
    urls: list[str] = run["urls"]
    index_of = {u: i for i, u in enumerate(urls)}
    router = CacheAware(RouterContext(len(urls), seed=args.seed), model_params(args))
    book = LoadBook(len(urls))
    problems: list[str] = []
    polls, k = 0, 0
    tickets: dict[int, list[tuple[int, Any]]] = {}
    pbar = router.int_param("mean_prefill_tokens")
    for event in _log_events(run["log"]):
        message = str(event.get("message", ""))
        if POLL_MESSAGE in message:
            polls += 1
            snap = _snapshot_for(polls, run["snapshots"])
            if snap is not None:
                got = [(index_of[x["worker"]], x) for x in snap["loads"] if x["worker"] in index_of]
                router.load_poll(
                    [i for i, _ in got],
                    [queued_work(x, pbar) for _, x in got],
                    # The barrier's utilisation: the load record's resident_token_usage
                    # (a field name in smg 1.13.0's binary), which vLLM-style /metrics do not
                    # give. Its token_usage (running requests' KV) is not it: with it the
                    # model broke ties smg broke at random.
                    [float(x.get("resident_token_usage") or 0.0) for _, x in got],
                )
            continue
        if message != "Cache-aware selection":
            continue
        if k >= len(rows):
            problems.append(f"more decision lines than requests ({k + 1})")
            break
        row = rows[k]
        # A new wave: the previous one drained before it was sent.
        for wave in [w for w in tickets if w < row.wave]:
            for _, t in tickets.pop(wave):
                book.finish(t)
        # Within the wave: a request the client saw end before this one was sent had ended
        # at smg (it decrements before it forwards the last bytes); one that ended while this
        # one was being routed makes its load uncertain (racy).
        for seq, t in tickets.get(row.wave, []):
            end = rows[seq].done_t
            if end and end < row.sent_t:
                book.finish(t)
            elif end and end <= row.routed_t:
                row.racy = True
        row.smg_branch = str(event.get("branch", ""))
        row.smg_matched = int(event.get("matched_units", 0))
        row.smg_line = {
            key: v for key, v in event.items()
            if key not in ("span", "spans", "target", "filename", "level", "model_id")
        }  # fmt: skip
        if index_of.get(str(event.get("worker"))) != row.smg:
            problems.append(
                f"request {k}: smg's log names {event.get('worker')}, its header {row.smg}"
            )
        req = RouteRequest(ENGINE, row.session, row.tokens, row.turn, text=run["texts"][k])
        d = router.decide(req, book.views())
        row.model, row.model_branch = d.replica, d.branch
        row.scores, row.poll = [round(x, 4) for x in d.scores], polls
        best = d.scores[d.replica] if d.scores else 0.0
        random_ties = router.str_param("ties") == "random"
        row.tied = [i for i, x in enumerate(d.scores) if x == best] if random_ties else [d.replica]
        chosen = row.smg if row.smg >= 0 else d.replica
        router.record(req, chosen)
        ticket = book.start(req, dataclasses.replace(d, replica=chosen))
        tickets.setdefault(row.wave, []).append((k, ticket))
        k += 1
    if k < len(rows):
        problems.append(f"{len(rows) - k} requests have no decision line in smg's log")
    return problems


def model_params(args: argparse.Namespace) -> dict[str, object]:
    """The model's parameters: smg's defaults, but the tree at one character (smg matches
    text character by character, and a partial word's match names the branch's holders; the
    model's default chunk of 16 stops short of it), unless --model-param says otherwise."""
    params: dict[str, object] = {"granularity": 1}
    return params | dict(args.model_param)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "n/a"


def report(rows: list[Row]) -> dict[str, Any]:
    done = [r for r in rows if r.model >= 0 and r.smg >= 0]
    exact = sum(r.model == r.smg for r in done)
    within = sum(r.smg in r.tied for r in done)
    print(f"requests {len(rows)}  compared {len(done)}  errors {sum(bool(r.error) for r in rows)}"
          f"  racy {sum(r.racy for r in rows)}  round trip {sum(r.round_trip for r in rows)}"
          f"/{len(rows)}  served = routed {sum(r.served == r.smg for r in rows)}/{len(rows)}")  # fmt: skip
    print(f"agreement {_share(exact, len(done))} exact, {_share(within, len(done))} within ties")
    out: dict[str, Any] = {"requests": len(rows), "compared": len(done),
                           "exact": exact / len(done) if done else None,
                           "within_ties": within / len(done) if done else None, "branches": {}}  # fmt: skip
    print(f"{'smg branch':<26}{'n':>6}{'exact':>8}{'ties':>8}  model branches")
    for branch in sorted({r.smg_branch for r in done}):
        part = [r for r in done if r.smg_branch == branch]
        e, t = sum(r.model == r.smg for r in part), sum(r.smg in r.tied for r in part)
        seen = dict(Counter(r.model_branch for r in part))
        print(
            f"{branch:<26}{len(part):>6}{_share(e, len(part)):>8}{_share(t, len(part)):>8}  {seen}"
        )
        out["branches"][branch] = {"n": len(part), "exact": e / len(part),
                                   "within_ties": t / len(part), "model": seen}  # fmt: skip
    wrong = [r for r in done if r.smg not in r.tied]
    for r in wrong[:20]:
        print(f"  differs: #{r.seq} wave {r.wave} {r.session} turn {r.turn}: smg {r.smg} "
              f"({r.smg_branch}, {r.smg_matched}/{r.chars} chars) model {r.model} "
              f"({r.model_branch}, tied {r.tied})")  # fmt: skip
    return out


def _param(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--model-param {text!r}: expected KEY=VALUE")
    return key, value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = ap.add_argument
    add("--trace", default=str(sample_path()), help="trace file (default: the bundled sample)")
    add("--sessions", type=int, default=16, help="sessions replayed (the first with ≥ 2 requests)")
    add("--turns", type=int, default=10, help="turns per session at most")
    add("--replicas", type=int, default=4, help="emulator replicas behind smg")
    add("--wave", type=int, default=8, help="sessions in flight together, one turn each")
    add("--token-scale", type=float, default=16.0, help="divide the trace's lengths by this")
    add("--max-tokens", type=int, default=16, help="output tokens per request at most")
    add("--time-scale", type=float, default=1.0, help="the emulators' clock speed-up")
    add("--settle-s", type=float, default=0.05, help="pause after each wave drains (s)")
    add("--seed", type=int, default=1, help="salt of the token ids; the model's tie draws")
    add("--shared-prefix", type=int, default=0,
        help="tokens of a prefix common to every session (a system prompt)")  # fmt: skip
    add("--smg-arg", action="append", default=[], help="an extra smg flag (repeatable)")
    add("--model-param", action="append", type=_param, default=[],
        help="a cache_aware parameter for the model, KEY=VALUE (repeatable)")  # fmt: skip
    add("--json", type=Path, help="write the figures and every request's row here")
    add("--save-run", type=Path, help="keep smg's side of the run (rows, log) in this file")
    add("--load-run", type=Path, help="compare a --save-run file again instead of replaying")
    args = ap.parse_args(argv)
    if args.shared_prefix < 0:
        ap.error("--shared-prefix must be at least 0")
    for name in ("sessions", "turns", "replicas", "wave", "max_tokens"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if not (math.isfinite(args.token_scale) and args.token_scale >= 1):
        ap.error("--token-scale must be a finite number ≥ 1")
    if not (math.isfinite(args.time_scale) and args.time_scale > 0):
        ap.error("--time-scale must be a finite number > 0")
    try:
        CacheAware(RouterContext(args.replicas), model_params(args))
    except ValueError as e:
        ap.error(f"--model-param: {e}")
    try:
        trace = load_trace(args.trace)
    except (TraceError, OSError) as e:
        ap.error(f"--trace: {e}")
    roots = [tr for tr in trace.trajectories if tr.num_requests >= 2][: args.sessions]
    if not roots:
        ap.error(f"--trace {args.trace}: no session with two or more requests")
    sessions = [scaled(tr, args.token_scale) for tr in roots]
    t0 = time.monotonic()
    if args.load_run:  # a run saved by --save-run: the model side again, no smg
        run = pickle.loads(args.load_run.read_bytes())
    else:
        try:
            run = asyncio.run(replay(args, sessions))
        except (SmgMissing, SmgError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if args.save_run:
            args.save_run.write_bytes(pickle.dumps(run))
    print(f"smg {run['version']} (pids {run['pids']}, gone), {args.replicas} replicas, "
          f"{len(sessions)} sessions of {Path(args.trace).name} at 1/{args.token_scale:g}: "
          f"{len(run['rows'])} requests in {time.monotonic() - t0:.1f} s")  # fmt: skip
    problems = model_pass(run, args)
    for p in problems:
        print(f"warning: {p}")
    figures = report(run["rows"])
    if args.json:
        figures |= {"smg": run["version"], "smg_args": args.smg_arg, "problems": problems,
                    "snapshots": run["snapshots"],
                    "rows": [dataclasses.asdict(r) for r in run["rows"]]}  # fmt: skip
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
