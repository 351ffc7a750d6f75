//! Registry and federated search through the built binary.
//!
//! `repo-retriever plugins` proves the final binary's registry holds the built-ins.
//! `serve --stores` against the real Chroma: with one healthy and one failing store the
//! answer is exactly the drop-in server's answer for the healthy collection (reciprocal-rank
//! fusion of one list keeps its order) plus the one skip line; with every store failing it is a
//! tool error naming each failure.

use crate::support;

use std::path::{Path, PathBuf};

use crate::support::{Server, excerpt_files, is_error, most_per_file, tool_text};
use serde_json::json;

#[tokio::test]
async fn plugins_lists_the_builtins_of_the_final_binary() {
    let out = Server::new().args(["plugins"]).output().await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listing = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = listing.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    assert!(!rows.is_empty(), "the registry is empty:\n{listing}");
    for (kind, name, origin) in [
        ("store", "chroma", "rr-chroma"),
        ("store", "embedded", "rr-embedded"),
        ("embedder", "hash", "rr-hash-embed"),
        ("embedder", "openai", "rr-openai"),
        ("reranker", "openai", "rr-rerank-openai"),
        ("reranker", "cohere", "rr-rerank-apis"),
        ("reranker", "jina", "rr-rerank-apis"),
        ("reranker", "voyage", "rr-rerank-apis"),
        ("reranker", "tei", "rr-rerank-apis"),
        ("reranker", "cross-encoder", "rr-cross-encoder"),
        ("reranker", "bm25-fusion", "rr-rerank-lexical"),
        ("reranker", "mmr", "rr-rerank-lexical"),
    ] {
        assert!(rows.iter().any(|r| r[0] == kind && r[1] == name && r[2] == origin), "{kind} {name} in\n{listing}");
    }
}

/// A stores file with a `chroma` store per `(name, url, collection)`, all embedding with the
/// embed server.
fn stores_file(dir: &tempfile::TempDir, stores: &[(&str, &str, &str)]) -> PathBuf {
    let f = support::fixture();
    let mut body = String::from("retry_attempts = 1\nrequest_timeout_secs = 10\n");
    for (name, url, collection) in stores {
        body.push_str(&format!(
            "\n[stores.{name}]\nkind = \"chroma\"\nurl = \"{url}\"\ncollection = \"{collection}\"\ntimeout_secs = 20\n\
             [stores.{name}.embedder]\nkind = \"openai\"\napi_url = \"{}\"\nmodel = \"{}\"\n",
            f.embed_url,
            support::EMBED_MODEL
        ));
    }
    let path = dir.path().join("stores.toml");
    std::fs::write(&path, body).unwrap();
    path
}

async fn federated_call(file: &Path, args: serde_json::Value) -> serde_json::Value {
    let mcp =
        Server::new().args(["serve", "--tools", "search", "--stores"]).arg(file.display().to_string()).stdio().await;
    mcp.call_tool("search", args).await
}

#[tokio::test]
async fn a_failing_store_is_skipped_with_one_line_at_the_end() {
    let f = support::fixture();
    let dir = tempfile::tempdir().unwrap();
    let file =
        stores_file(&dir, &[("healthy", &f.chroma_url, &f.collection), ("gone", &f.chroma_url, "no-such-collection")]);
    for args in [
        json!({"query": "how is the configuration loaded and validated", "limit": 4}),
        json!({"query": "retry policy", "path": "docs/*"}),
        json!({"query": "rectangle area", "source": "acme/widgets"}),
    ] {
        let federated = federated_call(&file, args.clone()).await;
        assert!(!is_error(&federated), "{federated}");
        let drop_in = Server::fixture().stdio().await;
        let single = drop_in.call_tool("search", args.clone()).await;
        let (text, single) = (tool_text(&federated), tool_text(&single));
        let base = if single.ends_with('\n') { single.to_owned() } else { format!("{single}\n") };
        let skip = text
            .strip_prefix(&base)
            .and_then(|rest| rest.strip_prefix('\n'))
            .unwrap_or_else(|| panic!("{args}: federated answer is not the drop-in's plus a line:\n{text}"));
        assert!(
            skip.starts_with("Skipped store that did not answer: `gone` (Chroma collection lookup failed"),
            "{skip}"
        );
        assert!(!skip.contains('\n') && skip.ends_with(")."), "{skip}");
    }
}

#[tokio::test]
async fn every_store_failing_is_a_tool_error_naming_each() {
    let f = support::fixture();
    let dir = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let file = stores_file(&dir, &[("gone", &f.chroma_url, "no-such-collection"), ("down", &dead, "x")]);
    let result = federated_call(&file, json!({"query": "configuration"})).await;
    assert!(is_error(&result), "{result}");
    let text = tool_text(&result);
    assert!(text.starts_with("repository content search failed: every store failed: `down`: "), "{text}");
    assert!(text.contains("; `gone`: Chroma collection lookup failed"), "{text}");
}

#[tokio::test]
async fn two_collections_split_from_the_fixture_answer_together() {
    let f = support::fixture();
    let docs = support::load_fixture_subset(&f.chroma_url, "fed-docs", |r| {
        r["metadata"]["path"].as_str().is_some_and(|p| p.starts_with("docs/"))
    })
    .await;
    let rest = support::load_fixture_subset(&f.chroma_url, "fed-rest", |r| {
        !r["metadata"]["path"].as_str().is_some_and(|p| p.starts_with("docs/"))
    })
    .await;
    assert!(!docs.is_empty() && !rest.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let file = stores_file(&dir, &[("docs", &f.chroma_url, "fed-docs"), ("rest", &f.chroma_url, "fed-rest")]);
    let result = federated_call(&file, json!({"query": "retry policy configuration", "limit": 10})).await;
    let text = tool_text(&result);
    assert!(!is_error(&result) && !text.contains("Skipped"), "{text}");
    assert!(text.contains("**File:** `docs/"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("**File:** `") && !l.starts_with("**File:** `docs/")), "{text}");
}

/// A reranker chain and its cut-off in a stores file reach the served `search` tool: a cut-off
/// above every score leaves nothing (the tool's own no-match text), the same chain without it
/// answers, and a bad stage stops the server at start naming the stage.
#[tokio::test]
async fn a_reranker_chain_and_its_cut_off_apply_to_the_served_search() {
    let f = support::fixture();
    let dir = tempfile::tempdir().unwrap();
    let file = stores_file(&dir, &[("widgets", &f.chroma_url, &f.collection)]);
    let stores = std::fs::read_to_string(&file).unwrap();
    let chain = "[[reranker]]\nkind = \"bm25-fusion\"\n[[reranker]]\nkind = \"mmr\"\nlambda = 0.5\n";
    let args = json!({"query": "retry with exponential backoff", "limit": 3});

    std::fs::write(&file, format!("rerank_min_score = 1e9\n{stores}\n{chain}")).unwrap();
    let cut = federated_call(&file, args.clone()).await;
    assert!(!is_error(&cut), "{cut}");
    assert_eq!(tool_text(&cut), rr_core::render::NO_MATCH);

    std::fs::write(&file, format!("{stores}\n{chain}")).unwrap();
    let kept = federated_call(&file, args).await;
    assert!(!is_error(&kept), "{kept}");
    assert_eq!(tool_text(&kept).matches("**File:** `").count(), 3, "{}", tool_text(&kept));

    std::fs::write(&file, format!("{stores}\n[[reranker]]\nkind = \"bm25-fusion\"\n[[reranker]]\nkind = \"bm26\"\n"))
        .unwrap();
    let out =
        Server::new().args(["serve", "--tools", "search", "--stores"]).arg(file.display().to_string()).output().await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reranker[1]: unknown reranker kind \"bm26\"; valid kinds: bm25-fusion, "), "{stderr}");
}

/// A stores file's `per_file` sets how many results one file gets before other files have had
/// their turn in the merged list (the reference's two by default), and `serve --per-file` wins
/// over it.
#[tokio::test]
async fn per_file_spreads_the_merged_list_and_the_flag_wins() {
    let f = support::fixture();
    let dir = tempfile::tempdir().unwrap();
    let file = stores_file(&dir, &[("widgets", &f.chroma_url, &f.collection)]);
    let stores = std::fs::read_to_string(&file).unwrap();
    let args = json!({"query": "where is the configuration loaded and validated", "limit": 5});
    let default = federated_call(&file, args.clone()).await;
    let default = tool_text(&default).to_owned();
    assert_eq!(most_per_file(&default), 2, "the reference's selection: {default}");

    std::fs::write(&file, format!("per_file = 1\n{stores}")).unwrap();
    let one = federated_call(&file, args.clone()).await;
    let one = tool_text(&one);
    assert_eq!(excerpt_files(one).len(), 5, "{one}");
    assert_eq!(most_per_file(one), 1, "{one}");

    let mcp = Server::new()
        .args(["serve", "--tools", "search", "--per-file", "2", "--stores"])
        .arg(file.display().to_string())
        .stdio()
        .await;
    let flag = mcp.call_tool("search", args).await;
    assert_eq!(tool_text(&flag), default, "--per-file 2 over the file's per_file = 1");
}
