//! Rerankers that need no model: reciprocal-rank fusion with BM25 over the
//! candidates (`bm25-fusion`), and maximal marginal relevance for diversity
//! (`mmr`).
//!
//! Both see only the candidates the store returned, never the whole index,
//! so every statistic (BM25's document frequencies and average length, MMR's
//! similarities) is computed over that candidate set. That keeps them
//! stateless and usable in front of any store, and it is also their limit: a
//! term rare in the index but present in every candidate gets a low IDF here.
//! Both rely on the incoming order being the current ranking, best first
//! (the store's ranking, or the previous stage's in a
//! [`RerankChain`](rr_core::RerankChain)).
//!
//! Text is split into the identifier-aware sub-tokens of the `hash` embedder
//! ([`rr_hash_embed::sub_tokens`]): runs of ASCII letters, digits and `_`,
//! split at `_`, camelCase and digit boundaries, lower-cased, one-letter
//! parts and English stop words dropped, plurals and `-ing`/`-ed` folded, and
//! a few abbreviations (`cfg`, `repo`, `env`) mapped to their long forms. So
//! `parseConfig` in a query meets `parse_config` and `ParseConfigs` in code.
//! Text outside ASCII yields no token; such a query leaves `bm25-fusion` with
//! the incoming order.
//!
//! The work is linear in the candidates' text for BM25 and quadratic in the
//! number of candidates for MMR (pairwise similarities, computed lazily),
//! well under a millisecond for the hundred or so a search reranks, so it
//! runs on the calling task.

mod bm25;
mod mmr;
mod registry;

pub use bm25::{Bm25Fusion, Bm25FusionSettings, bm25_scores, reciprocal_rank_fusion};
pub use mmr::{Mmr, MmrSettings, mmr_order};

/// Settings a reranker refuses, worded for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// The sub-tokens of `text` (see the crate docs).
pub fn tokens(text: &str) -> Vec<String> {
    rr_hash_embed::sub_tokens(text)
}

/// A setting that must lie in `[0, 1]`.
fn unit_interval(key: &str, value: f64) -> Result<(), SettingsError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(SettingsError(format!("{key} must be between 0 and 1, not {value}")))
    }
}

/// A setting that must be a finite number `> 0` (`>= 0` when `zero_ok`).
fn positive(key: &str, value: f64, zero_ok: bool) -> Result<(), SettingsError> {
    if value.is_finite() && (value > 0.0 || (zero_ok && value == 0.0)) {
        Ok(())
    } else if zero_ok {
        Err(SettingsError(format!("{key} must be a non-negative number, not {value}")))
    } else {
        Err(SettingsError(format!("{key} must be a positive number, not {value}")))
    }
}
