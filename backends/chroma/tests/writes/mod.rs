//! The write side against a scripted fake Chroma: the exact requests of a
//! namespace listing, a collection creation, an upsert and a delete, the
//! batch limit, and errors.

use std::sync::{Arc, Mutex};

use rr_chroma::DEFAULT_MAX_BATCH_SIZE;
use rr_core::{Chunk, EmbeddedChunk, IndexStore, Metadata};
use rr_http::test_util::{FakeServer, Recorded, Reply};
use serde_json::{Value, json};

use super::fake_store;

const COLLECTIONS: &str = "/api/v2/tenants/tenant/databases/database/collections";
const LOOKUP: &str = "/api/v2/tenants/tenant/databases/database/collections/repository-content";
const PRE_FLIGHT: &str = "/api/v2/pre-flight-checks";

fn op(id: &str, operation: &str) -> String {
    format!("{COLLECTIONS}/{id}/{operation}")
}

fn paths(server: &FakeServer) -> Vec<String> {
    server.requests().into_iter().map(|r| format!("{} {}", r.method, r.path)).collect()
}

/// A Chroma whose collection `c1` holds `ids` in namespace `ns1`, answering
/// `get` pages by their `limit` and `offset`.
async fn chroma_with(ids: Vec<String>, max_batch: Value) -> FakeServer {
    FakeServer::start(move |r: &Recorded| match r.path.as_str() {
        PRE_FLIGHT => Reply::json(json!({"max_batch_size": max_batch, "supports_base64_encoding": true})),
        LOOKUP => Reply::json(json!({"id": "c1", "name": "repository-content"})),
        p if p == op("c1", "get") => {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            let (offset, limit) = (body["offset"].as_u64().unwrap() as usize, body["limit"].as_u64().unwrap() as usize);
            let page: Vec<&String> = ids.iter().skip(offset).take(limit).collect();
            Reply::json(json!({"ids": page, "embeddings": null, "documents": null, "metadatas": null, "include": []}))
        }
        p if p == op("c1", "upsert") => Reply::json(json!({})),
        p if p == op("c1", "delete") => Reply::json(json!({"deleted": 2})),
        _ => Reply::status(404, r#"{"error":"NotFoundError"}"#),
    })
    .await
}

fn record(id: &str, path: &str, embedding: Vec<f32>) -> EmbeddedChunk {
    EmbeddedChunk {
        chunk: Chunk {
            id: id.into(),
            document: format!("Source: acme/widgets@main:{path}\nType: code\n\nfn a() {{ x < y }}"),
            metadata: Metadata {
                schema_version: 1,
                namespace_id: "ns1".into(),
                organization: "acme".into(),
                repository: "widgets".into(),
                branch: "main".into(),
                path: path.into(),
                file_name: path.rsplit('/').next().unwrap().into(),
                file_extension: ".rs".into(),
                file_type: "code".into(),
                language: "rust".into(),
                document_id: "repodoc:v1:ns1:p".into(),
                file_hash: "fh".into(),
                chunk_hash: "ch".into(),
                chunk_index: 0,
                chunk_count: 2,
                chunking_strategy: "code".into(),
                chunking_version: 2,
                start_line: 1,
                end_line: 12,
                section: "".into(),
                symbol: "a".into(),
                indexed_commit_sha: "".into(),
                extra: [("not_in_schema".to_owned(), json!("dropped"))].into_iter().collect(),
            },
        },
        embedding,
    }
}

#[tokio::test]
async fn namespace_ids_are_paged_with_an_eq_filter_and_no_include() {
    let ids: Vec<String> = (0..5).map(|i| format!("id-{i}")).collect();
    let server = chroma_with(ids.clone(), json!(3)).await;
    let store = fake_store(&server, None, 1).with_page_size(2);
    assert_eq!(store.max_batch_size(), DEFAULT_MAX_BATCH_SIZE, "before the pre-flight request");
    assert_eq!(store.namespace_ids("ns1").await.unwrap(), ids);
    assert_eq!(store.max_batch_size(), 3, "from the pre-flight checks");
    assert_eq!(
        paths(&server),
        [
            format!("GET {PRE_FLIGHT}"),
            format!("GET {LOOKUP}"),
            format!("POST {}", op("c1", "get")),
            format!("POST {}", op("c1", "get")),
            format!("POST {}", op("c1", "get")),
        ]
    );
    let bodies: Vec<String> = server.requests().iter().skip(2).map(Recorded::body_text).collect();
    assert_eq!(
        bodies,
        [
            r#"{"where":{"namespace_id":{"$eq":"ns1"}},"limit":2,"offset":0,"include":[]}"#,
            r#"{"where":{"namespace_id":{"$eq":"ns1"}},"limit":2,"offset":2,"include":[]}"#,
            r#"{"where":{"namespace_id":{"$eq":"ns1"}},"limit":2,"offset":4,"include":[]}"#,
        ]
    );
    assert_eq!(server.requests()[2].header("content-type"), Some("application/json"));

    // A second listing asks the pre-flight checks no more but looks the
    // collection up again; a full last page costs one empty page more.
    let store = store.with_page_size(5);
    assert_eq!(store.namespace_ids("ns1").await.unwrap().len(), 5);
    let later: Vec<String> = paths(&server).into_iter().skip(5).collect();
    assert_eq!(
        later,
        [format!("GET {LOOKUP}"), format!("POST {}", op("c1", "get")), format!("POST {}", op("c1", "get"))]
    );
}

#[tokio::test]
async fn the_batch_limit_falls_back_to_100() {
    for reply in [
        Reply::json(json!({"supports_base64_encoding": true})),
        Reply::json(json!({"max_batch_size": -1})),
        Reply::status(404, "not found"),
    ] {
        let server = FakeServer::start(move |r: &Recorded| {
            if r.path == PRE_FLIGHT { reply.clone() } else { Reply::json(json!({"id": "c1", "ids": []})) }
        })
        .await;
        let store = fake_store(&server, None, 1);
        assert!(store.namespace_ids("ns1").await.unwrap().is_empty());
        assert_eq!(store.max_batch_size(), 100);
    }
}

#[tokio::test]
async fn a_failing_pre_flight_request_fails_the_listing() {
    let server = FakeServer::start(|_| Reply::status(503, "overloaded")).await;
    let store = fake_store(&server, None, 3);
    let err = store.namespace_ids("ns1").await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma maximum batch size lookup failed with HTTP 503: overloaded");
    assert_eq!(err.backend(), "chroma");
    assert_eq!(server.request_count(), 3, "retried like every backend call");
    assert_eq!(store.max_batch_size(), 100);
}

#[tokio::test]
async fn a_missing_collection_is_an_empty_namespace_and_is_not_created() {
    let server = FakeServer::start(|r: &Recorded| {
        if r.path == PRE_FLIGHT {
            Reply::json(json!({"max_batch_size": 5461}))
        } else {
            Reply::status(
                404,
                r#"{"error":"NotFoundError","message":"Collection [repository-content] does not exist"}"#,
            )
        }
    })
    .await;
    let store = fake_store(&server, None, 1);
    assert!(store.namespace_ids("ns1").await.unwrap().is_empty());
    store.delete(&["gone".to_owned()]).await.unwrap();
    store.delete(&[]).await.unwrap();
    store.upsert(&[]).await.unwrap();
    assert_eq!(paths(&server), [format!("GET {PRE_FLIGHT}"), format!("GET {LOOKUP}"), format!("GET {LOOKUP}")]);
    assert_eq!(store.cached_collection_id(), None);
}

#[tokio::test]
async fn the_first_upsert_creates_the_collection_as_the_reference_does() {
    let server = FakeServer::start(|r: &Recorded| {
        if r.path == COLLECTIONS {
            Reply::json(json!({"id": "c9", "name": "repository-content"}))
        } else {
            Reply::json(json!({}))
        }
    })
    .await;
    let store = fake_store(&server, None, 1);
    store.upsert(&[record("r1", "src/a.rs", vec![0.5, 1.0, -0.25])]).await.unwrap();
    store.upsert(&[record("r2", "src/b.rs", vec![0.0, 1.0, 0.0])]).await.unwrap();
    assert_eq!(
        paths(&server),
        [format!("POST {COLLECTIONS}"), format!("POST {}", op("c9", "upsert")), format!("POST {}", op("c9", "upsert"))]
    );
    assert_eq!(
        server.requests()[0].body_text(),
        r#"{"name":"repository-content","metadata":null,"configuration":{"hnsw":null,"spann":null,"embedding_function":{"type":"legacy"}},"schema":null,"get_or_create":true}"#
    );
    assert_eq!(store.cached_collection_id().as_deref(), Some("c9"));
}

#[tokio::test]
async fn an_upsert_sends_ids_embeddings_documents_and_the_22_metadata_fields() {
    let server = chroma_with(Vec::new(), json!(100)).await;
    let store = fake_store(&server, None, 1);
    store.namespace_ids("ns1").await.unwrap();
    store
        .upsert(&[record("r1", "src/a.rs", vec![0.5, 1.0, -0.25]), record("r2", "b.rs", vec![0.1, 0.0, 3e-8])])
        .await
        .unwrap();
    let upsert = server.requests().pop().unwrap();
    assert_eq!(upsert.path, op("c1", "upsert"), "the listed collection is reused, nothing is created");
    let metadata = |path: &str, name: &str| {
        format!(
            concat!(
                r#"{{"schema_version":1,"namespace_id":"ns1","organization":"acme","repository":"widgets","branch":"main","#,
                r#""path":"{}","file_name":"{}","file_extension":".rs","file_type":"code","language":"rust","#,
                r#""document_id":"repodoc:v1:ns1:p","file_hash":"fh","chunk_hash":"ch","chunk_index":0,"chunk_count":2,"#,
                r#""chunking_strategy":"code","chunking_version":2,"start_line":1,"end_line":12,"section":"","symbol":"a","#,
                r#""indexed_commit_sha":""}}"#
            ),
            path, name
        )
    };
    let expected = format!(
        concat!(
            r#"{{"ids":["r1","r2"],"embeddings":[[0.5,1.0,-0.25],[0.1,0.0,3e-8]],"#,
            r#""documents":["Source: acme/widgets@main:src/a.rs\nType: code\n\nfn a() {{ x < y }}","#,
            r#""Source: acme/widgets@main:b.rs\nType: code\n\nfn a() {{ x < y }}"],"#,
            r#""metadatas":[{},{}]}}"#
        ),
        metadata("src/a.rs", "a.rs"),
        metadata("b.rs", "b.rs")
    );
    assert_eq!(upsert.json(), serde_json::from_str::<Value>(&expected).unwrap());
    let parsed: Value = serde_json::from_slice(&upsert.body).unwrap();
    for m in parsed["metadatas"].as_array().unwrap() {
        assert_eq!(m.as_object().unwrap().len(), 22);
        assert!(m["chunk_count"].is_i64() && m["schema_version"].is_i64());
    }
}

#[tokio::test]
async fn a_delete_sends_the_ids() {
    let server = chroma_with(Vec::new(), json!(100)).await;
    let store = fake_store(&server, None, 1);
    store.delete(&["a".to_owned(), "b".to_owned()]).await.unwrap();
    assert_eq!(paths(&server), [format!("GET {LOOKUP}"), format!("POST {}", op("c1", "delete"))]);
    assert_eq!(server.requests()[1].body_text(), r#"{"ids":["a","b"]}"#);
}

#[tokio::test]
async fn a_failed_upsert_names_the_operation_after_retries_and_hides_the_token() {
    let upserts = Arc::new(Mutex::new(0));
    let count = upserts.clone();
    let server = FakeServer::start(move |r: &Recorded| {
        if r.path == LOOKUP {
            return Reply::json(json!({"id": "c1"}));
        }
        if r.path == PRE_FLIGHT || r.path.ends_with("/get") {
            return Reply::json(json!({"max_batch_size": 10, "ids": []}));
        }
        *count.lock().unwrap() += 1;
        Reply::status(500, format!("boom for {}", r.header("authorization").unwrap_or_default()))
    })
    .await;
    let store = fake_store(&server, Some("chroma-secret"), 3);
    store.namespace_ids("ns1").await.unwrap();
    let err = store.upsert(&[record("r1", "a.rs", vec![1.0])]).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma upsert failed with HTTP 500: boom for Bearer <redacted>");
    assert_eq!(*upserts.lock().unwrap(), 3);
    let err = store.delete(&["r1".to_owned()]).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma delete failed with HTTP 500: boom for Bearer <redacted>");
    for r in server.requests() {
        assert_eq!(r.header("authorization"), Some("Bearer chroma-secret"), "{}", r.path);
        assert_eq!(r.header("user-agent"), Some("repo-retriever/test"));
    }
}

#[tokio::test]
async fn a_non_finite_embedding_is_refused_before_sending() {
    let server = chroma_with(Vec::new(), json!(100)).await;
    let store = fake_store(&server, None, 1);
    let err = store.upsert(&[record("r1", "a.rs", vec![1.0, f32::INFINITY])]).await.unwrap_err();
    assert_eq!(err.to_string(), "Chroma upsert: encode request: non-finite value inf in a vector");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn the_whole_collection_is_read_page_by_page_without_a_filter() {
    let server = FakeServer::start(|r: &Recorded| match r.path.as_str() {
        LOOKUP => Reply::json(json!({"id": "c1", "name": "repository-content"})),
        p if p == op("c1", "get") => {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            let offset = body["offset"].as_u64().unwrap() as usize;
            let ids: Vec<String> = (offset..3.min(offset + 2)).map(|i| format!("id-{i}")).collect();
            let documents: Vec<Value> =
                ids.iter().map(|i| if i == "id-1" { Value::Null } else { json!(format!("doc {i}")) }).collect();
            let metadatas: Vec<Value> = ids.iter().map(|_| json!({"path": "a.rs", "start_line": 3})).collect();
            Reply::json(json!({"ids": ids, "documents": documents, "metadatas": metadatas}))
        }
        _ => Reply::status(404, r#"{"error":"NotFoundError"}"#),
    })
    .await;
    let store = fake_store(&server, Some("tok"), 1).with_page_size(2);
    let records = store.all_records().await.unwrap().unwrap();
    let ids: Vec<&str> = records.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["id-0", "id-1", "id-2"]);
    assert_eq!(records[0].document, "doc id-0");
    assert_eq!(records[1].document, "", "a null document reads as empty");
    assert_eq!((records[2].metadata.path.as_str(), records[2].metadata.start_line), ("a.rs", 3));
    let bodies: Vec<String> = server.requests().iter().skip(1).map(Recorded::body_text).collect();
    assert_eq!(
        bodies,
        [
            r#"{"limit":2,"offset":0,"include":["documents","metadatas"]}"#,
            r#"{"limit":2,"offset":2,"include":["documents","metadatas"]}"#,
        ]
    );
    assert!(server.requests().iter().all(|r| r.header("authorization") == Some("Bearer tok")));
    assert_eq!(store.all_ids().await.unwrap().unwrap(), ids);
    assert_eq!(server.requests().last().unwrap().body_text(), r#"{"limit":2,"offset":2,"include":[]}"#);

    let missing = FakeServer::start(|_| Reply::status(404, r#"{"error":"NotFoundError"}"#)).await;
    assert_eq!(fake_store(&missing, None, 1).all_records().await.unwrap(), None);
}
