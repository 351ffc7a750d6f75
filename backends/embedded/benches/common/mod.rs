//! The synthetic corpus both benches of this crate generate: a seeded
//! random source, realistic paths and languages, and a Zipf-distributed
//! vocabulary of common words and made-up identifiers.

// Each bench uses a different part of this module.
#![allow(dead_code)]

pub const DIM: usize = 256;

pub use rr_testkit::Rng;

use rr_core::{Chunk, EmbeddedChunk, Metadata};

/// Repositories of the corpus (`repo0` … `repo11`), spread over [`ORGS`].
pub const REPOSITORIES: usize = 12;

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

/// `n` chunks of 100 Zipf-drawn words each, in files of 5 to 15 chunks, with
/// the index (0..[`REPOSITORIES`]) of the repository each belongs to. `embed`
/// makes a chunk's vector from the generator's random source and its
/// document, after the words are drawn, so a bench drawing random vectors
/// and one embedding the text see the same documents.
pub fn generate(
    n: usize,
    rng: &mut Rng,
    zipf: &Zipf,
    words: &[String],
    embed: impl FnMut(&mut Rng, &str) -> Vec<f32>,
) -> Vec<(usize, EmbeddedChunk)> {
    let mut out = Vec::with_capacity(n);
    generate_in_batches(n, rng, zipf, words, n.max(1), embed, |batch| out.extend(batch));
    out
}

/// The chunks of [`generate`], handed to `each` in batches of `batch` (the
/// last may be shorter), so a large corpus is never held whole.
pub fn generate_in_batches(
    n: usize,
    rng: &mut Rng,
    zipf: &Zipf,
    words: &[String],
    batch: usize,
    mut embed: impl FnMut(&mut Rng, &str) -> Vec<f32>,
    mut each: impl FnMut(Vec<(usize, EmbeddedChunk)>),
) {
    let mut out = Vec::with_capacity(batch.min(n));
    let mut made = 0;
    let mut file = 0usize;
    while made < n {
        let org = ORGS[file % ORGS.len()];
        let repo_index = file % REPOSITORIES;
        let repo = format!("repo{repo_index}");
        let branch = if file.is_multiple_of(5) { "dev" } else { "main" };
        let (ext, file_type) = EXTS[rng.below(EXTS.len())];
        let path = format!("{}/module{}/file{file}.{ext}", DIRS[rng.below(DIRS.len())], rng.below(50));
        let chunks = 5 + rng.below(11);
        for i in 0..chunks.min(n - made) {
            let body: Vec<&str> = (0..100).map(|_| words[zipf.sample(rng)].as_str()).collect();
            let namespace_id = format!("{org}/{repo}@{branch}");
            let document = format!("Source: {namespace_id}:{path}\nType: {file_type}\n\n{}", body.join(" "));
            let embedding = embed(rng, &document);
            let metadata = Metadata {
                schema_version: 1,
                namespace_id: namespace_id.clone(),
                organization: org.into(),
                repository: repo.clone(),
                branch: branch.into(),
                path: path.clone(),
                file_type: file_type.into(),
                chunk_index: i as i64,
                chunk_count: chunks as i64,
                start_line: 1 + 20 * i as i64,
                end_line: 20 + 20 * i as i64,
                ..Default::default()
            };
            let chunk = Chunk { id: format!("{namespace_id}:{path}:{i}"), document, metadata };
            out.push((repo_index, EmbeddedChunk { chunk, embedding }));
            made += 1;
            if out.len() == batch {
                each(std::mem::replace(&mut out, Vec::with_capacity(batch.min(n - made))));
            }
        }
        file += 1;
    }
    if !out.is_empty() {
        each(out);
    }
}
