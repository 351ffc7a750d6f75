//! One search across several stores.
//!
//! Each store ranks in its own retrieval mode (dense, lexical or hybrid, see
//! [`crate::retrieval`]). A dense or hybrid store is queried with a vector from *its own* embedder (vectors are
//! model-specific: a 384-d query is never compared with 1024-d vectors), but a
//! query is embedded only once per distinct embedder (embedders are compared
//! by identity, `Arc::ptr_eq`, so the configuration loader shares one
//! instance between stores that declare the same embedder). Stores whose
//! declared `sources` cannot hold the requested `source` are not asked.
//!
//! Raw distances are not comparable across stores (different metrics,
//! models, normalisations), so the per-store lists are merged by rank with
//! reciprocal-rank fusion: a candidate scores `Σ 1 / (60 + rank)` over the
//! lists it appears in (rank 1-based; the same chunk id in two stores is one
//! candidate). Ties keep store order, then rank. The fused list is cut to the
//! same candidate count a single store would have returned, then reranked,
//! selected and rendered exactly as for one store.
//!
//! A store that fails or exceeds its timeout is skipped when another one
//! answered; the caller renders [`skipped_line`] at the end of the result.
//! When every store asked fails, the search fails with
//! [`SearchError::AllStoresFailed`], naming each failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::join_all;

use crate::error::SearchError;
use crate::pipeline::{
    CANDIDATES_PER_RESULT, MAX_CANDIDATES_WITHOUT_RERANK, RerankOptions, SearchOutcome, SkippedStore, rerank_candidates,
};
use crate::record::Candidate;
use crate::request::SearchRequest;
use crate::retrieval::{HybridOptions, RetrievalMode, Retriever, fuse_candidates};
use crate::select::select;
use crate::traits::{CallContext, Embedder, Reranker, VectorStore};

/// The `k` of reciprocal-rank fusion (Cormack et al.): damps the weight of
/// the very first ranks so one store cannot dominate.
pub const RRF_K: f64 = 60.0;
/// Per-store deadline when the configuration sets none.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// `owner/repository[@branch]` patterns a store can hold; `*` as a whole
/// owner, repository or branch matches anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePattern {
    owner: String,
    repository: String,
    branch: Option<String>,
}

impl SourcePattern {
    /// Parses `owner/repo`, `owner/*`, `*/*`, `owner/repo@branch`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (repo, branch) = match text.split_once('@') {
            Some((r, b)) if !b.trim().is_empty() => (r, Some(b.trim().to_owned())),
            Some(_) => return Err(format!("source pattern \"{text}\": branch must be non-empty after @")),
            None => (text, None),
        };
        match repo.split('/').map(str::trim).collect::<Vec<_>>().as_slice() {
            [o, r] if !o.is_empty() && !r.is_empty() => {
                Ok(SourcePattern { owner: (*o).to_owned(), repository: (*r).to_owned(), branch })
            }
            _ => Err(format!(
                "source pattern \"{text}\" must be owner/repository or owner/repository@branch (* as a whole part matches any)"
            )),
        }
    }

    /// Whether a store holding this pattern may hold chunks matching the
    /// request's organization/repository/branch equalities (empty = any).
    pub fn may_hold(&self, organization: &str, repository: &str, branch: &str) -> bool {
        fn part(pattern: &str, value: &str) -> bool {
            pattern == "*" || value.is_empty() || pattern == value
        }
        part(&self.owner, organization)
            && part(&self.repository, repository)
            && self.branch.as_deref().is_none_or(|b| part(b, branch))
    }
}

/// One store of a federation with everything it needs.
pub struct FederatedStore {
    /// The name the configuration gave it; used in skip lines and errors.
    pub name: String,
    pub store: Arc<dyn VectorStore>,
    pub embedder: Arc<dyn Embedder>,
    /// The embedder's model (or kind) for the dimension-mismatch error.
    pub model: String,
    /// Prepended to the query before embedding.
    pub query_prefix: String,
    /// This store's first stage: dense, lexical or hybrid ([`crate::retrieval`]).
    pub retriever: Retriever,
    /// Reorders this store's own candidates before fusion.
    pub reranker: Option<Arc<dyn Reranker>>,
    /// `None`: the store may hold any source.
    pub sources: Option<Vec<SourcePattern>>,
    pub timeout: Duration,
    dimension_checked: AtomicBool,
}

impl FederatedStore {
    pub fn new(name: impl Into<String>, store: Arc<dyn VectorStore>, embedder: Arc<dyn Embedder>) -> Self {
        let model = embedder.name().to_owned();
        FederatedStore {
            name: name.into(),
            store,
            embedder,
            model,
            query_prefix: "query: ".into(),
            retriever: Retriever::default(),
            reranker: None,
            sources: None,
            timeout: DEFAULT_STORE_TIMEOUT,
            dimension_checked: AtomicBool::new(false),
        }
    }

    /// Sets this store's retrieval mode and hybrid weights.
    pub fn with_retrieval(mut self, mode: RetrievalMode, hybrid: HybridOptions) -> Self {
        self.retriever = Retriever::new(mode, hybrid);
        self
    }

    fn may_hold(&self, request: &SearchRequest) -> bool {
        let f = &request.filter;
        self.sources.as_ref().is_none_or(|ps| ps.iter().any(|p| p.may_hold(&f.organization, &f.repository, &f.branch)))
    }
}

impl std::fmt::Debug for FederatedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FederatedStore")
            .field("name", &self.name)
            .field("store", &self.store.name())
            .field("embedder", &self.embedder.name())
            .field("retrieval", &self.retriever.mode())
            .field("reranker", &self.reranker.as_ref().map(|r| r.name().to_owned()))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Several stores searched as one.
pub struct FederatedEngine {
    stores: Vec<FederatedStore>,
    /// Reranks the fused list, as the one-store engine's reranker does.
    reranker: Option<Arc<dyn Reranker>>,
    rerank: RerankOptions,
}

impl std::fmt::Debug for FederatedEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FederatedEngine")
            .field("stores", &self.stores)
            .field("reranker", &self.reranker.as_ref().map(|r| r.name().to_owned()))
            .finish()
    }
}

/// Why one store did not contribute.
enum StoreFailure {
    Timeout(Duration),
    Failed(String),
}

impl FederatedEngine {
    pub fn new(stores: Vec<FederatedStore>, reranker: Option<Arc<dyn Reranker>>, rerank: RerankOptions) -> Self {
        FederatedEngine { stores, reranker, rerank }
    }

    pub fn stores(&self) -> &[FederatedStore] {
        &self.stores
    }

    /// The reranker of the fused list, if any.
    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.reranker.as_ref()
    }

    /// Candidates asked of each store, and kept after fusion, for `limit`
    /// results: the one-store engine's rule.
    pub fn candidate_count(&self, limit: usize) -> usize {
        if self.reranker.is_some() {
            (limit * self.rerank.candidate_multiplier).min(self.rerank.max_candidates)
        } else {
            (limit * CANDIDATES_PER_RESULT).min(MAX_CANDIDATES_WITHOUT_RERANK)
        }
    }

    /// Runs the federated pipeline (see the module docs).
    pub async fn search(&self, request: &SearchRequest, ctx: &CallContext) -> Result<SearchOutcome, SearchError> {
        let asked: Vec<&FederatedStore> = self.stores.iter().filter(|s| s.may_hold(request)).collect();
        if asked.is_empty() {
            return Ok(SearchOutcome::default());
        }
        let n_results = self.candidate_count(request.limit);

        // Embed once per distinct (embedder, prefix), for the stores whose mode needs it.
        let mut groups: Vec<(&Arc<dyn Embedder>, &str)> = Vec::new();
        let group_of: Vec<Option<usize>> = asked
            .iter()
            .map(|s| {
                if !s.retriever.needs_embedding(s.store.as_ref()) {
                    return None;
                }
                let found = groups.iter().position(|(e, p)| Arc::ptr_eq(e, &s.embedder) && *p == s.query_prefix);
                Some(found.unwrap_or_else(|| {
                    groups.push((&s.embedder, &s.query_prefix));
                    groups.len() - 1
                }))
            })
            .collect();
        let embeddings = join_all(groups.iter().map(|(embedder, prefix)| async move {
            let input = [format!("{prefix}{}", request.query)];
            embedder.embed(&input, ctx).await.map(|mut v| v.swap_remove(0))
        }))
        .await;

        let answers = join_all(asked.iter().zip(&group_of).map(|(store, group)| {
            let embedding = group.map(|g| &embeddings[g]);
            async move {
                let embedding = match embedding {
                    None => None,
                    Some(Ok(e)) => Some(e.clone()),
                    Some(Err(e)) => {
                        tracing::debug!(store = %store.name, error = %e, "embedding failed");
                        // The line names the store already.
                        return Err(StoreFailure::Failed(e.summary()));
                    }
                };
                match tokio::time::timeout(store.timeout, self.query_store(store, request, embedding, n_results, ctx))
                    .await
                {
                    Ok(Ok(candidates)) => Ok(candidates),
                    Ok(Err(e)) => {
                        tracing::debug!(store = %store.name, error = %e, "store failed");
                        let reason = match &e {
                            SearchError::Backend(b) => b.summary(),
                            other => other.to_string(),
                        };
                        Err(StoreFailure::Failed(reason))
                    }
                    Err(_) => Err(StoreFailure::Timeout(store.timeout)),
                }
            }
        }))
        .await;

        let mut lists = Vec::new();
        let mut failures = Vec::new();
        for (store, answer) in asked.iter().zip(answers) {
            match answer {
                Ok(list) => lists.push(list),
                Err(failure) => {
                    let reason = match failure {
                        StoreFailure::Timeout(t) => format!("timed out after {}", humanize(t)),
                        StoreFailure::Failed(message) => message,
                    };
                    tracing::warn!(store = %store.name, %reason, "store skipped");
                    failures.push((store.name.clone(), reason));
                }
            }
        }
        if lists.is_empty() {
            return Err(SearchError::AllStoresFailed(failures));
        }
        let mut candidates = fuse(&lists);
        candidates.truncate(n_results);
        if let Some(reranker) = &self.reranker {
            candidates = rerank_candidates(reranker.as_ref(), &self.rerank, &request.query, candidates, ctx).await?;
        }
        Ok(SearchOutcome {
            results: select(candidates, request.limit),
            skipped: failures.into_iter().map(|(store, reason)| SkippedStore { store, reason }).collect(),
        })
    }

    async fn query_store(
        &self,
        store: &FederatedStore,
        request: &SearchRequest,
        embedding: Option<Vec<f32>>,
        n_results: usize,
        ctx: &CallContext,
    ) -> Result<Vec<Candidate>, SearchError> {
        if let Some(embedding) = &embedding
            && !store.dimension_checked.load(Ordering::Acquire)
        {
            if let Some(dimension) = store.store.dimension(ctx).await?
                && dimension != embedding.len()
            {
                return Err(SearchError::DimensionMismatch {
                    store: store.name.clone(),
                    model: store.model.clone(),
                    store_dimension: dimension,
                    embedder_dimension: embedding.len(),
                });
            }
            store.dimension_checked.store(true, Ordering::Release);
        }
        let mut candidates = store
            .retriever
            .retrieve(store.store.as_ref(), &request.query, embedding, n_results, &request.filter, ctx)
            .await?;
        if let Some(reranker) = &store.reranker {
            candidates = rerank_candidates(reranker.as_ref(), &self.rerank, &request.query, candidates, ctx).await?;
        }
        Ok(candidates)
    }
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

/// Reciprocal-rank fusion of relevance-ordered lists (module docs). The
/// result carries no distance: fused scores are not distances.
pub fn fuse(lists: &[Vec<Candidate>]) -> Vec<Candidate> {
    // Equal scores keep first-seen order (store order, then rank).
    let weighted: Vec<(f64, &[Candidate])> = lists.iter().map(|l| (1.0, l.as_slice())).collect();
    fuse_candidates(&weighted, RRF_K)
}

/// The one line appended to a result when stores were skipped.
pub fn skipped_line(skipped: &[SkippedStore]) -> String {
    let list: Vec<String> = skipped.iter().map(|s| format!("`{}` ({})", s.store, s.reason)).collect();
    let noun = if skipped.len() == 1 { "store" } else { "stores" };
    format!("Skipped {noun} that did not answer: {}.", list.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BackendError;
    use crate::record::{Chunk, Metadata};
    use crate::request::SearchArgs;
    use crate::traits::VectorQuery;
    use async_trait::async_trait;
    use std::sync::Mutex;

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
        s.timeout = Duration::from_millis(200);
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
        let engine = FederatedEngine::new(
            vec![
                store("one", Behaviour::List(vec![cand("a"), cand("b")]), &shared),
                store("two", Behaviour::List(vec![cand("c")]), &shared),
                store("three", Behaviour::Fail("Chroma query failed with HTTP 500: boom"), &other_dyn),
                store("four", Behaviour::Hang, &other_dyn),
            ],
            None,
            RerankOptions::default(),
        );
        let out = engine.search(&req(""), &CallContext::default()).await.unwrap();
        assert_eq!(ids(&out), ["a", "c", "b"]);
        assert_eq!(*other.0.lock().unwrap(), 1);
        assert_eq!(
            skipped_line(&out.skipped),
            "Skipped stores that did not answer: `three` (Chroma query failed with HTTP 500: boom); `four` (timed out after 200ms)."
        );
    }

    #[tokio::test]
    async fn all_failing_is_an_error_naming_each_failure() {
        let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
        let engine = FederatedEngine::new(
            vec![store("a", Behaviour::Fail("down"), &e), store("b", Behaviour::Hang, &e)],
            None,
            RerankOptions::default(),
        );
        let err = engine.search(&req(""), &CallContext::default()).await.unwrap_err();
        assert_eq!(
            err.client_message(),
            "repository content search failed: every store failed: `a`: down; `b`: timed out after 200ms"
        );
    }

    #[tokio::test]
    async fn only_stores_that_can_hold_the_source_are_asked() {
        let e: Arc<dyn Embedder> = Arc::new(CountingEmbedder(Mutex::default(), 2));
        let mut acme = store("acme", Behaviour::List(vec![cand("a")]), &e);
        acme.sources = Some(vec![SourcePattern::parse("acme/*").unwrap()]);
        let mut other = store("other", Behaviour::Fail("must not be asked"), &e);
        other.sources = Some(vec![SourcePattern::parse("other/x@main").unwrap()]);
        let engine = FederatedEngine::new(vec![acme, other], None, RerankOptions::default());
        let out = engine.search(&req("acme/widgets"), &CallContext::default()).await.unwrap();
        assert_eq!((ids(&out), out.skipped.len()), (vec!["a"], 0));
        let out = engine.search(&req("nobody/x"), &CallContext::default()).await.unwrap();
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
        let engine = FederatedEngine::new(vec![s], None, RerankOptions::default());
        let err = engine.search(&req(""), &CallContext::default()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "every store failed: `docs`: store \"docs\" holds 1024-dimensional vectors but its embedder \"e5-small\" makes 384-dimensional ones"
        );
    }
}
