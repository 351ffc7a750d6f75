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
//! When every store asked runs the hybrid chain the same way (a lexical
//! ranking, the same options, no reranker of its own), the federation
//! answers as one store holding all their chunks would: each store's dense
//! and lexical rankings are merged into one of each ([`merge_rankings`]), by
//! closeness where the stores can say what their distances measure, and the
//! one chain (fusion, verbatim matches, the head read again over the summed
//! term statistics) runs once.
//!
//! Otherwise raw distances are not comparable across stores (different
//! metrics, models, normalisations), so the per-store lists are merged by
//! rank with reciprocal-rank fusion: a candidate scores `Σ 1 / (60 + rank)`
//! over the lists it appears in (rank 1-based; the same chunk id in two
//! stores is one candidate). Ties keep store order, then rank. The fused list
//! is cut to the same candidate count a single store would have returned,
//! then reranked, selected and rendered exactly as for one store.
//!
//! A store that fails or exceeds its timeout is skipped when another one
//! answered; the caller renders [`skipped_line`] at the end of the result.
//! When every store asked fails, the search fails with
//! [`SearchError::AllStoresFailed`], naming each failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::SearchError;
use crate::record::Candidate;
use crate::request::SearchRequest;
use crate::retrieval::{HybridOptions, RetrievalMode, Retriever, fuse_candidates, fusion_key};
use crate::traits::{
    CallContext, DistanceKind, Embedder, HybridInputs, LexicalStore, Reranker, TermStatistics, VectorStore,
};

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

/// One store of an engine (of a federation, or the only one) with everything it needs.
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
    /// The index that ranks this store's chunks by their words when the
    /// store cannot (a lexical index kept beside a Chroma collection).
    pub lexical_index: Option<Arc<dyn LexicalStore>>,
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
            lexical_index: None,
            dimension_checked: AtomicBool::new(false),
        }
    }

    /// The same store with `index` ranking its chunks by their words.
    pub fn with_lexical_index(mut self, index: Arc<dyn LexicalStore>) -> Self {
        self.lexical_index = Some(index);
        self
    }

    /// What ranks this store's chunks by their words: the lexical index kept
    /// beside it, else the store's own ranking, if any.
    pub fn lexical(&self) -> Option<&dyn LexicalStore> {
        self.lexical_index.as_deref().or_else(|| self.store.lexical())
    }

    /// Sets this store's retrieval mode and hybrid weights.
    pub fn with_retrieval(mut self, mode: RetrievalMode, hybrid: HybridOptions) -> Self {
        self.retriever = Retriever::new(mode, hybrid);
        self
    }

    /// Checks the store's dimension against the embedder's once: a store of
    /// other vectors would answer with meaningless neighbours.
    pub(crate) async fn check_dimension(
        &self,
        embedder_dimension: usize,
        ctx: &CallContext,
    ) -> Result<(), SearchError> {
        if self.dimension_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(dimension) = self.store.dimension(ctx).await?
            && dimension != embedder_dimension
        {
            return Err(SearchError::DimensionMismatch {
                store: self.name.clone(),
                model: self.model.clone(),
                store_dimension: dimension,
                embedder_dimension,
            });
        }
        self.dimension_checked.store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn may_hold(&self, request: &SearchRequest) -> bool {
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

/// A store left out of a federated search, and why (already client-safe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedStore {
    pub store: String,
    pub reason: String,
}

pub(crate) fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{}s", d.as_secs()) } else { format!("{}ms", d.as_millis()) }
}

/// Reciprocal-rank fusion of relevance-ordered lists (module docs). The
/// result carries no distance: fused scores are not distances.
pub fn fuse(lists: &[Vec<Candidate>]) -> Vec<Candidate> {
    // Equal scores keep first-seen order (store order, then rank).
    let weighted: Vec<(f64, &[Candidate])> = lists.iter().map(|l| (1.0, l.as_slice())).collect();
    fuse_candidates(&weighted, RRF_K)
}

/// Several stores' hybrid inputs as one store's: the nearest neighbours
/// merged by closeness when the stores share an embedder and each says what
/// its distances measure ([`VectorStore::distance_kind`]), by rank
/// otherwise ([`fuse`]); the lexical rankings merged by score when every
/// candidate has one (a lexical `distance` is a negated BM25 score, which
/// the stores' own statistics make close enough to compare), by rank
/// otherwise; each cut to `depth`, a chunk two stores hold kept once; the
/// term statistics summed when every store has them. `stores[i]` answered
/// `inputs[i]`.
pub fn merge_rankings(stores: &[&FederatedStore], inputs: Vec<HybridInputs>, depth: usize) -> HybridInputs {
    let shared_embedder = stores
        .windows(2)
        .all(|w| Arc::ptr_eq(&w[0].embedder, &w[1].embedder) && w[0].query_prefix == w[1].query_prefix);
    let kinds: Option<Vec<DistanceKind>> = stores.iter().map(|s| s.store.distance_kind()).collect();
    let mut statistics = Some(TermStatistics { rows: 0, frequencies: Vec::new() });
    let (mut dense, mut lexical) = (Vec::new(), Vec::new());
    for input in inputs {
        statistics = match (statistics, input.statistics) {
            (Some(mut sum), Some(one)) => {
                sum.rows += one.rows;
                sum.frequencies.resize(sum.frequencies.len().max(one.frequencies.len()), 0);
                for (total, n) in sum.frequencies.iter_mut().zip(one.frequencies) {
                    *total += n;
                }
                Some(sum)
            }
            _ => None,
        };
        dense.push(input.dense);
        lexical.push(input.lexical);
    }
    let dense = match kinds.filter(|_| shared_embedder) {
        Some(kinds) => {
            let as_cosine = |(kind, list): (DistanceKind, Vec<Candidate>)| {
                list.into_iter().map(move |mut c| {
                    c.distance = c.distance.map(|d| kind.cosine_distance(d));
                    c
                })
            };
            by_distance(kinds.into_iter().zip(dense).flat_map(as_cosine).collect(), depth)
        }
        None => by_rank(&dense, depth),
    };
    let lexical = match lexical.iter().flatten().all(|c| c.distance.is_some_and(f64::is_finite)) {
        true => by_distance(lexical.into_iter().flatten().collect(), depth),
        false => by_rank(&lexical, depth),
    };
    HybridInputs { dense, lexical, statistics }
}

/// `candidates` closest first (stably: store order, then rank, among equal
/// distances; no distance last), each chunk once, cut to `depth`.
fn by_distance(mut candidates: Vec<Candidate>, depth: usize) -> Vec<Candidate> {
    candidates.sort_by(|a, b| match (a.distance, b.distance) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (x, y) => x.is_none().cmp(&y.is_none()),
    });
    let mut seen = std::collections::HashSet::new();
    candidates.retain(|c| seen.insert(fusion_key(c)));
    candidates.truncate(depth);
    candidates
}

/// `lists` merged by rank ([`fuse`]), cut to `depth`.
fn by_rank(lists: &[Vec<Candidate>], depth: usize) -> Vec<Candidate> {
    let mut merged = fuse(lists);
    merged.truncate(depth);
    merged
}

/// The one line appended to a result when stores were skipped.
pub fn skipped_line(skipped: &[SkippedStore]) -> String {
    let list: Vec<String> = skipped.iter().map(|s| format!("`{}` ({})", s.store, s.reason)).collect();
    let noun = if skipped.len() == 1 { "store" } else { "stores" };
    format!("Skipped {noun} that did not answer: {}.", list.join("; "))
}
