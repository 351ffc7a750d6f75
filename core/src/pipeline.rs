//! embed → retrieve → rerank → select → render, for one validated request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;

use crate::code_rank::{self, CodeRank};
use crate::error::SearchError;
use crate::federated::{FederatedStore, SkippedStore, fuse, humanize, merge_rankings};
use crate::query::Query;
use crate::record::Candidate;
use crate::request::SearchRequest;
use crate::rerank::score_order;
use crate::retrieval::{HybridOptions, RetrievalMode, hybrid};
use crate::select::{PER_FILE_FIRST_PASS, clean_document, select_spread};
use crate::traits::{CallContext, Embedder, HybridInputs, LexicalStore, Reranker, VectorStore};

/// Candidates fetched per requested result without reranking.
pub const CANDIDATES_PER_RESULT: usize = 3;
/// Ceiling on candidates fetched without reranking.
pub const MAX_CANDIDATES_WITHOUT_RERANK: usize = 60;

/// How candidates are gathered and reranked.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineOptions {
    /// Prepended to the query before embedding (E5-style models).
    pub query_prefix: String,
    /// How the store ranks the first stage (dense by default, as the drop-in does).
    pub retrieval: RetrievalMode,
    /// Fusion weights when `retrieval` is hybrid.
    pub hybrid: HybridOptions,
    pub rerank: RerankOptions,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            query_prefix: "query: ".into(),
            retrieval: RetrievalMode::Dense,
            hybrid: HybridOptions::default(),
            rerank: RerankOptions::default(),
        }
    }
}

/// Candidate counts and byte caps used when a reranker is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerankOptions {
    pub candidate_multiplier: usize,
    pub max_candidates: usize,
    /// 0 = unlimited.
    pub max_document_bytes: usize,
    /// 0 = unlimited.
    pub max_request_bytes: usize,
}

impl Default for RerankOptions {
    fn default() -> Self {
        RerankOptions { candidate_multiplier: 3, max_candidates: 100, max_document_bytes: 0, max_request_bytes: 0 }
    }
}

/// The selected results, the stores a federated search had to skip, and
/// how long each stage took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchOutcome {
    pub results: Vec<Candidate>,
    pub skipped: Vec<SkippedStore>,
    pub timings: StageTimings,
}

/// How long each stage of one search took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageTimings {
    /// The query embedded (each distinct embedder, together).
    pub embed: Duration,
    /// The first stage: every store's rankings, fused and merged, with the
    /// files the query names (and a store's own reranker).
    pub retrieve: Duration,
    /// Each stage of the reranker of the one list, by name, in order.
    pub rerank: Vec<(String, Duration)>,
    /// The code ranking ([`crate::code_rank`]).
    pub code_rank: Duration,
    /// Repeated text dropped and the results spread over files.
    pub select: Duration,
    pub total: Duration,
}

impl StageTimings {
    /// The stage names a metric or a table shows, each with its time: the
    /// rerank stages together as `rerank`.
    pub fn stages(&self) -> [(&'static str, Duration); 5] {
        [
            ("embed", self.embed),
            ("retrieve", self.retrieve),
            ("rerank", self.rerank.iter().map(|(_, d)| *d).sum()),
            ("code_rank", self.code_rank),
            ("select", self.select),
        ]
    }
}

/// One search configuration: an embedder, a store and an optional reranker
/// ([`SearchEngine::new`]), or several stores searched as one
/// ([`SearchEngine::federated`], see [`crate::federated`]).
///
/// Both run the same pipeline: the query is embedded once per distinct
/// embedder (for the stores whose retrieval needs a vector), each store
/// asked ranks its candidates, the lists become one, the reranker reorders
/// it and the first `limit` are selected. One store searched alone differs
/// only where a federation must: its list is kept as ranked (distances
/// included), its error is the search's, and it has no deadline of its own
/// nor a dimension check (the backend reports a mismatch itself).
#[derive(Clone)]
pub struct SearchEngine {
    stores: Arc<[FederatedStore]>,
    /// Reorders the one list (a federation's fused list).
    reranker: Option<Arc<dyn Reranker>>,
    rerank: RerankOptions,
    /// Results one file gets before other files have had their turn
    /// ([`select_spread`]); 0 keeps the ranking's order. The reference's 2
    /// unless [`with_per_file`](Self::with_per_file) says otherwise: the
    /// drop-in must keep it.
    per_file: usize,
    /// Orders the candidates again as code ([`crate::code_rank`]), after any
    /// reranker; off unless [`with_code_rank`](Self::with_code_rank).
    code_rank: Option<CodeRank>,
    /// Candidates asked of each store, when fixed ([`with_candidates`](Self::with_candidates)).
    candidates: Option<usize>,
    federated: bool,
}

impl std::fmt::Debug for SearchEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchEngine")
            .field("stores", &self.stores)
            .field("reranker", &self.reranker.as_ref().map(|r| r.name().to_owned()))
            .field("rerank", &self.rerank)
            .field("per_file", &self.per_file)
            .field("code_rank", &self.code_rank)
            .field("candidates", &self.candidates)
            .field("federated", &self.federated)
            .finish()
    }
}

/// Why one store did not contribute.
enum StoreFailure {
    /// Its embedder failed; the error is `embeddings[group]`.
    Embedding(usize),
    Search(SearchError),
    Timeout(Duration),
}

impl SearchEngine {
    pub fn new(
        embedder: Arc<dyn Embedder>,
        store: Arc<dyn VectorStore>,
        reranker: Option<Arc<dyn Reranker>>,
        options: PipelineOptions,
    ) -> Self {
        Self::with_lexical_index(embedder, store, None, reranker, options)
    }

    /// [`new`](Self::new) with `lexical_index` ranking the store's chunks by
    /// their words ([`FederatedStore::with_lexical_index`]).
    pub fn with_lexical_index(
        embedder: Arc<dyn Embedder>,
        store: Arc<dyn VectorStore>,
        lexical_index: Option<Arc<dyn LexicalStore>>,
        reranker: Option<Arc<dyn Reranker>>,
        options: PipelineOptions,
    ) -> Self {
        let name = store.name().to_owned();
        let mut only = FederatedStore::new(name, store, embedder).with_retrieval(options.retrieval, options.hybrid);
        only.query_prefix = options.query_prefix;
        only.lexical_index = lexical_index;
        SearchEngine {
            stores: Arc::new([only]),
            reranker,
            rerank: options.rerank,
            per_file: PER_FILE_FIRST_PASS,
            code_rank: None,
            candidates: None,
            federated: false,
        }
    }

    /// Several stores searched as one, `reranker` reordering the fused list
    /// (see [`crate::federated`]). With no store every search finds nothing.
    pub fn federated(stores: Vec<FederatedStore>, reranker: Option<Arc<dyn Reranker>>, rerank: RerankOptions) -> Self {
        SearchEngine {
            stores: stores.into(),
            reranker,
            rerank,
            per_file: PER_FILE_FIRST_PASS,
            code_rank: None,
            candidates: None,
            federated: true,
        }
    }

    /// The same engine giving a file `per_file` results before other files
    /// have had their turn (0: the ranking's order), see [`select_spread`].
    pub fn with_per_file(mut self, per_file: usize) -> Self {
        self.per_file = per_file;
        self
    }

    /// The same engine ordering its candidates again as code (`None`: as the
    /// stores and the reranker ranked them), see [`crate::code_rank`].
    pub fn with_code_rank(mut self, code_rank: Option<CodeRank>) -> Self {
        self.code_rank = code_rank;
        self
    }

    /// The same engine asking each store for `candidates` (at least the
    /// results asked for, and what the code ranking reads) instead of a
    /// number derived from the results asked for: an evaluation's
    /// `candidates` setting.
    pub fn with_candidates(mut self, candidates: Option<usize>) -> Self {
        self.candidates = candidates;
        self
    }

    /// The code ranking, if on.
    pub fn code_rank(&self) -> Option<&CodeRank> {
        self.code_rank.as_ref()
    }

    /// Results one file gets before other files have had their turn (0: no spread).
    pub fn per_file(&self) -> usize {
        self.per_file
    }

    /// Whether this engine is a federation (its answers may name skipped stores).
    pub fn is_federated(&self) -> bool {
        self.federated
    }

    /// The stores searched, in configuration order (one for [`new`](Self::new)).
    pub fn stores(&self) -> &[FederatedStore] {
        &self.stores
    }

    /// The reranker of the one list, if any.
    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.reranker.as_ref()
    }

    /// Candidates asked of each store, and kept after fusion, for `limit`
    /// results.
    pub fn candidate_count(&self, limit: usize) -> usize {
        if let Some(candidates) = self.candidates {
            let code = (limit * code_rank::CANDIDATES_PER_RESULT).min(code_rank::MAX_CANDIDATES);
            let fixed = candidates.max(limit);
            return if self.code_rank.is_some() { fixed.max(code) } else { fixed };
        }
        if self.code_rank.is_some() {
            let own = (limit * code_rank::CANDIDATES_PER_RESULT).min(code_rank::MAX_CANDIDATES);
            let reranked = (limit * self.rerank.candidate_multiplier).min(self.rerank.max_candidates);
            if self.reranker.is_some() { own.max(reranked) } else { own }
        } else if self.reranker.is_some() {
            (limit * self.rerank.candidate_multiplier).min(self.rerank.max_candidates)
        } else {
            (limit * CANDIDATES_PER_RESULT).min(MAX_CANDIDATES_WITHOUT_RERANK)
        }
    }

    /// Runs the pipeline and returns the selected results in display order.
    pub async fn search(&self, request: &SearchRequest, ctx: &CallContext) -> Result<Vec<Candidate>, SearchError> {
        self.search_outcome(request, ctx).await.map(|o| o.results)
    }

    /// Like [`search`](Self::search), also reporting skipped stores.
    pub async fn search_outcome(
        &self,
        request: &SearchRequest,
        ctx: &CallContext,
    ) -> Result<SearchOutcome, SearchError> {
        let asked: Vec<&FederatedStore> = self.stores.iter().filter(|s| s.may_hold(request)).collect();
        if asked.is_empty() {
            return Ok(SearchOutcome::default());
        }
        let started = Instant::now();
        let mut timings = StageTimings::default();
        let n_results = self.candidate_count(request.limit);
        let query = Query::new(&request.query);
        let query = &query;

        // Embed once per distinct (embedder, prefix), for the stores whose mode needs it.
        let mut groups: Vec<(&Arc<dyn Embedder>, &str)> = Vec::new();
        let group_of: Vec<Option<usize>> = asked
            .iter()
            .map(|s| {
                if !s.retriever.needs_embedding(s.lexical().is_some()) {
                    return None;
                }
                let found = groups.iter().position(|(e, p)| Arc::ptr_eq(e, &s.embedder) && *p == s.query_prefix);
                Some(found.unwrap_or_else(|| {
                    groups.push((&s.embedder, &s.query_prefix));
                    groups.len() - 1
                }))
            })
            .collect();
        let mut embeddings = join_all(groups.iter().map(|(embedder, prefix)| async move {
            let input = [format!("{prefix}{}", request.query)];
            embedder.embed(&input, ctx).await.map(|mut v| v.swap_remove(0))
        }))
        .await;
        timings.embed = started.elapsed();
        let retrieving = Instant::now();

        // A federation of hybrid stores answers as one store would: each
        // store's two rankings merged into one of each, then one hybrid chain.
        let joint = if self.federated { joint_hybrid(&asked) } else { None };
        let answers = join_all(asked.iter().zip(&group_of).map(|(store, group)| {
            let embedding = group.map(|g| (g, &embeddings[g]));
            async move {
                let embedding = match embedding {
                    None => None,
                    Some((_, Ok(e))) => Some(e.clone()),
                    Some((g, Err(e))) => {
                        if self.federated {
                            tracing::debug!(store = %store.name, error = %e, "embedding failed");
                        }
                        return Err(StoreFailure::Embedding(g));
                    }
                };
                let answer = async {
                    match joint {
                        Some(options) => {
                            let depth = options.depth.max(n_results);
                            self.store_rankings(store, request, query, embedding, depth, ctx).await
                        }
                        None => {
                            self.query_store(store, request, query, embedding, n_results, ctx).await.map(Answer::Ranked)
                        }
                    }
                };
                if !self.federated {
                    return answer.await.map_err(StoreFailure::Search);
                }
                match tokio::time::timeout(store.timeout, answer).await {
                    Ok(answer) => answer.map_err(StoreFailure::Search),
                    Err(_) => Err(StoreFailure::Timeout(store.timeout)),
                }
            }
        }))
        .await;

        let (mut candidates, skipped) = if self.federated {
            let mut lists = Vec::new();
            let mut answered = Vec::new();
            let mut failures = Vec::new();
            for (store, answer) in asked.iter().zip(answers) {
                match answer {
                    Ok(answer) => {
                        lists.push(answer);
                        answered.push(*store);
                    }
                    Err(failure) => {
                        let reason = match failure {
                            StoreFailure::Timeout(t) => format!("timed out after {}", humanize(t)),
                            // The line names the store already.
                            StoreFailure::Embedding(g) => {
                                embeddings[g].as_ref().err().map(|e| e.summary()).unwrap_or_default()
                            }
                            StoreFailure::Search(SearchError::Backend(b)) => b.summary(),
                            StoreFailure::Search(other) => other.to_string(),
                        };
                        tracing::warn!(store = %store.name, %reason, "store skipped");
                        failures.push((store.name.clone(), reason));
                    }
                }
            }
            if lists.is_empty() {
                return Err(SearchError::AllStoresFailed(failures));
            }
            let fused = match joint {
                Some(options) => joint_answer(&answered, lists, query, &options, n_results),
                None => {
                    let lists: Vec<Vec<Candidate>> = lists.into_iter().map(Answer::into_candidates).collect();
                    let mut fused = fuse(&lists);
                    fused.truncate(n_results);
                    fused
                }
            };
            (fused, failures.into_iter().map(|(store, reason)| SkippedStore { store, reason }).collect())
        } else {
            match answers.into_iter().next() {
                Some(Ok(answer)) => (answer.into_candidates(), Vec::new()),
                Some(Err(StoreFailure::Embedding(g))) => match embeddings.swap_remove(g) {
                    Err(e) => return Err(e.into()),
                    Ok(_) => (Vec::new(), Vec::new()),
                },
                Some(Err(StoreFailure::Search(e))) => return Err(e),
                Some(Err(StoreFailure::Timeout(_))) | None => (Vec::new(), Vec::new()),
            }
        };
        timings.retrieve = retrieving.elapsed();
        if let Some(reranker) = &self.reranker {
            let (reranked, stages) =
                rerank_candidates_timed(reranker.as_ref(), &self.rerank, &request.query, candidates, ctx).await?;
            candidates = reranked;
            timings.rerank = stages;
        }
        if let Some(code_rank) = &self.code_rank {
            let ranking = Instant::now();
            candidates = code_rank.rank(&query.shape, candidates);
            timings.code_rank = ranking.elapsed();
        }
        let selecting = Instant::now();
        let results = select_spread(candidates, request.limit, self.per_file);
        timings.select = selecting.elapsed();
        timings.total = started.elapsed();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let [embed, retrieve, rerank, code, select] = timings.stages().map(|(_, d)| ms(d));
        tracing::debug!(
            embed,
            retrieve,
            rerank,
            code_rank = code,
            select,
            total = ms(timings.total),
            "search stages (ms)"
        );
        Ok(SearchOutcome { results, skipped, timings })
    }

    /// One store's candidates: checked against its embedder's dimension
    /// once (in a federation), retrieved in its mode, reordered by its own
    /// reranker.
    async fn query_store(
        &self,
        store: &FederatedStore,
        request: &SearchRequest,
        query: &Query,
        embedding: Option<Vec<f32>>,
        n_results: usize,
        ctx: &CallContext,
    ) -> Result<Vec<Candidate>, SearchError> {
        if self.federated
            && let Some(embedding) = &embedding
        {
            store.check_dimension(embedding.len(), ctx).await?;
        }
        let lexical = store.lexical();
        let mut candidates = store
            .retriever
            .retrieve(store.store.as_ref(), lexical, query, embedding, n_results, &request.filter, ctx)
            .await?;
        // The code ranking reads the files the query names too; a reranker
        // and its cut-off see them like the rest.
        if self.code_rank.is_some() {
            candidates = with_named_files(lexical, query, &request.filter, candidates, ctx).await?;
        }
        if let Some(reranker) = &store.reranker {
            candidates = rerank_candidates(reranker.as_ref(), &self.rerank, &request.query, candidates, ctx).await?;
        }
        Ok(candidates)
    }

    /// One hybrid store's inputs for a joint answer ([`joint_hybrid`]): its
    /// two rankings, to `depth`, its term statistics, and the chunks of the
    /// files the query names when the code ranking reads them.
    async fn store_rankings(
        &self,
        store: &FederatedStore,
        request: &SearchRequest,
        query: &Query,
        embedding: Option<Vec<f32>>,
        depth: usize,
        ctx: &CallContext,
    ) -> Result<Answer, SearchError> {
        let embedding = embedding.unwrap_or_default();
        store.check_dimension(embedding.len(), ctx).await?;
        // `joint_hybrid` asked only stores with a lexical ranking.
        let Some(lexical) = store.lexical() else { return Ok(Answer::Ranked(Vec::new())) };
        let rankings =
            store.retriever.rankings(store.store.as_ref(), lexical, query, embedding, depth, &request.filter, ctx);
        let named = async {
            match self.code_rank {
                Some(_) => lexical.named_files(query, &request.filter, ctx).await,
                None => Ok(Vec::new()),
            }
        };
        let (inputs, named) = futures::join!(rankings, named);
        Ok(Answer::Rankings { inputs: inputs?, named: named? })
    }
}

/// What one store of a search answered.
enum Answer {
    /// Its candidates, ranked in its own mode.
    Ranked(Vec<Candidate>),
    /// The inputs of a joint hybrid answer, and the chunks of the files the
    /// query names.
    Rankings { inputs: HybridInputs, named: Vec<Candidate> },
}

impl Answer {
    fn into_candidates(self) -> Vec<Candidate> {
        match self {
            Answer::Ranked(list) => list,
            Answer::Rankings { inputs, mut named } => {
                let mut list = inputs.dense;
                list.append(&mut named);
                list
            }
        }
    }
}

/// The hybrid options a federation's stores share when every store asked
/// runs the hybrid chain the same way (a lexical ranking, no reranker of its
/// own, the same options): their answer is then one store's, from the
/// union of their rankings ([`joint_answer`]).
fn joint_hybrid(stores: &[&FederatedStore]) -> Option<HybridOptions> {
    let options = *stores.first()?.retriever.hybrid();
    let joint = stores.len() > 1
        && stores.iter().all(|s| {
            s.retriever.mode() == RetrievalMode::Hybrid
                && s.lexical().is_some()
                && s.reranker.is_none()
                && *s.retriever.hybrid() == options
        });
    joint.then_some(options)
}

/// The stores' rankings as one store's ([`merge_rankings`]), run through the
/// one hybrid chain, followed by the chunks of the files the query names.
fn joint_answer(
    stores: &[&FederatedStore],
    answers: Vec<Answer>,
    query: &Query,
    options: &HybridOptions,
    n_results: usize,
) -> Vec<Candidate> {
    let mut inputs = Vec::new();
    let mut named = Vec::new();
    for answer in answers {
        match answer {
            Answer::Rankings { inputs: i, named: mut n } => {
                inputs.push(i);
                named.append(&mut n);
            }
            Answer::Ranked(list) => inputs.push(HybridInputs { dense: list, lexical: Vec::new(), statistics: None }),
        }
    }
    let depth = options.depth.max(n_results);
    let HybridInputs { dense, lexical, statistics } = merge_rankings(stores, inputs, depth);
    let mut candidates = hybrid(query, dense, lexical, options, n_results, statistics.as_ref());
    let mut seen: std::collections::HashSet<String> = candidates.iter().map(|c| c.chunk.id.clone()).collect();
    candidates.extend(named.into_iter().filter(|c| seen.insert(c.chunk.id.clone())));
    candidates
}

/// `candidates` followed by the chunks of the files the query names that
/// they do not hold, when a lexical index lists the store's files
/// ([`LexicalStore::named_files`](crate::traits::LexicalStore::named_files)):
/// what the code ranking reads besides the store's own list.
pub async fn with_named_files(
    lexical: Option<&dyn LexicalStore>,
    query: &Query,
    filter: &crate::filter::SearchFilter,
    mut candidates: Vec<Candidate>,
    ctx: &CallContext,
) -> Result<Vec<Candidate>, SearchError> {
    let Some(lexical) = lexical else { return Ok(candidates) };
    let named = lexical.named_files(query, filter, ctx).await?;
    let seen: std::collections::HashSet<String> = candidates.iter().map(|c| c.chunk.id.clone()).collect();
    candidates.extend(named.into_iter().filter(|c| !seen.contains(&c.chunk.id)));
    Ok(candidates)
}

/// Reorders `candidates` by the reranker's scores, stably, highest first,
/// after dropping those below its [`Reranker::min_score`] (and NaN ones)
/// when it has one. Used for the one list and for each store's own.
pub async fn rerank_candidates(
    reranker: &dyn Reranker,
    caps: &RerankOptions,
    query: &str,
    candidates: Vec<Candidate>,
    ctx: &CallContext,
) -> Result<Vec<Candidate>, SearchError> {
    rerank_candidates_timed(reranker, caps, query, candidates, ctx).await.map(|(ranked, _)| ranked)
}

/// [`rerank_candidates`], also reporting each rerank stage's time
/// ([`Reranker::rerank_timed`]; none when no stage ran).
pub async fn rerank_candidates_timed(
    reranker: &dyn Reranker,
    caps: &RerankOptions,
    query: &str,
    candidates: Vec<Candidate>,
    ctx: &CallContext,
) -> Result<(Vec<Candidate>, Vec<(String, Duration)>), SearchError> {
    let min_score = reranker.min_score();
    // One candidate needs no order, but with a cut-off it still needs a score.
    if candidates.is_empty() || (candidates.len() < 2 && min_score.is_none()) {
        return Ok((candidates, Vec::new()));
    }
    let documents = rerank_documents(&candidates, caps)?;
    let (scores, stages) = reranker.rerank_timed(query, &documents, ctx).await?;
    let mut scored: Vec<(f64, Candidate)> = scores.into_iter().zip(candidates).collect();
    if let Some(min) = min_score {
        scored.retain(|(score, _)| *score >= min);
    }
    // Stable, highest first; NaN sorts last rather than poisoning the order.
    scored.sort_by(|a, b| score_order(a.0, b.0));
    Ok((scored.into_iter().map(|(_, c)| c).collect(), stages))
}

/// The reranker's view of each candidate, checked against the byte caps
/// before anything is sent.
pub fn rerank_documents(candidates: &[Candidate], caps: &RerankOptions) -> Result<Vec<String>, SearchError> {
    let mut total = 0usize;
    candidates
        .iter()
        .enumerate()
        .map(|(index, c)| {
            let doc = rerank_document(c);
            if caps.max_document_bytes > 0 && doc.len() > caps.max_document_bytes {
                return Err(SearchError::RerankDocumentTooLarge {
                    index,
                    size: doc.len(),
                    max: caps.max_document_bytes,
                });
            }
            total += doc.len();
            if caps.max_request_bytes > 0 && total > caps.max_request_bytes {
                return Err(SearchError::RerankRequestTooLarge { size: total, max: caps.max_request_bytes });
            }
            Ok(doc)
        })
        .collect()
}

/// `Repository: org/repo@branch`, `File: path#Lx-Ly`, a blank line, the body.
pub fn rerank_document(c: &Candidate) -> String {
    let m = &c.chunk.metadata;
    format!(
        "Repository: {}/{}@{}\nFile: {}\n\n{}",
        m.organization,
        m.repository,
        m.branch,
        m.path_with_lines(),
        clean_document(&c.chunk.document)
    )
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

    struct FixedEmbedder(Mutex<Vec<String>>);
    #[async_trait]
    impl Embedder for FixedEmbedder {
        fn name(&self) -> &str {
            "fixed"
        }
        async fn embed(&self, inputs: &[String], _: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
            self.0.lock().unwrap().extend(inputs.iter().cloned());
            Ok(inputs.iter().map(|_| vec![1.0]).collect())
        }
    }

    struct ListStore(Vec<Candidate>, Mutex<Option<usize>>);
    #[async_trait]
    impl VectorStore for ListStore {
        fn name(&self) -> &str {
            "list"
        }
        async fn query(&self, q: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            *self.1.lock().unwrap() = Some(q.n_results);
            Ok(self.0.iter().take(q.n_results).cloned().collect())
        }
    }

    struct LengthReranker;
    #[async_trait]
    impl Reranker for LengthReranker {
        fn name(&self) -> &str {
            "length"
        }
        async fn rerank(&self, _: &str, docs: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
            Ok(docs.iter().map(|d| d.len() as f64).collect())
        }
    }

    fn cand(path: &str, body: &str) -> Candidate {
        Candidate {
            chunk: Chunk {
                id: path.into(),
                document: format!("Source: o/r@b:{path}\n\n{body}"),
                metadata: Metadata {
                    organization: "o".into(),
                    repository: "r".into(),
                    branch: "b".into(),
                    path: path.into(),
                    start_line: 1,
                    end_line: 3,
                    ..Default::default()
                },
            },
            distance: None,
        }
    }

    fn engine(
        cands: Vec<Candidate>,
        rerank: Option<RerankOptions>,
    ) -> (SearchEngine, Arc<FixedEmbedder>, Arc<ListStore>) {
        let e = Arc::new(FixedEmbedder(Mutex::default()));
        let s = Arc::new(ListStore(cands, Mutex::default()));
        let options = PipelineOptions { rerank: rerank.clone().unwrap_or_default(), ..Default::default() };
        let r: Option<Arc<dyn Reranker>> = rerank.map(|_| Arc::new(LengthReranker) as _);
        (SearchEngine::new(e.clone(), s.clone(), r, options), e, s)
    }

    fn req(limit: i64) -> SearchRequest {
        SearchArgs { query: " find me ".into(), limit, ..Default::default() }.validate().unwrap()
    }

    #[tokio::test]
    async fn embeds_with_prefix_and_asks_three_per_result_capped_at_60() {
        let (eng, e, s) = engine(vec![cand("a", "x")], None);
        eng.search(&req(4), &CallContext::default()).await.unwrap();
        assert_eq!(e.0.lock().unwrap().as_slice(), ["query: find me"]);
        assert_eq!(*s.1.lock().unwrap(), Some(12));
        eng.search(&req(20), &CallContext::default()).await.unwrap();
        assert_eq!(*s.1.lock().unwrap(), Some(60));
    }

    #[tokio::test]
    async fn reranking_uses_multiplier_cap_and_sorts_stably() {
        let opts = RerankOptions { candidate_multiplier: 4, max_candidates: 7, ..Default::default() };
        let cands = vec![cand("a", "s"), cand("b", "longer"), cand("c", "t"), cand("d", "longer!")];
        let (eng, _, s) = engine(cands, Some(opts));
        let got = eng.search(&req(5), &CallContext::default()).await.unwrap();
        assert_eq!(*s.1.lock().unwrap(), Some(7));
        let order: Vec<_> = got.iter().map(|c| c.chunk.id.as_str()).collect();
        assert_eq!(order, ["d", "b", "a", "c"]);
    }

    /// Length scores with a NaN for any document containing `nan`.
    struct NanLengthReranker;
    #[async_trait]
    impl Reranker for NanLengthReranker {
        fn name(&self) -> &str {
            "nan-length"
        }
        async fn rerank(&self, _: &str, docs: &[String], _: &CallContext) -> Result<Vec<f64>, BackendError> {
            Ok(docs.iter().map(|d| if d.contains("nan") { f64::NAN } else { d.len() as f64 }).collect())
        }
    }

    fn cut_off_engine(cands: Vec<Candidate>, min_score: f64) -> SearchEngine {
        let e = Arc::new(FixedEmbedder(Mutex::default()));
        let s = Arc::new(ListStore(cands, Mutex::default()));
        let chain = crate::RerankChain::new(vec![Arc::new(NanLengthReranker)]).unwrap().with_min_score(Some(min_score));
        SearchEngine::new(e, s, Some(Arc::new(chain)), PipelineOptions::default())
    }

    fn ids(got: &[Candidate]) -> Vec<&str> {
        got.iter().map(|c| c.chunk.id.as_str()).collect()
    }

    #[tokio::test]
    async fn cut_off_drops_candidates_below_it_before_selection() {
        // Every document is the 33-byte header plus its body: a 34, b 39, c 34, d 40, e 36.
        let cands = vec![cand("a", "s"), cand("b", "longer"), cand("c", "t"), cand("d", "longer!"), cand("e", "nan")];
        let ctx = CallContext::default();
        // Without the cut-off, a limit of 3 would also take a.
        let got = cut_off_engine(cands.clone(), 39.0).search(&req(3), &ctx).await.unwrap();
        assert_eq!(ids(&got), ["d", "b"]);
        // A limit of 1 fetches three candidates (a, b, c), of which only b passes.
        let got = cut_off_engine(cands.clone(), 39.0).search(&req(1), &ctx).await.unwrap();
        assert_eq!(ids(&got), ["b"]);
        // NaN is dropped even by the lowest cut-off.
        let got = cut_off_engine(cands.clone(), f64::NEG_INFINITY).search(&req(10), &ctx).await.unwrap();
        assert_eq!(ids(&got), ["d", "b", "a", "c"]);
        // A lone candidate is scored, and dropped, when there is a cut-off.
        let got = cut_off_engine(vec![cand("a", "s")], 35.0).search(&req(3), &ctx).await.unwrap();
        assert!(got.is_empty());
        let got = cut_off_engine(vec![cand("a", "s")], 34.0).search(&req(3), &ctx).await.unwrap();
        assert_eq!(ids(&got), ["a"]);
    }

    #[test]
    fn byte_caps_fail_instead_of_truncating() {
        let cands = vec![cand("a", "12345"), cand("b", "123")];
        let doc0 = rerank_document(&cands[0]);
        assert_eq!(doc0, "Repository: o/r@b\nFile: a#L1-L3\n\n12345");
        let caps = RerankOptions { max_document_bytes: doc0.len() - 1, ..Default::default() };
        assert_eq!(
            rerank_documents(&cands, &caps).unwrap_err().to_string(),
            format!(
                "reranking document 0 is {} bytes, exceeding rerank-max-document-bytes of {}",
                doc0.len(),
                doc0.len() - 1
            )
        );
        let caps = RerankOptions { max_request_bytes: doc0.len() + 5, ..Default::default() };
        let total = doc0.len() + rerank_document(&cands[1]).len();
        assert_eq!(
            rerank_documents(&cands, &caps).unwrap_err().to_string(),
            format!("reranking request is {total} bytes, exceeding rerank-max-request-bytes of {}", doc0.len() + 5)
        );
        let caps = RerankOptions { max_request_bytes: total, max_document_bytes: doc0.len(), ..Default::default() };
        assert_eq!(rerank_documents(&cands, &caps).unwrap().len(), 2);
    }
}
