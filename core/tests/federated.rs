//! Several stores searched as one (`SearchEngine::federated`): one embedding
//! per distinct embedder, reciprocal-rank fusion, failing and slow stores
//! skipped, only the stores that can hold the source asked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rr_core::federated::{FederatedStore, SourcePattern, fuse, merge_rankings, skipped_line};
use rr_core::traits::{HybridInputs, TermStatistics};
use rr_core::{
    BackendError, CallContext, Candidate, Chunk, DistanceKind, Embedder, Metadata, RerankOptions, SearchArgs,
    SearchEngine, SearchOutcome, SearchRequest, VectorQuery, VectorStore,
};

struct CountingEmbedder(Mutex<usize>, usize);
#[async_trait]
impl Embedder for CountingEmbedder {
    fn name(&self) -> &str {
        "counting"
    }
    async fn embed(&self, inputs: &[String], _: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        *self.0.lock().unwrap() += 1;
        Ok(inputs.iter().map(|_| vec![0.5; self.1]).collect())
    }
}

enum Behaviour {
    List(Vec<Candidate>),
    Fail(&'static str),
    Hang,
}
struct FakeStore(Behaviour, Option<usize>);
#[async_trait]
impl VectorStore for FakeStore {
    fn name(&self) -> &str {
        "fake"
    }
    async fn query(&self, q: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        match &self.0 {
            Behaviour::List(l) => Ok(l.iter().take(q.n_results).cloned().collect()),
            Behaviour::Fail(m) => Err(BackendError::new("fake", *m)),
            Behaviour::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Vec::new())
            }
        }
    }
    async fn dimension(&self, _: &CallContext) -> Result<Option<usize>, BackendError> {
        Ok(self.1)
    }
}

fn cand(id: &str) -> Candidate {
    Candidate {
        chunk: Chunk {
            id: id.into(),
            document: format!("Source: o/r@b:{id}.rs\n\nbody {id}"),
            metadata: Metadata {
                organization: "o".into(),
                repository: "r".into(),
                branch: "b".into(),
                path: format!("{id}.rs"),
                ..Default::default()
            },
        },
        distance: Some(0.1),
    }
}

fn store(name: &str, b: Behaviour, e: &Arc<dyn Embedder>) -> FederatedStore {
    let mut s = FederatedStore::new(name, Arc::new(FakeStore(b, None)), e.clone());
    // A store that answers at once never comes near it, even on a loaded machine; one that
    // hangs is cut at it.
    s.timeout = Duration::from_secs(1);
    s
}

fn req(source: &str) -> SearchRequest {
    SearchArgs { query: "q".into(), source: source.into(), limit: 5, ..Default::default() }.validate().unwrap()
}

fn ids(o: &SearchOutcome) -> Vec<&str> {
    o.results.iter().map(|c| c.chunk.id.as_str()).collect()
}

#[test]
fn rrf_merges_by_rank_and_dedupes_ids() {
    let fused = fuse(&[vec![cand("a"), cand("b"), cand("c")], vec![cand("c"), cand("d")]]);
    let order: Vec<_> = fused.iter().map(|c| c.chunk.id.as_str()).collect();
    // c: 1/63 + 1/61 beats a: 1/61; then a, then d (1/62) ties b (1/62): first seen wins.
    assert_eq!(order, ["c", "a", "b", "d"]);
    assert!(fused.iter().all(|c| c.distance.is_none()));
}

#[tokio::test]
async fn embeds_once_per_distinct_embedder_and_skips_a_failing_store() {
    let shared: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let other = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let other_dyn: Arc<dyn Embedder> = other.clone();
    let engine = SearchEngine::federated(
        vec![
            store("one", Behaviour::List(vec![cand("a"), cand("b")]), &shared),
            store("two", Behaviour::List(vec![cand("c")]), &shared),
            store("three", Behaviour::Fail("Chroma query failed with HTTP 500: boom"), &other_dyn),
            store("four", Behaviour::Hang, &other_dyn),
        ],
        None,
        RerankOptions::default(),
    );
    let out = engine.search_outcome(&req(""), &CallContext::default()).await.unwrap();
    assert_eq!(ids(&out), ["a", "c", "b"]);
    assert_eq!(*other.0.lock().unwrap(), 1);
    assert_eq!(
        skipped_line(&out.skipped),
        "Skipped stores that did not answer: `three` (Chroma query failed with HTTP 500: boom); `four` (timed out after 1s)."
    );
}

#[tokio::test]
async fn all_failing_is_an_error_naming_each_failure() {
    let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let engine = SearchEngine::federated(
        vec![store("a", Behaviour::Fail("down"), &e), store("b", Behaviour::Hang, &e)],
        None,
        RerankOptions::default(),
    );
    let err = engine.search_outcome(&req(""), &CallContext::default()).await.unwrap_err();
    assert_eq!(
        err.client_message(),
        "repository content search failed: every store failed: `a`: down; `b`: timed out after 1s"
    );
}

#[tokio::test]
async fn only_stores_that_can_hold_the_source_are_asked() {
    let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let mut acme = store("acme", Behaviour::List(vec![cand("a")]), &e);
    acme.sources = Some(vec![SourcePattern::parse("acme/*").unwrap()]);
    let mut other = store("other", Behaviour::Fail("must not be asked"), &e);
    other.sources = Some(vec![SourcePattern::parse("other/x@main").unwrap()]);
    let engine = SearchEngine::federated(vec![acme, other], None, RerankOptions::default());
    let out = engine.search_outcome(&req("acme/widgets"), &CallContext::default()).await.unwrap();
    assert_eq!((ids(&out), out.skipped.len()), (vec!["a"], 0));
    let out = engine.search_outcome(&req("nobody/x"), &CallContext::default()).await.unwrap();
    assert!(out.results.is_empty() && out.skipped.is_empty());
    assert!(SourcePattern::parse("acme").is_err());
    assert!(SourcePattern::parse("other/x@main").unwrap().may_hold("other", "x", ""));
    assert!(!SourcePattern::parse("other/x@main").unwrap().may_hold("other", "x", "dev"));
}

#[tokio::test]
async fn dimension_mismatch_names_store_model_and_both_numbers() {
    let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 384));
    let mut s = FederatedStore::new("docs", Arc::new(FakeStore(Behaviour::List(vec![]), Some(1024))), e);
    s.model = "e5-small".into();
    let engine = SearchEngine::federated(vec![s], None, RerankOptions::default());
    let err = engine.search_outcome(&req(""), &CallContext::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "every store failed: `docs`: store \"docs\" holds 1024-dimensional vectors but its embedder \"e5-small\" makes 384-dimensional ones"
    );
}

/// A lexical index beside a fake store: ranks the same list by words and
/// knows the document frequencies.
struct Words(Vec<Candidate>);
#[async_trait]
impl rr_core::LexicalStore for Words {
    async fn lexical_query(&self, q: &rr_core::LexicalQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        Ok(self.0.iter().take(q.n_results).cloned().collect())
    }
    async fn term_statistics(
        &self,
        tokens: &[String],
        _: &CallContext,
    ) -> Result<Option<rr_core::traits::TermStatistics>, BackendError> {
        Ok(Some(rr_core::traits::TermStatistics { rows: 50, frequencies: vec![1; tokens.len()] }))
    }
}

fn named(id: &str, path: &str, body: &str) -> Candidate {
    let mut c = cand(id);
    c.chunk.metadata.path = path.into();
    c.chunk.metadata.start_line = 10;
    c.chunk.document = body.into();
    c
}

#[tokio::test]
async fn the_merged_head_of_hybrid_stores_is_read_again_over_their_union() {
    let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let (a, b) = (named("a", "src/run.rs", "fn run() {}"), named("b", "src/walk.rs", "fn walk() {}"));
    let c = named("c", "src/config.rs", "pub fn parse_config() -> Config {}");
    let hybrid = |name: &str, list: Vec<Candidate>, rerank: usize| {
        let mut s = store(name, Behaviour::List(list.clone()), &e)
            .with_retrieval(rr_core::RetrievalMode::Hybrid, rr_core::HybridOptions { rerank, ..Default::default() })
            .with_lexical_index(Arc::new(Words(list)));
        s.query_prefix = String::new();
        s
    };
    let query = |engine: SearchEngine| async move {
        let request = SearchArgs { query: "config parse".into(), limit: 3, ..Default::default() }.validate().unwrap();
        let out = engine.search_outcome(&request, &CallContext::default()).await.unwrap();
        ids(&out).into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    // Fused without reading the head again, the first store's weak best leads (equal lexical
    // scores keep store order).
    let merged = SearchEngine::federated(
        vec![hybrid("one", vec![a.clone(), b.clone()], 0), hybrid("two", vec![c.clone()], 0)],
        None,
        RerankOptions::default(),
    )
    .with_per_file(0);
    assert_eq!(query(merged).await, ["a", "b", "c"]);
    // Each store reading its head again, the merged head is read again too: the chunk that
    // names both words leads.
    let read = SearchEngine::federated(
        vec![hybrid("one", vec![a, b], 20), hybrid("two", vec![c], 20)],
        None,
        RerankOptions::default(),
    )
    .with_per_file(0);
    assert_eq!(query(read).await, ["c", "a", "b"]);
}

/// A store that says what its distances measure.
struct Measured(Option<DistanceKind>);
#[async_trait]
impl VectorStore for Measured {
    fn name(&self) -> &str {
        "measured"
    }
    async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        Ok(Vec::new())
    }
    fn distance_kind(&self) -> Option<DistanceKind> {
        self.0
    }
}

fn at(id: &str, distance: f64) -> Candidate {
    Candidate { distance: Some(distance), ..cand(id) }
}

#[test]
fn joint_rankings_merge_by_closeness_and_score_and_sum_the_statistics() {
    let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
    let measured = |kind| FederatedStore::new("s", Arc::new(Measured(kind)), e.clone());
    let inputs = || {
        vec![
            HybridInputs {
                dense: vec![at("a", 0.3), at("b", 0.5)],
                lexical: vec![at("a", -3.0)],
                statistics: Some(TermStatistics { rows: 10, frequencies: vec![1, 2] }),
            },
            HybridInputs {
                // Squared Euclidean distances of unit vectors: twice the cosine distance.
                dense: vec![at("c", 0.4), at("a", 0.6), at("d", 1.2)],
                lexical: vec![at("d", -5.0), at("c", -1.0)],
                statistics: Some(TermStatistics { rows: 5, frequencies: vec![0, 1] }),
            },
        ]
    };
    let ids = |list: &[Candidate]| list.iter().map(|c| c.chunk.id.clone()).collect::<Vec<_>>();
    let (cosine, euclid) = (measured(Some(DistanceKind::Cosine)), measured(Some(DistanceKind::SquaredEuclidean)));
    let merged = merge_rankings(&[&cosine, &euclid], inputs(), 50);
    // c 0.2, a 0.3 (its 0.3 from the second store comes later and is dropped), b 0.5, d 0.6.
    assert_eq!(ids(&merged.dense), ["c", "a", "b", "d"]);
    assert_eq!(merged.dense[0].distance, Some(0.2));
    assert_eq!(ids(&merged.lexical), ["d", "a", "c"]);
    assert_eq!(merged.statistics, Some(TermStatistics { rows: 15, frequencies: vec![1, 3] }));
    // Cut to the depth asked for.
    assert_eq!(ids(&merge_rankings(&[&cosine, &euclid], inputs(), 2).dense), ["c", "a"]);
    // A store that cannot say what its distances measure: merged by rank.
    let unknown = measured(None);
    assert_eq!(ids(&merge_rankings(&[&cosine, &unknown], inputs(), 50).dense), ["a", "c", "b", "d"]);
    // Stores with different embedders: by rank too.
    let other = FederatedStore::new(
        "o",
        Arc::new(Measured(Some(DistanceKind::Cosine))),
        Arc::new(CountingEmbedder(Mutex::default(), 2)),
    );
    assert_eq!(ids(&merge_rankings(&[&cosine, &other], inputs(), 50).dense), ["a", "c", "b", "d"]);
    // A store without statistics: none.
    let mut partial = inputs();
    partial[1].statistics = None;
    assert_eq!(merge_rankings(&[&cosine, &euclid], partial, 50).statistics, None);
}
