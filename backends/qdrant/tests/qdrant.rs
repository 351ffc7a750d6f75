//! Against a real Qdrant, only when `QDRANT_URL` (the gRPC endpoint, e.g.
//! `http://127.0.0.1:6334`) is set; otherwise each test prints why it is
//! skipped and passes. Loads the 89 fixture records (vectors + payload) into
//! fresh collections, flat and nested, and checks that the store's answers
//! equal an exact cosine ranking of the same records under the same filter.

mod grpc_fake;

use std::sync::Arc;

use qdrant_client::Qdrant;
use qdrant_client::qdrant::{CreateCollectionBuilder, Distance, PointStruct, UpsertPointsBuilder, VectorParamsBuilder};
use rr_core::{CallContext, Chunk, PathGlob, SearchFilter, VectorQuery, VectorStore};
use rr_qdrant::{PayloadLayout, QdrantStore, RetryPolicy, Target};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

fn qdrant_url() -> Option<String> {
    match std::env::var("QDRANT_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped: QDRANT_URL is not set (no Qdrant server to test against)");
            None
        }
    }
}

fn fixture() -> Vec<Value> {
    rr_testkit::fixture_records().to_vec()
}

use rr_testkit::record_embedding as embedding;

/// A stable UUID for a record id (Qdrant ids are UUIDs or integers).
fn point_uuid(id: &str) -> String {
    let h = Sha256::digest(id.as_bytes());
    let x: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &x[0..8], &x[8..12], &x[12..16], &x[16..20], &x[20..32])
}

fn payload(record: &Value, layout: &PayloadLayout) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert(layout.document_key.clone(), record["document"].clone());
    match &layout.metadata_key {
        None => p.extend(record["metadata"].as_object().unwrap().clone()),
        Some(k) => {
            p.insert(k.clone(), record["metadata"].clone());
        }
    }
    p
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

async fn load(client: &Qdrant, name: &str, layout: &PayloadLayout, records: &[Value]) {
    if client.collection_exists(name).await.expect("collection_exists") {
        client.delete_collection(name).await.expect("delete_collection");
    }
    let dim = embedding(&records[0]).len() as u64;
    client
        .create_collection(
            CreateCollectionBuilder::new(name).vectors_config(VectorParamsBuilder::new(dim, Distance::Cosine)),
        )
        .await
        .expect("create_collection");
    let points: Vec<PointStruct> = records
        .iter()
        .map(|r| PointStruct::new(point_uuid(r["id"].as_str().unwrap()), embedding(r), payload(r, layout)))
        .collect();
    client.upsert_points(UpsertPointsBuilder::new(name, points).wait(true)).await.expect("upsert_points");
}

#[tokio::test]
async fn results_equal_an_exact_cosine_ranking_with_the_same_filters() {
    let Some(url) = qdrant_url() else { return };
    let client = Qdrant::from_url(&url).skip_compatibility_check().build().expect("client");
    let records = fixture();
    let by_uuid: std::collections::HashMap<String, &Value> =
        records.iter().map(|r| (point_uuid(r["id"].as_str().unwrap()), r)).collect();
    for (collection, layout) in [
        ("rr-qdrant-test-flat", PayloadLayout::default()),
        ("rr-qdrant-test-nested", PayloadLayout { document_key: "text".into(), metadata_key: Some("meta".into()) }),
    ] {
        load(&client, collection, &layout, &records).await;
        let store = QdrantStore::new(
            Qdrant::from_url(&url).skip_compatibility_check().build().expect("client"),
            Target { collection: collection.into(), vector_name: None, layout: layout.clone() },
        );
        let ctx = CallContext::default();
        assert_eq!(store.dimension(&ctx).await.unwrap(), Some(embedding(&records[0]).len()));
        for (probe, n, org, repo, branch, glob) in [
            (0, 5, "acme", "widgets", "main", ""),
            (3, 8, "acme", "widgets", "", "docs/*"),
            (10, 4, "", "", "", "**/*.go"),
            (20, 3, "acme", "widgets", "main", "docs/café.md"),
            (30, 5, "acme", "widgets", "main", "/README.md"),
            (40, 2, "acme", "widgets", "main", "internal/*/config.g?"),
            (50, 89, "acme", "widgets", "main", "**/*"),
            (60, 5, "other", "widgets", "main", ""),
        ] {
            let q = VectorQuery {
                embedding: embedding(&records[probe]),
                n_results: n,
                filter: SearchFilter::scoped(org, repo, branch, glob),
            };
            let got = store.query(&q, &ctx).await.unwrap_or_else(|e| panic!("{collection} {glob:?}: {e}"));
            let mut expected: Vec<(f64, &Value)> = records
                .iter()
                .filter(|r| q.filter.matches(&serde_json::from_value::<Chunk>((*r).clone()).unwrap()))
                .map(|r| (cosine(&q.embedding, &embedding(r)), r))
                .collect();
            expected.sort_by(|a, b| b.0.total_cmp(&a.0));
            expected.truncate(n);
            assert_eq!(got.len(), expected.len(), "{collection} {glob:?}: result count");
            let mut seen = std::collections::HashSet::new();
            for (i, (c, (score, _))) in got.iter().zip(&expected).enumerate() {
                assert!(seen.insert(c.chunk.id.clone()), "duplicate {}", c.chunk.id);
                let record = by_uuid[&c.chunk.id];
                let chunk: Chunk = serde_json::from_value(record.clone()).unwrap();
                assert_eq!((&c.chunk.document, &c.chunk.metadata), (&chunk.document, &chunk.metadata));
                assert!(q.filter.matches(&c.chunk), "{collection} {glob:?}: result {i} fails the filter");
                // Equal up to ties: the i-th result has the i-th exact score.
                let s = cosine(&q.embedding, &embedding(record));
                assert!(
                    (s - score).abs() < 1e-4,
                    "{collection} {glob:?}: rank {i} has score {s}, exact ranking {score}"
                );
            }
        }
        client.delete_collection(collection).await.expect("delete_collection");
    }
}

fn fake_point(i: usize, path: &str) -> qdrant_client::qdrant::ScoredPoint {
    let payload = serde_json::json!({
        "document": format!("Source: acme/widgets@main:{path}\nType: text\n\nbody {i}"),
        "organization": "acme", "repository": "widgets", "branch": "main", "path": path, "start_line": i,
    });
    qdrant_client::qdrant::ScoredPoint {
        id: Some((i as u64).into()),
        payload: payload.as_object().unwrap().clone().into_iter().map(|(k, v)| (k, v.into())).collect(),
        score: 1.0 - i as f32 / 1000.0,
        ..Default::default()
    }
}

/// Through the registry's factory and the real gRPC client: what goes over the wire, paging, mapping, errors.
#[tokio::test]
async fn grpc_fake_records_the_requests_of_a_paged_glob_search() {
    use qdrant_client::qdrant::condition::ConditionOneOf;
    use qdrant_client::qdrant::r#match::MatchValue;

    // 150 points, closest first; only points 70 and 140 are Go files.
    let points =
        (0..150).map(|i| fake_point(i, if i % 70 == 0 && i > 0 { "cmd/main.go" } else { "docs/a.md" })).collect();
    let fake = Arc::new(grpc_fake::Fake { points, dimension: 256, ..Default::default() });
    let url = grpc_fake::start(fake.clone()).await;

    let mut ctx = rr_core::FactoryContext::new("test");
    ctx.env = Arc::new(|n| (n == "QDRANT_KEY").then(|| "k3y".to_owned()));
    let registry = rr_core::Registry::builtin().unwrap();
    let config = serde_json::json!({"url": url, "collection": "acme-widgets", "api_key_env": "QDRANT_KEY", "vector_name": "code"});
    let store = registry.store("qdrant", &config, &ctx).unwrap();
    let call = CallContext::default();
    assert_eq!(store.dimension(&call).await.unwrap(), None, "a named vector absent from the collection has no size");
    let config_unnamed = serde_json::json!({"url": url, "collection": "acme-widgets"});
    assert_eq!(registry.store("qdrant", &config_unnamed, &ctx).unwrap().dimension(&call).await.unwrap(), Some(256));

    let q = VectorQuery {
        embedding: vec![0.25, 0.5],
        n_results: 2,
        filter: SearchFilter {
            organization: "acme".into(),
            repository: "widgets".into(),
            branch: "main".into(),
            path: PathGlob::new("**/*.go"),
            ..Default::default()
        },
    };
    let got = store.query(&q, &call).await.unwrap();
    let ids: Vec<&str> = got.iter().map(|c| c.chunk.id.as_str()).collect();
    assert_eq!(ids, ["70", "140"]);
    assert_eq!(got[0].chunk.metadata.path, "cmd/main.go");
    assert_eq!(got[0].chunk.metadata.start_line, 70);
    assert!(got[0].chunk.document.starts_with("Source: acme/widgets@main:cmd/main.go\n"));

    let requests = fake.requests.lock().unwrap().clone();
    let pages: Vec<_> = requests.iter().map(|(r, _)| (r.offset, r.limit)).collect();
    assert_eq!(pages, [(None, Some(64)), (Some(64), Some(64)), (Some(128), Some(64))]);
    for (r, key) in &requests {
        assert_eq!(key.as_deref(), Some("k3y"));
        assert_eq!(r.collection_name, "acme-widgets");
        assert_eq!(r.using.as_deref(), Some("code"));
        assert_eq!(r.with_payload, Some(true.into()));
        let musts: Vec<(String, String)> = r
            .filter
            .as_ref()
            .unwrap()
            .must
            .iter()
            .map(|c| match c.condition_one_of.as_ref().unwrap() {
                ConditionOneOf::Field(f) => match f.r#match.as_ref().unwrap().match_value.as_ref().unwrap() {
                    MatchValue::Keyword(k) => (f.key.clone(), k.clone()),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        let expected: Vec<(String, String)> = [("organization", "acme"), ("repository", "widgets"), ("branch", "main")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(musts, expected);
    }
    drop(requests);

    // An exact path: one request of n, the path as a payload condition.
    fake.requests.lock().unwrap().clear();
    let exact =
        VectorQuery { filter: SearchFilter { path: PathGlob::new("/cmd/main.go"), ..Default::default() }, ..q.clone() };
    let got = store.query(&exact, &call).await.unwrap();
    assert_eq!(got.len(), 2, "the fake does not filter: the server-side condition is trusted");
    let requests = fake.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!((requests[0].0.offset, requests[0].0.limit), (None, Some(2)));
    assert_eq!(requests[0].0.filter.as_ref().unwrap().must.len(), 1);

    // Errors name the operation; the store names itself.
    let broken = registry.store("qdrant", &serde_json::json!({"url": url, "collection": "broken"}), &ctx).unwrap();
    let err = broken.query(&q, &call).await.unwrap_err();
    assert_eq!(err.backend(), "qdrant");
    assert!(err.to_string().starts_with("Qdrant query failed: "), "{err}");
    assert!(err.to_string().contains("Collection `broken` doesn't exist!"), "{err}");
}

#[tokio::test]
async fn transient_failures_are_retried_and_permanent_ones_are_not() {
    use std::time::Duration;
    use tonic::Status;

    let points = (0..3).map(|i| fake_point(i, "docs/a.md")).collect();
    let fake = Arc::new(grpc_fake::Fake { points, dimension: 2, ..Default::default() });
    let url = grpc_fake::start(fake.clone()).await;
    let target = |collection: &str| Target {
        collection: collection.into(),
        vector_name: None,
        layout: PayloadLayout::default(),
    };
    let store = |attempts, collection: &str| {
        let client = Qdrant::from_url(&url).skip_compatibility_check().build().unwrap();
        let policy = RetryPolicy { attempts, base: Duration::from_millis(1) };
        QdrantStore::with_retry(client, target(collection), policy)
    };
    let q = VectorQuery { embedding: vec![0.5, 0.5], n_results: 2, filter: SearchFilter::default() };
    let call = CallContext::default();

    // Two failures a later attempt cures, then an answer: three requests, one result. (UNAVAILABLE
    // is left out: the client already repeats it once itself, on a new connection.)
    *fake.failures.lock().unwrap() = vec![Status::deadline_exceeded("slow"), Status::aborted("conflict")];
    let got = store(3, "c").query(&q, &call).await.unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(fake.requests.lock().unwrap().len(), 3);

    // Out of attempts: the last failure is reported.
    fake.requests.lock().unwrap().clear();
    *fake.failures.lock().unwrap() = vec![Status::resource_exhausted("second"), Status::aborted("first")];
    let err = store(2, "c").query(&q, &call).await.unwrap_err();
    assert!(err.to_string().starts_with("Qdrant query failed: "), "{err}");
    assert!(err.to_string().contains("second"), "{err}");
    assert_eq!(fake.requests.lock().unwrap().len(), 2);

    // A missing collection does not get better by asking again.
    fake.requests.lock().unwrap().clear();
    fake.failures.lock().unwrap().clear();
    let err = store(5, "broken").query(&q, &call).await.unwrap_err();
    assert!(err.to_string().contains("Collection `broken` doesn't exist!"), "{err}");
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}

#[test]
fn retry_delays_double_up_to_sixteen_times_the_base_and_honour_retry_after() {
    use std::time::Duration;
    let p = RetryPolicy::default();
    let ms = |d: Duration| d.as_millis();
    let delays: Vec<u128> = (1..=7).map(|a| ms(p.delay(a, None))).collect();
    assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
    assert_eq!(ms(p.delay(1, Some(Duration::from_secs(3)))), 3000);
    assert_eq!(ms(p.delay(1, Some(Duration::from_secs(60)))), 8000);
    assert_eq!(ms(p.delay(3, Some(Duration::from_millis(10)))), 2000);
}
