//! OpenAiEmbedder against a fake `/v1/embeddings`.

use rr_core::{CallContext, Embedder};
use rr_http::test_util::{FakeServer, Reply, instant_client, settings};
use rr_openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
use serde_json::json;

fn embedder(server: &FakeServer, key: Option<&str>) -> OpenAiEmbedder {
    OpenAiEmbedder::new(
        OpenAiEmbedderConfig {
            api_url: server.url().to_owned(),
            model: "text-embed".into(),
            api_key: key.map(str::to_owned),
        },
        instant_client(settings(1)),
    )
}

fn inputs(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

#[tokio::test]
async fn sends_the_reference_request() {
    let server =
        FakeServer::sequence(vec![Reply::json(json!({"data": [{"index": 0, "embedding": [0.1, 0.2]}]}))]).await;
    let ctx = CallContext { authorization: Some("Bearer not-for-embeddings".into()) };
    let vectors = embedder(&server, Some("embed-secret"))
        .embed(&inputs(&["query: find <config> & \"flags\""]), &ctx)
        .await
        .unwrap();
    assert_eq!(vectors, vec![vec![0.1f32, 0.2]]);
    let request = &server.requests()[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(request.header("authorization"), Some("Bearer embed-secret"));
    assert_eq!(request.header("user-agent"), Some("repo-retriever/test"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    // Equal as parsed JSON: the same fields and values, however the text is escaped.
    assert_eq!(
        request.json(),
        serde_json::json!({"input": ["query: find <config> & \"flags\""], "model": "text-embed"})
    );
}

#[tokio::test]
async fn without_a_key_no_authorization_is_sent() {
    let server = FakeServer::sequence(vec![Reply::json(json!({"data": [{"embedding": [1]}]}))]).await;
    embedder(&server, None).embed(&inputs(&["q"]), &CallContext::default()).await.unwrap();
    embedder(&server, Some("")).embed(&inputs(&["q"]), &CallContext::default()).await.unwrap();
    embedder(&server, Some("bearer Already")).embed(&inputs(&["q"]), &CallContext::default()).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), None);
    assert_eq!(requests[1].header("authorization"), None);
    assert_eq!(requests[2].header("authorization"), Some("bearer Already"));
}

#[tokio::test]
async fn a_count_mismatch_is_no_embedding() {
    let two = json!({"data": [{"index": 0, "embedding": [1]}, {"index": 1, "embedding": [2]}]});
    let server = FakeServer::sequence(vec![Reply::json(two)]).await;
    let err = embedder(&server, None).embed(&inputs(&["q"]), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "embedding request returned no embedding");
    assert_eq!(err.backend(), "openai");

    let server = FakeServer::sequence(vec![Reply::json(json!({"data": [{"embedding": [1]}]}))]).await;
    let err = embedder(&server, None).embed(&inputs(&["a", "b"]), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "embedding request returned no embedding");
}

#[tokio::test]
async fn several_inputs_come_back_in_input_order() {
    let body = json!({"data": [{"index": 1, "embedding": [2.5]}, {"index": 0, "embedding": [1.5]}]});
    let server = FakeServer::sequence(vec![Reply::json(body)]).await;
    let vectors = embedder(&server, None).embed(&inputs(&["a", "b"]), &CallContext::default()).await.unwrap();
    assert_eq!(vectors, vec![vec![1.5], vec![2.5]]);
    assert_eq!(server.requests()[0].body_text(), r#"{"input":["a","b"],"model":"text-embed"}"#);
}

#[tokio::test]
async fn no_inputs_means_no_request() {
    let server = FakeServer::sequence(vec![Reply::status(500, "unused")]).await;
    let vectors = embedder(&server, None).embed(&[], &CallContext::default()).await.unwrap();
    assert!(vectors.is_empty());
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn the_key_is_redacted_from_errors() {
    let server = FakeServer::start(|r| {
        Reply::status(401, format!("Incorrect API key provided: {}", r.header("authorization").unwrap_or_default()))
    })
    .await;
    let err =
        embedder(&server, Some("sk-embed-123")).embed(&inputs(&["q"]), &CallContext::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "embedding request failed with HTTP 401: Incorrect API key provided: Bearer <redacted>"
    );
}
