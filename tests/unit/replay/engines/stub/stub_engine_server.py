"""A stand-in engine process for the launcher tests: started exactly as a real server would
be (`python -m stub_engine_server --model ... --host H --port P ...`), it spawns a worker
child the way vLLM spawns its engine core, then serves `/health` (mode `healthy`), exits with
an error (mode `exit`) or never answers (mode `hang`). It writes its and its worker's pids to
--pidfile so a test can check the whole process group went down."""

from __future__ import annotations

import argparse
import http.server
import subprocess
import sys
import time


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=["healthy", "exit", "hang"], default="healthy")
    p.add_argument("--pidfile", required=True)
    args, _ = p.parse_known_args()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(args.pidfile, "w") as f:
        f.write(f"{worker.pid}\n")
    print(f"stub engine starting in mode {args.mode}", flush=True)
    if args.mode == "exit":
        print("fatal: stub engine could not start (on purpose)", flush=True)
        sys.exit(3)
    if args.mode == "hang":
        time.sleep(600)
    http.server.ThreadingHTTPServer((args.host, args.port), _Health).serve_forever()


if __name__ == "__main__":
    main()
