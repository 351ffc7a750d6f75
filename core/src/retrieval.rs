//! The first stage of the pipeline: how a store ranks its candidates.
//!
//! Three modes:
//!
//! * `dense`: nearest neighbours of the query's embedding
//!   ([`VectorStore::query`]), what every store can do.
//! * `lexical`: the store's own ranking by the query's words
//!   ([`LexicalStore::lexical_query`]); no embedding is made.
//! * `hybrid`: both full rankings, each read to [`HybridOptions::depth`]
//!   candidates, fused by weighted reciprocal-rank fusion: a chunk scores
//!   `weight_dense / (k + rank_dense) + weight_lexical / (k + rank_lexical)`
//!   over the lists it is in (ranks from 1); the best lexical rows that hold
//!   the query verbatim first; then the first [`HybridOptions::rerank`]
//!   after them read again for the query's terms, weighed by the lexical
//!   index's term statistics ([`read_head_again`]). The engine runs this
//!   chain over every store; a store only answers the rankings (in one call
//!   when it can, [`LexicalStore::hybrid_inputs`]) and the statistics.
//!
//! A store says it can rank lexically by returning itself from
//! [`VectorStore::lexical`], or the engine keeps a lexical index beside it
//! ([`crate::FederatedStore::with_lexical_index`]); no caller downcasts. Asked for `lexical` or
//! `hybrid`, a store that cannot runs `dense`, and the [`Retriever`] says so
//! once in the log (a warning per retriever, not per query). Filters apply
//! before ranking in every mode, as the traits require.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::BackendError;
use crate::evidence;
use crate::filter::SearchFilter;
pub use crate::query::{Query, contains_verbatim, verbatim_phrase};
use crate::record::Candidate;
use crate::traits::{CallContext, Embedder, HybridInputs, TermStatistics, VectorQuery, VectorStore};
// The store-side half (what a store implements, and the options it is
// handed) lives with the other traits; re-exported so callers keep these paths.
pub use crate::traits::{HybridOptions, LexicalQuery, LexicalStore};

/// How the first stage ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    /// Nearest neighbours of the query embedding.
    #[default]
    Dense,
    /// The store's ranking by the query's words.
    Lexical,
    /// Dense and lexical fused by reciprocal rank.
    Hybrid,
}

/// The mode of a store that can rank lexically and was given none: the one
/// that measured best on the evaluation sets (docs/evaluation.md). Stores
/// that cannot rank lexically default to [`RetrievalMode::Dense`].
pub const DEFAULT_LEXICAL_CAPABLE_MODE: RetrievalMode = RetrievalMode::Hybrid;

/// The names `--mode` and the `retrieval` keys accept, in order.
pub const MODE_NAMES: [&str; 3] = ["dense", "lexical", "hybrid"];

impl RetrievalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalMode::Dense => "dense",
            RetrievalMode::Lexical => "lexical",
            RetrievalMode::Hybrid => "hybrid",
        }
    }

    /// The default mode of a store: [`DEFAULT_LEXICAL_CAPABLE_MODE`] when its
    /// words can be ranked (by itself or an index beside it), else dense.
    pub fn default_for(lexical: bool) -> Self {
        if lexical { DEFAULT_LEXICAL_CAPABLE_MODE } else { RetrievalMode::Dense }
    }

    /// Whether this mode needs the query's embedding, over a store whose
    /// words can (`lexical`) or cannot be ranked.
    pub fn needs_embedding(self, lexical: bool) -> bool {
        self != RetrievalMode::Lexical || !lexical
    }
}

impl std::fmt::Display for RetrievalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RetrievalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dense" => Ok(RetrievalMode::Dense),
            "lexical" => Ok(RetrievalMode::Lexical),
            "hybrid" => Ok(RetrievalMode::Hybrid),
            other => Err(format!("unknown retrieval mode \"{other}\"; valid modes: {}", MODE_NAMES.join(", "))),
        }
    }
}

/// Defaults of [`HybridOptions`], chosen on the evaluation sets
/// (docs/evaluation.md, "Tuning the hybrid defaults"): the identifier-aware
/// lexical ranking finds far more than the `hash` embedder on hand-written
/// questions and identifiers, so it leads (weight 4 against 1), and the dense
/// ranking breaks ties and adds what matches in meaning only; lexical weights
/// 4–6 with `k` 15–30 all measure alike, and weights up to 1.5 let chunks that
/// both rankings place in the middle push an exact identifier or phrase match
/// out of the top 5.
pub const DEFAULT_WEIGHT_DENSE: f64 = 1.0;
pub const DEFAULT_WEIGHT_LEXICAL: f64 = 4.0;
pub const DEFAULT_RRF_K: f64 = 20.0;
pub const DEFAULT_HYBRID_DEPTH: usize = 50;
/// The fused candidates the embedded store reads again by the evidence of
/// the query's terms in them (docs/evaluation.md): the chunk a question is
/// about is among the first 20 far more often than among the first 5.
pub const DEFAULT_HYBRID_RERANK: usize = 20;

impl Default for HybridOptions {
    fn default() -> Self {
        HybridOptions {
            weight_dense: DEFAULT_WEIGHT_DENSE,
            weight_lexical: DEFAULT_WEIGHT_LEXICAL,
            rrf_k: DEFAULT_RRF_K,
            depth: DEFAULT_HYBRID_DEPTH,
            rerank: DEFAULT_HYBRID_RERANK,
        }
    }
}

impl HybridOptions {
    /// The defaults with `embedder`'s own dense weight
    /// ([`Embedder::hybrid_weight_dense`]).
    pub fn for_embedder(embedder: &dyn Embedder) -> Self {
        HybridOptions { weight_dense: embedder.hybrid_weight_dense(), ..HybridOptions::default() }
    }

    /// Refuses weights that would make the fused order meaningless; `key`
    /// names each setting (`weight_dense`, `rrf_k`, ...) as the operator wrote
    /// it (`--hybrid-rrf-k`).
    pub fn validate(&self, key: impl Fn(&str) -> String) -> Result<(), RetrievalSettingError> {
        for (name, value) in [("weight_dense", self.weight_dense), ("weight_lexical", self.weight_lexical)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(RetrievalSettingError::Negative { key: key(name), value });
            }
        }
        if self.weight_dense == 0.0 && self.weight_lexical == 0.0 {
            return Err(RetrievalSettingError::NoWeight { dense: key("weight_dense"), lexical: key("weight_lexical") });
        }
        if !(self.rrf_k.is_finite() && self.rrf_k > 0.0) {
            return Err(RetrievalSettingError::NotPositive { key: key("rrf_k"), value: self.rrf_k });
        }
        if self.depth == 0 {
            return Err(RetrievalSettingError::Zero { key: key("depth") });
        }
        Ok(())
    }
}

/// A retrieval setting refused, named by its key as the operator wrote it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetrievalSettingError {
    #[error("{key}: must be a non-negative number, not {value}")]
    Negative { key: String, value: f64 },
    #[error("{dense} and {lexical} cannot both be 0")]
    NoWeight { dense: String, lexical: String },
    #[error("{key}: must be a positive number, not {value}")]
    NotPositive { key: String, value: f64 },
    #[error("{key}: must be at least 1")]
    Zero { key: String },
    /// A hybrid setting with another mode, where it would silently do nothing.
    #[error("{key}: applies to hybrid retrieval only, not {mode}")]
    HybridOnly { key: String, mode: RetrievalMode },
}

/// Weighted reciprocal-rank fusion of rankings given as keys, best first:
/// `Σ weight / (k + rank)` (rank from 1). Equal scores keep first-seen order
/// (list order, then rank). Returns each key with its fused score.
pub fn reciprocal_rank_fusion<K: Clone + Eq + Hash>(rankings: &[(f64, &[K])], k: f64) -> Vec<(K, f64)> {
    let mut index: HashMap<&K, usize> = HashMap::new();
    let mut fused: Vec<(K, f64)> = Vec::new();
    // A ranking of weight 0 is ignored, so its keys do not trail with a score of 0.
    for (weight, ranking) in rankings.iter().filter(|(w, _)| *w != 0.0) {
        for (i, key) in ranking.iter().enumerate() {
            let score = weight / (k + (i + 1) as f64);
            match index.get(key) {
                Some(&at) => fused[at].1 += score,
                None => {
                    index.insert(key, fused.len());
                    fused.push((key.clone(), score));
                }
            }
        }
    }
    // Stable: equal scores keep first-seen order.
    fused.sort_by(|a, b| b.1.total_cmp(&a.1));
    fused
}

/// The key under which lists are fused: the chunk id, or its file and lines
/// when a store gives none.
pub fn fusion_key(candidate: &Candidate) -> String {
    if candidate.chunk.id.is_empty() {
        let m = &candidate.chunk.metadata;
        format!("{}{}", m.file_key(), m.line_anchor())
    } else {
        candidate.chunk.id.clone()
    }
}

/// Candidate lists fused by [`reciprocal_rank_fusion`] on [`fusion_key`],
/// each with its weight. The results carry no distance: fused scores are
/// not distances.
pub fn fuse_candidates(lists: &[(f64, &[Candidate])], k: f64) -> Vec<Candidate> {
    let keys: Vec<Vec<String>> = lists.iter().map(|(_, l)| l.iter().map(fusion_key).collect()).collect();
    let mut first: HashMap<&str, &Candidate> = HashMap::new();
    for ((_, list), keys) in lists.iter().zip(&keys) {
        for (c, key) in list.iter().zip(keys) {
            first.entry(key.as_str()).or_insert(c);
        }
    }
    let rankings: Vec<(f64, &[String])> = lists.iter().zip(&keys).map(|((w, _), k)| (*w, k.as_slice())).collect();
    reciprocal_rank_fusion(&rankings, k)
        .into_iter()
        .map(|(key, _)| Candidate { chunk: first[key.as_str()].chunk.clone(), distance: None })
        .collect()
}

/// How many of the lexical ranking's best a verbatim match is looked for in.
pub const VERBATIM_DEPTH: usize = 5;

/// The hybrid ranking before its head is read again: the two rankings
/// fused, and how many verbatim matches lead it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    /// Best first; `distance` is the negated fused score.
    pub candidates: Vec<Candidate>,
    /// The first `verbatim` candidates hold the query word for word, in the
    /// lexical order: a chunk that holds an error text or a several-word
    /// name exactly as asked for is what the question names, and fusion by
    /// rank alone could push it below chunks that merely resemble it.
    pub verbatim: usize,
}

/// The one fusion of a dense and a lexical ranking (full lists, best
/// first): weighted reciprocal-rank fusion on [`fusion_key`], then the best
/// lexical results that hold a query of several words verbatim first
/// (see [`Fused::verbatim`]).
pub fn fuse_hybrid(query: &Query, dense: Vec<Candidate>, lexical: Vec<Candidate>, options: &HybridOptions) -> Fused {
    let keys = |list: &[Candidate]| list.iter().map(fusion_key).collect::<Vec<String>>();
    let (dense_keys, lexical_keys) = (keys(&dense), keys(&lexical));
    let fused = reciprocal_rank_fusion(
        &[(options.weight_dense, &dense_keys[..]), (options.weight_lexical, &lexical_keys[..])],
        options.rrf_k,
    );
    let score_of: HashMap<&str, f64> = fused.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    // The fused keys of the verbatim rows, in the lexical order (a lexical
    // ranking of weight 0 adds no keys of its own).
    let verbatim: Vec<&str> = match &query.phrase {
        Some(phrase) => lexical
            .iter()
            .zip(&lexical_keys)
            .take(VERBATIM_DEPTH)
            .filter(|(c, key)| score_of.contains_key(key.as_str()) && contains_verbatim(&c.chunk.document, phrase))
            .map(|(_, key)| key.as_str())
            .collect(),
        None => Vec::new(),
    };
    // Each chunk as first seen (dense, then lexical), moved, not copied.
    let mut first: HashMap<&str, Candidate> = HashMap::with_capacity(dense.len() + lexical.len());
    for (c, key) in dense.into_iter().zip(&dense_keys).chain(lexical.into_iter().zip(&lexical_keys)) {
        first.entry(key.as_str()).or_insert(c);
    }
    let mut take = |key: &str, score: f64| {
        first.remove(key).map(|mut c| {
            c.distance = Some(-score);
            c
        })
    };
    let mut candidates: Vec<Candidate> = verbatim.iter().filter_map(|key| take(key, score_of[key])).collect();
    candidates.extend(fused.iter().filter_map(|(key, score)| take(key, *score)));
    Fused { candidates, verbatim: verbatim.len() }
}

/// The first `rerank` candidates after the verbatim matches, ordered again
/// by the evidence of the query's terms in them ([`crate::evidence`]),
/// weighed by `statistics` of the query's [`Query::lookup_tokens`] (in that
/// order). Reciprocal-rank fusion knows only ranks; the chunk a question is
/// about is most often already among the first twenty, below chunks one
/// ranking loves for a single rare word.
pub fn read_head_again(query: &Query, fused: &mut Fused, rerank: usize, statistics: &TermStatistics) {
    let tail = &mut fused.candidates[fused.verbatim..];
    let end = tail.len().min(rerank);
    if rerank < 2 || tail.len() < 2 || query.terms.is_empty() {
        return;
    }
    let tokens = query.lookup_tokens();
    let frequency: HashMap<&str, u64> =
        tokens.iter().map(String::as_str).zip(statistics.frequencies.iter().copied()).collect();
    let terms = match evidence::weigh(query.terms.clone(), statistics.rows, |token| {
        Ok::<u64, std::convert::Infallible>(frequency.get(token).copied().unwrap_or(0))
    }) {
        Ok(terms) => terms,
        Err(never) => match never {},
    };
    let mut matcher = evidence::Matcher::new(&terms);
    let evidence: Vec<evidence::Evidence> =
        tail[..end].iter().map(|c| matcher.of(&c.chunk.document, &c.chunk.metadata)).collect();
    let reordered: Vec<Candidate> = evidence::order(&evidence).into_iter().map(|i| tail[i].clone()).collect();
    for (slot, c) in tail[..end].iter_mut().zip(reordered) {
        *slot = c;
    }
}

/// Whether [`hybrid`] reads the head again for `query`, so that the term
/// statistics are worth asking for.
pub fn reads_head_again(query: &Query, options: &HybridOptions) -> bool {
    options.rerank > 1 && !query.terms.is_empty()
}

/// The hybrid answer from the two full rankings: fused ([`fuse_hybrid`]),
/// the head read again when `statistics` are given ([`read_head_again`]),
/// cut to `n_results`.
pub fn hybrid(
    query: &Query,
    dense: Vec<Candidate>,
    lexical: Vec<Candidate>,
    options: &HybridOptions,
    n_results: usize,
    statistics: Option<&TermStatistics>,
) -> Vec<Candidate> {
    let mut fused = fuse_hybrid(query, dense, lexical, options);
    if let Some(statistics) = statistics {
        // Only the head can move, and the answer is cut after it.
        fused.candidates.truncate(n_results.max(fused.verbatim.saturating_add(options.rerank)));
        read_head_again(query, &mut fused, options.rerank, statistics);
    }
    fused.candidates.truncate(n_results);
    fused.candidates
}

/// One store's first stage: its mode and hybrid weights, and whether it has
/// already said that it cannot rank lexically.
#[derive(Debug)]
pub struct Retriever {
    mode: RetrievalMode,
    hybrid: HybridOptions,
    warned: AtomicBool,
}

impl Clone for Retriever {
    fn clone(&self) -> Self {
        Retriever::new(self.mode, self.hybrid)
    }
}

impl PartialEq for Retriever {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode && self.hybrid == other.hybrid
    }
}

impl Default for Retriever {
    fn default() -> Self {
        Retriever::new(RetrievalMode::Dense, HybridOptions::default())
    }
}

impl Retriever {
    pub fn new(mode: RetrievalMode, hybrid: HybridOptions) -> Self {
        Retriever { mode, hybrid, warned: AtomicBool::new(false) }
    }

    /// The mode asked for (a store that cannot rank lexically still runs dense).
    pub fn mode(&self) -> RetrievalMode {
        self.mode
    }

    pub fn hybrid(&self) -> &HybridOptions {
        &self.hybrid
    }

    /// Whether [`retrieve`](Self::retrieve) needs an embedding, given
    /// whether a lexical ranking is at hand.
    pub fn needs_embedding(&self, lexical: bool) -> bool {
        self.mode.needs_embedding(lexical)
    }

    /// The first `n_results` candidates of `store` passing `filter`, ranked
    /// by this retriever's mode, the words ranked by `lexical` (the store's
    /// own lexical ranking, or one kept beside it). `embedding` must be given
    /// when [`needs_embedding`](Self::needs_embedding) says so.
    ///
    /// Hybrid is a chain the engine runs the same way over every store: the
    /// two rankings read to [`HybridOptions::depth`], fused once
    /// ([`fuse_hybrid`]), the head read again for the query's terms where
    /// `lexical` has term statistics ([`read_head_again`]), cut to
    /// `n_results`.
    #[allow(clippy::too_many_arguments)]
    pub async fn retrieve(
        &self,
        store: &dyn VectorStore,
        lexical: Option<&dyn LexicalStore>,
        query: &Query,
        embedding: Option<Vec<f32>>,
        n_results: usize,
        filter: &SearchFilter,
        ctx: &CallContext,
    ) -> Result<Vec<Candidate>, BackendError> {
        let lexical = match (self.mode, lexical) {
            (RetrievalMode::Dense, _) => None,
            (mode, None) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        store = store.name(),
                        mode = mode.as_str(),
                        "the store cannot rank lexically; running dense retrieval"
                    );
                }
                None
            }
            (mode, Some(lexical)) => Some((mode, lexical)),
        };
        let dense = |embedding: Option<Vec<f32>>, n_results: usize| {
            let query = VectorQuery { embedding: embedding.unwrap_or_default(), n_results, filter: filter.clone() };
            async move { store.query(&query, ctx).await }
        };
        let Some((mode, lexical)) = lexical else { return dense(embedding, n_results).await };
        if mode == RetrievalMode::Lexical {
            let words = LexicalQuery { text: query.text.clone(), n_results, filter: filter.clone() };
            return lexical.lexical_query(&words, ctx).await;
        }
        let depth = self.hybrid.depth.max(n_results);
        let inputs = self.rankings(store, lexical, query, embedding.unwrap_or_default(), depth, filter, ctx).await?;
        let HybridInputs { dense, lexical, statistics } = inputs;
        Ok(hybrid(query, dense, lexical, &self.hybrid, n_results, statistics.as_ref()))
    }

    /// The inputs of the hybrid chain over `store`: its `depth` nearest
    /// neighbours of `embedding`, the `depth` best of `lexical`'s ranking,
    /// and the term statistics of the query's tokens when the head will be
    /// read again ([`reads_head_again`]). In one call when `lexical` is the
    /// store's own and answers them together ([`LexicalStore::hybrid_inputs`]).
    #[allow(clippy::too_many_arguments)]
    pub async fn rankings(
        &self,
        store: &dyn VectorStore,
        lexical: &dyn LexicalStore,
        query: &Query,
        embedding: Vec<f32>,
        depth: usize,
        filter: &SearchFilter,
        ctx: &CallContext,
    ) -> Result<HybridInputs, BackendError> {
        let deep = LexicalQuery { text: query.text.clone(), n_results: depth, filter: filter.clone() };
        let tokens = reads_head_again(query, &self.hybrid).then(|| query.lookup_tokens());
        // Only a store's own lexical ranking may answer the nearest neighbours
        // with it: an index kept beside a store holds other vectors.
        let own = store.lexical().is_some_and(|own| std::ptr::addr_eq(own, lexical));
        if own && let Some(inputs) = lexical.hybrid_inputs(&deep, &embedding, tokens.as_deref(), ctx).await {
            return inputs;
        }
        let statistics = async {
            match &tokens {
                Some(tokens) => lexical.term_statistics(tokens, ctx).await,
                None => Ok(None),
            }
        };
        let nearest = VectorQuery { embedding, n_results: depth, filter: filter.clone() };
        let (dense, ranked, statistics) =
            futures::join!(store.query(&nearest, ctx), lexical.lexical_query(&deep, ctx), statistics);
        Ok(HybridInputs { dense: dense?, lexical: ranked?, statistics: statistics? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_of_several_words_is_found_word_for_word() {
        assert_eq!(verbatim_phrase("Missing queryFn"), Some(" missing queryfn ".to_owned()));
        assert_eq!(verbatim_phrase("  parse_config  "), Some(" parse config ".to_owned()));
        assert_eq!((verbatim_phrase("queryFn"), verbatim_phrase(" ?! ")), (None, None));
        let phrase = verbatim_phrase("As of v4, queryKey needs to be an Array").unwrap();
        assert!(contains_verbatim("throw new Error('As of v4, queryKey needs to be an Array.')", &phrase));
        assert!(!contains_verbatim("As of v4 the queryKey needs to be an Array", &phrase), "a word between");
        // Whole words only.
        let phrase = verbatim_phrase("missing query").unwrap();
        assert!(!contains_verbatim("Missing queryFn", &phrase));
        assert!(contains_verbatim("// MISSING\tQUERY!", &phrase));
    }

    #[test]
    fn hybrid_fusion_puts_the_best_verbatim_lexical_results_first() {
        let c = |id: &str, document: &str| Candidate {
            chunk: Chunk { id: id.into(), document: document.into(), metadata: Metadata::default() },
            distance: None,
        };
        let (a, b, d) = (c("a", "no match here"), c("b", "the routing pattern must begin with '/'"), c("d", "routing"));
        let dense = [a.clone(), d.clone(), b.clone()];
        let lexical = [d.clone(), b.clone()];
        let options = HybridOptions { weight_dense: 1.0, weight_lexical: 1.0, rrf_k: 60.0, depth: 50, rerank: 0 };
        let fuse = |query: &str, dense: &[Candidate], lexical: &[Candidate], n: usize| {
            let fused = fuse_hybrid(&Query::new(query), dense.to_vec(), lexical.to_vec(), &options);
            let verbatim = fused.verbatim;
            (fused.candidates.into_iter().take(n).map(|c| c.chunk.id).collect::<Vec<_>>(), verbatim)
        };
        // d: 1/62 + 1/61 > b: 1/63 + 1/62 > a: 1/61.
        assert_eq!(fuse("routing", &dense, &lexical, 3), (vec!["d".to_owned(), "b".into(), "a".into()], 0));
        assert_eq!(fuse("Pattern must begin", &dense, &lexical, 3), (vec!["b".to_owned(), "d".into(), "a".into()], 1));
        assert_eq!(fuse("pattern must begin", &dense, &lexical, 1).0, ["b"]);
        // Only the lexical ranking's best are looked at.
        let deep: Vec<Candidate> =
            (0..VERBATIM_DEPTH).map(|i| c(&format!("x{i}"), "routing")).chain([b.clone()]).collect();
        assert_eq!(fuse("pattern must begin", &[], &deep, 1).0, ["x0"]);
        // A lexical ranking of weight 0 promotes only what the dense ranking holds.
        let dense_only = HybridOptions { weight_lexical: 0.0, ..options };
        let fused = fuse_hybrid(&Query::new("pattern must begin"), dense.to_vec(), lexical.to_vec(), &dense_only);
        assert_eq!((ids(&fused.candidates), fused.verbatim), (vec!["b", "a", "d"], 1));
        let fused = fuse_hybrid(&Query::new("pattern must begin"), dense[..2].to_vec(), lexical.to_vec(), &dense_only);
        assert_eq!((ids(&fused.candidates), fused.verbatim), (vec!["a", "d"], 0));
    }
    use crate::record::{Chunk, Metadata};
    use async_trait::async_trait;
    use std::sync::Mutex;

    fn cand(id: &str) -> Candidate {
        Candidate {
            chunk: Chunk {
                id: id.into(),
                document: format!("Source: o/r@b:{id}.rs\n\nbody {id}"),
                metadata: Metadata { path: format!("{id}.rs"), ..Default::default() },
            },
            distance: Some(0.5),
        }
    }

    fn ids(list: &[Candidate]) -> Vec<&str> {
        list.iter().map(|c| c.chunk.id.as_str()).collect()
    }

    #[test]
    fn weighted_fusion_prefers_agreement_and_honours_weights() {
        let (a, b) = (["1", "3", "5", "2"], ["2", "3", "4"]);
        // 3: 1/62 + 1/62; 2: 1/64 + 1/61; 1: 1/61; 5 and 4 tie at 1/63, first seen first.
        let fused = reciprocal_rank_fusion(&[(1.0, &a[..]), (1.0, &b[..])], 60.0);
        let order: Vec<&str> = fused.iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["3", "2", "1", "5", "4"]);
        assert!((fused[0].1 - 2.0 / 62.0).abs() < 1e-12);
        // The second list weighted 3x: 2 (1/64 + 3/61) passes 3 (4/62), and 4 (3/63) passes 1 (1/61).
        let fused = reciprocal_rank_fusion(&[(1.0, &a[..]), (3.0, &b[..])], 60.0);
        let order: Vec<&str> = fused.iter().map(|(k, _)| *k).collect();
        assert_eq!(order, ["2", "3", "4", "1", "5"]);
        // Equal scores keep first-seen order.
        let fused = reciprocal_rank_fusion(&[(1.0, &["x", "y"][..]), (1.0, &["y", "x"][..])], 60.0);
        assert_eq!(fused.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["x", "y"]);
        // A ranking of weight 0 contributes no keys.
        let fused = reciprocal_rank_fusion(&[(0.0, &a[..]), (1.0, &b[..])], 60.0);
        assert_eq!(fused.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["2", "3", "4"]);
    }

    #[test]
    fn modes_parse_and_print() {
        for name in MODE_NAMES {
            assert_eq!(name.parse::<RetrievalMode>().unwrap().as_str(), name);
        }
        assert_eq!(
            "bm25".parse::<RetrievalMode>().unwrap_err(),
            "unknown retrieval mode \"bm25\"; valid modes: dense, lexical, hybrid"
        );
        let key = |k: &str| format!("--hybrid-{k}");
        let bad = HybridOptions { weight_dense: 0.0, weight_lexical: 0.0, ..Default::default() };
        assert_eq!(
            bad.validate(key).unwrap_err().to_string(),
            "--hybrid-weight_dense and --hybrid-weight_lexical cannot both be 0"
        );
        let bad = HybridOptions { rrf_k: 0.0, ..Default::default() };
        assert_eq!(bad.validate(key).unwrap_err().to_string(), "--hybrid-rrf_k: must be a positive number, not 0");
        assert!(HybridOptions::default().validate(key).is_ok());
    }

    /// A store answering dense and lexical queries from fixed lists, and
    /// recording what it was asked.
    struct Both {
        dense: Vec<Candidate>,
        words: Option<Vec<Candidate>>,
        asked: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl VectorStore for Both {
        fn name(&self) -> &str {
            "both"
        }
        async fn query(&self, q: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            self.asked.lock().unwrap().push(format!("dense {} {}", q.n_results, q.embedding.len()));
            Ok(self.dense.iter().take(q.n_results).cloned().collect())
        }
        fn lexical(&self) -> Option<&dyn LexicalStore> {
            self.words.as_ref().map(|_| self as &dyn LexicalStore)
        }
    }

    #[async_trait]
    impl LexicalStore for Both {
        async fn lexical_query(&self, q: &LexicalQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            self.asked.lock().unwrap().push(format!("lexical {} {}", q.n_results, q.text));
            Ok(self.words.iter().flatten().take(q.n_results).cloned().collect())
        }
    }

    async fn run(store: &Both, mode: RetrievalMode, n: usize) -> Vec<String> {
        let equal = HybridOptions { weight_dense: 1.0, weight_lexical: 1.0, rrf_k: 60.0, depth: 3, rerank: 0 };
        let retriever = Retriever::new(mode, equal);
        let embedding = retriever.needs_embedding(store.lexical().is_some()).then(|| vec![1.0]);
        let query = Query::new("find x");
        let filter = SearchFilter::default();
        let got = retriever
            .retrieve(store, store.lexical(), &query, embedding, n, &filter, &CallContext::default())
            .await
            .unwrap();
        ids(&got).into_iter().map(str::to_owned).collect()
    }

    #[tokio::test]
    async fn each_mode_asks_the_store_for_its_ranking() {
        let lexical = Some(vec![cand("c"), cand("b"), cand("d")]);
        let store = Both { dense: vec![cand("a"), cand("b"), cand("c")], words: lexical, asked: Mutex::default() };
        assert_eq!(run(&store, RetrievalMode::Dense, 2).await, ["a", "b"]);
        assert_eq!(run(&store, RetrievalMode::Lexical, 2).await, ["c", "b"]);
        // c: 1/63 + 1/61 just beats b: 1/62 + 1/62; a: 1/61. Both lists are read to depth 3.
        assert_eq!(run(&store, RetrievalMode::Hybrid, 2).await, ["c", "b"]);
        assert_eq!(
            store.asked.lock().unwrap().as_slice(),
            ["dense 2 1", "lexical 2 find x", "dense 3 1", "lexical 3 find x"]
        );
        assert!(!RetrievalMode::Lexical.needs_embedding(true));
    }

    /// A lexical index kept beside a store: ranks words and knows their
    /// document frequencies.
    struct Beside {
        words: Vec<Candidate>,
        rows: u64,
    }

    #[async_trait]
    impl LexicalStore for Beside {
        async fn lexical_query(&self, q: &LexicalQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
            Ok(self.words.iter().take(q.n_results).cloned().collect())
        }
        async fn term_statistics(
            &self,
            tokens: &[String],
            _: &CallContext,
        ) -> Result<Option<TermStatistics>, BackendError> {
            Ok(Some(TermStatistics { rows: self.rows, frequencies: vec![1; tokens.len()] }))
        }
        // An index with vectors of its own: the engine must not take its neighbours for the store's.
        async fn hybrid_inputs(
            &self,
            _: &LexicalQuery,
            _: &[f32],
            _: Option<&[String]>,
            _: &CallContext,
        ) -> Option<Result<HybridInputs, BackendError>> {
            Some(Err(BackendError::new("beside", "asked for the store's nearest neighbours")))
        }
    }

    #[tokio::test]
    async fn hybrid_over_a_store_without_words_uses_the_index_beside_it_and_reads_the_head_again() {
        let doc = |id: &str, path: &str, body: &str| Candidate {
            chunk: Chunk {
                id: id.into(),
                document: body.into(),
                metadata: Metadata { path: path.into(), start_line: 10, ..Default::default() },
            },
            distance: None,
        };
        let (a, b, c) = (
            doc("a", "src/run.rs", "fn run() {}"),
            doc("b", "src/other.rs", "fn other() { /* config */ }"),
            doc("c", "src/config.rs", "pub fn parse_config() -> Config {}"),
        );
        // The store ranks by vectors only; the index beside it ranks words.
        let store = Both { dense: vec![a.clone(), b.clone(), c.clone()], words: None, asked: Mutex::default() };
        let beside = Beside { words: vec![b.clone(), c.clone()], rows: 100 };
        let options = HybridOptions { weight_dense: 1.0, weight_lexical: 1.0, rrf_k: 60.0, depth: 3, rerank: 0 };
        // Not "parse config", which c holds verbatim and would lead anyway.
        let query = Query::new("config parse");
        let run = |options: HybridOptions| {
            let (store, beside, query) = (&store, &beside, &query);
            async move {
                let retriever = Retriever::new(RetrievalMode::Hybrid, options);
                let (filter, ctx) = (SearchFilter::default(), CallContext::default());
                let got = retriever.retrieve(store, Some(beside), query, Some(vec![1.0]), 3, &filter, &ctx).await;
                ids(&got.unwrap()).into_iter().map(str::to_owned).collect::<Vec<_>>()
            }
        };
        // b: 1/62 + 1/61; c: 1/63 + 1/62; a: 1/61.
        assert_eq!(run(options).await, ["b", "c", "a"]);
        // Read again, the chunk that names both words leads.
        assert_eq!(run(HybridOptions { rerank: 20, ..options }).await, ["c", "b", "a"]);
        assert_eq!(store.asked.lock().unwrap().as_slice(), ["dense 3 1", "dense 3 1"]);
    }

    #[tokio::test]
    async fn a_store_that_cannot_rank_lexically_runs_dense() {
        let store = Both { dense: vec![cand("a"), cand("b")], words: None, asked: Mutex::default() };
        assert_eq!(RetrievalMode::default_for(store.lexical().is_some()), RetrievalMode::Dense);
        assert!(RetrievalMode::Lexical.needs_embedding(false));
        assert_eq!(run(&store, RetrievalMode::Lexical, 5).await, ["a", "b"]);
        assert_eq!(run(&store, RetrievalMode::Hybrid, 1).await, ["a"]);
        assert_eq!(store.asked.lock().unwrap().as_slice(), ["dense 5 1", "dense 1 1"]);
    }
}
