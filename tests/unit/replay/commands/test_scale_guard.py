"""Work that cannot finish is refused before it starts, naming the flag or file and the
limit (issue 24): a 10^18-token prompt, a run whose prompts alone pass the memory, a Ray
address where nothing answers (within seconds, not Ray's minutes of retries)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.commands import scale_guard
from replay.commands.scale_guard import PROMPT_LIMIT, RayAddressError, check_ray_address


def said(res: Any) -> str:
    return " ".join((res.output + res.stderr).split())


def _trace(path: Path, prompt: int, sessions: int = 2) -> str:
    lines = []
    for s in range(sessions):
        n = prompt if s == sessions - 1 else 640
        reqs = [{"t": 0.0, "type": "s", "in": 640, "out": 4, "hash_ids": list(range(10))},
                {"t": 5.0, "type": "s", "in": n, "out": 4, "hash_ids": list(range(11))}]  # fmt: skip
        lines.append(json.dumps({"id": f"s{s}", "block_size": 64, "hash_id_scope": "local",
                                 "requests": reqs}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_an_absurd_prompt_is_refused_naming_line_and_limit(command: str, tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl", 10**18)
    args = ["--trace", trace, "--sessions", "2", "--out", str(tmp_path / "o")]
    if command == "simulate":
        args += ["--policies", "vllm"]
    else:
        args += ["--engines", "vllm", "--no-panel"]
    t = time.monotonic()
    res = CliRunner().invoke(app, [command, *args])
    assert res.exit_code == 2, said(res)
    assert time.monotonic() - t < 30
    text = said(res)
    assert f"line 2: session 's1' request 1 has a prompt of {10**18:,} tokens" in text
    assert f"over the limit of {PROMPT_LIMIT:,}" in text
    assert not (tmp_path / "o").exists()


def test_a_run_that_cannot_fit_in_memory_is_refused(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl", 640)
    res = CliRunner().invoke(app, ["run", "--engines", "vllm", "--trace", trace, "--sessions",
                                   "100000000", "--duration-min", "3", "--no-panel",
                                   "--out", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2
    assert "--sessions 100,000,000: the run would need about" in said(res)
    assert "the limit here is about" in said(res) and not (tmp_path / "o").exists()


def test_a_long_sweep_is_announced_and_one_too_big_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay.traces import load_trace

    tr = load_trace(_trace(tmp_path / "t.jsonl", 640))
    monkeypatch.setattr(scale_guard, "available_bytes", lambda: 10**15)
    note = scale_guard.check_sim_work(tr, [100_000], 2, 2700.0, 1)
    assert note is not None and "simulates about 108,000,000 requests" in note
    assert scale_guard.check_sim_work(tr, [4], 1, 60.0, 1) is None
    monkeypatch.setattr(scale_guard, "available_bytes", lambda: 10**9)
    # 18 KB a session + 12 request records (60 s ÷ the trace's 5 s gap) of 2.5 KB each
    with pytest.raises(scale_guard.ScaleError, match=r"--sessions 1,000,000: .* about 20,833"):
        scale_guard.check_sim_work(tr, [1_000_000], 1, 60.0, 1)


def test_simulate_seeds_past_memory_is_refused_before_any_point(tmp_path: Path) -> None:
    """Issue 36: --seeds 100000000 built specs at ~50 MB/s and printed nothing."""
    trace = _trace(tmp_path / "t.jsonl", 640)
    t = time.monotonic()
    res = CliRunner().invoke(app, ["simulate", "--trace", trace, "--policies", "vllm,sglang",
                                   "--sessions", "2", "--seeds", "100000000", "--token-scale",
                                   "1", "--out", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2, said(res)
    assert time.monotonic() - t < 30
    text = said(res)
    assert "--seeds 100,000,000: the sweep has 200,000,000 points" in text
    assert "the limit here is about" in text and "MemAvailable, /proc/meminfo" in text
    assert "Traceback" not in text and not (tmp_path / "o").exists()


def test_a_sweep_whose_request_records_cannot_fit_is_refused(tmp_path: Path) -> None:
    """Sessions × duration: a year of 2,000 sessions' records (a request every 5 s) is
    ~12.6 billion records, past any machine's memory."""
    trace = _trace(tmp_path / "t.jsonl", 640)
    res = CliRunner().invoke(app, ["simulate", "--trace", trace, "--policies", "vllm",
                                   "--sessions", "2000", "--duration-min", "525600",
                                   "--token-scale", "1", "--out", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2, said(res)
    text = said(res)
    assert "--sessions 2,000: the simulation would need about" in text
    assert "request records of 2.5 KB" in text and "the limit here is about" in text
    assert not (tmp_path / "o").exists()


def test_simulator_workers_past_memory_are_refused_and_idle_ones_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replay.traces import load_trace

    tr = load_trace(_trace(tmp_path / "t.jsonl", 640))
    monkeypatch.setattr(scale_guard, "available_bytes", lambda: 10 * 2**30)
    with pytest.raises(scale_guard.ScaleError, match=r"--workers 100,000: starts 1,000 simul"):
        scale_guard.check_sim_work(tr, [2], 1_000, 60.0, 100_000, 1_000)
    # One run: one process, whatever --workers says (the pool starts no more than runs).
    assert scale_guard.check_sim_work(tr, [2], 1, 60.0, 100_000) is None


def test_simulate_workers_past_memory_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl", 640)
    res = CliRunner().invoke(app, ["simulate", "--trace", trace, "--policies", "vllm",
                                   "--sessions", "2", "--seeds", "100000", "--workers", "100000",
                                   "--token-scale", "1", "--out", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2, said(res)
    assert "--workers 100,000: starts 100,000 simulator workers" in said(res)
    assert "the limit here is about" in said(res) and not (tmp_path / "o").exists()


def test_a_ray_address_that_does_not_answer_fails_in_seconds() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
    t = time.monotonic()
    with pytest.raises(RayAddressError, match=rf"--ray 127.0.0.1:{port}: nothing answers"):
        check_ray_address(f"127.0.0.1:{port}")
    with pytest.raises(RayAddressError, match="expected host:port"):
        check_ray_address("bogus")
    assert time.monotonic() - t < 10
    check_ray_address("local")


def test_simulate_ray_bogus_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl", 640)
    res = CliRunner().invoke(app, ["simulate", "--trace", trace, "--policies", "vllm",
                                   "--sessions", "2", "--ray", "bogus.invalid:1234", "--token-scale", "1",
                                   "--out", str(tmp_path / "o")])  # fmt: skip
    assert res.exit_code == 2 and "--ray bogus.invalid:1234: nothing answers at" in said(res)


def test_run_emulators_and_workers_past_memory_are_refused_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = _trace(tmp_path / "t.jsonl", 640)
    base = ["run", "--engines", "vllm,sglang", "--trace", trace, "--sessions", "2",
            "--no-panel", "--out", str(tmp_path / "o")]  # fmt: skip
    monkeypatch.setattr(scale_guard, "available_bytes", lambda: 8 * 2**30)
    res = CliRunner().invoke(app, [*base, "--replicas", "1000", "--router", "round_robin"])
    assert res.exit_code == 2, said(res)
    text = said(res)
    assert "--replicas 1,000: starts 2,000 emulators of about 70 MB each" in text
    assert "MemAvailable, /proc/meminfo); the limit here is about 58" in text
    res = CliRunner().invoke(app, [*base, "--workers", "100000"])
    assert res.exit_code == 2, said(res)
    assert "--workers 100,000: starts 100,000 client workers of about 160 MB" in said(res)
    assert "the limit here is about 51" in said(res) and not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_a_bad_or_dead_ray_address_fails_in_seconds_naming_the_flag(
    command: str, tmp_path: Path
) -> None:
    """Issue 36: `--ray 'http://[::1'` was a traceback, and `replay run --ray 127.0.0.1:1`
    waited 330 s on Ray's retries (only `simulate` checked the address)."""
    trace = _trace(tmp_path / "t.jsonl", 640)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: refused
    base = ["--trace", trace, "--sessions", "2", "--token-scale", "1",
            "--out", str(tmp_path / "o")]  # fmt: skip
    base += ["--policies", "vllm"] if command == "simulate" else ["--engines", "vllm", "--no-panel"]
    for address, message in [
        ("http://[::1", "--ray 'http://[::1': expected host:port"),
        (f"127.0.0.1:{port}", f"--ray 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}"),
    ]:
        t = time.monotonic()
        res = CliRunner().invoke(app, [command, *base, "--ray", address])
        assert res.exit_code == 2, said(res)
        assert time.monotonic() - t < 10
        assert message in said(res) and "Traceback" not in said(res)
        assert not (tmp_path / "o").exists()


def _server(reply: bytes | None) -> tuple[socket.socket, int]:
    """A loopback server that accepts and answers `reply` (None: says nothing)."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = srv.accept()
            conn.recv(64)
            if reply is not None:
                conn.sendall(reply)
            time.sleep(5)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_a_port_that_accepts_tcp_but_is_no_ray_is_refused_in_seconds() -> None:
    """Issue 36: a port that accepted TCP but was no Ray passed the check and the run waited
    100 s+; a gRPC server's SETTINGS frame (what Ray's GCS answers) passes."""
    settings = bytes([0, 0, 0x18, 4, 0, 0, 0, 0, 0])
    for reply, ok in [(b"HTTP/1.1 400 Bad Request\r\n\r\n", False), (None, False),
                      (settings, True)]:  # fmt: skip
        srv, port = _server(reply)
        t = time.monotonic()
        try:
            if ok:
                check_ray_address(f"127.0.0.1:{port}")
            else:
                with pytest.raises(RayAddressError, match=r"accepts connections but is no Ray"):
                    check_ray_address(f"ray://127.0.0.1:{port}")
        finally:
            srv.close()
        assert time.monotonic() - t < 10


@pytest.mark.parametrize(
    ("command", "count_flag"),
    [("simulate", "--seeds"), ("slo-search", "--confirm-seeds")],
)
def test_seeds_past_64_bits_are_refused_naming_the_flag(
    tmp_path: Path, command: str, count_flag: str
) -> None:
    """--seed at 2^63 - 1 with a second seed: the last one used to reach the spec unchecked
    (a traceback after the first point ran)."""
    trace = _trace(tmp_path / "t.jsonl", 640)
    args = [command, "--trace", trace, "--policies", "vllm", "--token-scale", "1",
            "--seed", str(2**63 - 1), count_flag, "2", "--out", str(tmp_path / "o")]  # fmt: skip
    if command == "slo-search":
        args += ["--slo", "ttft=6"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, said(res)
    text = said(res)
    assert f"{count_flag} 2: from --seed {2**63 - 1} the last seed would be {2**63}" in text
    assert "Traceback" not in text and not (tmp_path / "o").exists()
