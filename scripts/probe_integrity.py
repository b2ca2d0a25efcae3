"""Probe of issue 12's failure cases, tried as a new user would (real `replay` processes,
real emulators): each case prints PASS/FAIL and what it saw, then the counts and the
SIGKILL / concurrent-resume figures.

    PYTHONPATH=$PWD .venv/bin/python scripts/probe_integrity.py [--keep DIR]

Takes 4-6 minutes on two cores (three short emulated runs), and as long again for issue 24's
cases (scripts/probe_hard_edges.py: windows, a mid-run hang, signals, scale guards, secrets in
every encoding, a torn journal and a full disk on a tmpfs, which needs root). Nothing here is timed against a
target; it is the re-run of the issue's probe.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from probe_lib import (  # noqa: E402
    FIGURES,
    KEY,
    PLANTED,
    RESULTS,
    alive,
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

from replay.rundir import read_journal, read_manifest, read_requests, run_status  # noqa: E402


# -- the cases ----------------------------------------------------------------------------
def probe_kill_and_concurrent_resume(tmp: Path, engines: str = "vllm,sglang") -> Path:
    run = tmp / "killed"
    args = ["run", "--engines", engines, "--sessions", "4", "--duration-min", "20"]
    harness = start(*args, "--out", str(run), "--no-panel", log=tmp / "killed.log")
    if not wait_for(lambda: journal_lines(run) >= 10, 180):
        check("embedded run starts", False, (tmp / "killed.log").read_text()[-300:])
        harness.kill()
        return run
    kids = children(harness.pid)
    urls = [e.url or "" for e in read_manifest(run).engines]
    second = replay("run", "--resume", str(run), "--no-panel")
    message_case(
        "second --resume while the run goes is refused (pid, start time)",
        second, f"pid {harness.pid}, started",
    )  # fmt: skip
    FIGURES["concurrent resume: second writer's exit code"] = second.returncode
    FIGURES["concurrent resume: records the second writer wrote"] = 0 if second.returncode else "?"
    written = journal_lines(run)
    os.kill(harness.pid, signal.SIGKILL)
    harness.wait(10)
    t = time.monotonic()
    gone = wait_for(lambda: not any(alive(k) for k in kids), 10)
    FIGURES["SIGKILL: emulator processes before the kill"] = len(kids)
    FIGURES["SIGKILL: processes left after 10 s"] = sum(alive(k) for k in kids)
    FIGURES["SIGKILL: seconds until the last emulator ended"] = round(time.monotonic() - t, 2)
    FIGURES["SIGKILL: ports still listening"] = sum(listening(u) for u in urls)
    check("SIGKILL of the harness leaves no emulator running or listening",
          gone and not any(listening(u) for u in urls))  # fmt: skip
    man = read_manifest(run)
    check("a killed run reads `interrupted (stale)`", run_status(run, man) == "interrupted (stale)")
    before = read_requests(run)
    FIGURES["SIGKILL: records in the journal at the kill"] = written
    FIGURES["SIGKILL: records readable after the kill"] = len(before)
    FIGURES["SIGKILL: duplicated record keys after the kill"] = int(before.duplicated(KEY).sum())
    res = replay("run", "--resume", str(run), "--no-panel", timeout=400)
    after = read_requests(run)
    journal = read_journal(run)
    man = read_manifest(run)
    FIGURES["resume: status"] = man.status
    FIGURES["resume: records scheduled and written (both segments)"] = len(after)
    FIGURES["resume: duplicated record keys"] = int(after.duplicated(KEY).sum())
    FIGURES["resume: journal rows missing from requests.parquet (lost)"] = len(journal) - len(after)
    FIGURES["resume: earlier records lost by the resume"] = max(0, len(before) - len(
        after[after.index < len(before)]))  # fmt: skip
    ok = res.returncode in (0, 1) and not after.duplicated(KEY).any() and len(after) > len(before)
    check(
        "the killed run resumes without duplicates; nothing recorded is lost", ok, said(res)[-200:]
    )
    notes = " ".join(man.notes)
    check("the resume says it took over a dead writer's lock", "died without releasing" in notes)
    return run


def probe_engine_dies(tmp: Path) -> None:
    run = tmp / "restart"
    harness = start("run", "--engines", "vllm", "--sessions", "4", "--duration-min", "12",
                    "--out", str(run), "--no-panel", log=tmp / "restart.log")  # fmt: skip
    if not wait_for(lambda: journal_lines(run) >= 5, 180):
        check("an emulator that dies is restarted", False, "the run did not start")
        harness.kill()
        return
    (child,) = children(harness.pid)
    os.kill(child, signal.SIGKILL)
    harness.wait(300)
    man = read_manifest(run)
    summary = json.loads(text_of(run / "summary.json") or '{"engines": {"vllm": {}}}')
    downs = [e for e in man.events if e.event == "engine_down"]
    FIGURES["dead emulator: restarts"] = man.emulator_restarts
    FIGURES["dead emulator: engine_down events"] = [(e.start_s, e.end_s) for e in downs]
    FIGURES["dead emulator: window error rate"] = summary["engines"]["vllm"].get("error_rate")
    FIGURES["dead emulator: run status"] = man.status
    check("an emulator that dies is restarted (noted in the manifest)",
          man.emulator_restarts == {"vllm": 1})  # fmt: skip
    check("engine_down is recorded with its times", len(downs) == 1 and downs[0].end_s is not None)
    notes = " ".join(summary.get("notes", []))
    check("summary.json notes the outage", "engine down from" in notes and "restarted" in notes)
    check("status is degraded iff the error share passed 5%",
          (man.status == "degraded") == ((summary["engines"]["vllm"]["error_rate"] or 0) > 0.05))  # fmt: skip


def probe_clock(tmp: Path) -> None:
    sim = start("serve-sim", "--engine", "vllm", "--time-scale", "30", "--port", "0",
                log=tmp / "sim.log")  # fmt: skip
    try:
        ok = wait_for(lambda: "serve-sim ready:" in (tmp / "sim.log").read_text(), 60)
        m = re.search(r"serve-sim ready:\s+(http://\S+)", (tmp / "sim.log").read_text())
        if not ok or not m:
            check("serve-sim --time-scale 30 starts", False)
            return
        url = m.group(1).replace("http://", "http://probe:s3cret-pass@")
        out = tmp / "clock"
        res = replay("run", "--endpoint", f"vllm={url}", "--sessions", "2", "--duration-min",
                     "3", "--out", str(out), "--no-panel")  # fmt: skip
        cfg = read_manifest(out).config.model_dump() if (out / "manifest.json").exists() else {}
        FIGURES["--endpoint to serve-sim --time-scale 30: clock_scale recorded"] = cfg.get(
            "clock_scale"
        )
        check("the announced clock scale is recorded (30, not 1)",
              res.returncode == 0 and cfg.get("clock_scale") == 30.0, said(res)[-200:])  # fmt: skip
        leaked = [f.name for f in out.iterdir() if b"s3cret-pass" in f.read_bytes()]
        check("URL credentials are in no file of the run, nor in the output",
              not leaked and "s3cret-pass" not in said(res), ",".join(leaked))  # fmt: skip
        bad = replay("run", "--endpoint", f"vllm={url}", "--sessions", "2", "--duration-min",
                     "3", "--time-scale", "10", "--out", str(tmp / "clock2"), "--no-panel")  # fmt: skip
        message_case("a --time-scale that conflicts with the announced one is an error", bad,
                     "--time-scale 10, but the engines announce time_scale 30")  # fmt: skip
    finally:
        sim.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            sim.wait(10)
        if sim.poll() is None:
            sim.kill()


def probe_secrets_and_preflight(tmp: Path) -> None:
    with echo_server(PLANTED) as url:
        out = tmp / "echo"
        trace = str(tmp / "t.jsonl")
        res = replay("run", "--endpoint", f"hosted=openai@{url}", "--trace", trace,
                     "--sessions", "1", "--duration-min", "0.05", "--retries", "0",
                     "--out", str(out), "--no-panel", extra_env={"OPENAI_API_KEY": PLANTED})  # fmt: skip
        files = [f for f in out.rglob("*") if f.is_file()] if out.exists() else []
        leaked = [f.name for f in files if PLANTED.encode() in f.read_bytes()]
        check("a planted key is in no file of the run (every file grepped)",
              bool(files) and not leaked and PLANTED not in said(res),
              f"{len(files)} files; leaked in {leaked}")  # fmt: skip
        FIGURES["planted key: files grepped"] = len(files)
        res = replay("run", "--endpoint", f"hosted=openai@{url}", "--trace", trace,
                     "--out", str(tmp / "no-key"), "--no-panel",
                     extra_env={"OPENAI_API_KEY": "sk-wrong-0123456789abcdef"})  # fmt: skip
        message_case("preflight fails on 401 and names the fix", res,
                     "was rejected (401)", "OPENAI_API_KEY")  # fmt: skip
        check("preflight never says passed for checks that did not run",
              "checks passed" not in said(res))  # fmt: skip


def probe_flags(tmp: Path, killed: Path) -> None:
    ep = ["--endpoint", "vllm=http://127.0.0.1:9"]
    message_case("--resume refuses --sessions", replay("run", "--resume", str(killed),
                 "--sessions", "8"), "drop --sessions")  # fmt: skip
    message_case(
        "a repeated --endpoint name is refused",
        replay("run", *ep, "--endpoint", "vllm=http://127.0.0.1:10"),
        "given twice",
    )
    message_case("--retries -1 is an error naming the flag", replay("run", *ep, "--retries", "-1"),
                 "--retries -1: must be 0 or more")  # fmt: skip
    afile = tmp / "afile"
    afile.write_text("x")
    message_case("run --out a file: refused before anything starts",
                 replay("run", *ep, "--out", str(afile)), "is a file, not a folder")  # fmt: skip
    res = replay("run", *ep, "--out", str(afile / "sub"))
    message_case("run --out under a file: refused before preflight", res, "is a file")
    check("  ...and preflight did not run", "preflight" not in said(res))
    message_case("traces synth --out a folder", replay("traces", "synth", "--out", str(tmp)),
                 "--out", "is a folder")  # fmt: skip
    message_case("traces convert --out a folder",
                 replay("traces", "convert", "/nonexistent.jsonl", "--to", "weka", "--out", str(tmp)),
                 "--out", "is a folder")  # fmt: skip
    binary = tmp / "bin.yaml"
    binary.write_bytes(b"\x7fELF\x00\x01\xff")
    message_case("--config a folder", replay("run", "--config", str(tmp)), "is a folder")
    message_case("--config a binary", replay("run", "--config", str(binary)), "is a binary file")
    message_case("engine YAML a binary", replay("engines", "show", str(binary)), "is a binary file")
    res = replay("run", *ep, "--trace", str(tmp / "t.jsonl"), "--duration-min", "5")
    message_case("--duration-min 5 without --window: the window used is said", res,
                 "measuring window 1.66667-5 min (none given: the last two thirds")  # fmt: skip
    message_case("a wrong-typed window is named", replay("run", *ep, "--window", "abc"),
                 "--window 'abc': expected A-B in minutes")  # fmt: skip


def probe_reports(tmp: Path, killed: Path) -> None:
    import shutil

    if not (killed / "manifest.json").exists():
        check("report and price cases (on the killed run)", False, "the killed run is missing")
        return

    folder = tmp / "runs"
    folder.mkdir()
    good, bad = folder / "good", folder / "bad"
    shutil.copytree(killed, good)
    shutil.copytree(killed, bad)
    with (bad / "requests.jsonl").open("ab") as f:
        f.write(b'{"engine": "vllm", "status" \n')
    (bad / "requests.parquet").unlink()
    lines = (bad / "requests.jsonl").read_bytes().count(b"\n")
    res = replay("report", str(bad), "--out", str(tmp / "rep0"), "--no-figures")
    message_case("report: a bad requests.jsonl line names file and line", res,
                 f"requests.jsonl: line {lines} is not valid JSON")  # fmt: skip
    res = replay("price", str(bad))
    message_case("price: a bad requests.jsonl line names file and line", res,
                 f"requests.jsonl: line {lines} is not valid JSON")  # fmt: skip
    res = replay("report", str(folder), "--out", str(tmp / "rep1"), "--no-figures",
                 "--format", "md")  # fmt: skip
    message_case("report over a folder reports the bad run and goes on", res,
                 "skipped a run:", "1 of 2 runs were left out", code=1)  # fmt: skip
    check("  ...and wrote the report of the rest", (tmp / "rep1" / "report.md").exists())
    res = replay("report", str(good), "--out", str(tmp / "rep2"), "--no-figures", "--format",
                 "md", "--window", "1-2")  # fmt: skip
    check("report --window is in minutes", res.returncode == 0 and "60–120 s" in text_of(
        tmp / "rep2" / "report.md"), said(res)[-200:])  # fmt: skip
    man = json.loads((good / "manifest.json").read_text())
    man["status"] = "running"
    (good / "manifest.json").write_text(json.dumps(man))
    replay("report", str(good), "--out", str(tmp / "rep3"), "--no-figures", "--format", "md")
    check("a running run nobody writes shows `interrupted (stale)`",
          "interrupted (stale)" in text_of(tmp / "rep3" / "report.md"))  # fmt: skip
    man["config"]["window"] = "abc"
    (good / "manifest.json").write_text(json.dumps(man))
    message_case("a wrong-typed manifest window is shown whole", replay("price", str(good)),
                 "a window is [start_s, end_s], got 'abc'")  # fmt: skip


def probe_traces(tmp: Path) -> None:
    path = tmp / "noreq.jsonl"
    path.write_text(json.dumps({"id": "s", "block_size": 64, "hash_id_scope": "local"}) + "\n")
    message_case("a missing `requests` key is named", replay("traces", "stats", str(path)),
                 "field 'requests'", "missing")  # fmt: skip
    t = time.monotonic()
    res = replay("traces", "stats", "hf:nobody-probe/no-such-trace",
                 extra_env={"HF_ENDPOINT": "http://127.0.0.1:9"})  # fmt: skip
    took = time.monotonic() - t
    FIGURES["nonexistent hub id: seconds to fail"] = round(took, 1)
    message_case("a hub id that cannot be reached fails fast", res, "field 'src'")
    check("  ...in under 15 s (was ~40 s of retries)", took < 15, f"{took:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs in this folder")
    ap.add_argument("--engines", default="vllm,sglang", help="the killed run's two emulators")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-integrity-") as tmpname:
        tmp = opts.keep or Path(tmpname)
        tmp.mkdir(parents=True, exist_ok=True)
        made = replay("traces", "synth", "--trajectories", "3", "--scale", "16", "--out",
                      str(tmp / "t.jsonl"))  # fmt: skip
        assert made.returncode == 0, said(made)
        probe_traces(tmp)
        probe_flags(tmp, tmp / "nonexistent-run")
        probe_secrets_and_preflight(tmp)
        killed = probe_kill_and_concurrent_resume(tmp, opts.engines)
        probe_reports(tmp, killed)
        probe_clock(tmp)
        probe_engine_dies(tmp)
        from probe_hard_edges import run_all  # issue 24's cases (they reuse the runs above)

        run_all(tmp)
    passed = sum(ok for _, ok, _ in RESULTS)
    print(f"\ntried {len(RESULTS)}, passed {passed}, failed {len(RESULTS) - passed}")
    for k, v in FIGURES.items():
        print(f"  {k}: {v}")
    sys.exit(0 if passed == len(RESULTS) else 1)


if __name__ == "__main__":
    main()
