//! ChromaStore against a scripted fake Chroma: the exact request bytes, the
//! headers, and the collection-id cache under failures. Searching a real
//! Chroma is tested with the server.
//!
//! The write side (`IndexStore`) has two modules of this one test binary:
//! `writes` against the fake Chroma, `real_chroma` against a real Chroma
//! 1.5.9 started by the test.

mod real_chroma;
mod writes;

use std::sync::{Arc, Mutex};

use rr_chroma::{ChromaConfig, ChromaStore};
use rr_core::{CallContext, SearchFilter, VectorQuery, VectorStore};
use rr_http::test_util::{FakeServer, Recorded, Reply, instant_client, settings};
use serde_json::json;

const LOOKUP: &str = "/api/v2/tenants/tenant/databases/database/collections/repository-content";

fn query_path(id: &str) -> String {
    format!("/api/v2/tenants/tenant/databases/database/collections/{id}/query")
}

/// A store over the fake's `tenant/database/repository-content`, trying each call `attempts` times
/// without back-off (the write tests in `writes` use it too).
fn fake_store(server: &FakeServer, token: Option<&str>, attempts: u32) -> ChromaStore {
    ChromaStore::new(
        ChromaConfig {
            server_url: server.url().to_owned(),
            tenant: "tenant".into(),
            database: "database".into(),
            collection_name: "repository-content".into(),
            bearer_token: token.map(str::to_owned),
        },
        instant_client(settings(attempts)),
    )
}

fn store(server: &FakeServer, token: Option<&str>) -> ChromaStore {
    fake_store(server, token, 1)
}

fn one_result() -> serde_json::Value {
    json!({
        "ids": [["record-id"]],
        "documents": [["Source: Acme/widgets@main:config.go\n\nconfiguration"]],
        "metadatas": [[{"organization": "Acme", "repository": "widgets", "branch": "main", "path": "config.go"}]],
        "distances": [[0.25]],
    })
}

/// A Chroma whose collection has id `id` and answers every query with one result.
async fn chroma(id: &'static str) -> FakeServer {
    FakeServer::start(move |r: &Recorded| {
        if r.path == LOOKUP {
            Reply::json(json!({"id": id, "name": "repository-content"}))
        } else if r.path == query_path(id) {
            Reply::json(one_result())
        } else {
            Reply::status(404, "not found")
        }
    })
    .await
}

fn query(filter: SearchFilter) -> VectorQuery {
    VectorQuery { embedding: vec![0.5, 1.0, -0.25], n_results: 15, filter }
}

fn source(org: &str, repo: &str, branch: &str, path: &str) -> SearchFilter {
    SearchFilter::scoped(org, repo, branch, path)
}

#[tokio::test]
async fn single_clause_body_bytes() {
    let server = chroma("c1").await;
    let results =
        store(&server, None).query(&query(source("Acme", "", "", "")), &CallContext::default()).await.unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].chunk.id, "record-id");
    assert_eq!(results[0].chunk.metadata.path, "config.go");
    assert_eq!(results[0].distance, Some(0.25));
    let requests = server.requests();
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].path, LOOKUP);
    assert_eq!(requests[1].path, query_path("c1"));
    assert_eq!(
        requests[1].json(),
        parse(
            r#"{"query_embeddings":[[0.5,1.0,-0.25]],"n_results":15,"where":{"organization":{"$eq":"Acme"}},"include":["documents","metadatas","distances"]}"#
        )
    );
}

#[tokio::test]
async fn and_clause_and_where_document_body_bytes() {
    let server = chroma("c1").await;
    let filter = source("Acme", "widgets", "main", "internal/*.go");
    store(&server, None).query(&query(filter), &CallContext::default()).await.unwrap();
    assert_eq!(
        server.requests()[1].json(),
        parse(concat!(
            r#"{"query_embeddings":[[0.5,1.0,-0.25]],"n_results":15,"#,
            r#""where":{"$and":[{"organization":{"$eq":"Acme"}},{"repository":{"$eq":"widgets"}},{"branch":{"$eq":"main"}}]},"#,
            r#""where_document":{"$regex":"^Source: [^\\n]+:internal/.*\\.go(?:\\n|$)"},"#,
            r#""include":["documents","metadatas","distances"]}"#
        ))
    );
}

#[tokio::test]
async fn no_filter_sends_neither_where_key() {
    let server = chroma("c1").await;
    store(&server, None).query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    assert_eq!(
        server.requests()[1].json(),
        parse(
            r#"{"query_embeddings":[[0.5,1.0,-0.25]],"n_results":15,"include":["documents","metadatas","distances"]}"#
        )
    );
    // `&`, `<` and `>` reach Chroma as those characters, however the JSON escapes them.
    store(&server, None).query(&query(source("", "", "", "a&b<c>.md")), &CallContext::default()).await.unwrap();
    assert_eq!(
        server.requests()[3].json()["where_document"],
        json!({"$regex": "^Source: [^\\n]+:a&b<c>\\.md(?:\\n|$)"})
    );
}

/// A request body as the JSON value the store compares it with.
fn parse(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn path_segments_are_escaped() {
    let server = FakeServer::start(|_| Reply::json(json!({"id": "id/with space"}))).await;
    let store = ChromaStore::new(
        ChromaConfig {
            server_url: server.url().to_owned(),
            tenant: "my tenant".into(),
            database: "db/x".into(),
            collection_name: "repo@main".into(),
            bearer_token: None,
        },
        instant_client(settings(1)),
    );
    let _ = store.query(&query(SearchFilter::default()), &CallContext::default()).await;
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths[0], "/api/v2/tenants/my%20tenant/databases/db%2Fx/collections/repo@main");
    assert_eq!(paths[1], "/api/v2/tenants/my%20tenant/databases/db%2Fx/collections/id%2Fwith%20space/query");
}

#[tokio::test]
async fn configured_token_wins_over_the_incoming_header() {
    let server = chroma("c1").await;
    let ctx = CallContext { authorization: Some("Bearer incoming".into()) };
    store(&server, Some("chroma-secret")).query(&query(SearchFilter::default()), &ctx).await.unwrap();
    for r in server.requests() {
        assert_eq!(r.header("authorization"), Some("Bearer chroma-secret"));
        assert_eq!(r.header("user-agent"), Some("repo-retriever/test"));
    }
}

#[tokio::test]
async fn the_incoming_header_is_passed_through_verbatim_without_a_token() {
    let server = chroma("c1").await;
    let ctx = CallContext { authorization: Some("Basic dXNlcjpwYXNz".into()) };
    store(&server, None).query(&query(SearchFilter::default()), &ctx).await.unwrap();
    store(&server, None).query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), Some("Basic dXNlcjpwYXNz"));
    assert_eq!(requests[1].header("authorization"), Some("Basic dXNlcjpwYXNz"));
    assert_eq!(requests[2].header("authorization"), None);
}

#[tokio::test]
async fn the_collection_id_is_cached() {
    let server = chroma("c1").await;
    let store = store(&server, None);
    for _ in 0..3 {
        store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    }
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec![LOOKUP.to_owned(), query_path("c1"), query_path("c1"), query_path("c1")]);
    assert_eq!(store.cached_collection_id().as_deref(), Some("c1"));
}

#[tokio::test]
async fn a_recreated_collection_is_found_again() {
    let current = Arc::new(Mutex::new("old-id"));
    let state = current.clone();
    let server = FakeServer::start(move |r: &Recorded| {
        let id = *state.lock().unwrap();
        if r.path == LOOKUP {
            Reply::json(json!({"id": id}))
        } else if r.path == query_path(id) {
            Reply::json(one_result())
        } else {
            Reply::status(404, r#"{"error":"NotFoundError","message":"Collection does not exist"}"#)
        }
    })
    .await;
    let store = store(&server, None);
    store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    *current.lock().unwrap() = "new-id";
    let results = store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    assert_eq!(results.len(), 1);
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        vec![LOOKUP.to_owned(), query_path("old-id"), query_path("old-id"), LOOKUP.to_owned(), query_path("new-id")]
    );
    assert_eq!(store.cached_collection_id().as_deref(), Some("new-id"));
}

#[tokio::test]
async fn an_unchanged_id_returns_the_original_query_error() {
    let queries = Arc::new(Mutex::new(0));
    let count = queries.clone();
    let server = FakeServer::start(move |r: &Recorded| {
        if r.path == LOOKUP {
            return Reply::json(json!({"id": "c1"}));
        }
        let mut n = count.lock().unwrap();
        *n += 1;
        if *n == 1 { Reply::json(one_result()) } else { Reply::status(400, "bad where clause") }
    })
    .await;
    let store = store(&server, None);
    store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    let err = store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma query failed with HTTP 400: bad where clause");
    assert_eq!(err.backend(), "chroma");
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec![LOOKUP.to_owned(), query_path("c1"), query_path("c1"), LOOKUP.to_owned()]);
}

#[tokio::test]
async fn a_failing_relookup_returns_the_lookup_error() {
    let expired = Arc::new(Mutex::new(false));
    let state = expired.clone();
    let server = FakeServer::start(move |r: &Recorded| {
        if *state.lock().unwrap() {
            Reply::status(401, "token expired")
        } else if r.path == LOOKUP {
            Reply::json(json!({"id": "c1"}))
        } else {
            Reply::json(one_result())
        }
    })
    .await;
    let store = store(&server, None);
    store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap();
    *expired.lock().unwrap() = true;
    let err = store.query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma collection lookup failed with HTTP 401: token expired");
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec![LOOKUP.to_owned(), query_path("c1"), query_path("c1"), LOOKUP.to_owned()]);
    assert_eq!(store.cached_collection_id(), None, "a failed lookup leaves nothing cached");
}

#[tokio::test]
async fn a_fresh_id_is_not_looked_up_twice() {
    let server = FakeServer::start(|r: &Recorded| {
        if r.path == LOOKUP { Reply::json(json!({"id": "c1"})) } else { Reply::status(500, "internal") }
    })
    .await;
    let err = store(&server, None).query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma query failed with HTTP 500: internal");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_lookup_without_an_id_is_an_error() {
    for body in [json!({"name": "repository-content"}), json!({"id": ""}), json!({"id": null}), json!(null)] {
        let server = FakeServer::start(move |_| Reply::json(body.clone())).await;
        let err =
            store(&server, None).query(&query(SearchFilter::default()), &CallContext::default()).await.unwrap_err();
        assert_eq!(err.to_string(), "Chroma collection lookup returned no collection ID");
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn a_non_finite_embedding_fails_to_encode() {
    let server = chroma("c1").await;
    let mut q = query(SearchFilter::default());
    q.embedding[1] = f32::NAN;
    let err = store(&server, None).query(&q, &CallContext::default()).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma query: encode request: non-finite value NaN in a vector");
    assert_eq!(server.request_count(), 1, "the lookup ran, the query was never sent");
}

#[tokio::test]
async fn the_configured_token_is_redacted_from_errors() {
    let server = FakeServer::start(|r: &Recorded| {
        Reply::status(403, format!("forbidden for {}", r.header("authorization").unwrap_or_default()))
    })
    .await;
    let err = store(&server, Some("chroma-secret"))
        .query(&query(SearchFilter::default()), &CallContext::default())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Chroma collection lookup failed with HTTP 403: forbidden for Bearer <redacted>");
}
