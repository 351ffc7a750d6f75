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
//! Text is split as every ranking splits it ([`rr_core::text::tokens`]):
//! each run of letters, digits and `_`, lower-cased, then its parts at `_`,
//! camelCase and digit boundaries, English stop words dropped. So
//! `parseConfig` in a query meets `parse_config` and `ParseConfig` in code.
//!
//! The work is linear in the candidates' text for BM25 and quadratic in the
//! number of candidates for MMR (pairwise similarities, computed lazily),
//! well under a millisecond for the hundred or so a search reranks, so it
//! runs on the calling task.

mod bm25;
mod mmr;
mod registry;
mod settings;
mod tokens;

pub use bm25::{Bm25Fusion, Bm25FusionSettings, bm25_scores, reciprocal_rank_fusion};
pub use mmr::{Mmr, MmrSettings, mmr_order};
pub use settings::SettingsError;
pub use tokens::tokens;
