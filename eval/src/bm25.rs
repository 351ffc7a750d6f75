//! The `bm25` baseline row of every evaluation: Okapi BM25 over *all* the
//! chunks of a store, written independently of any store's full-text code,
//! so that a table always shows whether a pipeline finds more than plain
//! BM25 over the very same chunks.
//!
//! The scoring is that of Python's `rank_bm25.BM25Okapi` with its defaults
//! (`k1` = 1.5, `b` = 0.75, `epsilon` = 0.25): a term found in `n` of `N`
//! chunks has `idf = ln(N − n + 0.5) − ln(n + 0.5)`; a negative IDF (a term
//! in more than half of the chunks) is replaced by `epsilon ×` the mean IDF
//! over the whole vocabulary; a chunk of `|d|` tokens holding a query token
//! `f` times gains `idf · f · (k1 + 1) / (f + k1 · (1 − b + b · |d| / avgdl))`,
//! once per occurrence of the token in the query, as `get_scores` sums.
//!
//! Tokens are `rr_core::text::tokens`, the split every ranking shares: every run of Unicode letters,
//! digits and `_` in the chunk's document (the `Source:` line included), lower-cased; a run with
//! several parts (split at `_`, lower→upper, `ABCd` → `AB`+`Cd` and
//! letter↔digit boundaries) also gives each part: `parseHTTPConfig_v2` →
//! `parsehttpconfig_v2 parse http config v 2`. No stop words, no stemming.
//!
//! The query's filter is applied before ranking, as stores do; chunks
//! scoring 0 (no query token) are not returned. Ties keep the store's
//! chunk order.

use std::collections::HashMap;

use async_trait::async_trait;
use rr_core::retrieval::{LexicalQuery, LexicalStore};
use rr_core::{BackendError, CallContext, Candidate, Chunk, VectorQuery, VectorStore};

/// `rank_bm25.BM25Okapi`'s defaults.
pub const K1: f64 = 1.5;
pub const B: f64 = 0.75;
pub const EPSILON: f64 = 0.25;

/// The name of the baseline row and of its store in errors.
pub const NAME: &str = "bm25";

/// The tokens of `text` (module docs), in order, with repeats.
pub fn tokens(text: &str) -> Vec<String> {
    rr_core::text::tokens(text)
}

/// Every chunk of a store with its BM25 statistics, searchable as a
/// [`LexicalStore`] (dense queries are refused: it holds no vectors).
pub struct Bm25Index {
    chunks: Vec<Chunk>,
    /// Per term: (chunk index, frequency in that chunk), by chunk index.
    postings: HashMap<String, Vec<(u32, u32)>>,
    idf: HashMap<String, f64>,
    /// `k1 · (1 − b + b · |d| / avgdl)` per chunk.
    norms: Vec<f64>,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index").field("chunks", &self.chunks.len()).finish_non_exhaustive()
    }
}

impl Bm25Index {
    pub fn new(chunks: Vec<Chunk>) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(chunks.len());
        for (i, chunk) in chunks.iter().enumerate() {
            let words = tokens(&chunk.document);
            lengths.push(words.len() as f64);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for w in words {
                *tf.entry(w).or_default() += 1;
            }
            for (w, f) in tf {
                postings.entry(w).or_default().push((i as u32, f));
            }
        }
        let n = chunks.len() as f64;
        let avgdl = if chunks.is_empty() { 1.0 } else { lengths.iter().sum::<f64>() / n };
        let mut idf: HashMap<String, f64> = postings
            .iter()
            .map(|(w, p)| (w.clone(), (n - p.len() as f64 + 0.5).ln() - (p.len() as f64 + 0.5).ln()))
            .collect();
        let average = if idf.is_empty() { 0.0 } else { idf.values().sum::<f64>() / idf.len() as f64 };
        for v in idf.values_mut() {
            if *v < 0.0 {
                *v = EPSILON * average;
            }
        }
        // avgdl of an all-empty corpus is 0; such chunks match nothing anyway.
        let avgdl = if avgdl > 0.0 { avgdl } else { 1.0 };
        let norms = lengths.iter().map(|&dl| K1 * (1.0 - B + B * dl / avgdl)).collect();
        Bm25Index { chunks, postings, idf, norms }
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The BM25 score of every chunk holding a query token, by chunk index.
    pub fn scores(&self, query: &str) -> HashMap<u32, f64> {
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for token in tokens(query) {
            let (Some(list), Some(&idf)) = (self.postings.get(&token), self.idf.get(&token)) else { continue };
            for &(doc, f) in list {
                let f = f64::from(f);
                *scores.entry(doc).or_default() += idf * f * (K1 + 1.0) / (f + self.norms[doc as usize]);
            }
        }
        scores
    }

    /// The `n` best chunks passing the query's filter, best first; `distance`
    /// is the negated score.
    pub fn search(&self, query: &LexicalQuery) -> Vec<Candidate> {
        let mut ranked: Vec<(u32, f64)> = self
            .scores(&query.text)
            .into_iter()
            .filter(|&(doc, score)| score != 0.0 && query.filter.matches(&self.chunks[doc as usize]))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(query.n_results);
        ranked
            .into_iter()
            .map(|(doc, score)| Candidate { chunk: self.chunks[doc as usize].clone(), distance: Some(-score) })
            .collect()
    }
}

#[async_trait]
impl VectorStore for Bm25Index {
    fn name(&self) -> &str {
        NAME
    }

    async fn query(&self, _: &VectorQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        Err(BackendError::new(NAME, "the bm25 baseline ranks by words only: it holds no vectors"))
    }

    fn lexical(&self) -> Option<&dyn LexicalStore> {
        Some(self)
    }
}

#[async_trait]
impl LexicalStore for Bm25Index {
    async fn lexical_query(&self, query: &LexicalQuery, _: &CallContext) -> Result<Vec<Candidate>, BackendError> {
        Ok(self.search(query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rr_core::{Metadata, SearchFilter};

    fn chunk(path: &str, body: &str) -> Chunk {
        Chunk {
            id: path.into(),
            document: body.into(),
            metadata: Metadata { path: path.into(), organization: "o".into(), ..Default::default() },
        }
    }

    #[test]
    fn tokens_are_words_and_their_identifier_parts() {
        assert_eq!(tokens("parseHTTPConfig_v2(x)"), ["parsehttpconfig_v2", "parse", "http", "config", "v", "2", "x"]);
        assert_eq!(tokens("Source: o/r@main:src/lib.rs"), ["source", "o", "r", "main", "src", "lib", "rs"]);
        assert_eq!(tokens("Größe load_config"), ["größe", "load_config", "load", "config"]);
    }

    /// `BM25Okapi([["hello","world"],["hello","there"],["goodbye","world","world"],["other"]])`,
    /// by hand: N = 4;
    /// idf(hello) = idf(world) = ln(2.5/2.5) = 0; idf(there) = idf(goodbye) =
    /// idf(other) = ln(3.5/1.5) = 0.847298; no idf is negative, so epsilon
    /// plays no part, and every score is 0. With the query ["there"], the
    /// second document scores 0.847298 · 2.5 / (1 + 1.5) = 0.847298.
    #[test]
    fn scores_as_rank_bm25_okapi() {
        let corpus = ["hello world", "hello there", "goodbye world world", "other"];
        let index = Bm25Index::new(corpus.iter().enumerate().map(|(i, t)| chunk(&i.to_string(), t)).collect());
        assert!(index.scores("hello world").values().all(|&s| s == 0.0));
        let there = index.scores("there");
        assert!((there[&1] - (3.5f64 / 1.5).ln()).abs() < 1e-12, "{there:?}");
        // A term in 3 of 4 documents has a negative IDF, replaced by epsilon × the mean IDF.
        let index = Bm25Index::new(
            ["a b", "a c", "a d", "e"].iter().enumerate().map(|(i, t)| chunk(&i.to_string(), t)).collect(),
        );
        // idf(a) = ln(1.5 / 3.5) < 0; b, c, d and e have ln(3.5 / 1.5); the mean counts all five.
        let mean = ((1.5f64 / 3.5).ln() + 4.0 * (3.5f64 / 1.5).ln()) / 5.0;
        let a = index.scores("a");
        let avgdl = 7.0 / 4.0;
        let want = EPSILON * mean * 2.5 / (1.0 + K1 * (1.0 - B + B * 2.0 / avgdl));
        assert!((a[&0] - want).abs() < 1e-12, "{a:?} vs {want}");
    }

    #[test]
    fn search_filters_before_ranking_and_keeps_ties_in_store_order() {
        let source = |path: &str, body: &str| chunk(path, &format!("Source: o/r@b:{path}\n\n{body}"));
        let mut chunks = vec![
            source("a.rs", "retry backoff"),
            source("b.rs", "retry backoff"),
            source("c.go", "retry once"),
            source("d.go", "retry"),
        ];
        chunks[3].metadata.organization = "other".into();
        let index = Bm25Index::new(chunks);
        let ask = |text: &str, filter: SearchFilter| {
            let q = LexicalQuery { text: text.into(), n_results: 10, filter };
            index.search(&q).into_iter().map(|c| c.chunk.id).collect::<Vec<_>>()
        };
        // `retry` is in every chunk: its IDF is epsilon × the mean IDF, which is
        // negative here (most words are in every Source line), as rank_bm25
        // computes it; so the shorter d.go loses more than c.go.
        assert_eq!(ask("backoff retry", SearchFilter::default()), ["a.rs", "b.rs", "c.go", "d.go"]);
        let go = SearchFilter { path: rr_core::PathGlob::new("**/*.go"), ..Default::default() };
        assert_eq!(ask("backoff retry", go), ["c.go", "d.go"]);
        let other = SearchFilter { organization: "other".into(), ..Default::default() };
        assert_eq!(ask("backoff", other), Vec::<String>::new());
        assert!(ask("?!", SearchFilter::default()).is_empty());
    }
}
