//! Self-test of the integration-test harness, independent of our server: a real Chroma and the embed
//! server come up, the fixture records load exactly as given, and a query embedded by the embed server
//! finds the right file through Chroma's own REST API.

use crate::support;

use serde_json::{Value, json};

#[tokio::test]
async fn fixture_loads_into_real_chroma_and_embed_server_finds_config_go() {
    let chroma = support::chroma();
    let embed = support::embed_server();
    let id = support::load_fixture(chroma.url(), "harness-selftest").await;
    assert_eq!(support::collection_count(chroma.url(), &id).await, support::FIXTURE_RECORDS as u64);

    let embedding = support::embed_query(embed.url(), "where is the configuration loaded and validated").await;
    assert_eq!(embedding.len(), 256);
    let res = support::chroma_query(chroma.url(), &id, &embedding, 5).await;
    let paths: Vec<&str> =
        res["metadatas"][0].as_array().expect("metadatas").iter().map(|m| m["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"internal/config/config.go"), "top 5 paths: {paths:?}");

    // Loading again under the same name replaces the collection instead of adding to it.
    let again = support::load_fixture(chroma.url(), "harness-selftest").await;
    assert_ne!(again, id);
    assert_eq!(support::collection_count(chroma.url(), &again).await, support::FIXTURE_RECORDS as u64);
    support::delete_collection(chroma.url(), "harness-selftest").await;
}

#[tokio::test]
async fn records_are_stored_exactly_as_given() {
    let fixture = support::fixture();
    let got =
        support::collection_get(&fixture.chroma_url, &fixture.collection_id, &["documents", "metadatas", "embeddings"])
            .await;
    let ids = got["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), support::FIXTURE_RECORDS);
    for record in support::fixture_records() {
        let i = ids.iter().position(|id| id == &record["id"]).unwrap_or_else(|| panic!("missing {}", record["id"]));
        assert_eq!(got["documents"][i], record["document"], "document of {}", record["id"]);
        assert_eq!(got["metadatas"][i], record["metadata"], "metadata of {}", record["id"]);
        let stored = got["embeddings"][i].as_array().expect("embedding");
        let given = record["embedding"].as_array().expect("embedding");
        assert_eq!(stored.len(), given.len());
        for (s, g) in stored.iter().zip(given) {
            // Chroma stores f32: the given values round-trip through f32 exactly.
            assert_eq!(s.as_f64().unwrap() as f32, g.as_f64().unwrap() as f32, "embedding of {}", record["id"]);
        }
    }
}

#[tokio::test]
async fn collection_matches_the_reference_indexer_configuration() {
    let fixture = support::fixture();
    let url = format!(
        "{}/{}",
        support::collections_url(&fixture.chroma_url, support::TENANT, support::DATABASE),
        fixture.collection
    );
    let col: Value = reqwest::get(url).await.expect("GET collection").json().await.expect("collection JSON");
    assert_eq!(col["id"], json!(fixture.collection_id));
    assert_eq!(col["configuration_json"]["hnsw"]["space"], json!("l2"));
    assert_eq!(col["configuration_json"]["embedding_function"], json!({"type": "legacy"}));
}

#[tokio::test]
async fn subset_and_other_tenants_load_and_delete() {
    let chroma = support::chroma();
    let id = support::load_fixture_subset(chroma.url(), "harness-subset", |r| {
        r["metadata"]["path"].as_str().is_some_and(|p| p.starts_with("docs/"))
    })
    .await;
    let expected = support::fixture_records()
        .iter()
        .filter(|r| r["metadata"]["path"].as_str().unwrap().starts_with("docs/"))
        .count();
    assert!(expected > 0);
    assert_eq!(support::collection_count(chroma.url(), &id).await, expected as u64);
    support::delete_collection(chroma.url(), "harness-subset").await;
    support::delete_collection(chroma.url(), "harness-subset").await; // a missing one is fine

    support::create_tenant_database(chroma.url(), "harness_tenant", "harness_db").await;
    support::create_tenant_database(chroma.url(), "harness_tenant", "harness_db").await; // idempotent
    let records = &support::fixture_records()[..3];
    let id = support::load_records_in(chroma.url(), "harness_tenant", "harness_db", "harness-other", records).await;
    let url = format!("{}/harness-other", support::collections_url(chroma.url(), "harness_tenant", "harness_db"));
    let col: Value = reqwest::get(url).await.expect("GET collection").json().await.expect("collection JSON");
    assert_eq!(col["id"], json!(id));
    support::delete_collection_in(chroma.url(), "harness_tenant", "harness_db", "harness-other").await;
}

#[tokio::test]
async fn embed_server_reports_health() {
    let health = support::embed_health(support::embed_server().url()).await;
    assert_eq!(health["status"], json!("ok"));
    assert_eq!(health["dim"], json!(256));
}
