//! Request construction, payload mapping and the paging logic, against a
//! fake page source that ranks the fixture records by exact cosine.

use std::sync::Mutex;

use qdrant_client::qdrant::condition::ConditionOneOf;
use qdrant_client::qdrant::query::Variant as QueryVariant;
use qdrant_client::qdrant::vector_input::Variant as InputVariant;
use qdrant_client::qdrant::with_payload_selector::SelectorOptions;
use rr_core::{FactoryContext, FactoryError};
use serde_json::json;

use super::*;

fn fixture() -> Vec<Value> {
    rr_testkit::fixture_records().to_vec()
}

use rr_testkit::record_embedding as embedding;

/// A record's payload in the given layout.
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

fn query(embedding: Vec<f32>, n: usize, org: &str, repo: &str, branch: &str, path: &str) -> VectorQuery {
    VectorQuery { embedding, n_results: n, filter: SearchFilter::scoped(org, repo, branch, path) }
}

/// The `(key, keyword)` pairs of a `must`-only filter.
fn musts(filter: &Filter) -> Vec<(String, String)> {
    assert!(filter.should.is_empty() && filter.must_not.is_empty() && filter.min_should.is_none());
    filter
        .must
        .iter()
        .map(|c| match c.condition_one_of.as_ref().unwrap() {
            ConditionOneOf::Field(f) => match f.r#match.as_ref().unwrap().match_value.as_ref().unwrap() {
                MatchValue::Keyword(k) => (f.key.clone(), k.clone()),
                other => panic!("not a keyword match: {other:?}"),
            },
            other => panic!("not a field condition: {other:?}"),
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn target(layout: PayloadLayout) -> Target {
    Target { collection: "acme-widgets".into(), vector_name: None, sparse_vector_name: None, layout }
}

#[test]
fn source_with_and_without_branch_becomes_must_keyword_matches() {
    let layout = PayloadLayout::default();
    let f = build_filter(&query(vec![1.0], 5, "acme", "widgets", "main", "").filter, &layout).unwrap();
    assert_eq!(musts(&f), pairs(&[("organization", "acme"), ("repository", "widgets"), ("branch", "main")]));
    let f = build_filter(&query(vec![1.0], 5, "acme", "widgets", "", "").filter, &layout).unwrap();
    assert_eq!(musts(&f), pairs(&[("organization", "acme"), ("repository", "widgets")]));
    assert!(build_filter(&SearchFilter::default(), &layout).is_none());

    let nested = PayloadLayout { document_key: "text".into(), metadata_key: Some("meta".into()) };
    let f = build_filter(&query(vec![1.0], 5, "acme", "widgets", "", "docs/a.md").filter, &nested).unwrap();
    assert_eq!(
        musts(&f),
        pairs(&[("meta.organization", "acme"), ("meta.repository", "widgets"), ("meta.path", "docs/a.md")])
    );
}

#[test]
fn values_with_whitespace_stay_exact_keyword_matches() {
    let f =
        build_filter(&query(vec![1.0], 5, "acme", "", "feature x", "my docs/a b.md").filter, &PayloadLayout::default())
            .unwrap();
    assert_eq!(musts(&f), pairs(&[("organization", "acme"), ("branch", "feature x"), ("path", "my docs/a b.md")]));
}

#[test]
fn path_globs_of_seed_000() {
    let layout = PayloadLayout::default();
    let case = |glob: &str| {
        let q = query(vec![1.0], 5, "acme", "widgets", "main", glob);
        let conditions = musts(&build_filter(&q.filter, &layout).unwrap());
        let path_condition = conditions.iter().find(|(k, _)| k == "path").map(|(_, v)| v.clone());
        (path_condition, local_glob(&q.filter).map(|g| g.pattern().to_owned()), page_size(&q))
    };
    // Wildcards: no server-side path condition, filtered locally over pages.
    assert_eq!(case("docs/*"), (None, Some("docs/*".into()), MIN_PAGE_SIZE));
    assert_eq!(case("**/*.go"), (None, Some("**/*.go".into()), MIN_PAGE_SIZE));
    assert_eq!(case("config?.yaml"), (None, Some("config?.yaml".into()), MIN_PAGE_SIZE));
    // Exact paths: a keyword match on `path`, leading `/` dropped, UTF-8 kept, one page of n.
    assert_eq!(case("/README.md"), (Some("README.md".into()), None, 5));
    assert_eq!(case("docs/café.md"), (Some("docs/café.md".into()), None, 5));
    // No path at all.
    assert_eq!(case("/"), (None, None, 5));
    // Large n: the page grows with it.
    assert_eq!(page_size(&query(vec![1.0], 50, "", "", "", "*.go")), 200);
}

#[test]
fn request_fields() {
    let q = query(vec![0.5, -1.0], 7, "acme", "widgets", "", "");
    let r = target(PayloadLayout::default()).request(&q, 0, 7);
    assert_eq!(r.collection_name, "acme-widgets");
    assert_eq!(r.limit, Some(7));
    assert_eq!(r.offset, None);
    assert_eq!(r.using, None);
    assert_eq!(r.with_payload, Some(true.into()));
    assert_eq!(r.with_vectors, Some(false.into()));
    assert!(r.score_threshold.is_none() && r.prefetch.is_empty());
    match r.query.unwrap().variant.unwrap() {
        QueryVariant::Nearest(input) => match input.variant.unwrap() {
            InputVariant::Dense(d) => assert_eq!(d.data, vec![0.5, -1.0]),
            other => panic!("not dense: {other:?}"),
        },
        other => panic!("not nearest: {other:?}"),
    }

    let nested = Target {
        collection: "c".into(),
        vector_name: Some("code".into()),
        sparse_vector_name: None,
        layout: PayloadLayout { document_key: "text".into(), metadata_key: Some("meta".into()) },
    };
    let r = nested.request(&q, 64, 64);
    assert_eq!((r.offset, r.limit, r.using.as_deref()), (Some(64), Some(64), Some("code")));
    match r.with_payload.unwrap().selector_options.unwrap() {
        SelectorOptions::Include(i) => assert_eq!(i.fields, ["text", "meta"]),
        other => panic!("not an include list: {other:?}"),
    }
}

#[test]
fn fixture_payloads_map_to_chunks_flat_and_nested() {
    for layout in
        [PayloadLayout::default(), PayloadLayout { document_key: "text".into(), metadata_key: Some("metadata".into()) }]
    {
        for (i, record) in fixture().iter().enumerate() {
            let point = ScoredPoint {
                id: Some(PointId::from(i as u64)),
                payload: payload(record, &layout).into_iter().map(|(k, v)| (k, v.into())).collect(),
                score: 0.25,
                ..Default::default()
            };
            let c = candidate(point, &layout);
            let expected: Chunk = serde_json::from_value(record.clone()).unwrap();
            assert_eq!(c.chunk.id, i.to_string());
            assert_eq!(c.chunk.document, expected.document);
            assert_eq!(c.chunk.metadata, expected.metadata, "record {i}");
            assert!(c.chunk.metadata.extra.is_empty());
            assert_eq!(c.distance, Some(-0.25));
        }
    }
}

#[test]
fn odd_payloads_read_leniently() {
    let layout = PayloadLayout { document_key: "document".into(), metadata_key: Some("m".into()) };
    let c = layout.chunk("u".into(), json!({"document": 3, "m": "x"}).as_object().unwrap().clone());
    assert_eq!(c, Chunk { id: "u".into(), ..Default::default() });
    let flat = PayloadLayout::default();
    let c = flat.chunk("u".into(), json!({"document": "d", "path": "a.go", "extra": 1}).as_object().unwrap().clone());
    assert_eq!((c.document.as_str(), c.metadata.path.as_str()), ("d", "a.go"));
    assert_eq!(c.metadata.extra.get("extra"), Some(&json!(1)));
    assert_eq!(
        point_id_string(Some(&PointId::from("6f1c2a3e-0000-4000-8000-000000000001".to_owned()))),
        "6f1c2a3e-0000-4000-8000-000000000001"
    );
    assert_eq!(point_id_string(None), "");
}

/// Ranks the fixture by exact cosine, honouring only the `must` keyword
/// conditions (as Qdrant would), and records every request.
struct FakeQdrant {
    records: Vec<Value>,
    layout: PayloadLayout,
    requests: Mutex<Vec<QueryPoints>>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

impl FakeQdrant {
    fn new(layout: PayloadLayout) -> Self {
        FakeQdrant { records: fixture(), layout, requests: Mutex::new(Vec::new()) }
    }
}

#[async_trait]
impl PageSource for FakeQdrant {
    async fn page(&self, request: QueryPoints) -> Result<Vec<ScoredPoint>, BackendError> {
        self.requests.lock().unwrap().push(request.clone());
        let vector = match request.query.and_then(|q| q.variant) {
            Some(QueryVariant::Nearest(input)) => match input.variant {
                Some(InputVariant::Dense(d)) => d.data,
                _ => return Err(BackendError::new("fake", "not dense")),
            },
            _ => return Err(BackendError::new("fake", "not nearest")),
        };
        let conditions = request.filter.as_ref().map(musts).unwrap_or_default();
        let mut scored: Vec<(f32, usize)> = self
            .records
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                conditions.iter().all(|(k, v)| {
                    let field = k.rsplit('.').next().unwrap();
                    r["metadata"][field].as_str() == Some(v.as_str())
                })
            })
            .map(|(i, r)| (cosine(&vector, &embedding(r)), i))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let offset = request.offset.unwrap_or(0) as usize;
        let limit = request.limit.unwrap() as usize;
        Ok(scored
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|(score, i)| ScoredPoint {
                id: Some(PointId::from(i as u64)),
                payload: payload(&self.records[i], &self.layout).into_iter().map(|(k, v)| (k, v.into())).collect(),
                score,
                ..Default::default()
            })
            .collect())
    }
}

/// The exact answer: every fixture record that passes the whole filter, by cosine.
fn expected(q: &VectorQuery) -> Vec<String> {
    let records = fixture();
    let mut scored: Vec<(f32, usize)> = records
        .iter()
        .enumerate()
        .filter(|(_, r)| q.filter.matches(&serde_json::from_value::<Chunk>((*r).clone()).unwrap()))
        .map(|(i, r)| (cosine(&q.embedding, &embedding(r)), i))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(q.n_results).map(|(_, i)| i.to_string()).collect()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn local_glob_filtering_pages_until_enough_matches() {
    let records = fixture();
    for layout in
        [PayloadLayout::default(), PayloadLayout { document_key: "text".into(), metadata_key: Some("meta".into()) }]
    {
        let t = target(layout.clone());
        for (probe, n, branch, glob) in [
            (0, 5, "main", "docs/*"),
            (10, 3, "", "**/*.go"),
            (20, 10, "main", "*.md"),
            (30, 4, "main", "config?.yaml"),
            (35, 4, "main", "internal/*/config.g?"),
            (40, 89, "", "**/*"),
            (50, 2, "main", "/README.md"),
            (60, 5, "main", "docs/café.md"),
            (70, 5, "main", ""),
            (5, 1, "", "no/such/*"),
        ] {
            let q = query(embedding(&records[probe]), n, "acme", "widgets", branch, glob);
            let fake = FakeQdrant::new(layout.clone());
            let got: Vec<String> =
                block_on(run_query(&fake, &t, &q)).unwrap().into_iter().map(|c| c.chunk.id).collect();
            assert_eq!(got, expected(&q), "glob {glob:?} n={n}");
            assert!(!got.is_empty() || ["no/such/*", "config?.yaml"].contains(&glob), "{glob:?}: a vacuous case");
            let requests = fake.requests.lock().unwrap();
            if local_glob(&q.filter).is_none() {
                assert_eq!(requests.len(), 1, "{glob:?}: one request when the server filters everything");
            } else {
                // Pages are contiguous and in order.
                for (i, r) in requests.iter().enumerate() {
                    assert_eq!(r.offset.unwrap_or(0), (i * MIN_PAGE_SIZE.max(4 * n)) as u64);
                }
            }
        }
    }
}

#[test]
fn a_narrow_glob_beyond_the_first_page_is_not_lost() {
    // Find a probe and a file whose nearest chunk ranks past the first page of
    // 64: a ranking-then-filtering store would return nothing for it.
    let records = fixture();
    let found = (0..records.len()).find_map(|probe| {
        let ranking = expected(&query(embedding(&records[probe]), 89, "", "", "", ""));
        let rank_of = |path: &str| {
            ranking.iter().position(|id| records[id.parse::<usize>().unwrap()]["metadata"]["path"] == path).unwrap()
        };
        records
            .iter()
            .map(|r| r["metadata"]["path"].as_str().unwrap())
            .find(|p| rank_of(p) >= MIN_PAGE_SIZE)
            .map(|p| (probe, p.to_owned()))
    });
    let (probe, path) = found.expect("the fixture has a file ranked past the first page for some probe");
    let glob = format!("*{}", &path[1..]);
    let q = query(embedding(&records[probe]), 1, "", "", "", &glob);
    let fake = FakeQdrant::new(PayloadLayout::default());
    let got: Vec<String> = block_on(run_query(&fake, &target(PayloadLayout::default()), &q))
        .unwrap()
        .into_iter()
        .map(|c| c.chunk.id)
        .collect();
    assert_eq!(got, expected(&q));
    assert_eq!(got.len(), 1);
    let offsets: Vec<_> = fake.requests.lock().unwrap().iter().map(|r| (r.offset, r.limit)).collect();
    assert_eq!(offsets, [(None, Some(64)), (Some(64), Some(64))]);
}

#[test]
fn registry_builds_and_rejects_unknown_keys() {
    use rr_core::Registry;
    let registry = Registry::builtin().unwrap();
    assert!(registry.names(rr_core::PluginKind::Store).contains(&"qdrant"));
    let mut ctx = FactoryContext::new("t");
    ctx.env = std::sync::Arc::new(|n| (n == "QKEY").then(|| "s3cret".to_owned()));
    let store = registry
        .store(
            "qdrant",
            &json!({"url": "http://127.0.0.1:6334", "collection": "c", "api_key_env": "QKEY",
                    "document_key": "text", "metadata_key": "meta", "vector_name": "v"}),
            &ctx,
        )
        .unwrap();
    assert_eq!(store.name(), "qdrant");
    let err = registry
        .store("qdrant", &json!({"url": "http://x:6334", "collection": "c", "colection": 1}), &ctx)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "store \"qdrant\": unknown field `colection`, expected one of `url`, `collection`, `api_key_env`, `document_key`, `metadata_key`, `vector_name`, `sparse_vector_name`"
    );
    let err = registry
        .store("qdrant", &json!({"url": "http://x:6334", "collection": "c", "api_key_env": "NOPE"}), &ctx)
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "store \"qdrant\": api_key_env: environment variable NOPE is not set or empty");
    let s: registry::Settings = FactoryError::parse(&json!({"url": "u", "collection": "c"})).unwrap();
    assert_eq!(
        s.target(),
        Target {
            collection: "c".into(),
            vector_name: None,
            sparse_vector_name: None,
            layout: PayloadLayout::default()
        }
    );
}

#[test]
fn kinds_are_checked_locally_page_after_page() {
    let records = fixture();
    let layout = PayloadLayout::default();
    for (probe, n, kinds) in [(0, 3, vec![rr_core::PathClass::Docs]), (10, 5, vec![rr_core::PathClass::Source])] {
        let mut q = query(embedding(&records[probe]), n, "acme", "widgets", "main", "");
        q.filter.kinds = kinds.clone();
        assert!(filters_locally(&q.filter));
        let fake = FakeQdrant::new(layout.clone());
        let got: Vec<String> =
            block_on(run_query(&fake, &target(layout.clone()), &q)).unwrap().into_iter().map(|c| c.chunk.id).collect();
        assert!(!got.is_empty(), "{kinds:?}: a vacuous case");
        assert_eq!(got, expected(&q), "{kinds:?}");
        assert_eq!(fake.requests.lock().unwrap()[0].limit, Some(MIN_PAGE_SIZE as u64));
    }
}

#[test]
fn languages_become_a_match_any_condition() {
    let filter = SearchFilter { languages: vec!["go".into(), "rust".into()], ..Default::default() };
    let built =
        build_filter(&filter, &PayloadLayout { document_key: "text".into(), metadata_key: Some("meta".into()) })
            .unwrap();
    match built.must[0].condition_one_of.as_ref().unwrap() {
        ConditionOneOf::Field(f) => {
            assert_eq!(f.key, "meta.language");
            match f.r#match.as_ref().unwrap().match_value.as_ref().unwrap() {
                MatchValue::Keywords(k) => assert_eq!(k.strings, ["go", "rust"]),
                other => panic!("not a match any: {other:?}"),
            }
        }
        other => panic!("not a field condition: {other:?}"),
    }
    assert!(!filters_locally(&filter), "the server applies it");
}

#[test]
fn a_lexical_request_ranks_by_the_named_sparse_vector() {
    let t = Target {
        sparse_vector_name: Some("bm25".into()),
        vector_name: Some("dense".into()),
        ..target(PayloadLayout::default())
    };
    let terms = sparse::query_vector("loadConfig");
    let r = t.ranked_request(&Ranking::Sparse(terms.clone()), &SearchFilter::scoped("acme", "widgets", "", ""), 0, 10);
    assert_eq!(r.using.as_deref(), Some("bm25"));
    assert_eq!(musts(r.filter.as_ref().unwrap()), pairs(&[("organization", "acme"), ("repository", "widgets")]));
    match r.query.unwrap().variant.unwrap() {
        QueryVariant::Nearest(input) => match input.variant.unwrap() {
            InputVariant::Sparse(s) => {
                assert_eq!(s.indices, terms.iter().map(|t| t.0).collect::<Vec<_>>());
                assert!(s.values.iter().all(|v| *v == 1.0));
            }
            other => panic!("not sparse: {other:?}"),
        },
        other => panic!("not nearest: {other:?}"),
    }
}
