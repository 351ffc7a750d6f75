//! OpenAiReranker against a fake `/v1/rerank`.

use rr_core::{CallContext, Reranker};
use rr_http::test_util::{FakeServer, Reply, instant_client, settings};
use rr_rerank_openai::{OpenAiReranker, OpenAiRerankerConfig};
use serde_json::json;

fn reranker(server: &FakeServer, key: Option<&str>) -> OpenAiReranker {
    OpenAiReranker::new(
        OpenAiRerankerConfig {
            api_url: server.url().to_owned(),
            model: "reranker".into(),
            api_key: key.map(str::to_owned),
        },
        instant_client(settings(1)),
    )
}

fn documents(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("Repository: Acme/widgets@main\nFile: file{i}.go\n\ncontent <{i}>")).collect()
}

async fn rerank_with(reply: serde_json::Value, n: usize) -> Result<Vec<f64>, String> {
    let server = FakeServer::sequence(vec![Reply::json(reply)]).await;
    reranker(&server, None).rerank("q", &documents(n), &CallContext::default()).await.map_err(|e| e.to_string())
}

#[tokio::test]
async fn sends_the_reference_request_and_returns_scores_in_document_order() {
    let reply = json!({"results": [
        {"index": 2, "relevance_score": 0.99}, {"index": 0, "relevance_score": 0.5}, {"index": 1, "relevance_score": 0.8}
    ]});
    let server = FakeServer::sequence(vec![Reply::json(reply)]).await;
    let ctx = CallContext { authorization: Some("Bearer not-for-reranking".into()) };
    let scores = reranker(&server, Some("rerank-secret")).rerank("gogitup flags", &documents(3), &ctx).await.unwrap();
    assert_eq!(scores, vec![0.5, 0.8, 0.99]);
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/rerank");
    assert_eq!(request.header("authorization"), Some("Bearer rerank-secret"));
    assert_eq!(request.header("user-agent"), Some("repo-retriever/test"));
    // Equal as parsed JSON: the same fields and values, however the text is escaped.
    assert_eq!(
        request.json(),
        serde_json::from_str::<serde_json::Value>(concat!(
            r#"{"model":"reranker","query":"gogitup flags","documents":["#,
            r#""Repository: Acme/widgets@main\nFile: file0.go\n\ncontent \u003c0\u003e","#,
            r#""Repository: Acme/widgets@main\nFile: file1.go\n\ncontent \u003c1\u003e","#,
            r#""Repository: Acme/widgets@main\nFile: file2.go\n\ncontent \u003c2\u003e"]}"#
        ))
        .unwrap()
    );
}

#[tokio::test]
async fn a_count_mismatch_names_both_counts() {
    let reply = json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]});
    assert_eq!(rerank_with(reply, 3).await.unwrap_err(), "reranking request returned 2 results for 3 documents");
}

#[tokio::test]
async fn out_of_range_and_repeated_indices_are_invalid() {
    let expected = "reranking request returned invalid result indices";
    let out_of_range = json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 2, "relevance_score": 0.1}]});
    assert_eq!(rerank_with(out_of_range, 2).await.unwrap_err(), expected);
    let repeated = json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.1}]});
    assert_eq!(rerank_with(repeated, 2).await.unwrap_err(), expected);
    let negative = json!({"results": [{"index": -1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]});
    assert_eq!(rerank_with(negative, 2).await.unwrap_err(), expected);
}

#[tokio::test]
async fn errors_name_the_backend_and_hide_the_key() {
    let server = FakeServer::start(|r| {
        Reply::status(429, format!("rate limited for key {}", r.header("authorization").unwrap_or_default()))
    })
    .await;
    let err = reranker(&server, Some("rk-123")).rerank("q", &documents(2), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.backend(), "openai");
    assert_eq!(err.to_string(), "reranking request failed with HTTP 429: rate limited for key Bearer <redacted>");
}

#[tokio::test]
async fn no_documents_means_no_request() {
    let server = FakeServer::sequence(vec![Reply::status(500, "unused")]).await;
    let scores = reranker(&server, None).rerank("q", &[], &CallContext::default()).await.unwrap();
    assert!(scores.is_empty());
    assert_eq!(server.request_count(), 0);
}
