#!/usr/bin/env python3
"""Run one `search` through an MCP server over stdio and print the Markdown text of the result.

    python3 scripts/mcp_search.py [--query Q] [--limit N] [--source S] [--path P] -- BINARY [ARGS...]

Sends initialize, notifications/initialized and tools/call search as newline-delimited JSON-RPC,
waits for the answer, then closes stdin. Exits 1 when the tool result is an error.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query", default="where is the configuration loaded and validated")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--source")
    ap.add_argument("--path")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("the server command is missing (after --)")

    arguments: dict[str, object] = {"query": args.query, "limit": args.limit}
    if args.source:
        arguments["source"] = args.source
    if args.path:
        arguments["path"] = args.path

    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()

    def send(msg: dict) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def wait_for(msg_id: int) -> dict:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                raise SystemExit(f"error: the server wrote a non-JSON line to stdout: {line!r}")
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise SystemExit(f"error: JSON-RPC error: {json.dumps(msg['error'])}")
                return msg["result"]
        raise SystemExit(f"error: the server exited (or timed out) before answering request {msg_id}")

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "repo-retriever-demo", "version": "1"}}})
        wait_for(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "search", "arguments": arguments}})
        result = wait_for(2)
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        timer.cancel()

    text = "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
    print(text)
    return 1 if result.get("isError") else 0


if __name__ == "__main__":
    sys.exit(main())
