"""Issue 24's cases for scripts/probe_integrity.py (which runs them after its own): windows
past the data, a mid-run hang, signals, scale guards, secrets in every encoding, a torn
journal tail and a full disk, and the bad inputs that used to be tracebacks. Each is a real
`replay` process, as a new user would run it."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from probe_lib import (
    FIGURES,
    check,
    children,
    echo_server,
    journal_lines,
    listening,
    message_case,
    replay,
    said,
    start,
    text_of,
    wait_for,
)

from replay.rundir import read_manifest, read_requests


def _status(run: Path) -> str:
    try:
        return str(json.loads((run / "manifest.json").read_text()).get("status"))
    except (OSError, ValueError):
        return "none"


def _stop_within(proc: subprocess.Popen[bytes], sig: int, limit: float) -> tuple[bool, float]:
    t = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(limit + 10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    took = time.monotonic() - t
    return took <= limit, round(took, 2)


def _big_trace(path: Path, sessions: int = 40, turns: int = 300) -> str:
    with path.open("w") as f:
        for s in range(sessions):
            reqs = [{"t": 2.0 * k, "type": "s", "in": 640 + 64 * k, "out": 4,
                     "hash_ids": list(range(s * 1000, s * 1000 + 10 + k))} for k in range(turns)]  # fmt: skip
            f.write(json.dumps({"id": f"s{s}", "block_size": 64, "hash_id_scope": "local",
                                "requests": reqs}) + "\n")  # fmt: skip
    return str(path)


def probe_windows(tmp: Path, done: Path) -> None:
    """`done`: a completed 3-minute run (the clock probe's)."""
    wide = replay("price", str(done), "--window", "1-100", "--json")
    own = replay("price", str(done), "--window", "1-3", "--json")
    try:
        a, b = json.loads(wide.stdout), json.loads(own.stdout)
        rates = [[e["prompt_tokens_per_min_per_gpu"] for e in x["engines"]]
                 for x in (a, b)]  # fmt: skip
        same = bool(rates[0]) and rates[0] == rates[1]
        clipped = a["window_s"] == b["window_s"] and any("clipped" in n for n in a["notes"])
    except (ValueError, KeyError, TypeError):
        same = clipped = False
    FIGURES["price --window 1-100 vs 1-3: window_s"] = (
        json.loads(wide.stdout).get("window_s") if wide.returncode == 0 else said(wide)[-120:]
    )
    check("price --window 1-100 on a 3-minute run: clipped, with a note", clipped,
          said(wide)[-200:])  # fmt: skip
    check("  ...and its rates are the covered window's (= --window 1-3)", same)
    message_case("price --window 5-10 (after the data) is refused",
                 replay("price", str(done), "--window", "5-10"), "starts after the run ends")  # fmt: skip
    res = replay("report", str(done), "--out", str(tmp / "rep-wide"), "--no-figures",
                 "--format", "md", "--window", "1-100")  # fmt: skip
    text = text_of(tmp / "rep-wide" / "report.md")
    check("report --window 1-100 says the window was clipped to the data",
          res.returncode == 0 and "clipped to the data's end" in text, said(res)[-200:])  # fmt: skip
    ep = ["--endpoint", "vllm=http://127.0.0.1:9", "--trace", str(tmp / "t.jsonl")]
    message_case("run --window past --duration-min is refused",
                 replay("run", *ep, "--duration-min", "3", "--window", "1-100"),
                 "ends after the run (--duration-min 3)")  # fmt: skip
    message_case("simulate --window past --duration-min is refused",
                 replay("simulate", "--trace", str(tmp / "t.jsonl"), "--policies", "vllm",
                        "--sessions", "2", "--duration-min", "3", "--window", "1-100"),
                 "ends after the run (--duration-min 3)")  # fmt: skip


def probe_hang(tmp: Path) -> None:
    """The endpoint freezes (SIGSTOP) before the window: the run must say it measured nothing."""
    sim = start("serve-sim", "--engine", "vllm", "--time-scale", "30", "--port", "0",
                log=tmp / "hang-sim.log")  # fmt: skip
    try:
        ok = wait_for(lambda: "serve-sim ready:" in text_of(tmp / "hang-sim.log"), 60)
        m = re.search(r"serve-sim ready:\s+(http://\S+)", text_of(tmp / "hang-sim.log"))
        if not ok or not m:
            check("a mid-run endpoint hang is noted", False, "serve-sim did not start")
            return
        run = tmp / "hang"
        harness = start("run", "--endpoint", f"vllm={m.group(1)}", "--sessions", "2",
                        "--duration-min", "3", "--out", str(run), "--no-panel",
                        log=tmp / "hang.log")  # fmt: skip
        wait_for(lambda: "checks passed" in text_of(tmp / "hang.log"), 120)
        os.kill(sim.pid, signal.SIGSTOP)
        harness.wait(300)
        os.kill(sim.pid, signal.SIGCONT)
        out = " ".join(text_of(tmp / "hang.log").split())
        summary = json.loads(text_of(run / "summary.json") or "{}")
        noted = any("no request was measured" in n for n in summary.get("notes", []))
        check("a run whose endpoint hung before the window says it measured nothing",
              noted and "no request was measured in the window" in out,
              f"status {_status(run)}; {out[-200:]}")  # fmt: skip
        FIGURES["mid-run hang: status"] = _status(run)
    finally:
        with_cont = sim.poll() is None
        if with_cont:
            os.kill(sim.pid, signal.SIGCONT)
            sim.send_signal(signal.SIGINT)
            try:
                sim.wait(10)
            except subprocess.TimeoutExpired:
                sim.kill()


def probe_signals(tmp: Path) -> None:
    trace = _big_trace(tmp / "big.jsonl")
    out = tmp / "sim-int"
    proc = start("simulate", "--trace", trace, "--policies", "vllm,flashstate", "--sessions",
                 "400", "--duration-min", "600", "--token-scale", "1", "--out", str(out),
                 log=tmp / "sim-int.log")  # fmt: skip
    wait_for(lambda: bool(children(proc.pid)), 60)
    time.sleep(1.5)
    kids = children(proc.pid)
    fast, took = _stop_within(proc, signal.SIGINT, 3.0)
    FIGURES["simulate: seconds from SIGINT to exit"] = took
    marked = [_status(d) for d in out.iterdir() if d.is_dir()] if out.exists() else []
    check("simulate stops within 3 s of SIGINT, runs marked interrupted, no child left",
          fast and proc.returncode == 130 and set(marked) == {"interrupted"}
          and not any(Path(f"/proc/{k}").exists() for k in kids),
          f"{took} s, exit {proc.returncode}, {marked}")  # fmt: skip
    run = tmp / "swamped"
    proc = start("run", "--engines", "vllm", "--sessions", "20000", "--duration-min", "3",
                 "--out", str(run), "--no-panel", log=tmp / "swamped.log")  # fmt: skip
    wait_for(lambda: "[0/" in text_of(tmp / "swamped.log"), 180)
    time.sleep(2)
    kids = children(proc.pid)
    fast, took = _stop_within(proc, signal.SIGTERM, 5.0)
    FIGURES["run, 20,000 sessions: seconds from SIGTERM to exit"] = took
    gone = wait_for(lambda: not any(Path(f"/proc/{k}").exists() for k in kids), 10)
    check("a swamped run (20,000 sessions) stops within 5 s of SIGTERM, manifest interrupted",
          fast and _status(run) == "interrupted" and gone,
          f"{took} s, status {_status(run)}")  # fmt: skip
    proc = start("dashboard", str(tmp), "--port", "0", log=tmp / "dash.log")
    wait_for(lambda: "http://127.0.0.1:" in text_of(tmp / "dash.log"), 60)
    m = re.search(r"http://127\.0\.0\.1:(\d+)", text_of(tmp / "dash.log"))
    port = m.group(1) if m else "0"
    wait_for(lambda: listening(f"http://127.0.0.1:{port}"), 60)
    proc.kill()
    proc.wait(10)
    freed = wait_for(lambda: not listening(f"http://127.0.0.1:{port}"), 15)
    check("SIGKILL of replay dashboard ends its Streamlit server (port freed)", freed)


def probe_guards(tmp: Path) -> None:
    message_case("run --sessions 100000000 is refused naming the flag and the limit",
                 replay("run", "--engines", "vllm", "--sessions", "100000000", "--duration-min",
                        "3", "--out", str(tmp / "huge"), "--no-panel"),
                 "--sessions 100,000,000: the run would need about", "the limit here is about")  # fmt: skip
    absurd = tmp / "absurd.jsonl"
    reqs = [{"t": 0, "type": "s", "in": 640, "out": 4, "hash_ids": list(range(10))},
            {"t": 5, "type": "s", "in": 10**18, "out": 4, "hash_ids": list(range(11))}]  # fmt: skip
    absurd.write_text(json.dumps({"id": "s0", "block_size": 64, "hash_id_scope": "local",
                                  "requests": reqs}) + "\n")  # fmt: skip
    for cmd, extra in (("simulate", ["--policies", "vllm"]), ("run", ["--engines", "vllm"])):
        t = time.monotonic()
        res = replay(cmd, "--trace", str(absurd), "--sessions", "2", *extra, "--out",
                     str(tmp / f"absurd-{cmd}"), "--no-panel" if cmd == "run" else "--json",
                     timeout=120)  # fmt: skip
        message_case(f"{cmd}: a 10^18-token prompt is refused naming line and limit", res,
                     "line 1: session 's0' request 1 has a prompt of", "over the limit of")  # fmt: skip
        FIGURES[f"{cmd}: seconds to refuse a 10^18-token prompt"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    res = replay("simulate", "--trace", str(tmp / "t.jsonl"), "--policies", "vllm", "--sessions",
                 "2", "--ray", "bogus:1234", "--out", str(tmp / "ray"), timeout=120)  # fmt: skip
    took = time.monotonic() - t
    message_case("simulate --ray bogus:1234 is an error naming the flag", res,
                 "--ray bogus:1234: nothing answers")  # fmt: skip
    check("  ...within 15 s (was 240 s+ of Ray warnings)", took < 15, f"{took:.1f} s")


def probe_secret_encodings(tmp: Path) -> None:
    password = "s3cret-PROBE-pass"
    forms = [password, base64.b64encode(f"probe:{password}".encode()).decode()]
    forms.append(base64.urlsafe_b64encode(f"probe:{password}".encode()).decode())
    with echo_server(None) as url:
        creds = url.replace("http://", f"http://probe:{password}@")
        res = replay("run", "--endpoint", f"vllm={creds}", "--trace", str(tmp / "t.jsonl"),
                     "--sessions", "1", "--duration-min", "0.05", "--out", str(tmp / "b64"),
                     "--no-panel")  # fmt: skip
        files = [f for f in (tmp / "b64").rglob("*") if f.is_file()]
        leaked = [f.name for f in files for s in forms if s.encode() in f.read_bytes()]
        text = res.stdout + res.stderr
        check("an echoed user:password (plain and bare base64) is on no console line or file",
              not leaked and not any(s in text for s in forms), f"leaked in {leaked}")  # fmt: skip
        res = replay("engines", "preflight", creds)
        check("engines preflight URL-with-credentials: the password is not printed",
              not any(s in res.stdout + res.stderr for s in forms) and "***@" in said(res))  # fmt: skip
    rc = tmp / "rc.yaml"
    res = replay("engines", "run-config", f"vllm-glm53-b200=http://u:{password}@h:8002",
                 "--out", str(rc))  # fmt: skip
    check("engines run-config --out keeps an environment reference, with a notice",
          password not in text_of(rc) + res.stdout + res.stderr
          and "${REPLAY_AUTH_VLLM}@h:8002" in text_of(rc) and "export REPLAY_AUTH_VLLM" in said(res))  # fmt: skip


def probe_journal(tmp: Path) -> None:
    run = tmp / "torn"
    proc = start("run", "--engines", "vllm", "--sessions", "4", "--duration-min", "10",
                 "--out", str(run), "--no-panel", log=tmp / "torn.log")  # fmt: skip
    if not wait_for(lambda: journal_lines(run) >= 10, 180):
        check("a torn journal tail is cut on resume", False, "the run did not start")
        proc.kill()
        return
    proc.kill()
    proc.wait(10)
    with (run / "requests.jsonl").open("ab") as f:
        f.write(b'{"engine": "vllm", "sess')
    (run / "requests.parquet").unlink(missing_ok=True)
    res = replay("price", str(run))
    check("a reader skips and counts a torn last line", "its last line is torn" in said(res),
          said(res)[-200:])  # fmt: skip
    res = replay("run", "--resume", str(run), "--no-panel", timeout=400)
    lines = (run / "requests.jsonl").read_bytes().splitlines()
    whole = True
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            whole = False
    notes = " ".join(read_manifest(run).notes)
    check("resume cuts the torn line first (noted); every line is whole; the run reads",
          whole and "a torn last line" in notes and len(read_requests(run)) == len(lines),
          said(res)[-200:])  # fmt: skip
    probe_full_disk(tmp)


def probe_full_disk(tmp: Path) -> None:
    mnt = tmp / "full"
    mnt.mkdir(exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        check("a full disk ends the run failed (tmpfs)", False, "needs root to mount a tmpfs")
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                             capture_output=True)  # fmt: skip
    if mounted.returncode:
        check("a full disk ends the run failed (tmpfs)", False, mounted.stderr.decode()[-200:])
        return
    try:
        run = mnt / "run"
        res = replay("run", "--engines", "vllm", "--sessions", "8", "--duration-min", "20",
                     "--out", str(run), "--no-panel", timeout=400)  # fmt: skip
        text = said(res)
        FIGURES["full disk: exit code"] = res.returncode
        check("a full disk: exit 1, the path and the free space named, no traceback",
              res.returncode == 1 and "no space left on the device (" in text
              and "bytes free" in text and "Traceback" not in text, text[-300:])  # fmt: skip
        check("  ...manifest failed, no temporary file, the journal whole lines",
              _status(run) == "failed" and not list(run.glob("*.tmp"))
              and (run / "requests.jsonl").read_bytes().endswith(b"\n"))  # fmt: skip
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def probe_messages(tmp: Path, done: Path) -> None:
    message_case("engines preflight --kind tgi is named, not a traceback",
                 replay("engines", "preflight", "http://127.0.0.1:9", "--kind", "tgi"),
                 "--kind 'tgi': not an adapter kind")  # fmt: skip
    message_case("traces synth --scale nan is named",
                 replay("traces", "synth", "--scale", "nan", "--out", str(tmp / "nan.jsonl")),
                 "--scale must be a finite number")  # fmt: skip
    message_case("run --engines '' is refused",
                 replay("run", "--engines", "", "--no-panel"), "--engines '': names no engine")  # fmt: skip
    out = tmp / "dup"
    res = replay("simulate", "--trace", str(tmp / "t.jsonl"), "--policies", "vllm,vllm",
                 "--sessions", "2", "--duration-min", "1", "--out", str(out))  # fmt: skip
    rows = text_of(out / "summary.csv").count("\n") - 1
    check("simulate --policies vllm,vllm runs vllm once, with a note, and writes summary.csv",
          res.returncode == 0 and "given more than once" in said(res) and rows == 1,
          said(res)[-200:])  # fmt: skip
    cfg = tmp / "slo.yaml"
    cfg.write_text("engines: [{name: vllm, url: 'http://127.0.0.1:9'}]\nslo: {ttft_s: fast}\n")
    message_case("slo: {ttft_s: fast} names the key", replay("run", "--config", str(cfg)),
                 "slo: field 'ttft_s'")  # fmt: skip
    v2 = tmp / "v2"
    shutil.copytree(done, v2)
    man = json.loads((v2 / "manifest.json").read_text())
    man["schema_version"] = 2
    (v2 / "manifest.json").write_text(json.dumps(man))
    res = replay("price", str(v2))
    check("a manifest of schema_version 2 is warned about",
          "schema_version 2, but this harness reads version 1" in said(res), said(res)[-200:])  # fmt: skip
    res = replay("run", "--endpoint", "a=vllm@http://127.0.0.1:9", "--endpoint",
                 "b=vllm@http://127.0.0.1:9", "--trace", str(tmp / "t.jsonl"), "--no-panel")  # fmt: skip
    check("two --endpoint names on one URL are warned about",
          "name one URL (http://127.0.0.1:9): they share" in said(res))  # fmt: skip
    res = replay("traces", "convert", str(tmp / "t.jsonl"), "--to", "weka", "--out",
                 str(tmp / "conv.jsonl"))  # fmt: skip
    check("traces convert says it drops per-request model, input_types, output_types",
          res.returncode == 0 and "per-request model, input_types and output_types" in said(res))  # fmt: skip


def run_all(tmp: Path) -> None:
    done = tmp / "clock"  # probe_integrity's completed 3-minute run
    if not (done / "manifest.json").exists():
        check("issue 24 probes: the completed 3-minute run exists", False)
        return
    probe_messages(tmp, done)
    probe_windows(tmp, done)
    probe_guards(tmp)
    probe_secret_encodings(tmp)
    probe_signals(tmp)
    probe_hang(tmp)
    probe_journal(tmp)


__all__ = ["run_all"]
