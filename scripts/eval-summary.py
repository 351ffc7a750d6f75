#!/usr/bin/env python3
"""Summarises the reports scripts/eval-real wrote into one Markdown table per query kind.

    python3 scripts/eval-summary.py [--heldout] [DIR]        # default: target/eval-real

With --heldout, the held-out sets (testdata/eval/heldout/, reports in DIR/heldout/).

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
HELDOUT_SETS = ["go-json-template", "python-requests-urllib3", "rust-ignore-globset", "typescript-query-core"]


def rows_of(path: Path) -> dict[str, dict[str, float]]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    if "pipelines" in data:
        return {p["name"]: p["metrics"] for p in data["pipelines"]}
    return {data["name"]: data["metrics"]}


def table(out: Path, suffix: str, title: str, sets: list[str] = SETS) -> None:
    per_set: dict[str, dict[str, dict[str, float]]] = {}
    names: list[str] = []
    for s in sets:
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
    for s in sets:
        try:
            queries.append(str(json.loads((out / f"{s}{suffix}-hash.json").read_text())["pipelines"][0]["queries"]))
        except (OSError, KeyError, IndexError, ValueError):
            queries.append("?")
    print(f"**{title}** ({' / '.join(queries)} queries):\n")
    head = " / ".join(s.split("-", 1)[0].capitalize().replace("Typescript", "TS") for s in sets)
    print(f"| pipeline | R@5 {head} | MRR@10 {head} |")
    print("|---|---|---|")
    for n in names:
        def cell(key: str) -> str:
            return " / ".join(f"{per_set[s][n][key]:.3f}" if n in per_set[s] else "–" for s in sets)
        print(f"| {n} | {cell('recall@5')} | {cell('mrr@10')} |")
    print()


def main() -> None:
    args = sys.argv[1:]
    heldout = "--heldout" in args
    args = [a for a in args if a != "--heldout"]
    out = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "target/eval-real"
    sets = SETS
    if heldout:
        out, sets = out / "heldout", HELDOUT_SETS
    table(out, "", "Hand-written queries", sets)
    table(out, "-generated", "Generated doc-comment queries", sets)


if __name__ == "__main__":
    main()
