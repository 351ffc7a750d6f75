//! The embedded default end to end through the binary: `index` a folder,
//! `search` it, re-index safely, index into the real Chroma, and serve MCP
//! over the store.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{EMBED_MODEL, Server, excerpt_files, fixture, server_bin, testdata_dir, tool_text};
use rr_testkit::{copy_dir, git};
use serde_json::{Value, json};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn run(args: &[&str]) -> Output {
    Command::new(server_bin()).args(args).env_remove("REPO_RETRIEVER_STORE").output().expect("run the binary")
}

/// Indexes at [`COMMIT`], so that the records' commit is known, with the
/// reference's chunking: these tests compare the store with the reference
/// indexer's records.
fn index(dir: &Path, store: &Path, extra: &[&str]) -> Value {
    index_chunked(dir, store, &[&["--chunking", "reference"], extra].concat())
}

/// [`index`] with the chunking left to `extra` or the store.
fn index_chunked(dir: &Path, store: &Path, extra: &[&str]) -> Value {
    support::index(dir, store, &[&["--commit-sha", COMMIT], extra].concat())
}

fn search(store: &Path, query: &str, extra: &[&str]) -> String {
    let mut args = vec!["search", query, "--store", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "search failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn corpus() -> PathBuf {
    testdata_dir().join("corpus")
}

#[test]
fn index_then_reindex_writes_nothing() {
    let store = tempfile::tempdir().unwrap();
    let first = index(&corpus(), store.path(), &[]);
    assert_eq!(first["chunks_desired"], 89);
    assert_eq!(first["chunks_added_or_updated"], 89);
    assert_eq!(first["chunks_unchanged"], 0);
    assert_eq!(first["chunks_deleted"], 0);
    assert_eq!(first["files_indexed"], 15);
    assert_eq!(first["files_binary_skipped"], 1);
    assert_eq!(first["namespace_id"], "ba357c58ec6dbc82c5d1e39f86be7ec68de3cabc037821f6653a2bbd7cd8c2f0");
    let second = index(&corpus(), store.path(), &[]);
    assert_eq!(second["chunks_added_or_updated"], 0);
    assert_eq!(second["chunks_unchanged"], 89);
    assert_eq!(second["chunks_deleted"], 0);
}

#[test]
fn editing_one_file_rewrites_only_its_records() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("widgets");
    copy_dir(&corpus(), &dir);
    let store = work.path().join("store");
    index(&dir, &store, &[]);
    let before: Vec<Value> =
        support::fixture_records().iter().filter(|r| r["metadata"]["path"] == "web/app.ts").cloned().collect();
    assert!(!before.is_empty());
    let path = dir.join("web/app.ts");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\nexport const addedForTheEditTest = 1;\n");
    std::fs::write(&path, text).unwrap();
    let after = index(&dir, &store, &[]);
    let changed = after["chunks_added_or_updated"].as_u64().unwrap();
    assert!(changed >= 1, "{after}");
    assert_eq!(after["chunks_deleted"].as_u64().unwrap(), before.len() as u64, "{after}");
    assert_eq!(after["chunks_unchanged"].as_u64().unwrap(), 89 - before.len() as u64, "{after}");
    let hits = search(&store, "addedForTheEditTest", &["--limit", "1"]);
    assert!(hits.contains("**File:** `web/app.ts"), "{hits}");
}

#[test]
fn dry_run_writes_nothing() {
    let store = tempfile::tempdir().unwrap();
    let summary = index(&corpus(), store.path(), &["--dry-run"]);
    assert_eq!(summary["dry_run"], true);
    assert_eq!(summary["chunks_added_or_updated"], 89);
    let out = run(&["search", "configuration", "--store", store.path().to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("Error: no index at "), "{stderr}");
}

/// The embedded store with the built-in hash embedder, in dense mode and
/// selecting two results per file first as the reference does, returns
/// what the drop-in server returns over the reference indexer's records in
/// Chroma.
#[tokio::test]
async fn embedded_search_matches_the_chroma_deployment() {
    let store = tempfile::tempdir().unwrap();
    // The fixture deployment's vectors are the hash embedder's.
    index(&corpus(), store.path(), &["--embedder", "hash"]);
    let mut mcp = Server::fixture().stdio().await;
    for (query, extra, args) in [
        (
            "where is the configuration loaded and validated",
            vec![],
            json!({"query": "where is the configuration loaded and validated"}),
        ),
        ("widget store", vec!["--limit", "8"], json!({"query": "widget store", "limit": 8})),
        ("http handler", vec!["--path", "**/*.go"], json!({"query": "http handler", "path": "**/*.go"})),
        (
            "client",
            vec!["--source", "acme/widgets@main", "--limit", "3"],
            json!({"query": "client", "source": "acme/widgets@main", "limit": 3}),
        ),
    ] {
        let dense = ["--mode", "dense", "--per-file", "2", "--code-rank", "off"];
        let local = search(store.path(), query, &[&dense[..], extra.as_slice()].concat());
        let remote = mcp.call_tool("search", args).await;
        assert_eq!(local, format!("{}\n", tool_text(&remote)), "query {query:?}");
    }
    mcp.close().await;
}

#[tokio::test]
async fn serve_answers_mcp_over_the_store() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &[]);
    let mut mcp = Server::new().args(["serve", "--store", store.path().to_str().unwrap()]).stdio().await;
    let result = mcp.call_tool("search", json!({"query": "café", "path": "docs/café.md", "limit": 1})).await;
    let text = tool_text(&result);
    assert!(text.starts_with("Found 1 relevant repository excerpt, ranked by semantic relevance.\n"), "{text}");
    assert!(
        text.contains(
            "(https://github.com/acme/widgets/blob/0123456789abcdef0123456789abcdef01234567/docs/caf%C3%A9.md"
        ),
        "{text}"
    );
    mcp.close().await;
}

/// The `index` flags that write into `collection` of the Chroma at `chroma_url`, embedded by `embed_url`.
fn into_chroma<'a>(chroma_url: &'a str, collection: &'a str, embed_url: &'a str) -> [&'a str; 8] {
    [
        "--chroma-url",
        chroma_url,
        "--collection-name",
        collection,
        "--embedding-api-url",
        embed_url,
        "--embedding-model",
        EMBED_MODEL,
    ]
}

/// `index --chroma-url` writes the reference indexer's records into a real
/// Chroma, and the drop-in server then answers from them.
#[tokio::test]
async fn index_into_real_chroma_then_search_through_the_server() {
    let f = fixture();
    let embed = support::embed_server().url().to_string();
    let collection = "indexed-by-cli";
    support::delete_collection(&f.chroma_url, collection).await;
    let store = tempfile::tempdir().unwrap();
    let chroma_args = into_chroma(&f.chroma_url, collection, &embed);
    let first = index(&corpus(), store.path(), &chroma_args);
    assert_eq!(first["chunks_added_or_updated"], 89, "{first}");
    let second = index(&corpus(), store.path(), &chroma_args);
    assert_eq!(second["chunks_added_or_updated"], 0, "{second}");
    assert_eq!(second["chunks_unchanged"], 89, "{second}");

    let mut ours = Server::with_backends(&f.chroma_url, collection, &embed).stdio().await;
    let mut reference = Server::fixture().stdio().await;
    for args in
        [json!({"query": "configuration precedence", "limit": 6}), json!({"query": "python client", "path": "py/**"})]
    {
        let a = ours.call_tool("search", args.clone()).await;
        let b = reference.call_tool("search", args).await;
        assert_eq!(tool_text(&a), tool_text(&b));
        assert!(tool_text(&a).starts_with("Found "), "{}", tool_text(&a));
    }
    ours.close().await;
    reference.close().await;
}

/// `index --chroma-url` over the polyglot corpus (24 languages, BOM, CRLF and Latin-1 files) writes
/// into a real Chroma exactly the 222 records the reference indexer wrote for it: ids, documents and
/// metadata identical, embeddings equal within 1e-4.
#[tokio::test]
async fn polyglot_index_into_real_chroma_equals_the_reference_records() {
    let chroma = support::chroma().url().to_string();
    let embed = support::embed_server().url().to_string();
    let collection = "polyglot-indexed-by-cli";
    support::delete_collection(&chroma, collection).await;
    let store = tempfile::tempdir().unwrap();
    let polyglot = testdata_dir().join("polyglot");
    let corpus = polyglot.join("corpus");
    let identity = ["--organization", "acme", "--repository", "polyglot", "--branch", "main"];
    let commit = ["--commit-sha", "89abcdef0123456789abcdef0123456789abcdef"];
    let target = ["index", corpus.to_str().unwrap(), "--store", store.path().to_str().unwrap()];
    let out = run(&[&target[..], &identity, &commit, &into_chroma(&chroma, collection, &embed)].concat());
    assert!(out.status.success(), "index failed: {}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("one JSON summary");
    assert_eq!(summary["chunks_added_or_updated"], 222, "{summary}");

    let url = format!("{}/{collection}", support::collections_url(&chroma, support::TENANT, support::DATABASE));
    let info: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let id = info["id"].as_str().unwrap_or_else(|| panic!("collection {collection}: {info}"));
    let got = support::collection_get(&chroma, id, &["documents", "metadatas", "embeddings"]).await;
    let mut ours: std::collections::BTreeMap<&str, (Value, Value, Vec<f64>)> = std::collections::BTreeMap::new();
    for (i, record_id) in got["ids"].as_array().unwrap().iter().enumerate() {
        let embedding = got["embeddings"][i].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        ours.insert(record_id.as_str().unwrap(), (got["documents"][i].clone(), got["metadatas"][i].clone(), embedding));
    }

    let jsonl = std::fs::read_to_string(polyglot.join("records.jsonl")).unwrap();
    let reference: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((reference.len(), ours.len()), (222, 222));
    let mut differences = Vec::new();
    for record in &reference {
        let key = format!("{}#{}", record["metadata"]["path"], record["metadata"]["chunk_index"]);
        let Some((document, metadata, embedding)) = ours.get(record["id"].as_str().unwrap()) else {
            differences.push(format!("{key}: id {} not in the collection", record["id"]));
            continue;
        };
        if document != &record["document"] {
            differences.push(format!("{key}: document differs"));
        }
        if metadata != &record["metadata"] {
            differences.push(format!("{key}: metadata: expected {}, got {metadata}", record["metadata"]));
        }
        let want: Vec<f64> = record["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let off = want.iter().zip(embedding).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        if want.len() != embedding.len() || off > 1e-4 {
            differences.push(format!("{key}: embedding of {} values, off by up to {off}", embedding.len()));
        }
    }
    assert!(differences.is_empty(), "{} of 222 records differ:\n{}", differences.len(), differences.join("\n"));
}

#[test]
fn a_store_keeps_the_embedder_it_was_created_with() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    index(&corpus(), &store, &["--embedder", "hash"]);
    let out = run(&["index", corpus().to_str().unwrap(), "--store", store.to_str().unwrap(), "--embedder", "minilm"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the store at {} was created with the \"hash\" embedder, not \"minilm\"",
            store.display()
        )),
        "{stderr}"
    );

    // A new store with the neural embedder, when its model is installed (scripts/test installs it).
    if let Err(e) = rr_minilm::locate().and_then(rr_minilm::MiniLmEmbedder::from_dir) {
        eprintln!("SKIPPED the minilm half: the all-MiniLM-L6-v2 model is not installed here ({e})");
        return;
    }
    let neural = tmp.path().join("neural");
    let summary = index(&corpus(), &neural, &["--embedder", "minilm"]);
    assert!(summary["chunks_added_or_updated"].as_u64().unwrap() > 0, "{summary}");
    let settings: Value = serde_json::from_slice(&std::fs::read(neural.join("repo-retriever.json")).unwrap()).unwrap();
    assert_eq!((settings["embedder"].as_str(), settings["dimension"].as_u64()), (Some("minilm"), Some(384)));
    assert!(search(&neural, "how are widgets configured?", &[]).starts_with("Found "));
    // Re-indexing without --embedder keeps minilm and writes nothing.
    assert_eq!(index(&corpus(), &neural, &[])["chunks_added_or_updated"], 0);
}

/// A store can take its vectors from any OpenAI-compatible embeddings
/// endpoint. The embed server computes the `hash` embedder's vectors, so an
/// `openai` store of the fixture ranks exactly as a `hash` store does; the
/// settings file names the endpoint and never the key.
#[test]
fn a_store_embeds_through_an_openai_compatible_endpoint() {
    let embed = support::embed_server().url().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (remote, local) = (tmp.path().join("remote"), tmp.path().join("local"));
    let endpoint = ["--embedder", "openai", "--embedding-api-url", embed.as_str(), "--embedding-model", EMBED_MODEL];
    let summary = index(&corpus(), &remote, &endpoint);
    assert_eq!(summary["chunks_added_or_updated"], 89, "{summary}");
    let settings = std::fs::read_to_string(remote.join("repo-retriever.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&settings).unwrap(),
        json!({
            "embedder": "openai",
            "dimension": 0,
            "query_prefix": "query: ",
            "document_prefix": "passage: ",
            "chunking": "reference",
            "endpoint": {"api_url": embed, "model": EMBED_MODEL}
        })
    );
    index(&corpus(), &local, &["--embedder", "hash"]);
    let hash_settings = std::fs::read_to_string(local.join("repo-retriever.json")).unwrap();
    assert!(!hash_settings.contains("endpoint"), "a built-in embedder's settings stay as they were: {hash_settings}");
    for query in ["where is the configuration loaded and validated", "widget store", "retry with backoff"] {
        // The hybrid default weighs `hash` vectors at 0.5 and an endpoint's at 1; the dense
        // and lexical rankings are the same.
        for mode in ["dense", "hybrid"] {
            let weight: &[&str] = if mode == "hybrid" { &["--hybrid-weight-dense", "1"] } else { &[] };
            let extra = [&["--mode", mode, "--limit", "8"], weight].concat();
            assert_eq!(search(&remote, query, &extra), search(&local, query, &extra), "{mode} {query:?}");
        }
    }
    // Re-indexing keeps the endpoint and writes nothing; another model or
    // another embedder is refused.
    assert_eq!(index(&corpus(), &remote, &[])["chunks_added_or_updated"], 0);
    let (code, stderr) = failure(
        &[
            &["index", corpus().to_str().unwrap(), "--store", remote.to_str().unwrap()],
            &endpoint[..4],
            &["--embedding-model", "other-model"],
        ]
        .concat(),
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        format!(
            "Error: the store at {} was created with the model \"{EMBED_MODEL}\" at {embed}, not the model \"other-model\" \
             at {embed}: a store keeps its embedder\n",
            remote.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(remote.join("repo-retriever.json")).unwrap(),
        settings,
        "a refusal changes nothing"
    );
    let (code, stderr) = failure(&[
        "index",
        corpus().to_str().unwrap(),
        "--store",
        tmp.path().join("new").to_str().unwrap(),
        "--embedder",
        "openai",
    ]);
    assert_eq!(
        (code, stderr.as_str()),
        (Some(1), "Error: --embedder openai needs --embedding-api-url and --embedding-model\n")
    );
    assert!(!tmp.path().join("new").exists(), "a refused index creates no store");
}

/// `index --config` reads the reference indexer's YAML: its `files` and
/// `chunking` keys select and cut files; flags override it.
#[test]
fn index_reads_the_reference_yaml() {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("indexer.yaml");
    std::fs::write(&config, "version: 1\nfiles:\n  include_paths: [\"docs/**\"]\n  exclude_extensions: [\".txt\"]\nchunking:\n  chunk_size: 512\n  chunk_overlap: 64\nsync:\n  batch_size: 10\n").unwrap();
    let store = work.path().join("store");
    let summary = index(&corpus(), &store, &["--config", config.to_str().unwrap(), "--dry-run"]);
    let expected: std::collections::BTreeSet<&str> = support::fixture_records()
        .iter()
        .filter_map(|r| r["metadata"]["path"].as_str())
        .filter(|p| p.starts_with("docs/") && !p.ends_with(".txt"))
        .collect();
    assert_eq!(summary["files_indexed"].as_u64().unwrap(), expected.len() as u64, "{summary}");
    let overridden =
        index(&corpus(), &store, &["--config", config.to_str().unwrap(), "--include-paths", "**", "--dry-run"]);
    assert_eq!(
        overridden["chunks_desired"],
        89 - support::fixture_records()
            .iter()
            .filter(|r| r["metadata"]["path"].as_str().is_some_and(|p| p.ends_with(".txt")))
            .count(),
        "{overridden}"
    );

    std::fs::write(&config, "version: 2\n").unwrap();
    let out = run(&[
        "index",
        corpus().to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "Error: config version must be 1\n");
}

/// Query and document prefixes are set when a store is created and kept:
/// asking an existing store for others is refused.
#[test]
fn prefixes_are_configurable_per_store() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &["--query-prefix", "search_query: ", "--document-prefix", "search_document: "]);
    let settings: Value =
        serde_json::from_slice(&std::fs::read(store.path().join("repo-retriever.json")).unwrap()).unwrap();
    assert_eq!(settings["query_prefix"], "search_query: ");
    assert_eq!(settings["document_prefix"], "search_document: ");
    assert!(search(store.path(), "configuration", &["--limit", "1"]).starts_with("Found 1 relevant"));
    let out = run(&[
        "index",
        corpus().to_str().unwrap(),
        "--store",
        store.path().to_str().unwrap(),
        "--query-prefix",
        "query: ",
    ]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "Error: the store at {} was created with the query prefix \"search_query: \", not \"query: \": a store keeps its prefixes\n",
            store.path().display()
        )
    );
}

/// A query of the fixture set where `bm25-fusion` moves the excerpt that
/// answers it (the rectangle code in src/lib.rs) to the top; the hash
/// embedder alone ranks a Go store excerpt first.
const FUSION_QUERY: &str = "check whether two rectangles overlap";

fn first_file(markdown: &str) -> &str {
    markdown.lines().find(|l| l.starts_with("**File:**")).unwrap_or_else(|| panic!("no excerpt in {markdown}"))
}

fn failure(args: &[&str]) -> (Option<i32>, String) {
    let out = run(args);
    assert!(!out.status.success(), "expected a failure: {}", String::from_utf8_lossy(&out.stdout));
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn search_rerank_reorders_the_embedded_store() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &["--embedder", "hash"]);
    let plain = search(store.path(), FUSION_QUERY, &["--mode", "dense", "--code-rank", "off"]);
    assert_eq!(first_file(&plain), "**File:** `internal/store/store.go#L10-L16`");
    let fused =
        search(store.path(), FUSION_QUERY, &["--mode", "dense", "--rerank", "bm25-fusion", "--code-rank", "off"]);
    assert_eq!(first_file(&fused), "**File:** `src/lib.rs#L14-L28`");
    assert_eq!(fused.lines().filter(|l| l.starts_with("**File:**")).count(), 5, "{fused}");
    // The default retrieval (hybrid) finds it first without a reranker, as lexical retrieval does.
    assert_eq!(
        first_file(&search(store.path(), FUSION_QUERY, &["--code-rank", "off"])),
        "**File:** `src/lib.rs#L14-L28`"
    );
    assert_eq!(
        first_file(&search(store.path(), FUSION_QUERY, &["--mode", "lexical", "--code-rank", "off"])),
        "**File:** `src/lib.rs#L14-L28`"
    );

    let chained =
        search(store.path(), FUSION_QUERY, &["--rerank", "bm25-fusion", "--rerank", "mmr", "--code-rank", "off"]);
    assert_eq!(first_file(&chained), "**File:** `src/lib.rs#L14-L28`");
    assert!(chained.starts_with("Found 5 relevant repository excerpts"), "{chained}");

    // The cut-off applies to the last stage's scores: none reaches this one.
    let cut = search(store.path(), FUSION_QUERY, &["--rerank", "bm25-fusion", "--rerank-min-score", "1e9"]);
    assert_eq!(cut, "No relevant repository content was found. Try a broader or more specific query.\n");
}

#[test]
fn search_hybrid_rerank_reads_the_fused_head_again() {
    let store = tempfile::tempdir().unwrap();
    // The store's own chunking, as `index` gives it.
    index_chunked(&corpus(), store.path(), &[]);
    let query = "retry with exponential backoff";
    // The fused order puts the guide that mentions retries first; read
    // again, the code that names and does it comes first.
    let fused = search(store.path(), query, &["--hybrid-rerank", "0", "--code-rank", "off"]);
    assert_eq!(first_file(&fused), "**File:** `docs/guides/configuration.md#L12-L23`");
    assert_eq!(
        first_file(&search(store.path(), query, &["--code-rank", "off"])),
        "**File:** `internal/store/store.go#L52-L71`"
    );
    let dir = store.path().to_str().unwrap();
    let (code, stderr) = failure(&["search", query, "--store", dir, "--mode", "lexical", "--hybrid-rerank", "5"]);
    assert_eq!(
        (code, stderr.as_str()),
        (Some(1), "Error: --hybrid-rerank: applies to hybrid retrieval only, not lexical\n")
    );
}

#[test]
fn search_mode_settings_are_checked() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &[]);
    let dir = store.path().to_str().unwrap();
    let (code, stderr) = failure(&["search", FUSION_QUERY, "--store", dir, "--mode", "dense", "--hybrid-rrf-k", "3"]);
    assert_eq!(
        (code, stderr.as_str()),
        (Some(1), "Error: --hybrid-rrf-k: applies to hybrid retrieval only, not dense\n")
    );
    let (_, stderr) = failure(&[
        "search",
        FUSION_QUERY,
        "--store",
        dir,
        "--hybrid-weight-dense",
        "0",
        "--hybrid-weight-lexical",
        "0",
    ]);
    assert_eq!(stderr, "Error: --hybrid-weight-dense and --hybrid-weight-lexical cannot both be 0\n");
    let (_, stderr) = failure(&["search", FUSION_QUERY, "--store", dir, "--mode", "bm25"]);
    assert!(stderr.contains("invalid value 'bm25' for '--mode <MODE>'"), "{stderr}");
    let weighted = search(store.path(), FUSION_QUERY, &["--hybrid-weight-dense", "0"]);
    assert_eq!(weighted, search(store.path(), FUSION_QUERY, &["--mode", "lexical"]), "a zero dense weight is lexical");
    let stores = store.path().join("stores.toml");
    std::fs::write(&stores, "").unwrap();
    let (_, stderr) = failure(&["serve", "--stores", stores.to_str().unwrap(), "--mode", "lexical"]);
    assert_eq!(stderr, format!("Error: {}\n", repo_retriever::cli::REMOTE_MODE));
}

#[test]
fn the_embedded_search_keeps_the_ranking_order_unless_told_to_spread() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    // a.go's functions say the query's words more often than b.go's one, so the ranking puts a.go's
    // chunks first (at this chunk size a function is about one chunk; every line differs, so no
    // excerpt repeats another's text).
    let function = |name: &str, times: usize| {
        let body: String = (0..times).map(|i| format!("\tfrobnicate(widgets, gizmos, {i})\n")).collect();
        format!("func {name}() {{\n{body}}}\n\n")
    };
    write(&repo, "a.go", &format!("package a\n\n{}{}{}", function("One", 6), function("Two", 5), function("Three", 4)));
    write(&repo, "b.go", &format!("package b\n\n{}", function("Other", 1)));
    let store = work.path().join("store");
    index_chunked(&repo, &store, &["--chunk-size", "80", "--chunk-overlap", "0"]);
    let query = "frobnicate widgets gizmos";
    let lexical = ["--limit", "4", "--mode", "lexical", "--code-rank", "off"];
    let ranked = search(&store, query, &lexical);
    assert_eq!(excerpt_files(&ranked), ["a.go", "a.go", "a.go", "a.go"], "{ranked}");
    assert_eq!(search(&store, query, &[&lexical[..], &["--per-file", "0"]].concat()), ranked);
    let reference = search(&store, query, &[&lexical[..], &["--per-file", "2"]].concat());
    assert_eq!(excerpt_files(&reference), ["a.go", "a.go", "b.go", "a.go"], "{reference}");
    let one = search(&store, query, &[&lexical[..], &["--per-file", "1"]].concat());
    assert_eq!(excerpt_files(&one), ["a.go", "b.go", "a.go", "a.go"], "{one}");
}

#[test]
fn search_rerank_refuses_unknown_and_unconfigured_kinds() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &[]);
    let dir = store.path().to_str().unwrap();
    let (code, stderr) = failure(&["search", FUSION_QUERY, "--store", dir, "--rerank", "bm25"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "Error: --rerank: unknown reranker kind \"bm25\"; valid kinds: bm25-fusion, cohere, cross-encoder, jina, mmr, openai, tei, voyage\n"
    );
    let (code, stderr) =
        failure(&["search", FUSION_QUERY, "--store", dir, "--rerank", "bm25-fusion", "--rerank", "openai"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        format!(
            "Error: --rerank: reranker \"openai\": missing field `api_url` ({})\n",
            repo_retriever::cli::args::RERANK_SETTINGS_HINT
        )
    );
    let (code, stderr) =
        failure(&["search", FUSION_QUERY, "--store", dir, "--rerank", "mmr", "--rerank-min-score", "NaN"]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr, "Error: --rerank-min-score: must be a number, not NaN\n");
    // A cut-off without a reranker to cut is a usage error.
    let (code, stderr) = failure(&["search", FUSION_QUERY, "--store", dir, "--rerank-min-score", "0.5"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with("error: the following required arguments were not provided:\n  --rerank <KIND>\n"),
        "{stderr}"
    );
}

/// `serve --rerank` answers as `search --rerank` does; with --stores the
/// flag is refused, since the file carries its own reranking.
#[tokio::test]
async fn serve_rerank_reranks_the_search_tool() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &[]);
    let dir = store.path().to_str().unwrap();
    let mut mcp = Server::new().args(["serve", "--store", dir, "--rerank", "bm25-fusion"]).stdio().await;
    let result = mcp.call_tool("search", json!({"query": FUSION_QUERY})).await;
    let text = tool_text(&result);
    assert_eq!(first_file(text), "**File:** `src/lib.rs#L14-L28`");
    assert_eq!(format!("{text}\n"), search(store.path(), FUSION_QUERY, &["--rerank", "bm25-fusion"]));
    mcp.close().await;

    let stores = store.path().join("stores.toml");
    std::fs::write(&stores, format!("[stores.local]\nkind = \"embedded\"\npath = {dir:?}\n")).unwrap();
    let (code, stderr) = failure(&["serve", "--stores", stores.to_str().unwrap(), "--rerank", "bm25-fusion"]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr, format!("Error: {}\n", repo_retriever::cli::REMOTE_RERANK));
}

/// A reader that stops early (`search … | head -1`) closes the pipe before
/// the result is written: the command still ends quietly with success.
#[test]
fn search_into_a_closed_pipe_ends_quietly() {
    let store = tempfile::tempdir().unwrap();
    index(&corpus(), store.path(), &[]);
    let mut child = Command::new(server_bin())
        .args(["search", "widget", "--store", store.path().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert_eq!(stderr, "");
}

fn store_chunking(store: &Path) -> Value {
    let settings: Value = serde_json::from_slice(&std::fs::read(store.join("repo-retriever.json")).unwrap()).unwrap();
    settings["chunking"].clone()
}

/// Re-indexing a store with another chunking rewrites every record (the ids
/// carry the chunking version) and the store records the new one; without
/// `--chunking`, a store keeps the one it was built with, and a new store
/// gets the semantic chunking.
#[test]
fn switching_the_chunking_rewrites_every_record() {
    let store = tempfile::tempdir().unwrap();
    let reference = index_chunked(&corpus(), store.path(), &["--chunking", "reference"]);
    assert_eq!(reference["chunks_added_or_updated"], 89, "{reference}");
    assert_eq!(store_chunking(store.path()), "reference");

    let semantic = index_chunked(&corpus(), store.path(), &["--chunking", "semantic"]);
    let desired = semantic["chunks_desired"].as_u64().unwrap();
    assert!(desired > 0 && desired < 89, "{semantic}");
    assert_eq!(semantic["chunks_added_or_updated"].as_u64(), Some(desired), "{semantic}");
    assert_eq!(semantic["chunks_unchanged"], 0, "{semantic}");
    assert_eq!(semantic["chunks_deleted"], 89, "{semantic}");
    assert_eq!(store_chunking(store.path()), "semantic");

    let again = index_chunked(&corpus(), store.path(), &[]);
    assert_eq!(
        (again["chunks_unchanged"].as_u64(), again["chunks_added_or_updated"].as_u64()),
        (Some(desired), Some(0))
    );

    let back = index_chunked(&corpus(), store.path(), &["--chunking", "reference"]);
    assert_eq!(back["chunks_added_or_updated"], 89, "{back}");
    assert_eq!(back["chunks_deleted"].as_u64(), Some(desired), "{back}");
    assert_eq!(store_chunking(store.path()), "reference");

    // A new store without --chunking gets the semantic chunking.
    let fresh = tempfile::tempdir().unwrap();
    let semantic_again = index_chunked(&corpus(), fresh.path(), &[]);
    assert_eq!(semantic_again["chunks_desired"].as_u64(), Some(desired), "{semantic_again}");
    assert_eq!(store_chunking(fresh.path()), "semantic");
    // ... and the built-in static model, with no flag at all.
    let settings: Value =
        serde_json::from_slice(&std::fs::read(fresh.path().join("repo-retriever.json")).unwrap()).unwrap();
    assert_eq!((settings["embedder"].as_str(), settings["dimension"].as_u64()), (Some("potion"), Some(256)));

    let (code, stderr) = failure(&["index", corpus().to_str().unwrap(), "--chunking", "fancy"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("invalid value 'fancy' for '--chunking <CHUNKING>'"), "{stderr}");
}

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn index_json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `index` reads no file over `--max-file-bytes` (1 MiB by default, as `add_repository`): each one
/// is named in the summary and on stderr.
#[test]
fn index_skips_a_file_over_the_size_limit_and_names_it() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("demo");
    write(&root, "src/lib.rs", "/// Parses the widget configuration.\npub fn parse_widget_config() {}\n");
    write(&root, "logs/huge.log", &"a line of a very long log\n".repeat(50_000));
    let store = work.path().join("store");
    let out = run(&["index", root.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["files_indexed"], 1, "{summary}");
    assert_eq!(
        summary["files_skipped"],
        json!([{"path": "logs/huge.log", "reason": "1300000 bytes, over the limit of 1048576 bytes"}])
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "skipped logs/huge.log: 1300000 bytes, over the limit of 1048576 bytes\n"
    );
    let out = run(&["index", root.to_str().unwrap(), "--store", store.to_str().unwrap(), "--max-file-bytes", "40"]);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["files_indexed"], 0, "{summary}");
    let skipped: Vec<&str> =
        summary["files_skipped"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(skipped, ["logs/huge.log", "src/lib.rs"]);
}

#[test]
fn a_built_checkout_is_indexed_without_its_build_output() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("demo");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "--initial-branch", "trunk"]);
    write(&root, ".gitignore", "target/\nnode_modules/\n.venv/\ndist/\n");
    write(&root, "src/lib.rs", "/// Parses the widget configuration.\npub fn parse_widget_config() {}\n");
    write(&root, "README.md", "# demo\n\nWidget configuration parser.\n");
    git(&root, &["add", "."]);
    git(&root, &["commit", "--quiet", "-m", "sources"]);
    let sha = git(&root, &["rev-parse", "HEAD"]);
    git(&root, &["remote", "add", "origin", "git@github.com:octo/demo.git"]);
    let build_output = [
        "target/debug/build/widget-config/out.rs",
        "target/release/deps/widget_config.d",
        "node_modules/widget-config/index.js",
        ".venv/lib/widget_config.py",
        "dist/widget-config.js",
    ];
    for path in build_output {
        write(&root, path, "// parse_widget_config build output\n");
    }
    let store = work.path().join("store");
    let (dir, store_arg) = (root.to_str().unwrap(), store.to_str().unwrap());
    let summary = index_json(&["index", dir, "--store", store_arg]);
    assert_eq!(
        (&summary["organization"], &summary["repository"], &summary["branch"]),
        (&json!("octo"), &json!("demo"), &json!("trunk"))
    );
    assert_eq!(summary["files_ignored"], 5, "{summary}");
    assert_eq!(summary["files_eligible"], 3, "{summary}");
    assert_eq!(summary["files_scanned"], 8, "{summary}");
    let found = search(&store, "parse_widget_config", &["--limit", "20"]);
    assert!(found.contains("`src/lib.rs"), "{found}");
    for path in build_output {
        assert!(!found.contains(path), "{path} was indexed: {found}");
    }
    // The link goes to the commit on GitHub, as the reference's would; the chunk (semantic
    // chunking, the embedded default) starts at the doc comment.
    assert!(found.contains(&format!("(https://github.com/octo/demo/blob/{sha}/src/lib.rs#L1-L2)")), "{found}");

    // --no-ignore: the reference's selection, build output included.
    let all = index_json(&["index", dir, "--store", store_arg, "--no-ignore"]);
    assert_eq!((&all["files_ignored"], &all["files_eligible"]), (&json!(0), &json!(8)), "{all}");
    let found = search(&store, "parse_widget_config", &["--limit", "20"]);
    // The five files have the same text, which a search returns once.
    assert!(build_output.iter().any(|path| found.contains(&format!("**File:** `{path}"))), "{found}");
}

#[test]
fn links_follow_the_remote_and_a_folder_without_one_has_none() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("tool");
    std::fs::create_dir(&root).unwrap();
    write(&root, "main.go", "package main\n\n// Greets the widget.\nfunc greetWidget() {}\n");
    let store = work.path().join("store");
    let (dir, store_arg) = (root.to_str().unwrap(), store.to_str().unwrap());
    // No git at all: `local/<folder>` and no link to a repository that does not exist.
    let summary = index_json(&["index", dir, "--store", store_arg]);
    assert_eq!((&summary["organization"], &summary["repository"]), (&json!("local"), &json!("tool")));
    let found = search(&store, "greetWidget", &[]);
    assert!(found.contains("**Repo:** `local/tool@main`\n**File:** `main.go"), "{found}");
    assert!(!found.contains("Source: ["), "{found}");
    assert!(!found.contains("https://"), "{found}");

    git(&root, &["init", "--quiet", "--initial-branch", "main"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "--quiet", "-m", "tool"]);
    let sha = git(&root, &["rev-parse", "HEAD"]);
    git(&root, &["remote", "add", "origin", "https://gitlab.com/group/sub/tool.git"]);
    let store = work.path().join("store-gitlab");
    index_json(&["index", dir, "--store", store.to_str().unwrap()]);
    let found = search(&store, "greetWidget", &[]);
    assert!(found.contains("**Repo:** `group/sub/tool@main`"), "{found}");
    // GitLab's line-range form; the semantic chunk holds the file from its first line.
    assert!(found.contains(&format!("(https://gitlab.com/group/sub/tool/-/blob/{sha}/main.go#L1-4)")), "{found}");
}

#[test]
fn search_orders_candidates_as_code_unless_told_not_to() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    // The test is named after the function and calls it twelve times; the definition stands in a
    // file named for something else. The text ranking puts the test first; the code ranking puts
    // the definition first and the test after a source file that does not mention the function.
    let calls: String = (0..12).map(|i| format!("\tw{i}, _ := ParseWidget(\"parse widget {i}\")\n")).collect();
    write(
        &repo,
        "widget/parse_widget_test.go",
        &format!("package widget\n\nfunc TestParseWidget(t *testing.T) {{\n{calls}}}\n"),
    );
    write(
        &repo,
        "widget/codec.go",
        "package widget\n\n// ParseWidget reads a widget from its text form.\nfunc ParseWidget(text string) (Widget, error) {\n\treturn Widget{Name: text}, nil\n}\n",
    );
    write(&repo, "widget/color.go", "package widget\n\n// Color is a widget's paint.\ntype Color int\n");
    let store = work.path().join("store");
    index_chunked(&repo, &store, &[]);
    // Each file once, in the order of its first excerpt.
    let files = |query: &str, extra: &[&str]| {
        let out = search(&store, query, extra);
        let mut seen: Vec<String> = Vec::new();
        for file in excerpt_files(&out) {
            if !seen.iter().any(|f| f == file) {
                seen.push(file.to_owned());
            }
        }
        seen
    };
    assert_eq!(
        files("ParseWidget", &["--code-rank", "off"]),
        ["widget/parse_widget_test.go", "widget/codec.go", "widget/color.go"]
    );
    assert_eq!(files("ParseWidget", &[]), ["widget/codec.go", "widget/color.go", "widget/parse_widget_test.go"]);
    assert_eq!(files("ParseWidget", &["--code-rank", "on"]), files("ParseWidget", &[]));
    // A question about the tests keeps them where the text ranking puts them.
    assert_eq!(files("tests of ParseWidget", &[])[..2], ["widget/codec.go", "widget/parse_widget_test.go"]);
    let (code, stderr) =
        failure(&["search", "ParseWidget", "--store", store.to_str().unwrap(), "--code-rank", "maybe"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("invalid value 'maybe' for '--code-rank <on|off>'"), "{stderr}");
}

/// The namespace's record ids and stored files (path, hash) of the store in
/// `store`, as a fresh index of the same tree would leave them.
fn store_state(store: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let embedded = rr_embedded::EmbeddedStore::open(store).unwrap();
    let mut ids = Vec::new();
    let mut files = Vec::new();
    for ns in embedded.namespaces().unwrap() {
        ids.extend(embedded.ids_in_namespace(&ns.namespace_id).unwrap());
        files.extend(embedded.list_files(&ns.namespace_id).unwrap().into_iter().map(|f| (f.path, f.file_hash)));
    }
    ids.sort();
    files.sort();
    (ids, files)
}

/// Polls `check` every 100 ms until it holds, or panics with `what` after `within`.
async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    within: std::time::Duration,
    mut check: impl FnMut() -> F,
) {
    let deadline = std::time::Instant::now() + within;
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A copy of the corpus to edit, and a store beside it.
fn watched_copy() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("widgets");
    copy_dir(&corpus(), &dir);
    let store = work.path().join("store");
    (work, dir, store)
}

fn watch_server(dir: &Path, store: &Path) -> Server {
    Server::new().args([
        "serve",
        "--tools",
        "search",
        "--store",
        store.to_str().unwrap(),
        "--watch",
        dir.to_str().unwrap(),
        "--watch-debounce-ms",
        "100",
    ])
}

const WATCHED: std::time::Duration = std::time::Duration::from_secs(20);

#[tokio::test]
async fn serve_watch_shows_an_edit_a_new_file_a_deletion_and_a_rename_in_search() {
    let (_work, dir, store) = watched_copy();
    let mcp = watch_server(&dir, &store).stdio().await;
    let found = |query: &'static str, path: &'static str| {
        let mcp = &mcp;
        async move {
            // The path keeps the answer to the file in question, whatever the ranking.
            let scope = format!("{}*", path.rsplit_once('/').map_or("", |(dir, _)| dir));
            let result = mcp.call_tool("search", json!({"query": query, "limit": 3, "path": scope})).await;
            let text = tool_text(&result).to_owned();
            excerpt_files(&text).iter().any(|f| f.starts_with(path)) && text.contains(query)
        }
    };
    // The store starts empty and the watch's catch-up fills it.
    eventually("the catch-up indexes the folder", WATCHED, || found("RegisterFlags", "internal/config/config.go"))
        .await;

    let app = dir.join("web/app.ts");
    std::fs::write(&app, std::fs::read_to_string(&app).unwrap() + "\nexport const watchedEditMarker = 1;\n").unwrap();
    eventually("an edit", WATCHED, || found("watchedEditMarker", "web/app.ts")).await;

    std::fs::create_dir_all(dir.join("notes")).unwrap();
    std::fs::write(dir.join("notes/new.md"), "# Notes\n\nThe watchedNewMarker lives here.\n").unwrap();
    eventually("a new file", WATCHED, || found("watchedNewMarker", "notes/new.md")).await;

    std::fs::remove_file(dir.join("notes/new.md")).unwrap();
    eventually("a deletion", WATCHED, || async { !found("watchedNewMarker", "notes/new.md").await }).await;

    std::fs::rename(&app, dir.join("web/renamed.ts")).unwrap();
    eventually("a rename", WATCHED, || async {
        found("watchedEditMarker", "web/renamed.ts").await && !found("watchedEditMarker", "web/app.ts").await
    })
    .await;
    drop(mcp);
}

/// The fresh index of `dir` in a store of its own, with the identity a
/// watch reads from the folder.
fn fresh_state(dir: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let fresh = tempfile::tempdir().unwrap();
    let out = run(&["index", dir.to_str().unwrap(), "--store", fresh.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    store_state(fresh.path())
}

#[tokio::test]
async fn serve_watch_after_a_thousand_rapid_edits_holds_what_a_fresh_index_of_the_final_tree_holds() {
    let (_work, dir, store) = watched_copy();
    let mcp = watch_server(&dir, &store).stdio().await;
    let initial = fresh_state(&dir);
    eventually("the catch-up", WATCHED, || async { store_state(&store) == initial }).await;

    let app = dir.join("web/app.ts");
    let original = std::fs::read_to_string(&app).unwrap();
    for i in 0..1000 {
        std::fs::write(&app, format!("{original}\nexport const edit{i} = {i};\n")).unwrap();
        let extra = dir.join(format!("extra{}.md", i % 7));
        if i % 3 == 0 {
            let _ = std::fs::remove_file(&extra);
        } else {
            std::fs::write(&extra, format!("# Extra\n\nVersion {i}.\n")).unwrap();
        }
        if i % 50 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        }
    }
    let wanted = fresh_state(&dir);
    assert_ne!(wanted, initial);
    eventually("the final tree", WATCHED, || async { store_state(&store) == wanted }).await;
    drop(mcp);
}

#[tokio::test]
async fn serve_watch_killed_during_an_update_converges_when_started_again() {
    let (_work, dir, store) = watched_copy();
    let mcp = watch_server(&dir, &store).stdio().await;
    let initial = fresh_state(&dir);
    eventually("the catch-up", WATCHED, || async { store_state(&store) == initial }).await;
    // Every file changes, and the server is killed while it writes them.
    for entry in walk(&dir) {
        if let Ok(text) = std::fs::read_to_string(&entry) {
            std::fs::write(&entry, text + "\n\nchanged before the kill\n").unwrap();
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let pid = mcp.pid().expect("the server runs");
    assert!(Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap().success());
    drop(mcp);

    let wanted = fresh_state(&dir);
    let again = watch_server(&dir, &store).stdio().await;
    eventually("the restart's catch-up", WATCHED, || async { store_state(&store) == wanted }).await;
    assert!(rr_embedded::EmbeddedStore::open(&store).unwrap().check().unwrap().is_consistent());
    drop(again);
}

/// The chunk ids and files (path, hash) of one branch's namespace of `local/widgets`.
fn branch_state(store: &Path, branch: &str) -> (Vec<String>, Vec<(String, String)>) {
    let embedded = rr_embedded::EmbeddedStore::open(store).unwrap();
    let namespace = rr_indexer::Identity::new("local", "widgets", branch, "").namespace_id();
    let mut ids = embedded.ids_in_namespace(&namespace).unwrap();
    let mut files: Vec<_> =
        embedded.list_files(&namespace).unwrap().into_iter().map(|f| (f.path, f.file_hash)).collect();
    ids.sort();
    files.sort();
    (ids, files)
}

/// `/readyz` of a server's `--metrics` address: its status.
async fn readyz(addr: &str) -> u16 {
    reqwest::get(format!("http://{addr}/readyz")).await.unwrap().status().as_u16()
}

/// A watched folder deleted and created again (a re-clone): the watch says not ready while it is
/// gone, then watches the new folder and indexes it, new files included.
#[tokio::test]
async fn serve_watch_follows_a_folder_deleted_and_created_again() {
    let (work, dir, store) = watched_copy();
    let addr = format!("127.0.0.1:{}", support::free_port());
    let mcp = watch_server(&dir, &store).args(["--metrics", &addr]).stdio().await;
    let initial = fresh_state(&dir);
    eventually("the catch-up", WATCHED, || async { store_state(&store) == initial }).await;
    eventually("ready after the catch-up", WATCHED, || async { readyz(&addr).await == 200 }).await;

    let copy = work.path().join("copy");
    copy_dir(&dir, &copy);
    std::fs::remove_dir_all(&dir).unwrap();
    eventually("not ready while the folder is gone", WATCHED, || async { readyz(&addr).await == 503 }).await;
    copy_dir(&copy, &dir);
    std::fs::write(dir.join("x.md"), "# x\n\nThe replacedFolderMarker page.\n").unwrap();
    let wanted = fresh_state(&dir);
    assert_ne!(wanted, initial);
    eventually("the new folder indexed", WATCHED, || async { store_state(&store) == wanted }).await;
    eventually("ready again", WATCHED, || async { readyz(&addr).await == 200 }).await;

    // And it is watched: a later edit is indexed too.
    std::fs::write(dir.join("y.md"), "# y\n\nAnother page.\n").unwrap();
    let wanted = fresh_state(&dir);
    eventually("an edit in the new folder", WATCHED, || async { store_state(&store) == wanted }).await;

    // Replaced at once, between two looks (the new folder may get the old inode number back).
    std::fs::remove_dir_all(&dir).unwrap();
    copy_dir(&copy, &dir);
    let wanted = fresh_state(&dir);
    eventually("the folder replaced at once", WATCHED, || async { store_state(&store) == wanted }).await;
    eventually("ready after it", WATCHED, || async { readyz(&addr).await == 200 }).await;
    std::fs::write(dir.join("z.md"), "# z\n\nA page after the quick replacement.\n").unwrap();
    let wanted = fresh_state(&dir);
    eventually("an edit after the quick replacement", WATCHED, || async { store_state(&store) == wanted }).await;
    drop(mcp);
}

/// After `git checkout feature` the watched files are indexed as `feature`'s, as a fresh `index`
/// labels them, not as the branch the watch started on.
#[tokio::test]
async fn serve_watch_indexes_a_branch_switch_as_the_new_branch() {
    let (_work, dir, store) = watched_copy();
    git(&dir, &["init", "--quiet", "--initial-branch", "main"]);
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "--quiet", "-m", "main"]);
    git(&dir, &["checkout", "--quiet", "-b", "feature"]);
    write(&dir, "feature.md", "# Feature\n\nThe featureBranchMarker page.\n");
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "--quiet", "-m", "feature"]);
    git(&dir, &["checkout", "--quiet", "main"]);

    let mcp = watch_server(&dir, &store).stdio().await;
    let main = fresh_state(&dir);
    eventually("the catch-up as main", WATCHED, || async { branch_state(&store, "main") == main }).await;

    git(&dir, &["checkout", "--quiet", "feature"]);
    let feature = fresh_state(&dir);
    eventually("the switch indexed as feature", WATCHED, || async { branch_state(&store, "feature") == feature }).await;
    let result = mcp
        .call_tool("search", json!({"query": "featureBranchMarker", "source": "local/widgets@feature", "limit": 1}))
        .await;
    assert!(tool_text(&result).contains("local/widgets@feature"), "{}", tool_text(&result));
    drop(mcp);
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}

#[tokio::test]
async fn serve_search_takes_language_and_kind_among_what_the_index_holds() {
    let store = tempfile::tempdir().unwrap();
    index_chunked(&corpus(), store.path(), &[]);
    let mcp =
        Server::new().args(["serve", "--tools", "search", "--store", store.path().to_str().unwrap()]).stdio().await;
    let tools = mcp.list_tools().await;
    let props = &tools["tools"][0]["inputSchema"]["properties"];
    let languages: Vec<&str> =
        props["language"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let kinds: Vec<&str> = props["kind"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(languages.contains(&"go") && languages.contains(&"python"), "{languages:?}");
    assert!(kinds.contains(&"source") && kinds.contains(&"docs"), "{kinds:?}");

    let result = mcp.call_tool("search", json!({"query": "configuration", "kind": "docs", "limit": 4})).await;
    let text = tool_text(&result);
    let files = excerpt_files(text);
    assert_eq!(files.len(), 4, "filtered before the limit: {text}");
    assert!(
        files.iter().all(|f| rr_core::PathClass::of(f.split('#').next().unwrap()) == rr_core::PathClass::Docs),
        "{files:?}"
    );

    let result = mcp.call_tool("search", json!({"query": "configuration", "language": "go", "limit": 3})).await;
    let files = excerpt_files(tool_text(&result)).into_iter().map(str::to_owned).collect::<Vec<_>>();
    assert!(!files.is_empty() && files.iter().all(|f| f.split('#').next().unwrap().ends_with(".go")), "{files:?}");

    let result = mcp.call_tool("search", json!({"query": "configuration", "language": "cobol"})).await;
    assert!(support::is_error(&result));
    assert_eq!(tool_text(&result), format!("unknown language \"cobol\"; valid languages: {}", languages.join(", ")));
    let result = mcp.call_tool("search", json!({"query": "configuration", "kind": "tests"})).await;
    assert_eq!(tool_text(&result), format!("unknown kind \"tests\"; valid kinds: {}", kinds.join(", ")));

    // The same filters on the command line.
    let cli = search(store.path(), "configuration", &["--kind", "docs", "--limit", "4"]);
    assert_eq!(
        cli,
        format!(
            "{}\n",
            tool_text(&mcp.call_tool("search", json!({"query": "configuration", "kind": "docs", "limit": 4})).await)
        )
    );
    let out = run(&["search", "configuration", "--store", store.path().to_str().unwrap(), "--language", "cobol"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("unknown language \"cobol\"; valid languages: "));
    drop(mcp);
}

#[tokio::test]
async fn serve_search_selects_markdown_and_refuses_blank_filters() {
    let store = tempfile::tempdir().unwrap();
    index_chunked(&corpus(), store.path(), &[]);
    let mcp =
        Server::new().args(["serve", "--tools", "search", "--store", store.path().to_str().unwrap()]).stdio().await;
    let tools = mcp.list_tools().await;
    let languages = &tools["tools"][0]["inputSchema"]["properties"]["language"]["enum"];
    assert!(languages.as_array().unwrap().contains(&json!("markdown")), "{languages}");

    let result = mcp.call_tool("search", json!({"query": "configuration", "language": "markdown", "limit": 3})).await;
    let files = excerpt_files(tool_text(&result)).into_iter().map(str::to_owned).collect::<Vec<_>>();
    assert!(!files.is_empty() && files.iter().all(|f| f.split('#').next().unwrap().ends_with(".md")), "{files:?}");
    let cli = search(store.path(), "configuration", &["--language", "markdown", "--limit", "3"]);
    assert_eq!(cli, format!("{}\n", tool_text(&result)));

    for (argument, value) in [("language", ""), ("language", " "), ("language", "go\n"), ("kind", ""), ("kind", " ")] {
        let result = mcp.call_tool("search", json!({"query": "configuration", argument: value})).await;
        assert!(support::is_error(&result), "{argument}={value:?}");
        assert!(tool_text(&result).starts_with(&format!("unknown {argument} ")), "{}", tool_text(&result));
    }
    let out = run(&["search", "configuration", "--store", store.path().to_str().unwrap(), "--language", ""]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("unknown language \"\"; valid languages: "));
    drop(mcp);
}

#[tokio::test]
async fn serve_watch_keeps_the_navigation_tools_in_step() {
    let (_work, dir, store) = watched_copy();
    let mcp = Server::new()
        .args(["serve", "--store", store.to_str().unwrap(), "--watch", dir.to_str().unwrap()])
        .args(["--watch-debounce-ms", "100"])
        .stdio()
        .await;
    let defines = |name: &'static str| {
        let mcp = &mcp;
        async move {
            let args = json!({"repository": "local/widgets", "name": name});
            let result = mcp.call_tool("list_definitions", args).await;
            !support::is_error(&result) && tool_text(&result).contains(&format!("\"entity_name\": \"{name}\""))
        }
    };
    eventually("the catch-up", WATCHED, || defines("RegisterFlags")).await;
    let go = dir.join("internal/store/store.go");
    std::fs::write(&go, std::fs::read_to_string(&go).unwrap() + "\nfunc WatchedFunction() {}\n").unwrap();
    eventually("a new definition", WATCHED, || defines("WatchedFunction")).await;
    drop(mcp);
}

#[tokio::test]
async fn serve_watch_is_not_woken_by_its_own_reads_nor_by_its_store_inside_the_checkout() {
    let (_work, dir, _) = watched_copy();
    let store = dir.join(".repo-retriever");
    let mut mcp = watch_server(&dir, &store).stdio().await;
    let updates = |mcp: &support::McpClient| mcp.stderr().matches("watch: store updated").count();
    eventually("the catch-up", WATCHED, || async { updates(&mcp) >= 1 }).await;
    // Searches read the store (and its write-ahead log); the watch stays quiet.
    for _ in 0..5 {
        mcp.call_tool("search", json!({"query": "configuration"})).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(updates(&mcp), 1, "{}", mcp.stderr());
    mcp.close().await;
}

/// `serve --chroma-url … --lexical-index DIR` over a collection another indexer filled (the reference
/// indexer's records in a real Chroma), with nothing at DIR: the index is built from the collection's
/// own records, the collection then answers as an embedded store holding those records does (not
/// as the drop-in's dense search), and records the collection loses leave the index at the next
/// refresh.
#[tokio::test]
async fn a_lexical_index_is_built_and_kept_from_a_collection_another_indexer_filled() {
    let f = fixture();
    let collection = "beside-reference-records";
    let id = rr_testkit::load_fixture(&f.chroma_url, collection).await;
    let work = tempfile::tempdir().unwrap();
    let index_dir = work.path().join("lexical");

    let beside = ["--lexical-index", index_dir.to_str().unwrap(), "--lexical-refresh", "300ms"];
    let missing = into_chroma(&f.chroma_url, "no-such-collection", &f.embed_url);
    let (code, stderr) = failure(&[&["serve"][..], &missing[..], &beside[..]].concat());
    assert_eq!(
        (code, stderr.as_str()),
        (Some(1), "Error: the Chroma collection \"no-such-collection\" does not exist\n")
    );
    assert!(!index_dir.exists(), "nothing is created for a missing collection");
    let into = into_chroma(&f.chroma_url, collection, &f.embed_url);
    let serve = Server::new()
        .args([&["serve", "--tools", "search"][..], &into[..], &beside[..]].concat())
        .env("RUST_LOG", "info");
    let mut mcp = serve.stdio().await;
    let built = "added=89 removed=0 held=89";
    eventually("the first refresh", std::time::Duration::from_secs(5), || async { mcp.stderr().contains(built) }).await;
    for query in ["where is the configuration loaded and validated", "widget store", "LoadConfig", "http handler"] {
        let remote = mcp.call_tool("search", json!({"query": query, "limit": 5})).await;
        let local = search(&index_dir, query, &["--limit", "5"]);
        assert_eq!(local, format!("{}\n", tool_text(&remote)), "query {query:?}");
    }
    // The chain runs: the drop-in's dense answer over the same collection is another.
    let mut dense = Server::with_backends(&f.chroma_url, collection, &f.embed_url).stdio().await;
    let query = json!({"query": "LoadConfig", "limit": 5});
    let (chain, plain) = (mcp.call_tool("search", query.clone()).await, dense.call_tool("search", query).await);
    assert_ne!(tool_text(&chain), tool_text(&plain));
    dense.close().await;

    // An index is not served with a collection whose vectors its queries cannot be compared with.
    let short: Vec<Value> = rr_testkit::fixture_records()[..3]
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["embedding"] = json!([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]);
            r
        })
        .collect();
    rr_testkit::load_records(&f.chroma_url, "beside-other-dimension", &short).await;
    let other = into_chroma(&f.chroma_url, "beside-other-dimension", &f.embed_url);
    let (code, stderr) = failure(&[&["serve"][..], &other[..], &beside[..]].concat());
    let refused = format!(
        "Error: the Chroma collection \"beside-other-dimension\" holds 8-dimensional vectors, but the lexical index \
         at {} embeds queries with the \"openai\" embedder into 256 dimensions: serve the collection with the index \
         written beside it, or give a new --lexical-index folder\n",
        index_dir.display()
    );
    assert_eq!((code, stderr.as_str()), (Some(1), refused.as_str()));
    support::delete_collection(&f.chroma_url, "beside-other-dimension").await;

    // The docs leave the collection; the next refresh removes them from the index too, so its
    // lexical ranking no longer brings them back.
    let docs: Vec<&Value> = rr_testkit::fixture_records()
        .iter()
        .filter(|r| r["metadata"]["path"].as_str().unwrap().starts_with("docs/"))
        .collect();
    assert!(docs.len() > 3, "{}", docs.len());
    let url =
        format!("{}/{id}/delete", rr_testkit::collections_url(&f.chroma_url, rr_testkit::TENANT, rr_testkit::DATABASE));
    let ids: Vec<&Value> = docs.iter().map(|r| &r["id"]).collect();
    rr_testkit::send_json(reqwest::Client::new().post(url).json(&json!({ "ids": ids })), "delete the docs").await;
    let removed = format!("added=0 removed={} held={}", docs.len(), 89 - docs.len());
    eventually("the refresh", std::time::Duration::from_secs(20), || async { mcp.stderr().contains(&removed) }).await;
    let answer = mcp.call_tool("search", json!({"query": "configuration guide troubleshooting", "limit": 10})).await;
    let files = excerpt_files(tool_text(&answer));
    assert!(!files.is_empty() && files.iter().all(|f| !f.contains("docs/")), "{files:?}");
    mcp.close().await;
    support::delete_collection(&f.chroma_url, collection).await;
}

/// `index --chroma-url … --lexical-index DIR` writes potion vectors into a real Chroma and the same
/// records into the index beside it; `serve --chroma-url … --lexical-index DIR` then answers as the
/// embedded store answers the same folder (hybrid, the head read again, the code ranking).
#[tokio::test]
async fn a_chroma_collection_with_its_lexical_index_answers_as_the_embedded_store() {
    let f = fixture();
    let collection = "beside-lexical-index";
    support::delete_collection(&f.chroma_url, collection).await;
    let (embedded, index_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    index_chunked(&corpus(), embedded.path(), &[]);
    let into = ["--chroma-url", &f.chroma_url, "--collection-name", collection];
    let beside = [&into[..], &["--lexical-index", index_dir.path().to_str().unwrap()]].concat();
    let first = index_chunked(&corpus(), Path::new("unused"), &beside);
    assert!(first["chunks_added_or_updated"].as_u64().unwrap() > 80, "{first}");
    let again = index_chunked(&corpus(), Path::new("unused"), &beside);
    assert_eq!(again["chunks_added_or_updated"], 0, "{again}");
    assert!(!Path::new("unused").exists(), "--store is not written with --lexical-index");

    // Without the index, a collection needs the endpoint that makes its vectors.
    let (code, stderr) =
        failure(&[&["index", corpus().to_str().unwrap()][..], &into[..], &["--embedder", "potion"]].concat());
    assert_eq!(
        (code, stderr.as_str()),
        (
            Some(1),
            "Error: --embedder chooses the embedder of an embedded store or of a lexical index; with --chroma-url \
             the vectors come from --embedding-api-url unless --lexical-index is given\n"
        )
    );

    let (code, stderr) = failure(&[&["index", corpus().to_str().unwrap()][..], &into[..]].concat());
    assert_eq!(
        (code, stderr.as_str()),
        (Some(1), "Error: a Chroma target needs a collection name, an embedding API URL and an embedding model\n")
    );

    let serve = [&["serve", "--tools", "search"][..], &beside[..]].concat();
    let mut mcp = Server::new().args(serve).stdio().await;
    for query in ["where is the configuration loaded and validated", "widget store", "LoadConfig", "http handler"] {
        let remote = mcp.call_tool("search", json!({"query": query, "limit": 5})).await;
        let local = search(embedded.path(), query, &["--limit", "5"]);
        assert_eq!(local, format!("{}\n", tool_text(&remote)), "query {query:?}");
    }
    mcp.close().await;
}
