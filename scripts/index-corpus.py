#!/usr/bin/env python3
"""Writes a generated Python corpus for measuring `repo-retriever index` at scale.

    python3 scripts/index-corpus.py DIR FILES      # e.g. DIR 100000: ~785 MB, 1,000,000 chunks

Each file holds ten functions of about 200 tokens drawn from a fixed vocabulary (seeded, so the
corpus is the same on every machine); the default semantic chunking at 512 tokens makes exactly
ten chunks of each file. Files go 1,000 to a folder.
"""
import os
import random
import sys

root, nfiles = sys.argv[1], int(sys.argv[2])
rng = random.Random(13)
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
         "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "buffer", "cache", "index", "query",
         "vector", "token", "chunk", "store", "batch", "stream", "parse", "render", "filter", "select",
         "merge", "split", "count", "score", "rank", "embed", "write", "read"]


def ident():
    return "_".join(rng.choice(words) for _ in range(2)) + str(rng.randrange(1000))


def func():
    name = ident()
    args = ", ".join(ident() for _ in range(3))
    lines = [f"def {name}({args}):", f'    """{" ".join(rng.choice(words) for _ in range(12))}."""']
    for _ in range(5):
        target, call, arg, number = ident(), ident(), ident(), rng.randrange(100)
        comment = " ".join(rng.choice(words) for _ in range(4))
        lines.append(f"    {target} = {call}({arg}, {number})  # {comment}")
    lines.append(f"    return {ident()}")
    return "\n".join(lines)


for i in range(nfiles):
    folder = os.path.join(root, f"pkg{i // 1000:03d}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"mod{i % 1000:03d}.py"), "w") as f:
        f.write("\n\n\n".join(func() for _ in range(10)) + "\n")
