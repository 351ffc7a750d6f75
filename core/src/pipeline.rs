//! embed → retrieve → rerank → select → render, for one validated request.

use std::sync::Arc;

use crate::error::SearchError;
use crate::federated::FederatedEngine;
use crate::record::Candidate;
use crate::request::SearchRequest;
use crate::rerank::score_order;
use crate::retrieval::{HybridOptions, RetrievalMode, Retriever};
use crate::select::{clean_document, select};
use crate::traits::{CallContext, Embedder, Reranker, VectorStore};

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

/// A store left out of a federated search, and why (already client-safe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedStore {
    pub store: String,
    pub reason: String,
}

/// The selected results, and the stores a federated search had to skip.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchOutcome {
    pub results: Vec<Candidate>,
    pub skipped: Vec<SkippedStore>,
}

/// One search configuration: an embedder, a store and an optional reranker;
/// or several stores searched as one ([`SearchEngine::federated`]).
#[derive(Clone)]
pub struct SearchEngine {
    embedder: Arc<dyn Embedder>,
    store: Arc<dyn VectorStore>,
    reranker: Option<Arc<dyn Reranker>>,
    options: PipelineOptions,
    retriever: Arc<Retriever>,
    /// When set, searches go through it and the fields above describe its first store.
    federated: Option<Arc<FederatedEngine>>,
}

impl std::fmt::Debug for SearchEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchEngine")
            .field("embedder", &self.embedder.name())
            .field("store", &self.store.name())
            .field("reranker", &self.reranker.as_ref().map(|r| r.name().to_owned()))
            .field("options", &self.options)
            .field("federated", &self.federated)
            .finish()
    }
}

impl SearchEngine {
    pub fn new(
        embedder: Arc<dyn Embedder>,
        store: Arc<dyn VectorStore>,
        reranker: Option<Arc<dyn Reranker>>,
        options: PipelineOptions,
    ) -> Self {
        let retriever = Arc::new(Retriever::new(options.retrieval, options.hybrid));
        SearchEngine { embedder, store, reranker, options, retriever, federated: None }
    }

    /// An engine over several stores (see [`crate::federated`]). Panics when
    /// `engine` has no store: the configuration loader refuses that earlier.
    pub fn federated(engine: FederatedEngine) -> Self {
        let first = engine.stores().first().expect("a federation has at least one store");
        SearchEngine {
            embedder: first.embedder.clone(),
            store: first.store.clone(),
            reranker: None,
            options: PipelineOptions::default(),
            retriever: Arc::default(),
            federated: Some(Arc::new(engine)),
        }
    }

    /// The federation behind this engine, if it is one.
    pub fn federation(&self) -> Option<&FederatedEngine> {
        self.federated.as_deref()
    }

    /// Like [`search`](Self::search), also reporting skipped stores.
    pub async fn search_outcome(
        &self,
        request: &SearchRequest,
        ctx: &CallContext,
    ) -> Result<SearchOutcome, SearchError> {
        if let Some(federated) = &self.federated {
            return federated.search(request, ctx).await;
        }
        Ok(SearchOutcome { results: self.search(request, ctx).await?, skipped: Vec::new() })
    }

    /// Candidates fetched for `limit` results.
    pub fn candidate_count(&self, limit: usize) -> usize {
        if let Some(federated) = &self.federated {
            return federated.candidate_count(limit);
        }
        if self.reranker.is_some() {
            (limit * self.options.rerank.candidate_multiplier).min(self.options.rerank.max_candidates)
        } else {
            (limit * CANDIDATES_PER_RESULT).min(MAX_CANDIDATES_WITHOUT_RERANK)
        }
    }

    /// Runs the pipeline and returns the selected results in display order.
    pub async fn search(&self, request: &SearchRequest, ctx: &CallContext) -> Result<Vec<Candidate>, SearchError> {
        if let Some(federated) = &self.federated {
            return federated.search(request, ctx).await.map(|o| o.results);
        }
        let embedding = match self.retriever.needs_embedding(self.store.as_ref()) {
            true => {
                let input = [format!("{}{}", self.options.query_prefix, request.query)];
                Some(self.embedder.embed(&input, ctx).await?.swap_remove(0))
            }
            false => None,
        };
        let n_results = self.candidate_count(request.limit);
        let mut candidates = self
            .retriever
            .retrieve(self.store.as_ref(), &request.query, embedding, n_results, &request.filter, ctx)
            .await?;
        if let Some(reranker) = &self.reranker {
            candidates =
                rerank_candidates(reranker.as_ref(), &self.options.rerank, &request.query, candidates, ctx).await?;
        }
        Ok(select(candidates, request.limit))
    }
}

/// Reorders `candidates` by the reranker's scores, stably, highest first,
/// after dropping those below its [`Reranker::min_score`] (and NaN ones)
/// when it has one. Shared by the one-store and the federated engines.
pub async fn rerank_candidates(
    reranker: &dyn Reranker,
    caps: &RerankOptions,
    query: &str,
    candidates: Vec<Candidate>,
    ctx: &CallContext,
) -> Result<Vec<Candidate>, SearchError> {
    let min_score = reranker.min_score();
    // One candidate needs no order, but with a cut-off it still needs a score.
    if candidates.is_empty() || (candidates.len() < 2 && min_score.is_none()) {
        return Ok(candidates);
    }
    let documents = rerank_documents(&candidates, caps)?;
    let scores = reranker.rerank(query, &documents, ctx).await?;
    let mut scored: Vec<(f64, Candidate)> = scores.into_iter().zip(candidates).collect();
    if let Some(min) = min_score {
        scored.retain(|(score, _)| *score >= min);
    }
    // Stable, highest first; NaN sorts last rather than poisoning the order.
    scored.sort_by(|a, b| score_order(a.0, b.0));
    Ok(scored.into_iter().map(|(_, c)| c).collect())
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
