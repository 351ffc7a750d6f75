//! The embedded store's BM25 as a Qdrant sparse vector.
//!
//! Terms are the embedded store's own ([`rr_embedded::columns`] and
//! [`rr_embedded::query_terms`]): a chunk's words, the parts of its
//! identifiers (`loadConfig` → `load`, `config`) and the English stems of its
//! words, each column's occurrences counted with the column's weight in
//! [`rr_embedded::COLUMNS`] (a stem counts a quarter of the word). So a word
//! a query is searched by in the embedded store is a word it is searched by
//! here.
//!
//! A document's value for a term is BM25's term-frequency part,
//! `f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))` with FTS5's `k1` and `b`; the
//! collection's `IDF` modifier multiplies it by the term's inverse document
//! frequency at query time, over the points that hold the vector, so the
//! IDF stays right as records come and go. `avgdl` is fixed per collection
//! ([`DEFAULT_AVG_TOKENS`] for a new one, recorded in its metadata under
//! [`crate::AVG_TOKENS_KEY`]): with a running
//! average every write would change every stored value. A query term weighs
//! 1, and Qdrant's dot product sums the matched terms: BM25.
//!
//! Differences from the embedded store's FTS5 ranking: no phrase terms (a
//! sparse vector holds single terms; the quoted whole query and
//! `parse_config`-style terms, which FTS5 searches as phrases, are left
//! out: their parts are searched anyway), no diacritics folding, the fixed
//! `avgdl` and Qdrant's IDF (`ln(1 + (N − n + 0.5)/(n + 0.5))`, never
//! negative). Term ids are the first four bytes of the term's SHA-256; two
//! terms that share one add up.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

/// BM25's term-frequency saturation, as FTS5's `bm25()`.
pub const K1: f32 = 1.2;
/// BM25's length normalisation, as FTS5's `bm25()`.
pub const B: f32 = 0.75;
/// The `avgdl` of a new collection: the terms (words, identifier parts and
/// stems) of an average chunk, 142.5 over the 7,820 chunks of the tokio
/// checkout with the semantic chunking (FTS5's own counts in the embedded
/// store).
pub const DEFAULT_AVG_TOKENS: f32 = 142.5;

/// The sparse index of a term.
pub fn term_index(term: &str) -> u32 {
    let h = Sha256::digest(term.as_bytes());
    u32::from_le_bytes([h[0], h[1], h[2], h[3]])
}

/// The tokens of one full-text column, as FTS5's `unicode61` tokenizer cuts
/// them: runs of letters and digits, lower-cased (`_` separates).
fn column_tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    rr_core::text::words(text).flat_map(|w| w.split('_')).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

/// The weighted term frequencies of `document` and its length in tokens.
pub fn term_frequencies(document: &str) -> (HashMap<String, f32>, usize) {
    let mut freq: HashMap<String, f32> = HashMap::new();
    let mut length = 0;
    for (column, text) in rr_embedded::COLUMNS.iter().zip(rr_embedded::columns(document)) {
        for token in column_tokens(&text) {
            length += 1;
            *freq.entry(token).or_default() += column.weight as f32;
        }
    }
    (freq, length)
}

/// The sparse vector of `document`: each term's BM25 term-frequency part,
/// sorted by index.
pub fn document_vector(document: &str, avg_tokens: f32) -> Vec<(u32, f32)> {
    document_terms(document, avg_tokens).0
}

/// [`document_vector`] and the distinct terms of `document`, sorted: the
/// tokens a chunk holds as the embedded store's full-text index counts them
/// (a row holds a token when any column does), which the indexer keeps in
/// the payload so that Qdrant can count the chunks holding a term.
pub fn document_terms(document: &str, avg_tokens: f32) -> (Vec<(u32, f32)>, Vec<String>) {
    let (freq, length) = term_frequencies(document);
    let norm = K1 * (1.0 - B + B * length as f32 / avg_tokens.max(1.0));
    let mut by_index: BTreeMap<u32, f32> = BTreeMap::new();
    for (term, f) in &freq {
        *by_index.entry(term_index(term)).or_default() += f * (K1 + 1.0) / (f + norm);
    }
    let mut terms: Vec<String> = freq.into_keys().collect();
    terms.sort_unstable();
    (by_index.into_iter().collect(), terms)
}

/// The sparse vector of a query: each term the embedded store searches that
/// is one token, weighing 1; empty when there is none.
pub fn query_vector(query: &str) -> Vec<(u32, f32)> {
    let mut by_index: BTreeMap<u32, f32> = BTreeMap::new();
    for term in rr_embedded::query_terms(query) {
        let mut tokens = column_tokens(&term.text);
        if let (Some(token), None) = (tokens.next(), tokens.next())
            && token == term.text
        {
            by_index.insert(term_index(&token), 1.0);
        }
    }
    by_index.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_parts_and_stems_count_as_in_the_embedded_store() {
        let (freq, length) = term_frequencies("fn loadConfig(parsing_rules) {}");
        // body: fn loadconfig parsing rules; idents: load config; stems: pars rule
        assert_eq!(length, 8);
        assert_eq!(freq["loadconfig"], 1.0);
        assert_eq!(freq["load"], 1.0);
        assert_eq!(freq["config"], 1.0);
        assert_eq!(freq["parsing"], 1.0);
        assert_eq!(freq["pars"], 0.25);
        assert_eq!(freq["rule"], 0.25);
        assert!(!freq.contains_key("parsing_rules"));
        let (vector, terms) = document_terms("fn loadConfig(parsing_rules) {}", DEFAULT_AVG_TOKENS);
        assert_eq!(terms, ["config", "fn", "load", "loadconfig", "pars", "parsing", "rule", "rules"]);
        assert_eq!(vector, document_vector("fn loadConfig(parsing_rules) {}", DEFAULT_AVG_TOKENS));
    }

    #[test]
    fn document_values_saturate_and_shorter_documents_weigh_more() {
        let short = document_vector("config", 256.0);
        let long = document_vector(&format!("config {}", "word ".repeat(500)), 256.0);
        let id = term_index("config");
        let value = |v: &[(u32, f32)]| v.iter().find(|(i, _)| *i == id).unwrap().1;
        assert!(value(&short) > value(&long));
        let many = document_vector(&"config ".repeat(1000), 256.0);
        assert!(value(&many) < K1 + 1.0);
        assert!(short.windows(2).all(|w| w[0].0 < w[1].0), "sorted by index, no repeats");
    }

    #[test]
    fn query_terms_are_words_parts_and_stems_without_phrases_or_stopwords() {
        let ids: Vec<u32> = query_vector("where is loadConfig parsing").iter().map(|t| t.0).collect();
        let mut expected: Vec<u32> =
            ["loadconfig", "load", "config", "parsing", "pars"].iter().map(|t| term_index(t)).collect();
        expected.sort_unstable();
        assert_eq!(ids, expected);
        assert!(query_vector("  ?! ").is_empty());
        assert!(query_vector("parse_config").iter().all(|t| t.0 != term_index("parse_config")));
    }
}
