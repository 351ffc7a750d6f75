//! The synthetic corpus both benches of this crate generate: a seeded
//! random source, realistic paths and languages, and a Zipf-distributed
//! vocabulary of common words and made-up identifiers.

// Each bench uses a different part of this module.
#![allow(dead_code)]

pub const DIM: usize = 256;

pub use rr_testkit::Rng;

pub const ORGS: [&str; 3] = ["acme", "globex", "initech"];
pub const DIRS: [&str; 8] =
    ["src", "internal/store", "internal/config", "cmd/server", "docs", "web/app", "pkg/api", "tests"];
pub const EXTS: [(&str, &str); 5] =
    [("rs", "rust"), ("go", "go"), ("py", "python"), ("ts", "typescript"), ("md", "markdown")];
/// The most frequent words of the generated text, most frequent first; the
/// rest of the vocabulary is made-up identifiers. Words are drawn with Zipf's
/// law, as in real code and prose, so a query mixes words found in most
/// chunks with rarer identifiers.
pub const COMMON: [&str; 24] = [
    "the", "return", "if", "self", "value", "err", "to", "config", "func", "let", "string", "of", "load", "for",
    "retry", "handler", "index", "store", "query", "cache", "client", "server", "render", "schema",
];
pub const VOCABULARY: usize = 20_000;
pub const SYLLABLES: [&str; 16] =
    ["ba", "ko", "ri", "zu", "me", "ta", "lo", "ne", "pi", "su", "da", "ve", "go", "hu", "ca", "fe"];

/// Word `rank` of the vocabulary: a common word, or a made-up camelCase or
/// snake_case identifier.
pub fn word(rank: usize) -> String {
    if let Some(w) = COMMON.get(rank) {
        return (*w).to_owned();
    }
    let mut s = String::new();
    let mut r = rank;
    for part in 0..3 {
        let syl = SYLLABLES[r % 16];
        r /= 16;
        if part == 2 && rank.is_multiple_of(2) {
            s.push_str(&syl[..1].to_uppercase());
            s.push_str(&syl[1..]);
        } else {
            if part == 2 {
                s.push('_');
            }
            s.push_str(syl);
        }
    }
    s.push_str(&(rank % 97).to_string());
    s
}

/// Cumulative Zipf weights (s = 1) over the vocabulary.
pub struct Zipf(pub Vec<f64>);

impl Default for Zipf {
    fn default() -> Self {
        Self::new()
    }
}

impl Zipf {
    pub fn new() -> Self {
        let mut acc = 0.0;
        Zipf(
            (1..=VOCABULARY)
                .map(|r| {
                    acc += 1.0 / r as f64;
                    acc
                })
                .collect(),
        )
    }
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * self.0[self.0.len() - 1];
        self.0.partition_point(|&c| c < x).min(self.0.len() - 1)
    }
}
