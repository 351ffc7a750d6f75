#!/usr/bin/env python3
"""Summarises the reports scripts/eval-real wrote into one Markdown table per query kind.

    python3 scripts/eval-summary.py [DIR]        # default: target/eval-real

Reads DIR/<set>-<embedder>.json, <set>-<embedder>-pipelines.json (`repo-retriever eval --json`)
and <set>-bm25.json (scripts/bm25_baseline.py), and prints, for the hand-written sets and then for
the generated ones, a row per pipeline with R@5 and MRR@10 on every set (– where a set was not
measured with that pipeline).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SETS = ["go-nethttp", "python-pallets", "rust-clap-builder", "typescript-zod"]


def rows_of(path: Path) -> dict[str, dict[str, float]]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    if "pipelines" in data:
        return {p["name"]: p["metrics"] for p in data["pipelines"]}
    return {data["name"]: data["metrics"]}


def table(out: Path, suffix: str, title: str) -> None:
    per_set: dict[str, dict[str, dict[str, float]]] = {}
    names: list[str] = []
    for s in SETS:
        label = s + suffix
        found: dict[str, dict[str, float]] = {}
        for f in [f"{label}-hash.json", f"{label}-hash-pipelines.json", f"{label}-minilm.json",
                  f"{label}-minilm-pipelines.json", f"{label}-bm25.json"]:
            found.update(rows_of(out / f))
        per_set[s] = found
        for n in found:
            if n not in names:
                names.append(n)
    if not names:
        return
    queries = []
    for s in SETS:
        try:
            queries.append(str(json.loads((out / f"{s}{suffix}-hash.json").read_text())["pipelines"][0]["queries"]))
        except (OSError, KeyError, IndexError, ValueError):
            queries.append("?")
    print(f"**{title}** ({' / '.join(queries)} queries):\n")
    head = " / ".join(s.split("-", 1)[0].capitalize().replace("Typescript", "TS") for s in SETS)
    print(f"| pipeline | R@5 {head} | MRR@10 {head} |")
    print("|---|---|---|")
    for n in names:
        def cell(key: str) -> str:
            return " / ".join(f"{per_set[s][n][key]:.3f}" if n in per_set[s] else "–" for s in SETS)
        print(f"| {n} | {cell('recall@5')} | {cell('mrr@10')} |")
    print()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "target/eval-real"
    table(out, "", "Hand-written queries")
    table(out, "-generated", "Generated doc-comment queries")


if __name__ == "__main__":
    main()
