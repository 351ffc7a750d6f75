//! Reranking end to end: the built binary with `--rerank-api-url` pointing at the
//! embed server's `/v1/rerank`, against the real Chroma.
//!
//! Expectations are computed independently: the candidates come from Chroma's raw answer for the
//! contract's query, the rerank documents are built from CONTRACT §2 step 4, the scores come from
//! the embed server itself, and the selection rules are applied to the stably sorted list.

use crate::support;

use crate::support::{
    RawCandidate, Recorder, Server, contract_select, found_line, is_error, raw_candidates, shown_results, tool_text,
};
use serde_json::{Value, json};

const RERANK_MODEL: &str = "hash-rerank";

/// Chroma's candidates for `query` (no source filter) with an optional path regex.
async fn candidates(query: &str, n_results: usize, regex: Option<&str>) -> Vec<RawCandidate> {
    let f = support::fixture();
    let embedding = support::embed_query(&f.embed_url, query).await;
    let raw = support::chroma_query_filtered(
        &f.chroma_url,
        &f.collection_id,
        &embedding,
        n_results,
        None,
        regex.map(|r| json!({"$regex": r})),
    )
    .await;
    raw_candidates(&raw)
}

/// The embed server's score for each document, by index.
async fn scores(query: &str, documents: &[String]) -> Vec<f64> {
    let f = support::fixture();
    let body = json!({"model": RERANK_MODEL, "query": query, "documents": documents});
    let resp: Value = reqwest::Client::new()
        .post(format!("{}/v1/rerank", f.embed_url))
        .json(&body)
        .send()
        .await
        .expect("rerank")
        .json()
        .await
        .expect("rerank JSON");
    let mut out = vec![f64::NAN; documents.len()];
    for r in resp["results"].as_array().expect("results") {
        out[r["index"].as_u64().unwrap() as usize] = r["relevance_score"].as_f64().unwrap();
    }
    assert!(out.iter().all(|s| !s.is_nan()), "every document scored");
    out
}

/// Candidates stably sorted by score, highest first.
fn by_score(candidates: &[RawCandidate], scores: &[f64]) -> Vec<RawCandidate> {
    let mut pairs: Vec<(f64, RawCandidate)> = scores.iter().copied().zip(candidates.iter().cloned()).collect();
    pairs.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
    pairs.into_iter().map(|(_, c)| c).collect()
}

#[tokio::test]
async fn rerank_reorders_candidates_by_the_embed_servers_scores() {
    let f = support::fixture();
    let embed = Recorder::forward(&f.embed_url).await;
    let mut s = Server::fixture().with_rerank(embed.url()).stdio().await;
    let mut reordered = 0;
    for (query, limit) in
        [("parse a color into components", 5usize), ("retry delay doubles with backoff", 3), ("widget database", 20)]
    {
        let before = embed.requests_to("/v1/rerank").len();
        let cands = candidates(query, (limit * 3).min(100), None).await;
        let documents: Vec<String> = cands.iter().map(RawCandidate::rerank_document).collect();
        let sc = scores(query, &documents).await;
        let expected = contract_select(&by_score(&cands, &sc), limit);
        let unranked = contract_select(&cands, limit);
        if expected.shown() != unranked.shown() {
            reordered += 1;
        }

        let result = s.call_tool("search", json!({"query": format!("  {query} "), "limit": limit})).await;
        assert!(!is_error(&result), "{result}");
        let text = tool_text(&result);
        assert!(text.starts_with(&found_line(expected.selected.len())), "{text}");
        assert_eq!(shown_results(text), expected.shown(), "{query}");

        // What the reranker was sent: the trimmed query without prefix, and the contract's documents.
        let sent = embed.requests_to("/v1/rerank");
        assert_eq!(sent.len(), before + 1);
        assert_eq!(sent[before].json(), json!({"model": RERANK_MODEL, "query": query, "documents": documents}));
        assert_eq!(sent[before].header("authorization"), None, "no rerank key configured");
    }
    assert!(reordered > 0, "reranking changed no answer: the test proves nothing");
    assert!(s.close().await.success());
}

#[tokio::test]
async fn rerank_candidate_count_follows_multiplier_and_cap() {
    let f = support::fixture();
    let chroma = Recorder::forward(&f.chroma_url).await;
    let embed = Recorder::forward(&f.embed_url).await;
    let mut s = Server::with_backends(chroma.url(), &f.collection, &f.embed_url)
        .with_rerank(embed.url())
        .args(["--rerank-candidate-multiplier", "2", "--rerank-max-candidates", "7", "--rerank-api-key", "rk-123"])
        .stdio()
        .await;
    for (limit, n) in [(2usize, 4usize), (5, 7), (20, 7)] {
        let query = "store list widgets";
        let before = chroma.requests_to("/api/v2/").iter().filter(|r| r.path.ends_with("/query")).count();
        let result = s.call_tool("search", json!({"query": query, "limit": limit})).await;
        assert!(!is_error(&result), "{result}");
        let queries: Vec<_> = chroma.requests().into_iter().filter(|r| r.path.ends_with("/query")).collect();
        assert_eq!(queries.len(), before + 1);
        assert_eq!(queries[before].json()["n_results"], json!(n), "limit {limit}");
        let rerank = embed.requests_to("/v1/rerank").pop().expect("a rerank request");
        assert_eq!(rerank.json()["documents"].as_array().unwrap().len(), n);
        assert_eq!(rerank.header("authorization"), Some("Bearer rk-123"));

        let cands = candidates(query, n, None).await;
        let documents: Vec<String> = cands.iter().map(RawCandidate::rerank_document).collect();
        let expected = contract_select(&by_score(&cands, &scores(query, &documents).await), limit);
        assert_eq!(shown_results(tool_text(&result)), expected.shown(), "limit {limit}");
    }
    assert!(s.close().await.success());
}

#[tokio::test]
async fn a_single_candidate_is_not_reranked() {
    let f = support::fixture();
    let embed = Recorder::forward(&f.embed_url).await;
    let mut s = Server::with_backends(&f.chroma_url, &f.collection, embed.url()).with_rerank(embed.url()).stdio().await;
    let result = s.call_tool("search", json!({"query": "kiosk", "path": "docs/café.md"})).await;
    assert_eq!(
        shown_results(tool_text(&result)),
        [("acme/widgets@main".to_string(), "docs/café.md#L1-L5".to_string())]
    );
    let result = s.call_tool("search", json!({"query": "kiosk", "path": "nothing/*"})).await;
    assert_eq!(tool_text(&result), support::NO_MATCH);
    assert_eq!(embed.requests_to("/v1/embeddings").len(), 2);
    assert!(embed.requests_to("/v1/rerank").is_empty(), "fewer than 2 candidates: no rerank call");
    assert!(s.close().await.success());
}

/// `docs/*` includes `docs/café.md`, so byte counts differ from character counts.
const DOCS_REGEX: &str = r"^Source: [^\n]+:docs/.*(?:\n|$)";

#[tokio::test]
async fn rerank_max_document_bytes_fails_the_search_with_the_exact_text() {
    let f = support::fixture();
    let query = "café kiosk snapshot notes";
    let limit = 5;
    let cands = candidates(query, limit * 3, Some(DOCS_REGEX)).await;
    let sizes: Vec<usize> = cands.iter().map(|c| c.rerank_document().len()).collect();
    assert!(cands.iter().any(|c| c.metadata["path"] == "docs/café.md"), "café.md among the candidates");
    assert!(
        cands.iter().map(|c| c.rerank_document()).any(|d| d.len() != d.chars().count()),
        "a non-ASCII document, so bytes are not characters"
    );
    // A cap that the first document meets and a later one exceeds.
    let max = sizes[0];
    let (index, size) = sizes.iter().copied().enumerate().find(|&(_, n)| n > max).expect("a larger later document");
    assert!(index > 0);

    let embed = Recorder::forward(&f.embed_url).await;
    let args = json!({"query": query, "path": "docs/*", "limit": limit});
    let result = search_with_cap(embed.url(), "--rerank-max-document-bytes", max, &args).await;
    assert!(is_error(&result));
    assert_eq!(
        tool_text(&result),
        format!(
            "repository content search failed: reranking document {index} is {size} bytes, exceeding rerank-max-document-bytes of {max}"
        )
    );
    assert!(embed.requests_to("/v1/rerank").is_empty(), "nothing is sent when a limit is hit");

    // A cap equal to the largest document passes.
    let largest = *sizes.iter().max().unwrap();
    let result = search_with_cap(&f.embed_url, "--rerank-max-document-bytes", largest, &args).await;
    assert!(!is_error(&result), "{result}");
}

#[tokio::test]
async fn rerank_max_request_bytes_fails_the_search_with_the_exact_text() {
    let f = support::fixture();
    let query = "café kiosk snapshot notes";
    let limit = 5;
    let cands = candidates(query, limit * 3, Some(DOCS_REGEX)).await;
    let sizes: Vec<usize> = cands.iter().map(|c| c.rerank_document().len()).collect();
    assert!(sizes.len() >= 5);
    // The running total passes the cap at the fourth document.
    let max: usize = sizes[..3].iter().sum();
    let total: usize = sizes[..4].iter().sum();

    let args = json!({"query": query, "path": "docs/*", "limit": limit});
    let result = search_with_cap(&f.embed_url, "--rerank-max-request-bytes", max, &args).await;
    assert!(is_error(&result));
    assert_eq!(
        tool_text(&result),
        format!(
            "repository content search failed: reranking request is {total} bytes, exceeding rerank-max-request-bytes of {max}"
        )
    );

    // A cap equal to the whole request passes; one byte less fails on the last document.
    let all: usize = sizes.iter().sum();
    for (cap, ok) in [(all, true), (all - 1, false)] {
        let result = search_with_cap(&f.embed_url, "--rerank-max-request-bytes", cap, &args).await;
        assert_eq!(!is_error(&result), ok, "cap {cap}: {result}");
        if !ok {
            assert_eq!(
                tool_text(&result),
                format!(
                    "repository content search failed: reranking request is {all} bytes, exceeding rerank-max-request-bytes of {cap}"
                )
            );
        }
    }
}

/// One `search` call through a drop-in server reranking at `rerank_url` with a byte cap;
/// the server must then exit cleanly.
async fn search_with_cap(rerank_url: &str, flag: &str, cap: usize, args: &serde_json::Value) -> serde_json::Value {
    let mut s = Server::fixture().with_rerank(rerank_url).args([flag, &cap.to_string()]).stdio().await;
    let result = s.call_tool("search", args.clone()).await;
    assert!(s.close().await.success());
    result
}

#[tokio::test]
async fn rerank_failures_fail_the_search() {
    // The rerank service is down.
    let port = support::free_port();
    let down = format!("http://127.0.0.1:{port}");
    let mut s = Server::fixture().with_rerank(&down).args(["--retry-attempts", "1"]).stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(is_error(&result));
    assert_eq!(
        tool_text(&result),
        format!(
            "repository content search failed: reranking request failed: Post \"{down}/v1/rerank\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    assert!(s.close().await.success());

    // A reranker that scores one index twice and misses another.
    let fake = Recorder::fake(|r| {
        let n = r.json()["documents"].as_array().map_or(0, Vec::len);
        let mut results: Vec<Value> = (0..n).map(|i| json!({"index": i, "relevance_score": 0.5})).collect();
        if n >= 2 {
            results[1] = json!({"index": 0, "relevance_score": 0.9});
        }
        (200, json!({"results": results}).to_string())
    })
    .await;
    let mut s = Server::fixture().with_rerank(fake.url()).stdio().await;
    let result = s.call_tool("search", json!({"query": "configuration"})).await;
    assert!(is_error(&result), "{result}");
    assert!(tool_text(&result).starts_with("repository content search failed: reranking request"), "{result}");
    assert_eq!(fake.requests().len(), 1, "a bad rerank answer is not retried");
    assert!(s.close().await.success());
}
