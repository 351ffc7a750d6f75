//! `repo-retriever eval` end to end through the binary: the fixture corpus
//! indexed with the hash embedder, the hand-written query set of
//! `testdata/eval`, the default comparison, a pipelines file, bad input,
//! `eval generate` on the fixture corpus, and `eval suite` on a one-repository
//! suite over it.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{index, server_bin, testdata_dir};
use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(server_bin())
        .args(args)
        .env_remove("REPO_RETRIEVER_STORE")
        .env_remove("RR_CROSS_ENCODER_DIR")
        .output()
        .expect("run the binary")
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn failure(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?} should fail");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

fn fixture_queries() -> String {
    testdata_dir().join("eval/fixture-queries.jsonl").to_str().unwrap().to_owned()
}

/// The default comparison's pipelines over a hash-embedded store: each
/// mode, the default mode selected as the reference selects, the default
/// mode with each reranker, and the BM25 baseline.
const DEFAULT_ROWS: [&str; 9] = [
    "hash dense",
    "hash lexical",
    "hash hybrid",
    "hash hybrid, no code ranking",
    "hash hybrid, 2 per file",
    "hash hybrid + bm25-fusion",
    "hash hybrid + mmr",
    "hash hybrid + bm25-fusion + mmr",
    "bm25",
];

/// MRR@10 of the hash embedder without reranking (with the code ranking) on the fixture query set:
/// the hash embedder is deterministic and the embedded store ranks exactly,
/// so this only moves when the corpus, the chunker, the query set or the
/// metric does. The store uses the reference's chunking.
const HASH_MRR: f64 = 0.6706207482993197;

/// MRR@10 of the `bm25` baseline row on the same set (deterministic too).
const BM25_MRR: f64 = 0.7586309523809524;

#[test]
fn eval_compares_the_default_pipelines_on_the_fixture_query_set() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // The deterministic lexical embedder pins the metric columns below.
    index(&testdata_dir().join("corpus"), &store, &["--chunking", "reference", "--embedder", "hash"]);
    let json_path = tmp.path().join("out.json");
    let table = ok(&[
        "eval",
        "--queries",
        &fixture_queries(),
        "--store",
        store.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
    ]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(
        rows[0],
        "| pipeline | queries | MRR@10 | nDCG@10 | R@1 | R@5 | R@10 | embed ms p50 / p99 | retrieve ms p50 / p99 | rerank ms p50 / p99 | code rank + select ms p50 / p99 | total ms p50 / p99 |"
    );
    assert_eq!(rows[1], "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    assert_eq!(rows.len(), 2 + DEFAULT_ROWS.len(), "{table}");
    for (row, name) in rows[2..].iter().zip(DEFAULT_ROWS) {
        assert!(row.starts_with(&format!("| {name} | 28 | ")), "{row}");
    }
    // Metric columns are fixed by the deterministic embedder; latencies are not.
    assert!(rows[2].starts_with("| hash dense | 28 | 0.671 | 0.717 | 0.417 | 0.786 | 0.935 | "), "{}", rows[2]);
    assert!(rows[2].contains(" | – | "), "no reranker, no rerank time: {}", rows[2]);

    let json: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(json["k"], 10);
    assert_eq!(json["limit"], 10);
    let pipelines = json["pipelines"].as_array().unwrap();
    let names: Vec<&str> = pipelines.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, DEFAULT_ROWS);
    for p in pipelines {
        for key in ["mrr@10", "ndcg@10", "recall@1", "recall@5", "recall@10"] {
            let v = p["metrics"][key].as_f64().unwrap_or(-1.0);
            assert!((0.0..=1.0).contains(&v), "{} {key} = {v}", p["name"]);
        }
        assert_eq!(p["queries"], 28);
        assert_eq!(p["per_query"].as_array().unwrap().len(), 28);
        for spread in ["embed", "retrieve", "rerank", "total"] {
            assert!(
                p["latency_ms"][spread]["p99"].as_f64().unwrap() >= p["latency_ms"][spread]["p50"].as_f64().unwrap()
            );
        }
    }
    let mrr = pipelines[0]["metrics"]["mrr@10"].as_f64().unwrap();
    assert!((mrr - HASH_MRR).abs() < 1e-12, "MRR@10 of the hash embedder moved: {mrr}");
    let modes: Vec<&str> = pipelines.iter().map(|p| p["retrieval"].as_str().unwrap()).collect();
    assert_eq!(modes, ["dense", "lexical", "hybrid", "hybrid", "hybrid", "hybrid", "hybrid", "hybrid", "lexical"]);
    let bm25 = pipelines[8]["metrics"]["mrr@10"].as_f64().unwrap();
    assert!((bm25 - BM25_MRR).abs() < 1e-12, "MRR@10 of the bm25 baseline moved: {bm25}");
    // Each stage of a chain is timed by name.
    let stages: Vec<&str> =
        pipelines[7]["latency_ms"]["stages"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(stages, ["bm25-fusion", "mmr"]);
    // The per-query details say where the targets were found.
    let first = &pipelines[0]["per_query"][0];
    assert_eq!(first["line"], 1);
    assert_eq!(first["query"], "load configuration from flags and environment variables");
    assert_eq!(first["relevant"][0], "internal/config/config.go#L33-L51");
    let ranks: Vec<usize> =
        first["relevant_ranks"].as_array().unwrap().iter().map(|r| r.as_u64().unwrap() as usize).collect();
    assert!(!ranks.is_empty());
    let results = first["results"].as_array().unwrap();
    assert!(results.len() <= 10);
    assert!(ranks.iter().all(|&r| {
        let hit = results[r - 1].as_str().unwrap();
        hit.starts_with("internal/config/config.go") || hit.starts_with("docs/guides/configuration.md")
    }));
    // Each result's distance comes with it (the code ranking orders them
    // again, so they need not grow down the list): a cosine distance for
    // the vectors, a negated BM25 score for the lexical mode.
    for p in &pipelines[..2] {
        for q in p["per_query"].as_array().unwrap() {
            let distances = q["distances"].as_array().unwrap();
            assert_eq!(distances.len(), q["results"].as_array().unwrap().len(), "{q}");
        }
    }
    assert!(pipelines[1]["per_query"][0]["distances"][0].as_f64().unwrap() < 0.0);
}

#[test]
fn eval_runs_a_pipelines_file_with_a_chain_a_cut_off_and_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    index(&testdata_dir().join("corpus"), &store, &["--chunking", "reference"]);
    let file = tmp.path().join("p.toml");
    let body = format!(
        r#"
[[pipeline]]
name = "plain"
store = "{store}"

[[pipeline]]
name = "chain | cut"
store = {{ kind = "embedded", path = "{store}" }}
embedder = {{ kind = "hash" }}
reranker = [{{ kind = "bm25-fusion" }}, {{ kind = "mmr" }}]
candidates = 5
min_score = 1e9

[[pipeline]]
name = "words"
store = "{store}"
retrieval = "lexical"
"#,
        store = store.display()
    );
    std::fs::write(&file, body).unwrap();
    let json_path = tmp.path().join("out.json");
    let table = ok(&[
        "eval",
        "--queries",
        &fixture_queries(),
        "--pipelines",
        file.to_str().unwrap(),
        "--limit",
        "3",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 6, "{table}");
    assert!(rows[2].starts_with("| plain | 28 | "), "{}", rows[2]);
    assert!(rows[4].starts_with("| words | 28 | "), "{}", rows[4]);
    assert!(rows[5].starts_with("| bm25 | 28 | "), "the baseline row comes last: {}", rows[5]);
    // A cut-off no score reaches leaves nothing: every metric is 0.
    assert!(rows[3].starts_with("| chain \\| cut | 28 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 | "), "{}", rows[3]);
    let json: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    assert_eq!(json["limit"], 3);
    assert_eq!(json["pipelines"][1]["candidates"], 5);
    assert_eq!(json["pipelines"][1]["rerankers"], serde_json::json!(["bm25-fusion", "mmr"]));
    let modes: Vec<&str> =
        json["pipelines"].as_array().unwrap().iter().map(|p| p["retrieval"].as_str().unwrap()).collect();
    assert_eq!(modes, ["hybrid", "hybrid", "lexical", "lexical"]);
    // Filters apply before ranking in every mode, the baseline's included.
    let per_query = |n: usize| json["pipelines"][n]["per_query"].as_array().unwrap().clone();
    for q in [0, 2, 3].into_iter().flat_map(per_query) {
        let results = q["results"].as_array().unwrap();
        assert!(results.len() <= 3);
        // Line 3 filters on py/**, line 28 on internal/**.
        match q["line"].as_u64().unwrap() {
            3 => assert!(results.iter().all(|r| r.as_str().unwrap().starts_with("py/")), "{q}"),
            28 => assert!(results.iter().all(|r| r.as_str().unwrap().starts_with("internal/")), "{q}"),
            _ => {}
        }
    }

    std::fs::write(
        &file,
        "[[pipeline]]\nname = \"x\"\nstore = \"/nonexistent/store\"\nreranker = { kind = \"bm25\" }\n",
    )
    .unwrap();
    let err = failure(&["eval", "--queries", &fixture_queries(), "--pipelines", file.to_str().unwrap()]);
    assert!(err.starts_with("Error: pipeline[0] \"x\": store: no index at /nonexistent/store"), "{err}");
    let body =
        format!("[[pipeline]]\nname = \"x\"\nstore = \"{}\"\nreranker = {{ kind = \"bm25\" }}\n", store.display());
    std::fs::write(&file, body).unwrap();
    let err = failure(&["eval", "--queries", &fixture_queries(), "--pipelines", file.to_str().unwrap()]);
    assert!(
        err.starts_with("Error: pipeline[0] \"x\": reranker[0]: unknown reranker kind \"bm25\"; valid kinds: "),
        "{err}"
    );
}

#[test]
fn eval_reports_every_bad_query_line() {
    let tmp = tempfile::tempdir().unwrap();
    let queries = tmp.path().join("q.jsonl");
    std::fs::write(
        &queries,
        "{\"query\": \"ok\", \"relevant\": [\"a.rs\"]}\n{\"query\": \"x\", \"relevant\": []}\n\n{oops\n",
    )
    .unwrap();
    let err = failure(&["eval", "--queries", queries.to_str().unwrap(), "--store", tmp.path().to_str().unwrap()]);
    assert_eq!(
        err,
        format!(
            "Error: query set {}:\nline 2: relevant must list at least one target\nline 4: invalid JSON: key must be a string (column 2)\n",
            queries.display()
        )
    );
}

/// Lines of every file under `dir`, by relative path.
fn line_counts(dir: &Path, prefix: &str, out: &mut Vec<(String, usize)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.file_type().unwrap().is_dir() {
            line_counts(&e.path(), &format!("{name}/"), out);
        } else {
            let bytes = std::fs::read(e.path()).unwrap();
            out.push((name, bytes.iter().filter(|b| **b == b'\n').count()));
        }
    }
}

#[test]
fn eval_generate_turns_the_fixture_doc_comments_into_queries() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gen");
    let corpus = testdata_dir().join("corpus");
    let printed = ok(&["eval", "generate", corpus.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(
        printed,
        "files: 17\n\
         definitions: 30 found, 18 with a usable doc comment (skipped: 0 tests, 12 undocumented, 0 under 3 words, 0 licence headers, 0 inline)\n\
         queries: 18 distinct, 18 kept\n"
    );
    let queries = std::fs::read_to_string(out.join("queries.jsonl")).unwrap();
    let lines: Vec<Value> = queries.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 18);
    // Checked against the files: the comment above `withRetry` (store.go
    // line 52; the function spans 53-70), the docstring of `parse_color`
    // (client.py 41-46) and the doc comment of `Rect::intersects` inside its
    // impl block (lib.rs 16-21).
    for (query, target) in [
        (
            "withRetry runs fn up to attempts times with exponential backoff between tries.",
            "internal/store/store.go#L53-L70",
        ),
        ("Parse a #rrggbb color into its three components.", "py/widgets/client.py#L41-L46"),
        ("Returns true when the two rectangles overlap.", "src/lib.rs#L16-L21"),
    ] {
        let found = lines.iter().find(|l| l["query"] == query).unwrap_or_else(|| panic!("{query} in\n{queries}"));
        assert_eq!(found["relevant"], serde_json::json!([target]));
    }

    let (mut before, mut after) = (Vec::new(), Vec::new());
    line_counts(&corpus, "", &mut before);
    line_counts(&out.join("corpus"), "", &mut after);
    assert_eq!(before, after);
    let read = |p: &str| std::fs::read_to_string(out.join("corpus").join(p)).unwrap();
    assert!(!read("internal/store/store.go").contains("withRetry runs fn"));
    assert!(read("internal/store/store.go").contains("func withRetry(ctx context.Context"));
    assert!(!read("py/widgets/client.py").contains("Parse a #rrggbb"));
    assert!(!read("src/lib.rs").contains("Returns true when"));
    // Files without a used comment are copied byte for byte.
    assert_eq!(read("README.md"), std::fs::read_to_string(corpus.join("README.md")).unwrap());

    // The generated pair evaluates like any query set; --max keeps an even spread.
    let store = tmp.path().join("store");
    index(&out.join("corpus"), &store, &[]);
    let table =
        ok(&["eval", "--queries", out.join("queries.jsonl").to_str().unwrap(), "--store", store.to_str().unwrap()]);
    assert!(table.lines().nth(2).unwrap().starts_with("| potion dense | 18 | "), "{table}");
    let small = tmp.path().join("small");
    let printed = ok(&["eval", "generate", corpus.to_str().unwrap(), "--out", small.to_str().unwrap(), "--max", "4"]);
    assert!(printed.ends_with("queries: 18 distinct, 4 kept\n"), "{printed}");
    assert_eq!(std::fs::read_to_string(small.join("queries.jsonl")).unwrap().lines().count(), 4);
    let again = failure(&["eval", "generate", corpus.to_str().unwrap(), "--out", small.to_str().unwrap()]);
    assert_eq!(again, format!("Error: {} already exists: choose a new --out folder\n", small.join("corpus").display()));
}

/// NDCG@10 of the fixture suite's `corpus`, 3 decimals: (0.613 + 1 + 1 + 1) / 4; the first query
/// finds its span at rank 1 and the file outside the benchmark root not at all.
const SUITE_NDCG: &str = "0.903";

/// A suite folder of one repository, `corpus` (the fixture corpus, its
/// benchmark root `internal`), and one, `absent`, with no checkout.
fn fixture_suite(dir: &Path) {
    std::fs::create_dir_all(dir.join("annotations")).unwrap();
    std::fs::write(
        dir.join("repos.json"),
        r#"[{"name": "corpus", "language": "go", "split": "dev", "benchmark_root": "internal", "url": "u"},
            {"name": "absent", "language": "go", "split": "test"}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("annotations/corpus.json"),
        r#"[{"query": "retry with exponential backoff", "category": "semantic",
             "relevant": [{"path": "internal/store/store.go", "start_line": 53, "end_line": 70}],
             "secondary": ["py/widgets/client.py"]},
            {"query": "load configuration from flags and environment variables", "category": "semantic",
             "relevant": ["internal/config/config.go"]},
            {"query": "Config", "category": "symbol", "relevant": ["internal/config/config.go", "internal/gone.go"]},
            {"query": "open the sqlite widget database and list widgets", "category": "architecture",
             "relevant": ["internal/store/store.go"]}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("published.json"),
        r#"{"methods": {"semble-hybrid": {"corpus": 0.9, "absent": 0.5}, "bm25-raw": {"corpus": 0.7}}}"#,
    )
    .unwrap();
}

#[test]
fn eval_suite_indexes_searches_and_scores_each_repository_as_search_does() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    fixture_suite(&suite);
    let stores = tmp.path().join("stores");
    let json_path = tmp.path().join("suite.json");
    let (suite_arg, stores_arg) = (suite.to_str().unwrap(), stores.to_str().unwrap());
    let checkouts = testdata_dir();
    let args =
        ["eval", "suite", "--suite", suite_arg, "--checkouts", checkouts.to_str().unwrap(), "--stores", stores_arg];
    let mut with_json = args.to_vec();
    with_json.extend(["--json", json_path.to_str().unwrap()]);
    let tables = ok(&with_json);
    let lines: Vec<&str> = tables.lines().collect();
    assert_eq!(
        lines[2],
        "| repository | language | split | queries | repo-retriever | semble-hybrid | bm25-raw | index s | query p50 ms |"
    );
    // The hash embedder and the store rank deterministically, so the scores only move with the
    // corpus, the chunker, the ranking or the scoring.
    assert!(lines[4].starts_with(&format!("| corpus | go | dev | 4 | {SUITE_NDCG} | 0.900 | 0.700 | ")), "{tables}");
    assert!(tables.contains(&format!("\nSkipped: absent (no folder {}).\n", checkouts.join("absent").display())));
    assert!(tables.contains(&format!("| **repo-retriever** | {SUITE_NDCG} | {SUITE_NDCG} | – |\n")), "{tables}");
    assert!(tables.contains("| semble-hybrid | 0.900 | 0.900 | – |\n"), "published numbers over the same repositories");
    assert!(tables.contains("| symbol | 1 | "), "{tables}");

    let json: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let corpus = &json["repos"][0];
    assert_eq!(corpus["name"], "corpus");
    let queries = corpus["per_query"].as_array().unwrap();
    assert_eq!(queries.len(), 4);
    // The missing file is left out of the ideal list; the file outside the root is not.
    let in_checkout: Vec<u64> = queries.iter().map(|q| q["targets_in_checkout"].as_u64().unwrap()).collect();
    assert_eq!(in_checkout, [2, 1, 1, 1]);
    for q in queries {
        let results = q["results"].as_array().unwrap();
        assert!(!results.is_empty() && results.len() <= 10, "{q}");
        assert!(results.iter().all(|r| r.as_str().unwrap().starts_with("internal/")), "{q}");
    }

    // Each query's results are those `search --limit 10` shows over the same store.
    let store = stores.join("corpus");
    let shown = ok(&["search", "retry with exponential backoff", "--limit", "10", "--store", store.to_str().unwrap()]);
    let shown: Vec<String> = shown
        .lines()
        .filter_map(|l| l.strip_prefix("**File:** `"))
        .map(|f| format!("internal/{}", f.trim_end_matches('`').split('#').next().unwrap()))
        .collect();
    let scored: Vec<&str> = queries[0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().split('#').next().unwrap())
        .collect();
    assert_eq!(shown, scored);

    // The search flags reach the engine; a split leaves the other half out.
    let mut lexical = args.to_vec();
    lexical.extend(["--split", "dev", "--mode", "lexical", "--per-file", "1", "--reindex"]);
    let tables = ok(&lexical);
    assert!(!tables.contains("Skipped"), "{tables}");
    assert!(tables.contains("| method | all (1) | dev (1) | test (0) |"), "{tables}");

    let mut unknown = args.to_vec();
    unknown.extend(["--repos", "corpus,nope"]);
    let err = failure(&unknown);
    assert_eq!(err, format!("Error: --repos: not in {}: nope\n", suite.join("repos.json").display()));
}
