"""Refuse, before any work, what cannot finish: absurd prompts, runs that cannot fit in
memory, and a Ray address where nothing answers.

- Prompt tokens per request: no bundled model profile serves more than 1,048,576 tokens
  (configs/models/*.yaml `context_tokens`); a request of more than `PROMPT_LIMIT_FACTOR`
  times that is no agent trace's request (the real corpus's longest is 880,502: measured on
  ../shared/traces/kvct-dev.jsonl.gz) and building its prompt would not finish (the
  simulator derives a key per block, the live client an int32 id per token).
- Memory: a live run holds, per session and engine, the prompt it builds (int32 ids), the
  previous prompt, and the request's JSON body (about 7 bytes per id: up to 6 digits and a
  comma), so `LIVE_BYTES_PER_TOKEN` = 4 + 4 + 8; sessions × engines × the trace's mean
  prompt × that is refused when it passes the memory this machine has available.
- Simulated work: a sweep simulates about sessions × duration ÷ the trace's mean seconds
  between requests per run; the simulator's speed, `SIM_REQUESTS_PER_S`, and its memory per
  session, `SIM_BYTES_PER_SESSION`, were measured here (real corpus, vllm policy, 6-minute
  runs of 48, 480 and 4,800 sessions on two shared cores, interpreted modules: 12.4 s,
  14.5 s, 18.1 s for 483, 2,558, 6,495 requests, so ~0.94 ms a request; peak RSS 388 MB at
  480 sessions, 466 MB at 4,800: ~18 KB a session). A sweep estimated at more than
  `SIM_WARN_S` is announced with its estimate; one whose largest run would not fit in the
  available memory is refused.
- A sweep's points (issue 36): every point's spec and config is built before the first run,
  ~8.3 KB and ~2.5 ms a point (`SIM_BYTES_PER_POINT`, `SIM_S_PER_POINT`, measured on
  `--seeds` sweeps), so `--seeds 100000000` grew by ~50 MB/s and printed nothing; the points
  are counted first and a sweep whose points alone pass the available memory is refused,
  naming `--seeds` and how many fit. A run holds its request records until its run directory
  is written, ~2.5 KB a record (`SIM_BYTES_PER_RECORD`), so the largest run's memory is its
  sessions × `SIM_BYTES_PER_SESSION` plus its requests (sessions × duration ÷ the trace's
  mean gap) × that; a fork-pool worker costs `SIM_WORKER_BYTES` (330 MB each, measured by
  issue 36's probe), and no more workers than runs are started.
- Processes a live run starts (issue 36): an emulator costs `EMULATOR_BYTES` (~70 MB RSS,
  measured: the vllm emulator of a 4-session run), a client worker `RUN_WORKER_BYTES`
  (~160 MB RSS, measured: each spawned worker of `replay run --workers 2`); engines ×
  `--replicas` emulators and `--workers` workers are refused when they alone pass the
  available memory, naming the flag and how many fit. A Ray cluster's workers run on its
  machines, so only `--ray local` counts them here.
- The available memory is the kernel's MemAvailable (/proc/meminfo); every refusal says so.
- Ray: `--ray host:port` must accept a TCP connection within `RAY_CONNECT_S` and answer the
  HTTP/2 preface as a gRPC server does (Ray's GCS and Ray Client servers), or Ray itself
  retries for minutes; with RAY_USE_TLS only the connection is checked.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import numpy as np

from replay.traces.model import Trace, Trajectory

LONGEST_PROFILE_CONTEXT = 1_048_576  # configs/models/glm-5.3-flash.yaml context_tokens
PROMPT_LIMIT_FACTOR = 16
PROMPT_LIMIT = PROMPT_LIMIT_FACTOR * LONGEST_PROFILE_CONTEXT
LIVE_BYTES_PER_TOKEN = 16
RAY_CONNECT_S = 3.0
SIM_REQUESTS_PER_S = 1_000.0  # measured (module docstring); the compiled build is ~2x faster
SIM_BYTES_PER_SESSION = 18_000  # measured (module docstring)
SIM_WARN_S = 600.0
SIM_BYTES_PER_POINT = 8_300  # measured (module docstring)
SIM_S_PER_POINT = 0.0025  # measured (module docstring)
SIM_BYTES_PER_RECORD = 2_500  # measured (module docstring)
SIM_WORKER_BYTES = 330 * 2**20  # measured (module docstring)
EMULATOR_BYTES = 70 * 2**20  # measured (module docstring)
RUN_WORKER_BYTES = 160 * 2**20  # measured (module docstring)
AVAILABLE = "available memory (MemAvailable, /proc/meminfo)"


class ScaleError(ValueError):
    """Work that cannot finish; the message names the flag or file and the limit."""


class RayAddressError(ValueError):
    """Nothing answers at the --ray address."""


def _walk(tr: Trajectory) -> Iterator[Trajectory]:
    yield tr
    for sub in tr.subagents:
        yield from _walk(sub)


def check_prompts(trace: Trace, flag: str = "--trace") -> None:
    """ScaleError naming the file, line, session and request of the first prompt over
    PROMPT_LIMIT tokens (a negative length is the loader's business)."""
    for tr in trace.trajectories:
        for part in _walk(tr):
            if not part.num_requests:
                continue
            i = int(np.argmax(part.input_tokens))
            n = int(part.input_tokens[i])
            if n > PROMPT_LIMIT:
                line = f"line {part.source_line}: " if part.source_line else ""
                raise ScaleError(
                    f"{flag} {trace.source}: {line}session {part.id!r} request {i} has a "
                    f"prompt of {n:,} tokens, over the limit of {PROMPT_LIMIT:,} "
                    f"({PROMPT_LIMIT_FACTOR} × {LONGEST_PROFILE_CONTEXT:,}, the longest context "
                    "of any model profile): no engine serves it and its prompt cannot be built; "
                    "fix that request or leave the session out"
                )


def over_context(trace: Trace, context_tokens: int) -> tuple[int, int]:
    """(requests whose prompt and output exceed `context_tokens`, all requests): an engine
    refuses each of them (HTTP 400, as the emulator's `check_context`)."""
    over = total = 0
    for tr in trace.trajectories:
        for part in _walk(tr):
            total += part.num_requests
            over += int(np.count_nonzero(part.input_tokens + part.output_tokens > context_tokens))
    return over, total


def mean_prompt_tokens(trace: Trace) -> float:
    total = count = 0
    for tr in trace.trajectories:
        for part in _walk(tr):
            total += int(part.input_tokens.sum())
            count += part.num_requests
    return total / count if count else 0.0


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_processes(flag: str, value: int, count: int, each: int, what: str) -> None:
    """ScaleError naming `flag` and how many fit, when `count` processes of `each` bytes
    (what `flag` = `value` starts: `what`) alone pass the available memory."""
    avail = available_bytes()
    if avail is None or count * each <= avail:
        return
    per_value = count * each / max(value, 1)
    fits = int(avail // per_value) if per_value else value
    raise ScaleError(
        f"{flag} {value:,}: starts {count:,} {what} of about {each / 2**20:,.0f} MB each "
        f"(measured), about {_gib(count * each)}, over the {_gib(avail)} of {AVAILABLE}; "
        f"the limit here is about {fits:,}"
    )


def check_live_processes(engines: int, emulators: int, workers: int) -> None:
    """ScaleError naming the flag and the most that fit, when a live run's `emulators`
    (engines × --replicas; 0: none) or its `workers` client processes alone would pass the
    available memory."""
    if emulators:
        replicas = max(emulators // max(engines, 1), 1)
        check_processes("--replicas", replicas, emulators, EMULATOR_BYTES, "emulators")
    if workers > 1:
        check_processes("--workers", workers, workers, RUN_WORKER_BYTES, "client workers")


def check_live_memory(trace: Trace, sessions: int, engines: int) -> None:
    """ScaleError naming --sessions and the most sessions that fit, when the run's prompts
    alone would pass the available memory."""
    avail = available_bytes()
    if avail is None:
        return
    per_session = mean_prompt_tokens(trace) * LIVE_BYTES_PER_TOKEN * max(engines, 1)
    need = sessions * per_session
    if need > avail:
        fits = int(avail // per_session) if per_session else sessions
        raise ScaleError(
            f"--sessions {sessions:,}: the run would need about {need / 2**30:,.1f} GiB for its "
            f"prompts alone ({engines} engine(s) × {sessions:,} sessions × the trace's mean "
            f"prompt of {mean_prompt_tokens(trace):,.0f} tokens × {LIVE_BYTES_PER_TOKEN} bytes), "
            f"over the {_gib(avail)} of {AVAILABLE}; the limit here is about {fits:,} "
            "sessions"
        )


def mean_request_gap_s(trace: Trace) -> float:
    """The trace's mean seconds from one request of a session to its next (0: unknown)."""
    span = gaps = 0.0
    for tr in trace.trajectories:
        for part in _walk(tr):
            if part.num_requests > 1:
                span += float(part.t[-1] - part.t[0])
                gaps += part.num_requests - 1
    return span / gaps if gaps else 0.0


def check_sim_work(
    trace: Trace,
    sessions: list[int],
    runs: int,
    duration_s: float,
    workers: int,
    seeds: int = 1,
) -> str | None:
    """Before a sweep's points are built: ScaleError naming `--seeds` when its `runs` points
    alone, `--workers` when its pool, or `--sessions` when its largest runs (one per worker
    at once: sessions and request records) would pass the available memory; otherwise the
    note announcing a long sweep (None: short)."""
    avail = available_bytes()
    at_once = max(1, min(workers, runs))
    gap = mean_request_gap_s(trace)
    if avail is not None:
        _check_sim_memory(avail, sessions, runs, duration_s, gap, (workers, at_once), seeds)
    building = runs * SIM_S_PER_POINT
    if gap <= 0:
        return None if building <= SIM_WARN_S else _long_note(runs, None, building)
    requests = sum(sessions) * (runs // max(len(sessions), 1)) * duration_s / gap
    seconds = building + requests / SIM_REQUESTS_PER_S / at_once
    if seconds <= SIM_WARN_S:
        return None
    return _long_note(runs, (requests, gap), seconds)


def _check_sim_memory(avail: int, sessions: list[int], runs: int, duration_s: float, gap: float,
                      pool_size: tuple[int, int], seeds: int) -> None:  # fmt: skip
    """`check_sim_work`'s memory checks against `avail` bytes; `pool_size`: the workers
    asked for and those that run at once; `gap`: the trace's mean seconds between requests."""
    workers, at_once = pool_size
    per_session = SIM_BYTES_PER_SESSION + (
        duration_s / gap * SIM_BYTES_PER_RECORD if gap > 0 else 0.0
    )
    points = runs * SIM_BYTES_PER_POINT
    pool = at_once * SIM_WORKER_BYTES if at_once > 1 else 0
    if points > avail:
        per_seed = runs / max(seeds, 1) * SIM_BYTES_PER_POINT
        raise ScaleError(
            f"--seeds {seeds:,}: the sweep has {runs:,} points (policies × fleets × "
            f"session counts × seeds), whose specs alone need about {_gib(points)} "
            f"({SIM_BYTES_PER_POINT / 1000:g} KB a point, measured), over the "
            f"{_gib(avail)} of {AVAILABLE}; the limit here is about "
            f"{int(avail // per_seed):,} seeds"
        )
    if pool > avail:
        raise ScaleError(
            f"--workers {workers:,}: starts {at_once:,} simulator workers of about "
            f"{SIM_WORKER_BYTES / 2**20:,.0f} MB each (measured), about {_gib(pool)}, over "
            f"the {_gib(avail)} of {AVAILABLE}; the limit here is about "
            f"{int(avail // SIM_WORKER_BYTES):,}"
        )
    largest = max(sessions) * per_session * at_once
    if points + pool + largest > avail:
        fits = int(max(avail - points - pool, 0) // (per_session * at_once))
        records = (
            f" and {duration_s / gap:,.0f} request records of "
            f"{SIM_BYTES_PER_RECORD / 1000:g} KB (--duration-min ÷ the trace's mean "
            f"{gap:.1f} s between requests)"
            if gap > 0
            else ""
        )
        raise ScaleError(
            f"--sessions {max(sessions):,}: the simulation would need about "
            f"{_gib(largest)} ({SIM_BYTES_PER_SESSION / 1000:g} KB a session{records}, "
            f"measured; × {at_once} worker(s)), over the {_gib(avail)} of {AVAILABLE}; "
            f"the limit here is about {fits:,} sessions at this --duration-min"
        )


def _long_note(runs: int, work: tuple[float, float] | None, seconds: float) -> str:
    what = f"{runs:,} runs"
    if work is not None:
        requests, gap = work
        what = (
            f"about {requests:,.0f} requests (sessions × --duration-min ÷ the trace's mean "
            f"{gap:.1f} s between requests, over {runs:,} runs)"
        )
    return (
        f"this sweep simulates {what}: about {_human(seconds)} at "
        f"~{SIM_REQUESTS_PER_S:,.0f} requests/s a worker and ~{SIM_S_PER_POINT * 1000:g} ms "
        "to build each run (measured); Ctrl-C stops it, keeping the runs that finished"
    )


def _human(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def check_ray_address(address: str) -> None:
    """RayAddressError unless `address` ('local', 'auto', host:port or ray://host:port)
    accepts a connection within RAY_CONNECT_S."""
    if address in ("local", "auto"):
        return
    try:  # a bad bracket or port ('http://[::1', 'h:99999') raises here: issue 36
        parts = urlsplit(address if "://" in address else f"ray://{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise RayAddressError(
            f"--ray {address!r}: expected host:port (or ray://host:port, 'auto', 'local')"
        )
    try:
        with socket.create_connection((host, port), timeout=RAY_CONNECT_S) as conn:
            reply = b"" if _tls() else _grpc_reply(conn)
    except OSError as e:
        raise RayAddressError(
            f"--ray {address}: nothing answers at {host}:{port} within {RAY_CONNECT_S:g} s "
            f"({e.strerror or e}); start the cluster (`ray start --head`) or give its address, "
            "or use --ray local"
        ) from None
    if reply is not None:
        return
    raise RayAddressError(
        f"--ray {address}: {host}:{port} accepts connections but is no Ray cluster (it did not "
        f"answer gRPC within {RAY_CONNECT_S:g} s); give the cluster's address (host:6379, or "
        "ray://host:10001 for Ray Client), or use --ray local"
    )


# The HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS and its
# Ray Client server both are) answers with a SETTINGS frame of its own (frame type 4, the
# fourth byte of its 9-byte header); an HTTP/1 server, or one that says nothing, does not.
# A port that accepted TCP but was no Ray used to pass and leave the run waiting 100 s+
# (issue 36).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _tls() -> bool:
    """Ray with TLS (RAY_USE_TLS) wants a TLS handshake first: no plain-text probe then."""
    import os

    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true", "yes")


def _grpc_reply(conn: socket.socket) -> bytes | None:
    """The server's first frame header when it speaks HTTP/2 (gRPC), else None."""
    conn.settimeout(RAY_CONNECT_S)
    data = b""
    try:
        conn.sendall(_H2_PREFACE)
        while len(data) < 9:
            chunk = conn.recv(9 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError:  # a timeout, a reset
        return None
    return data if len(data) == 9 and data[3] == 4 else None


__all__ = [
    "PROMPT_LIMIT",
    "RayAddressError",
    "ScaleError",
    "check_live_memory",
    "check_live_processes",
    "check_processes",
    "check_prompts",
    "check_ray_address",
    "check_sim_work",
    "mean_prompt_tokens",
    "over_context",
]
