//! The built-in `hash` embedder: lexical, deterministic, nothing to download.
//!
//! **This embedder is lexical. It has no notion of meaning.** A vector is a
//! signed feature hash of the text's identifier-aware sub-tokens (split on
//! `_`, camelCase and digit boundaries, lower-cased, stop words dropped, a tiny
//! suffix stemmer, a few abbreviation folds such as `cfg` → `config`), plus
//! character trigrams of longer tokens at low weight. Two texts are close when
//! they share words, never because they mean the same thing: "remove a user"
//! and "delete an account" are unrelated to it. It exists so that
//! `repo-retriever` can index and search a folder with no model, no network
//! and no server; pick a neural embedder when quality matters.
//!
//! The algorithm is, on purpose, the one of the reference test server
//! (`testdata/embed_server.py`), reproduced to the last bit that survives the
//! cast to `f32`: features are accumulated in the order Python's dict keeps
//! them, each hashed with BLAKE2b (8-byte digest, little-endian) to an index
//! (`v % dim`) and a sign (bit 63), weighted `1 + ln(tf)` (or `tf` below 1),
//! and the vector is L2-normalised; a text with no feature becomes the unit
//! vector `e0`. Vectors written by that server and by this crate are therefore
//! interchangeable, which the fixture test pins for all 89 records.

mod registry;
mod tokens;

use std::collections::HashMap;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use async_trait::async_trait;
use blake2::Blake2b;
use blake2::Digest;
use blake2::digest::consts::U8;
use rr_core::{BackendError, CallContext, Embedder};

pub use tokens::{stem, strip_prefix, sub_tokens};

/// The dimension of the reference server and the default here.
pub const DEFAULT_DIMENSION: usize = 256;

/// Weight added per occurrence of a character trigram.
const TRIGRAM_WEIGHT: f64 = 0.15;
/// Tokens this long or longer also contribute character trigrams.
const TRIGRAM_MIN_LEN: usize = 5;
/// Batches up to this size are embedded without leaving the async task.
const INLINE_BATCH: usize = 16;

/// The lexical hash embedder (see the crate docs: no semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashEmbedder {
    dimension: usize,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder { dimension: DEFAULT_DIMENSION }
    }
}

impl HashEmbedder {
    /// An embedder producing `dimension`-long vectors; only the default of
    /// 256 matches the reference server. Returns `None` for 0.
    pub fn new(dimension: usize) -> Option<Self> {
        (dimension > 0).then_some(HashEmbedder { dimension })
    }

    /// The length of every vector this embedder returns.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The unit-length embedding of one text (a leading `query: ` or
    /// `passage: ` is ignored).
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        let mut vec = vec![0.0f64; self.dimension];
        for (key, tf) in features(strip_prefix(text)) {
            let (index, sign) = hash_feature(&key, self.dimension);
            vec[index] += if tf >= 1.0 { sign * (1.0 + tf.ln()) } else { sign * tf };
        }
        // Sequential summation, like Python's `sum` over the list.
        let norm = vec.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            let mut unit = vec![0.0f32; self.dimension];
            unit[0] = 1.0;
            return unit;
        }
        vec.into_iter().map(|x| (x / norm) as f32).collect()
    }
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn name(&self) -> &str {
        "hash"
    }

    /// Hashed words rank by the same words the lexical ranking already
    /// weighs, without its stems, names or IDF, so in hybrid fusion this
    /// ranking breaks ties and adds little else: it counts half a
    /// model's (docs/evaluation.md, "Comments and code").
    fn hybrid_weight_dense(&self) -> f64 {
        0.5
    }

    /// Small batches (queries) are embedded inline; larger ones (about
    /// 0.1 ms per 700-byte chunk) on tokio's blocking pool, so indexing does
    /// not stall the runtime.
    async fn embed(&self, inputs: &[String], _ctx: &CallContext) -> Result<Vec<Vec<f32>>, BackendError> {
        if inputs.len() <= INLINE_BATCH {
            return Ok(inputs.iter().map(|text| self.embed_text(text)).collect());
        }
        let (embedder, inputs) = (*self, inputs.to_vec());
        tokio::task::spawn_blocking(move || inputs.iter().map(|text| embedder.embed_text(text)).collect())
            .await
            .map_err(|e| BackendError::new("hash", format!("hash embedding failed: {e}")))
    }
}

/// The reference server's relevance score: the fraction of the query's
/// distinct sub-tokens that occur in the document, in `[0, 1]`; `0` when the
/// query has none. Prefixes are stripped from both. Lexical, like the
/// embedder: it backs a model-free reranker, not a semantic one.
pub fn rerank_score(query: &str, document: &str) -> f64 {
    let query: HashSet<String> = sub_tokens(strip_prefix(query)).into_iter().collect();
    if query.is_empty() {
        return 0.0;
    }
    let document: HashSet<String> = sub_tokens(strip_prefix(document)).into_iter().collect();
    let overlap = query.intersection(&document).count();
    overlap as f64 / query.len() as f64
}

/// Feature weights in first-seen order (Python dict insertion order), which
/// fixes the float accumulation order of [`HashEmbedder::embed_text`].
fn features(text: &str) -> Vec<(String, f64)> {
    let mut order: Vec<(String, f64)> = Vec::new();
    let mut slot: HashMap<String, usize, BuildHasherDefault<FxHasher>> = HashMap::default();
    let mut key = String::new();
    let mut add = |key: &str, weight: f64| match slot.get(key) {
        Some(&i) => order[i].1 += weight,
        None => {
            slot.insert(key.to_owned(), order.len());
            // `feats.get(k, 0.0) + w`: start from 0.0 so the sum rounds alike.
            order.push((key.to_owned(), 0.0 + weight));
        }
    };
    for token in sub_tokens(text) {
        key.clear();
        key.push_str("w:");
        key.push_str(&token);
        add(&key, 1.0);
        if token.len() >= TRIGRAM_MIN_LEN {
            // Tokens are ASCII, so byte windows are character trigrams.
            for i in 0..token.len() - 2 {
                key.clear();
                key.push_str("c:");
                key.push_str(&token[i..i + 3]);
                add(&key, TRIGRAM_WEIGHT);
            }
        }
    }
    order
}

/// rustc's Fx hash: the feature keys are short and not attacker-chosen in any
/// way that matters (a slow document only slows its own embedding), and
/// SipHash was a third of the embedding time.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Index and sign of one feature: BLAKE2b with an 8-byte digest, read
/// little-endian; the index is the value modulo the dimension and bit 63
/// chooses `+1`.
fn hash_feature(key: &str, dimension: usize) -> (usize, f64) {
    let digest = Blake2b::<U8>::digest(key.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest);
    let v = u64::from_le_bytes(bytes);
    let index = (v % dimension as u64) as usize;
    let sign = if (v >> 63) & 1 == 1 { 1.0 } else { -1.0 };
    (index, sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_matches_python_blake2b() {
        // hashlib.blake2b(b"w:config", digest_size=8).digest() read little-endian.
        let digest = Blake2b::<U8>::digest(b"w:config");
        let v = u64::from_le_bytes(digest.as_slice().try_into().unwrap());
        assert_eq!(v, 0x5c2d_9a18_103e_d4f9);
        assert_eq!(hash_feature("w:config", 256), (249, -1.0));
    }

    #[test]
    fn empty_and_stop_word_text_is_e0() {
        let e = HashEmbedder::default();
        for text in ["", "query: ", "the and of", "a b c !!"] {
            let v = e.embed_text(text);
            assert_eq!(v.len(), 256);
            assert_eq!(v[0], 1.0);
            assert!(v[1..].iter().all(|&x| x == 0.0), "{text:?}");
        }
    }

    #[test]
    fn vectors_are_unit_length_and_dimension_is_configurable() {
        let e = HashEmbedder::new(64).unwrap();
        let v = e.embed_text("passage: fn loadConfig(path: &Path) -> Config");
        assert_eq!(v.len(), 64);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6);
        assert!(HashEmbedder::new(0).is_none());
    }

    #[tokio::test]
    async fn inline_and_pooled_batches_agree() {
        let e = HashEmbedder::default();
        let texts: Vec<String> = (0..40).map(|i| format!("passage: item{i} loadConfig retryDelay")).collect();
        let pooled = e.embed(&texts, &CallContext::default()).await.unwrap();
        let inline = e.embed(&texts[..3], &CallContext::default()).await.unwrap();
        assert_eq!(pooled.len(), 40);
        assert_eq!(&pooled[..3], &inline[..]);
        assert_eq!(pooled[39], e.embed_text(&texts[39]));
    }

    #[test]
    fn rerank_score_is_the_fraction_of_query_tokens_present() {
        assert_eq!(rerank_score("query: load config", "passage: loading the cfg"), 1.0);
        assert_eq!(rerank_score("load config file", "configuration loader"), 1.0 / 3.0);
        assert_eq!(rerank_score("the of", "anything"), 0.0);
        assert_eq!(rerank_score("server", "client"), 0.0);
    }
}
