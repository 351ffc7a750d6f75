//! Against a real Qdrant: `QDRANT_URL` (the gRPC endpoint, e.g.
//! `http://127.0.0.1:6334`) for one node, and `QDRANT_START` (the
//! `start.sh` of `../shared/tools/qdrant`) for the cluster test, which starts
//! three nodes of its own. `scripts/test` sets both. Without them each test
//! prints why it is skipped and passes, except under `CI=true`, where a
//! missing server is a failure.
//!
//! Loads the 89 fixture records (vectors + payload) into fresh collections,
//! flat and nested, and checks that the store's answers equal an exact
//! cosine ranking of the same records under the same filter; writes a
//! folder through the indexer's sync and searches it densely and
//! lexically; checks the term counts and the named files the server answers
//! against the embedded store's over the same records; and kills a node of
//! a three-node cluster during searches.

mod grpc_fake;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use qdrant_client::Qdrant;
use qdrant_client::qdrant::{CreateCollectionBuilder, Distance, PointStruct, UpsertPointsBuilder, VectorParamsBuilder};
use rr_core::retrieval::LexicalQuery;
use rr_core::traits::TermStatistics;
use rr_core::{CallContext, Chunk, Embedder, IndexStore, PathGlob, SearchFilter, VectorQuery, VectorStore};
use rr_indexer::{Build, Identity, IndexOptions, SyncOptions, sync_build};
use rr_qdrant::{
    DEFAULT_DENSE_VECTOR, DEFAULT_SPARSE_VECTOR, PayloadLayout, QdrantIndex, QdrantStore, RetryPolicy, TERMS_KEY,
    Target, WriteTarget, point_uuid,
};
use serde_json::{Map, Value};

/// Whether a missing server must fail the test rather than skip it.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn from_env(name: &str, what: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            assert!(!in_ci(), "CI=true but {name} is not set: {what} (scripts/test starts one)");
            eprintln!("skipped: {name} is not set ({what})");
            None
        }
    }
}

fn qdrant_url() -> Option<String> {
    from_env("QDRANT_URL", "no Qdrant server to test against")
}

fn client(url: &str) -> Qdrant {
    Qdrant::from_url(url).skip_compatibility_check().build().expect("client")
}

fn fixture() -> Vec<Value> {
    rr_testkit::fixture_records().to_vec()
}

use rr_testkit::record_embedding as embedding;

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
    let client = client(&url);
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
            Target {
                collection: collection.into(),
                vector_name: None,
                sparse_vector_name: None,
                layout: layout.clone(),
            },
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
            let mut seen = HashSet::new();
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
        sparse_vector_name: None,
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

/// The records of `root` as the indexer builds them for acme/widgets@main.
fn build(root: &Path) -> (Build, Identity) {
    let identity = Identity::new("acme", "widgets", "main", "0123456789abcdef0123456789abcdef01234567");
    let mut options = IndexOptions::default();
    options.chunking.scheme = rr_indexer::ChunkingScheme::Semantic;
    (rr_indexer::build(root, &identity, &options).expect("build"), identity)
}

/// `build(root)` synchronised into `index` with the potion embedder, as `index --qdrant-url` writes it.
async fn sync(index: &dyn IndexStore, root: &Path) -> rr_indexer::SyncSummary {
    let (build, identity) = build(root);
    let embedder = rr_potion::PotionEmbedder::new().expect("potion");
    let opts = SyncOptions { document_prefix: String::new(), ..SyncOptions::default() };
    sync_build(index, &embedder, build, &identity, &opts).await.expect("sync")
}

fn write_target(collection: &str) -> WriteTarget {
    WriteTarget::new(collection)
}

/// A reader of what [`write_target`] writes: dense and sparse vectors.
fn reader(url: &str, collection: &str) -> QdrantStore {
    QdrantStore::new(
        client(url),
        Target {
            collection: collection.into(),
            vector_name: Some(DEFAULT_DENSE_VECTOR.into()),
            sparse_vector_name: Some(DEFAULT_SPARSE_VECTOR.into()),
            layout: PayloadLayout::default(),
        },
    )
}

async fn drop_collection(client: &Qdrant, name: &str) {
    if client.collection_exists(name).await.expect("collection_exists") {
        client.delete_collection(name).await.expect("delete_collection");
    }
}

async fn query_embedding(text: &str) -> Vec<f32> {
    let embedder = rr_potion::PotionEmbedder::new().expect("potion");
    embedder.embed(&[text.to_owned()], &CallContext::default()).await.expect("embed").remove(0)
}

#[tokio::test]
async fn the_indexer_writes_searchable_points_and_a_second_sync_writes_nothing() {
    let Some(url) = qdrant_url() else { return };
    let collection = "rr-qdrant-test-indexer";
    let admin = client(&url);
    drop_collection(&admin, collection).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("widgets");
    rr_testkit::copy_dir(&rr_testkit::corpus(), &root);
    let index = QdrantIndex::new(client(&url), write_target(collection), RetryPolicy::default());

    let first = sync(&index, &root).await;
    assert!(first.chunks_desired > 10, "{first:?}");
    assert_eq!((first.chunks_added_or_updated, first.chunks_unchanged), (first.chunks_desired, 0));
    let second = sync(&index, &root).await;
    assert_eq!(
        (second.chunks_added_or_updated, second.chunks_unchanged, second.chunks_deleted),
        (0, first.chunks_desired, 0),
        "a sync over unchanged files writes nothing"
    );

    // The points are the records: the payload the store reads, found by their record ids.
    let (built, identity) = build(&root);
    let mut listed = index.namespace_ids(&identity.namespace_id()).await.unwrap();
    listed.sort();
    let mut ids: Vec<String> = built.records.iter().map(|r| r.id.clone()).collect();
    ids.sort();
    assert_eq!(listed, ids);

    let store = reader(&url, collection);
    let ctx = CallContext::default();
    assert_eq!(store.dimension(&ctx).await.unwrap(), Some(rr_potion::DIMENSION));
    let by_point: std::collections::HashMap<String, &Chunk> =
        built.records.iter().map(|r| (point_uuid(&r.id), r)).collect();
    let filter = SearchFilter::scoped("acme", "widgets", "main", "");
    let dense = VectorQuery {
        embedding: query_embedding("load the configuration file").await,
        n_results: 5,
        filter: filter.clone(),
    };
    let got = store.query(&dense, &ctx).await.unwrap();
    assert_eq!(got.len(), 5);
    for c in &got {
        let record = by_point[&c.chunk.id];
        assert_eq!((&c.chunk.document, &c.chunk.metadata.path), (&record.document, &record.metadata.path));
        assert_eq!(c.chunk.metadata.start_line, record.metadata.start_line);
    }

    // Lexical: the sparse BM25 vector finds an identifier's chunks, each holding one of its terms.
    let lexical = store.lexical().expect("a store with a sparse vector ranks lexically");
    let holder = built.records.iter().find(|r| r.document.contains("func Load")).expect("a chunk defining Load");
    let q = LexicalQuery { text: "func Load".into(), n_results: 3, filter: filter.clone() };
    let got = lexical.lexical_query(&q, &ctx).await.unwrap();
    assert!(!got.is_empty());
    assert!(
        got.iter().any(|c| c.chunk.id == point_uuid(&holder.id)),
        "{:?}",
        got.iter().map(|c| &c.chunk.metadata.path).collect::<Vec<_>>()
    );
    for c in &got {
        let text = c.chunk.document.to_lowercase();
        assert!(text.contains("func") || text.contains("load"), "{}", c.chunk.metadata.path);
    }
    // Filters apply before the lexical ranking too.
    let q = LexicalQuery {
        text: "func Load".into(),
        n_results: 3,
        filter: SearchFilter::scoped("acme", "widgets", "main", "docs/*"),
    };
    for c in lexical.lexical_query(&q, &ctx).await.unwrap() {
        assert!(c.chunk.metadata.path.starts_with("docs/"), "{}", c.chunk.metadata.path);
    }
    let q = LexicalQuery { text: "?! ,".into(), n_results: 3, filter };
    assert!(lexical.lexical_query(&q, &ctx).await.unwrap().is_empty(), "no term, no match");

    // A deleted file's records disappear; the others stay unchanged.
    let gone = built.records.iter().find(|r| r.metadata.path.ends_with(".md")).unwrap().metadata.path.clone();
    let gone_records = built.records.iter().filter(|r| r.metadata.path == gone).count();
    std::fs::remove_file(root.join(&gone)).unwrap();
    let third = sync(&index, &root).await;
    assert_eq!(
        (third.chunks_added_or_updated, third.chunks_deleted, third.chunks_unchanged),
        (0, gone_records, first.chunks_desired - gone_records)
    );
    let listed: HashSet<String> = index.namespace_ids(&identity.namespace_id()).await.unwrap().into_iter().collect();
    assert!(built.records.iter().filter(|r| r.metadata.path == gone).all(|r| !listed.contains(&r.id)));
    drop_collection(&admin, collection).await;
}

/// Each named file's path and first line, in the order given.
fn files_and_lines(chunks: &[rr_core::Candidate]) -> Vec<(String, i64)> {
    chunks.iter().map(|c| (c.chunk.metadata.path.clone(), c.chunk.metadata.start_line)).collect()
}

#[tokio::test]
async fn term_counts_and_named_files_are_the_embedded_stores_and_follow_a_sync() {
    let Some(url) = qdrant_url() else { return };
    let collection = "rr-qdrant-test-statistics";
    let admin = client(&url);
    drop_collection(&admin, collection).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("widgets");
    rr_testkit::copy_dir(&rr_testkit::corpus(), &root);
    let index = QdrantIndex::new(client(&url), write_target(collection), RetryPolicy::default());
    let embedded = rr_embedded::EmbeddedStore::open(dir.path().join("store")).unwrap();
    let first = sync(&index, &root).await;
    assert_eq!(sync(&embedded, &root).await.chunks_desired, first.chunks_desired);

    let store = reader(&url, collection);
    let lexical = store.lexical().unwrap();
    let ctx = CallContext::default();
    let tokens: Vec<String> =
        ["config", "load", "pars", "widget", "store", "nosuchtoken"].iter().map(|t| t.to_string()).collect();
    let counted = lexical.term_statistics(&tokens, &ctx).await.unwrap().expect("the indexer's collection counts terms");
    assert_eq!(counted, embedded.term_statistics(&tokens).unwrap());
    assert_eq!(counted, TermStatistics { rows: 88, frequencies: vec![54, 5, 2, 88, 56, 0] });

    // A file the query names, with its chunks in line order; the same as the embedded store's.
    let filter = SearchFilter::scoped("acme", "widgets", "main", "");
    let query = rr_core::Query::new("the config loader config.go");
    let named = lexical.named_files(&query, &filter, &ctx).await.unwrap();
    assert_eq!(files_and_lines(&named), files_and_lines(&embedded.named_files(&query, &filter).unwrap()));
    let config = |line: i64| ("internal/config/config.go".to_owned(), line);
    assert_eq!(
        files_and_lines(&named),
        [config(1), config(11), config(18), config(24), config(32), ("config.example.yaml".to_owned(), 1)]
    );
    assert!(named.iter().all(|c| !c.chunk.metadata.extra.contains_key(TERMS_KEY)), "the term list is no metadata");
    // Filters apply: another kind of file, another repository.
    let docs = SearchFilter { kinds: vec![rr_core::PathClass::Docs], ..filter.clone() };
    assert!(lexical.named_files(&query, &docs, &ctx).await.unwrap().is_empty());
    let other = SearchFilter::scoped("acme", "gadgets", "main", "");
    assert!(lexical.named_files(&query, &other, &ctx).await.unwrap().is_empty());

    // A deleted file's chunks leave the counts and the named files.
    std::fs::remove_file(root.join("internal/config/config.go")).unwrap();
    let gone = sync(&index, &root).await.chunks_deleted;
    assert_eq!(sync(&embedded, &root).await.chunks_deleted, gone);
    let counted = lexical.term_statistics(&tokens, &ctx).await.unwrap().unwrap();
    assert_eq!(counted, embedded.term_statistics(&tokens).unwrap());
    assert_eq!(counted.rows, 88 - gone as u64);
    let named = lexical.named_files(&query, &filter, &ctx).await.unwrap();
    assert_eq!(files_and_lines(&named), [("config.example.yaml".to_owned(), 1)]);
    assert_eq!(files_and_lines(&named), files_and_lines(&embedded.named_files(&query, &filter).unwrap()));
    drop_collection(&admin, collection).await;
}

/// A collection another tool wrote, without the indexer's payload indexes,
/// answers no term statistics and no named files (rather than wrong ones).
#[tokio::test]
async fn a_collection_without_the_indexers_payload_indexes_answers_no_statistics() {
    let Some(url) = qdrant_url() else { return };
    let collection = "rr-qdrant-test-foreign-statistics";
    let admin = client(&url);
    drop_collection(&admin, collection).await;
    let records = fixture();
    load(&admin, collection, &PayloadLayout::default(), &records).await;
    let store = QdrantStore::new(
        client(&url),
        Target { collection: collection.into(), sparse_vector_name: Some("none".into()), ..Target::default() },
    );
    let lexical = store.lexical().unwrap();
    let ctx = CallContext::default();
    assert_eq!(lexical.term_statistics(&["config".into()], &ctx).await.unwrap(), None);
    let query = rr_core::Query::new("config.go");
    assert!(lexical.named_files(&query, &SearchFilter::default(), &ctx).await.unwrap().is_empty());
    drop_collection(&admin, collection).await;
}

/// Loopback ports `base + 10k + {0, 1, 2}` of `nodes` Qdrant nodes, all free now.
fn free_cluster_base(nodes: u16) -> u16 {
    for _ in 0..500 {
        let base = 20000 + (rr_testkit::free_port() % 40000);
        let ports: Vec<u16> = (0..nodes).flat_map(|k| (0..3).map(move |i| base + 10 * k + i)).collect();
        let held: Vec<_> = ports.iter().map_while(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).ok()).collect();
        if held.len() == ports.len() {
            return base;
        }
    }
    panic!("no free loopback ports for a cluster");
}

/// Nodes started by `start.sh`, stopped when dropped.
struct Cluster {
    start: PathBuf,
    dir: tempfile::TempDir,
    urls: Vec<String>,
}

impl Cluster {
    fn start(script: &Path, nodes: u16) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let base = free_cluster_base(nodes);
        let out = std::process::Command::new("bash")
            .arg(script)
            .arg(dir.path())
            .arg(nodes.to_string())
            .arg(base.to_string())
            .output()
            .expect("run start.sh");
        let urls = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
        // Built before the check, so that the nodes that did start are stopped.
        let cluster = Cluster { start: script.to_owned(), dir, urls };
        assert!(out.status.success(), "start.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        cluster
    }

    /// Kills node `k` at once (SIGKILL), as a crashed machine leaves it.
    fn kill(&self, k: usize) {
        let pid = std::fs::read_to_string(self.dir.path().join(format!("node-{k}.pid"))).unwrap();
        let status = std::process::Command::new("kill").arg("-9").arg(pid.trim()).status().unwrap();
        assert!(status.success(), "kill node {k}");
    }
}

impl Drop for Cluster {
    /// Stops the nodes and waits for them to exit before their folder is removed.
    fn drop(&mut self) {
        let pids: Vec<String> = (0..self.urls.len())
            .filter_map(|k| std::fs::read_to_string(self.dir.path().join(format!("node-{k}.pid"))).ok())
            .map(|p| p.trim().to_owned())
            .collect();
        let _ = std::process::Command::new("bash").arg(&self.start).arg(self.dir.path()).arg("stop").status();
        for pid in pids {
            for _ in 0..100 {
                let alive =
                    std::process::Command::new("kill").args(["-0", &pid]).stderr(std::process::Stdio::null()).status();
                if !alive.is_ok_and(|s| s.success()) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_answers_every_search_alike_while_a_node_is_killed() {
    let Some(script) = from_env("QDRANT_START", "no start.sh to start a Qdrant cluster with") else { return };
    let cluster = Cluster::start(Path::new(&script), 3);
    assert_eq!(cluster.urls.len(), 3, "{:?}", cluster.urls);
    let url = cluster.urls[0].clone();
    let collection = "rr-qdrant-test-cluster";

    // Three shards, two copies of each: every shard survives the loss of any one node.
    let mut target = write_target(collection);
    target.shards = Some(3);
    target.replication_factor = Some(2);
    let index = QdrantIndex::new(client(&url), target, RetryPolicy::default());
    let root = rr_testkit::corpus();
    let summary = sync(&index, &root).await;
    assert!(summary.chunks_added_or_updated > 10, "{summary:?}");

    let store = Arc::new(reader(&url, collection));
    let ctx = CallContext::default();
    let texts = [
        "load the configuration",
        "http server handler",
        "parse command line flags",
        "README",
        "validate the settings",
    ];
    let mut queries = Vec::new();
    for text in texts {
        let filter = SearchFilter::scoped("acme", "widgets", "main", "");
        queries.push((
            VectorQuery { embedding: query_embedding(text).await, n_results: 5, filter: filter.clone() },
            LexicalQuery { text: text.into(), n_results: 5, filter },
        ));
    }
    let ids = |c: Vec<rr_core::Candidate>| c.into_iter().map(|c| c.chunk.id).collect::<Vec<_>>();
    let mut before = Vec::new();
    for (dense, lexical) in &queries {
        let d = ids(store.query(dense, &ctx).await.unwrap());
        let l = ids(store.lexical().unwrap().lexical_query(lexical, &ctx).await.unwrap());
        assert_eq!(d.len(), 5);
        assert!(!l.is_empty(), "no lexical match for {:?}", lexical.text);
        before.push((d, l));
    }

    // Searches run without pause from before node 2 is killed until 40 rounds after.
    let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (under_way, first_round) = tokio::sync::oneshot::channel::<()>();
    let searching = {
        let (store, queries, before, killed) = (store.clone(), queries.clone(), before.clone(), killed.clone());
        tokio::spawn(async move {
            let ctx = CallContext::default();
            let mut under_way = Some(under_way);
            let (mut rounds, mut after_kill) = (0usize, 0usize);
            while after_kill < 40 {
                let dead = killed.load(std::sync::atomic::Ordering::SeqCst);
                for ((dense, lexical), (d, l)) in queries.iter().zip(&before) {
                    let round = format!("round {rounds} ({after_kill} after the kill), {:?}", lexical.text);
                    let got =
                        store.query(dense, &ctx).await.map_err(|e| format!("{round}: dense search failed: {e}"))?;
                    if &ids(got) != d {
                        return Err(format!("{round}: dense results changed"));
                    }
                    let got = store
                        .lexical()
                        .unwrap()
                        .lexical_query(lexical, &ctx)
                        .await
                        .map_err(|e| format!("{round}: lexical search failed: {e}"))?;
                    if &ids(got) != l {
                        return Err(format!("{round}: lexical results changed"));
                    }
                }
                rounds += 1;
                after_kill += usize::from(dead);
                if let Some(signal) = under_way.take() {
                    let _ = signal.send(());
                }
            }
            Ok::<(usize, usize), String>((rounds, after_kill))
        })
    };
    // Kill once searching is under way.
    let _ = first_round.await;
    cluster.kill(2);
    killed.store(true, std::sync::atomic::Ordering::SeqCst);
    let (rounds, after_kill) = searching.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    assert!(rounds > after_kill, "searches ran before the kill too ({rounds} rounds in all)");
    // And after the searches: the survivors still answer as before.
    for ((dense, _), (d, _)) in queries.iter().zip(&before) {
        assert_eq!(&ids(store.query(dense, &ctx).await.unwrap()), d);
    }
}
