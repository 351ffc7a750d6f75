//! Chroma's v2 REST API as the tests use it: collections (re)created exactly as the reference indexer
//! creates them, loaded with the fixture records, counted, read and deleted; and the [`Fixture`], a
//! test binary's Chroma, embed server and fixture collection.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::fixture::fixture_records;
use crate::services::{chroma, embed_server, init_once, panic_message};

/// Default tenant and database of a fresh Chroma.
pub const TENANT: &str = "default_tenant";
pub const DATABASE: &str = "default_database";
/// The collection that [`fixture()`] loads once per test binary.
pub const FIXTURE_COLLECTION: &str = "acme-widgets";

/// `<chroma>/api/v2/tenants/<tenant>/databases/<database>/collections`.
pub fn collections_url(chroma_url: &str, tenant: &str, database: &str) -> String {
    format!("{chroma_url}/api/v2/tenants/{tenant}/databases/{database}/collections")
}

/// Sends `req`, panics on a failure status; the JSON answer (`Null` for an empty body).
pub async fn send_json(req: reqwest::RequestBuilder, what: &str) -> Value {
    let resp = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let status = resp.status();
    let body = resp.text().await.unwrap_or_else(|e| panic!("{what}: reading body: {e}"));
    assert!(status.is_success(), "{what}: HTTP {status}: {body}");
    if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{what}: {e}: {body}"))
    }
}
/// Creates a tenant and a database in it (either may already exist).
pub async fn create_tenant_database(chroma_url: &str, tenant: &str, database: &str) {
    let client = reqwest::Client::new();
    let resp = client.post(format!("{chroma_url}/api/v2/tenants")).json(&json!({"name": tenant})).send().await;
    let resp = resp.expect("create tenant");
    assert!(resp.status().is_success() || resp.status() == 409, "create tenant {tenant}: HTTP {}", resp.status());
    let resp = client
        .post(format!("{chroma_url}/api/v2/tenants/{tenant}/databases"))
        .json(&json!({"name": database}))
        .send()
        .await
        .expect("create database");
    assert!(resp.status().is_success() || resp.status() == 409, "create database {database}: HTTP {}", resp.status());
}

/// Deletes a collection by name in the default tenant/database; a missing one is fine.
pub async fn delete_collection(chroma_url: &str, name: &str) {
    delete_collection_in(chroma_url, TENANT, DATABASE, name).await
}

pub async fn delete_collection_in(chroma_url: &str, tenant: &str, database: &str, name: &str) {
    let url = format!("{}/{name}", collections_url(chroma_url, tenant, database));
    let resp = reqwest::Client::new().delete(url).send().await.expect("delete collection");
    let status = resp.status();
    assert!(status.is_success() || status == 404, "delete collection {name}: HTTP {status}");
}

/// (Re)creates `name` as the reference indexer does and adds `records` exactly as given; returns its id.
///
/// `chromadb-repo-indexer` calls `get_or_create_collection(name, embedding_function=<its own class>)`
/// with no metadata, so the Python client sends the configuration `{"embedding_function":
/// {"type": "legacy"}}` and Chroma picks its default HNSW space, `l2`. We send the same, which gives
/// a collection whose configuration and schema are identical to the indexer's.
pub async fn load_records_in(chroma_url: &str, tenant: &str, database: &str, name: &str, records: &[Value]) -> String {
    delete_collection_in(chroma_url, tenant, database, name).await;
    let client = reqwest::Client::new();
    let base = collections_url(chroma_url, tenant, database);
    let created = send_json(
        client.post(&base).json(&json!({
            "name": name,
            "configuration": {"embedding_function": {"type": "legacy"}},
            "get_or_create": false,
        })),
        &format!("create collection {name}"),
    )
    .await;
    let id = created["id"].as_str().unwrap_or_else(|| panic!("create collection {name}: no id in {created}"));
    for batch in records.chunks(100) {
        let payload = json!({
            "ids": batch.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(),
            "documents": batch.iter().map(|r| r["document"].clone()).collect::<Vec<_>>(),
            "metadatas": batch.iter().map(|r| r["metadata"].clone()).collect::<Vec<_>>(),
            "embeddings": batch.iter().map(|r| r["embedding"].clone()).collect::<Vec<_>>(),
        });
        send_json(client.post(format!("{base}/{id}/add")).json(&payload), &format!("add records to {name}")).await;
    }
    id.to_string()
}

/// [`load_records_in`] in the default tenant and database.
pub async fn load_records(chroma_url: &str, name: &str, records: &[Value]) -> String {
    load_records_in(chroma_url, TENANT, DATABASE, name, records).await
}

/// (Re)creates `collection_name` with all 89 fixture records; returns the collection id.
pub async fn load_fixture(chroma_url: &str, collection_name: &str) -> String {
    load_records(chroma_url, collection_name, fixture_records()).await
}

/// (Re)creates `collection_name` with the fixture records that `keep` selects; returns the id.
pub async fn load_fixture_subset(chroma_url: &str, collection_name: &str, keep: impl Fn(&Value) -> bool) -> String {
    let subset: Vec<Value> = fixture_records().iter().filter(|r| keep(r)).cloned().collect();
    load_records(chroma_url, collection_name, &subset).await
}

/// `GET .../collections/<id>/count`.
pub async fn collection_count(chroma_url: &str, collection_id: &str) -> u64 {
    let url = format!("{}/{collection_id}/count", collections_url(chroma_url, TENANT, DATABASE));
    let v = send_json(reqwest::Client::new().get(url), "count").await;
    v.as_u64().unwrap_or_else(|| panic!("count: not a number: {v}"))
}

/// `POST .../collections/<id>/get` with `include` (e.g. `["documents","metadatas","embeddings"]`).
pub async fn collection_get(chroma_url: &str, collection_id: &str, include: &[&str]) -> Value {
    let url = format!("{}/{collection_id}/get", collections_url(chroma_url, TENANT, DATABASE));
    send_json(reqwest::Client::new().post(url).json(&json!({"include": include})), "get records").await
}

/// `POST .../collections/<id>/query` for one embedding, as the reference server sends it.
pub async fn chroma_query(chroma_url: &str, collection_id: &str, embedding: &[f64], n_results: u32) -> Value {
    let url = format!("{}/{collection_id}/query", collections_url(chroma_url, TENANT, DATABASE));
    let body = json!({
        "query_embeddings": [embedding],
        "n_results": n_results,
        "include": ["documents", "metadatas", "distances"],
    });
    send_json(reqwest::Client::new().post(url).json(&body), "query").await
}

/// Chroma, the embed server and the 89 fixture records in [`FIXTURE_COLLECTION`], set up once per
/// test binary. Tests that change or delete collections should use their own names instead.
#[derive(Debug)]
pub struct Fixture {
    pub chroma_url: String,
    pub embed_url: String,
    pub collection: String,
    pub collection_id: String,
}

/// The shared [`Fixture`] of this test binary (the services' logs go into `log_dir`); callable from
/// sync and async tests alike.
pub fn fixture(log_dir: &Path) -> &'static Fixture {
    static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
    init_once(&FIXTURE, "the fixture", || {
        let chroma_url = chroma(log_dir).url().to_string();
        let embed_url = embed_server(log_dir).url().to_string();
        // Load on a thread of its own with its own runtime: this may be called inside any runtime.
        let url = chroma_url.clone();
        let collection_id = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(load_fixture(&url, FIXTURE_COLLECTION))
        })
        .join()
        .unwrap_or_else(|p| panic!("loading the fixture collection failed: {}", panic_message(p.as_ref())));
        Fixture { chroma_url, embed_url, collection: FIXTURE_COLLECTION.to_string(), collection_id }
    })
}
