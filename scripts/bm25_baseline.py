#!/usr/bin/env python3
"""An independent BM25 baseline over the chunks of an embedded store.

    python3 scripts/bm25_baseline.py --store S --queries Q.jsonl [--name NAME] [--json OUT.json]

Reads every chunk of the embedded store folder S (its store.sqlite3: the `chunks` table's
`document` column, the text the embedder saw, and `start_line`/`end_line`/`path` from `metadata`),
ranks all of them for each query of the query set with rank_bm25's BM25Okapi (k1 = 1.5, b = 0.75,
epsilon = 0.25, its defaults) and scores the top ten with the relevance rule and metrics of
`repo-retriever eval` (docs/evaluation.md): MRR@10, nDCG@10, R@1, R@5, R@10, averaged over queries.
It prints one Markdown row with the same quality columns as `repo-retriever eval`.

This is a cross-check written apart from the Rust code: it shares no tokenizer, index or metric
code with it, only the store's chunks and the query-set format.

Tokenizer (queries and chunks alike): every run of [A-Za-z0-9_] is an identifier; it yields the run
lowercased (`parse_args`, `getconn`), and, when it has several parts, each part lowercased, the
parts being split at underscores and at camelCase boundaries (`getConn` → `get`, `conn`;
`HTTPServer` → `http`, `server`; `utf8Reader` → `utf8`, `reader`). Everything else separates tokens.

Needs rank_bm25 (`pip install rank_bm25`). `path` filters in the query set are applied before
ranking, as the store does; `source` filters are refused (a store built by `index` holds one
repository).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sqlite3
import sys
from pathlib import Path

try:
    from rank_bm25 import BM25Okapi
except ImportError:  # pragma: no cover - a setup error, reported plainly
    sys.exit("error: rank_bm25 is not installed (pip install rank_bm25)")

K = 10
IDENT = re.compile(r"[A-Za-z0-9_]+")
# camelCase parts: an upper-case run not followed by lower case (HTTP in HTTPServer), a capitalised
# or lower-case word, or digits attached to the letters before them (utf8).
PART = re.compile(r"[A-Z]+(?![a-z])[0-9]*|[A-Z]?[a-z]+[0-9]*|[0-9]+")


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    for ident in IDENT.findall(text):
        tokens.append(ident.lower())
        parts = [p.lower() for piece in ident.split("_") for p in PART.findall(piece)]
        if len(parts) > 1:
            tokens.extend(parts)
    return tokens


def parse_target(spec: str) -> tuple[str, int | None, int | None]:
    path, _, lines = spec.partition("#")
    if not lines:
        return path, None, None
    m = re.fullmatch(r"L(\d+)(?:-L(\d+))?", lines)
    if not m:
        raise ValueError(f"bad target {spec!r}")
    start = int(m.group(1))
    end = int(m.group(2) or start)
    return path, start, end


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The `path` filter of a query: `*` crosses folders, `**/` is zero or more folders, `?` one
    character (docs/evaluation.md)."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
        elif pattern[i] == "*":
            out.append(".*")
            i += 1
        elif pattern[i] == "?":
            out.append(".")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def load_chunks(store: Path) -> list[tuple[str, int, int, str]]:
    db = store / "store.sqlite3"
    if not db.is_file():
        sys.exit(f"error: {db} not found (is {store} an embedded store folder?)")
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute("SELECT document, metadata FROM chunks ORDER BY pk").fetchall()
    conn.close()
    chunks = []
    for document, metadata in rows:
        meta = json.loads(metadata)
        chunks.append((meta["path"], int(meta["start_line"]), int(meta["end_line"]), document))
    return chunks


def score(matches: list[set[int]], targets: int) -> dict[str, float]:
    top = matches[:K]
    rr = next((1.0 / (i + 1) for i, m in enumerate(top) if m), 0.0)
    credited: set[int] = set()
    dcg = 0.0
    for i, m in enumerate(top):
        if m - credited:
            dcg += 1.0 / math.log2(i + 2)
        credited |= m
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(targets, K)))

    def recall(k: int) -> float:
        found = set().union(*matches[:k]) if matches[:k] else set()
        return len(found) / targets

    return {
        "mrr@10": rr,
        "ndcg@10": dcg / ideal if ideal else 0.0,
        "recall@1": recall(1),
        "recall@5": recall(5),
        "recall@10": recall(10),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, type=Path, help="an embedded store folder")
    ap.add_argument("--queries", required=True, type=Path, help="a query set (JSON Lines)")
    ap.add_argument("--name", default="bm25 (rank_bm25)", help="the row's name")
    ap.add_argument("--json", type=Path, help="write the metrics and every query's ranks here")
    args = ap.parse_args()

    chunks = load_chunks(args.store)
    if not chunks:
        sys.exit(f"error: {args.store} holds no chunk")
    corpus = [tokenize(doc) for _, _, _, doc in chunks]

    queries = []
    for n, line in enumerate(args.queries.read_text().splitlines(), 1):
        if line.strip():
            q = json.loads(line)
            if "source" in q:
                sys.exit(f"error: {args.queries}:{n}: source filters are not supported here")
            queries.append((n, q))

    # One index per distinct path filter, over the chunks it keeps (the store filters first).
    indexes: dict[str | None, tuple[list[int], BM25Okapi]] = {}

    def index_for(pattern: str | None) -> tuple[list[int], BM25Okapi]:
        if pattern not in indexes:
            rx = glob_regex(pattern) if pattern else None
            keep = [i for i, c in enumerate(chunks) if rx is None or rx.match(c[0])]
            if not keep:
                sys.exit(f"error: path filter {pattern!r} keeps no chunk")
            indexes[pattern] = (keep, BM25Okapi([corpus[i] for i in keep]))
        return indexes[pattern]

    per_query = []
    for n, q in queries:
        targets = [parse_target(t) for t in q["relevant"]]
        keep, bm25 = index_for(q.get("path"))
        scores = bm25.get_scores(tokenize(q["query"]))
        order = sorted(range(len(keep)), key=lambda j: (-scores[j], j))[:K]
        matches, results = [], []
        for j in order:
            path, first, last = chunks[keep[j]][:3]
            results.append(f"{path}#L{first}-L{last}")
            matches.append(
                {
                    t
                    for t, (tp, start, end) in enumerate(targets)
                    if tp == path and (start is None or (first <= end and start <= last))
                }
            )
        m = score(matches, len(targets))
        per_query.append(
            {
                "line": n,
                "query": q["query"],
                "relevant": q["relevant"],
                "relevant_ranks": [i + 1 for i, s in enumerate(matches) if s],
                "results": results,
                "metrics": m,
            }
        )

    names = ["mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10"]
    mean = {k: sum(p["metrics"][k] for p in per_query) / len(per_query) for k in names}
    print("| pipeline | chunks | queries | MRR@10 | nDCG@10 | R@1 | R@5 | R@10 |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    cells = " | ".join(f"{mean[k]:.3f}" for k in names)
    print(f"| {args.name} | {len(chunks)} | {len(per_query)} | {cells} |")
    if args.json:
        out = {
            "queries_file": str(args.queries),
            "store": str(args.store),
            "chunks": len(chunks),
            "k": K,
            "name": args.name,
            "metrics": mean,
            "per_query": per_query,
        }
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
