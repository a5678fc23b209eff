"""Run the fake Messages API as a process: `python -m flower.testing.fakeapi --script FILE`.

Prints one line, `fakeapi listening on http://127.0.0.1:PORT`, then serves until SIGTERM or
SIGINT. With --log, each request is appended to a JSON-lines file (headers redacted, the key
kept only as a fingerprint). A required key is read from an environment variable, never argv.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

from flower.testing.script import ScriptError
from flower.testing.scriptfile import load_script
from flower.testing.server import FakeAPI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flower.testing.fakeapi",
        description="Serve a scripted fake Anthropic Messages API on the loopback interface.",
    )
    parser.add_argument("--script", required=True, help="rules file (.json, .yaml or .yml)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0 = any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--log", help="append every request as a JSON line to this file")
    parser.add_argument(
        "--require-key-env",
        metavar="VAR",
        help="answer 401 unless the request carries the key held in this environment variable",
    )
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as exc:
        print(f"fakeapi: {exc}", file=sys.stderr)
        return 2
    api_key = None
    if args.require_key_env:
        api_key = os.environ.get(args.require_key_env)
        if not api_key:
            print(f"fakeapi: ${args.require_key_env} is not set", file=sys.stderr)
            return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        api = FakeAPI(script, host=args.host, port=args.port, api_key=api_key, log_path=args.log)
        api.start()
    except OSError as exc:
        print(f"fakeapi: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"fakeapi listening on {api.url}", flush=True)
    stop.wait()
    api.stop()
    for error in api.errors:
        print(f"fakeapi: {error}", file=sys.stderr)
    return 1 if api.errors else 0


if __name__ == "__main__":
    sys.exit(main())
