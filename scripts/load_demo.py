#!/usr/bin/env python3
"""Load the demo collection into a running Chroma through its v2 REST API (standard library only).

    python3 scripts/load_demo.py --chroma-url http://127.0.0.1:8000 [--collection acme-widgets]
                                 [--records testdata/records.jsonl]

(Re)creates the collection the way chromadb-repo-indexer 1.2.0 does (default tenant and database,
configuration {"embedding_function": {"type": "legacy"}}, so Chroma's default l2 space) and adds every
record of records.jsonl with its id, document, metadata and embedding exactly as given.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def call(method: str, url: str, body: object | None = None) -> object:
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"error: {method} {url} -> HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')}")
    except urllib.error.URLError as exc:
        raise SystemExit(f"error: {method} {url}: {exc.reason}")
    return json.loads(raw) if raw else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chroma-url", required=True)
    ap.add_argument("--collection", default="acme-widgets")
    ap.add_argument("--tenant", default="default_tenant")
    ap.add_argument("--database", default="default_database")
    ap.add_argument("--records", default=str(ROOT / "testdata" / "records.jsonl"))
    args = ap.parse_args()

    records = [json.loads(line) for line in Path(args.records).read_text("utf-8").splitlines() if line.strip()]
    base = f"{args.chroma_url.rstrip('/')}/api/v2/tenants/{args.tenant}/databases/{args.database}/collections"

    try:
        call("DELETE", f"{base}/{args.collection}")
    except SystemExit as exc:
        if "HTTP 404" not in str(exc):
            raise
    created = call("POST", base, {
        "name": args.collection,
        "configuration": {"embedding_function": {"type": "legacy"}},
        "get_or_create": False,
    })
    cid = created["id"]
    for start in range(0, len(records), 100):
        batch = records[start:start + 100]
        call("POST", f"{base}/{cid}/add", {
            "ids": [r["id"] for r in batch],
            "documents": [r["document"] for r in batch],
            "metadatas": [r["metadata"] for r in batch],
            "embeddings": [r["embedding"] for r in batch],
        })
    count = call("GET", f"{base}/{cid}/count")
    if count != len(records):
        raise SystemExit(f"error: collection {args.collection} holds {count} records, expected {len(records)}")
    print(f"loaded {count} records into {args.collection} ({cid})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
